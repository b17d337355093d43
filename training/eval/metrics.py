"""Evaluation metrics with 95% confidence intervals, computed from episode records alone.

`summarize(records, group_by)` returns a machine-readable summary (what `summary.json` holds)::

    {"env_id": "tomgym/tomsb-v0", "n": 240, "confidence": 0.95,
     "overall": {<metrics>},
     "groups": {"attacker": {"base": {<metrics>}, ...}, "prior_level": {"0": {<metrics>}, ...}}}

Every metric `m` comes with `m_ci` = [low, high] beside it, and every metrics block holds `n` (the
games it covers). Rates use the Wilson score interval (`scipy.stats.binomtest`), which stays
inside [0, 1] and behaves at 0 and 1 successes; means use the Student t interval (a single game or
zero spread gives a zero-width interval); means of [0, 1]-bounded quantities are clipped to
[0, 1].

TOM-SB metrics (defender `defender_0`; per-record values come from `rewards.tomsb` so that
evaluation and training rewards never disagree): `fooled_rate`, `extracted_rate`, `detected_rate`,
`baited_rate`, `tom_accuracy` (trajectory ToM, `rewards.tomsb.tom_prior`), `stepwise_tom`
(`rewards.tomsb.stepwise_tom`), `leak_penalty`, `avg_turns` (attacker turns), `format_failures`
(mean defender format failures per game), `format_ok_rate` (`rewards.shaping.format_ok`, over
the games where the defender played at least one turn; `None` when it played none). Each TOM-SB
block also holds `hard` (the same metrics on prior levels 1-2) and `by_prior_level`
({"0": ..., "1": ..., "2": ...}).

Decrypto replay runs: `replay_summary(records)` (the replaying policy's per-round error rate vs the
recorded players', from the records' `eval.recorded_rounds`).

Decrypto metrics: `avg_rounds`, `avg_miscommunications`, `avg_interceptions`, `team_win_rate`,
ending rates (`survived_rate`, `miscommunication_rate`, `interception_rate`, `both_rate`), and,
when the ToM experiments ran, `tom_<experiment>_<rate>` (e.g. `tom_perspective_taking_
predicted_interceptor`): per-game pass rates averaged over the games where the rate is defined
(the spec: "averaged over games with at least one counted round"), with `..._n` games counted.

Games the runner cut short (`truncation_reason`, e.g. a conversation that outgrew a model's
context window) have no env ending, so the metrics above cover the games the env finished (`n`);
every block also holds `truncated` (games cut short, not in `n`), `truncated_rate` (their share
of all the block's games, with its CI) and, when any were, `truncation_reasons` ({reason: games}).
Records are de-duplicated on their key (`rewards.episode.record_key`: game id and players, first
record kept) before anything is counted; the summary names repeated game ids in `duplicate_keys`.

Group keys (`GROUP_KEYS`): "attacker" (the attacker prompt variant, `infos.*.attacker_variant`),
"attacker_policy", "defender", "encoder", "decoder", "interceptor" (the spec the evaluation gave
the role, `eval.<role>_spec`, else `policies.<agent>.name`), "matchup"
("encoder/decoder/interceptor"), "prior_level", "scenario",
"seed" (the evaluation seed from `record["eval"]["seed"]` when present, else the game seed),
"checkpoint" (`record["eval"]["checkpoint"]`, else the defender name), "outcome"; anything else is
read as a dotted path into the record ("options.split", "eval.episode").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats
from tomgym.envs.tomsb.game import OUTCOMES as TOMSB_OUTCOMES
from tomgym.rewards import decrypto as decrypto_rewards
from tomgym.rewards import tomsb as tomsb_rewards
from tomgym.rewards.episode import (
    dedupe,
    eval_block,
    final_infos,
    first_infos,
    outcome,
    policy_name,
    truncation_reason,
)
from tomgym.rewards.shaping import agent_turns, format_ok

CONFIDENCE = 0.95
DECRYPTO_ENDINGS = decrypto_rewards.ENDINGS
HARD_PRIOR_LEVELS = (1, 2)
DEFENDER = "defender_0"
DECRYPTO_AGENTS = ("encoder_0", "decoder_0", "interceptor_0")


class MetricsError(ValueError):
    """Records that cannot be summarised (mixed envs, unknown group key ...); one clear line."""


# ---- intervals -----------------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> list[float | None]:
    """Wilson score interval for a binomial rate; [None, None] for n == 0."""
    if n == 0:
        return [None, None]
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(
        confidence_level=confidence, method="wilson"
    )
    return [float(ci.low), float(ci.high)]


def mean_interval(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    bounds: tuple[float, float] | None = None,
) -> list[float | None]:
    """Student t interval for the mean; degenerate (zero width) for one value or no spread."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return [None, None]
    mean = float(data.mean())
    if data.size == 1 or float(data.std()) == 0.0:
        return [mean, mean]
    low, high = stats.t.interval(confidence, df=data.size - 1, loc=mean, scale=stats.sem(data))
    if bounds is not None:
        low, high = max(bounds[0], low), min(bounds[1], high)
    return [float(low), float(high)]


def _rate(block: dict[str, Any], name: str, flags: Sequence[bool]) -> None:
    n = len(flags)
    k = int(sum(bool(f) for f in flags))
    block[name] = k / n if n else None
    block[f"{name}_ci"] = wilson_interval(k, n)


def _mean(
    block: dict[str, Any],
    name: str,
    values: Sequence[float],
    bounds: tuple[float, float] | None = None,
    count: bool = False,
) -> None:
    block[name] = float(np.mean(values)) if len(values) else None
    block[f"{name}_ci"] = mean_interval(values, bounds=bounds)
    if count:
        block[f"{name}_n"] = len(values)


# ---- record fields -------------------------------------------------------------------------------


def env_kind(record: Mapping[str, Any]) -> str:
    """ "tomsb" or "decrypto", from the record's env id."""
    env_id = str(record.get("env_id", ""))
    for kind in ("tomsb", "decrypto"):
        if kind in env_id:
            return kind
    raise MetricsError(f"record {record.get('game_id')!r}: unknown env id {env_id!r}")


def _dotted(path: str) -> Callable[[Mapping[str, Any]], Any]:
    def read(record: Mapping[str, Any]) -> Any:
        node: Any = record
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    return read


def _player(agent: str) -> Callable[[Mapping[str, Any]], Any]:
    """The spec an evaluation gave the agent (`eval.<role>_spec`), else the policy's name: two
    specs of one policy class (embedding:k=8 vs k=16) must not fall into one group."""
    role = agent.rsplit("_", 1)[0]

    def read(record: Mapping[str, Any]) -> Any:
        return eval_block(record).get(f"{role}_spec") or policy_name(record, agent)

    return read


def _matchup(record: Mapping[str, Any]) -> str:
    return "/".join(str(_player(a)(record)) for a in DECRYPTO_AGENTS)


def _game_field(info_key: str, option: str) -> Callable[[Mapping[str, Any]], Any]:
    """A game-wide field from the final infos, else from the reset options the game was asked
    with (a game the runner cut short has only mid-game infos)."""

    def read(record: Mapping[str, Any]) -> Any:
        value = first_infos(record).get(info_key)
        return value if value is not None else (record.get("options") or {}).get(option)

    return read


GROUP_KEYS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "attacker": _game_field("attacker_variant", "attacker"),
    "attacker_policy": _player("attacker_0"),
    "defender": _player(DEFENDER),
    "encoder": _player("encoder_0"),
    "decoder": _player("decoder_0"),
    "interceptor": _player("interceptor_0"),
    "matchup": _matchup,
    "prior_level": _game_field("prior_level", "prior_level"),
    "scenario": _game_field("scenario_id", "scenario"),
    "seed": lambda r: eval_block(r).get("seed", r.get("seed")),
    "checkpoint": lambda r: eval_block(r).get("checkpoint") or _player(DEFENDER)(r),
    "outcome": outcome,
}


def group_value(record: Mapping[str, Any], key: str) -> str:
    """The record's value for a group key, as a string ("None" when absent)."""
    reader = GROUP_KEYS.get(key) or _dotted(key)
    return str(reader(record))


# ---- per-env metrics -----------------------------------------------------------------------------


def _tomsb_block(records: Sequence[Mapping[str, Any]], nested: bool = True) -> dict[str, Any]:
    block: dict[str, Any] = {"n": len(records)}
    outcomes = [tomsb_rewards.outcome(r) for r in records]
    for name in TOMSB_OUTCOMES:
        _rate(block, f"{name}_rate", [o == name for o in outcomes])
    _rate(block, "tom_accuracy", [tomsb_rewards.tom_prior(r) == 1.0 for r in records])
    _mean(block, "stepwise_tom", [tomsb_rewards.stepwise_tom(r) for r in records], bounds=(0, 1))
    _mean(block, "leak_penalty", [tomsb_rewards.leak_penalty(r) for r in records], bounds=(-1, 0))
    infos = [final_infos(r, DEFENDER) for r in records]
    _mean(block, "avg_turns", [float(i.get("turns", 0)) for i in infos])
    _mean(block, "format_failures", [float(i.get("format_failures", 0)) for i in infos])
    # A defender that never spoke (a 1-turn game the attacker ended) has no format to rate.
    spoke = [r for r in records if agent_turns(r, DEFENDER)]
    _rate(block, "format_ok_rate", [format_ok(r, DEFENDER) == 1.0 for r in spoke])
    if nested:
        levels = [int(i.get("prior_level", -1)) for i in infos]
        hard = [r for r, lvl in zip(records, levels, strict=True) if lvl in HARD_PRIOR_LEVELS]
        block["hard"] = _tomsb_block(hard, nested=False)
        block["by_prior_level"] = {
            str(level): _tomsb_block(
                [r for r, lvl in zip(records, levels, strict=True) if lvl == level], nested=False
            )
            for level in sorted(set(levels))
        }
    return block


def _tom_rates(info: Mapping[str, Any]) -> dict[str, float]:
    rates: dict[str, float] = {}
    for experiment, scores in (info.get("tom") or {}).items():
        if not isinstance(scores, Mapping):
            continue
        for rate, value in scores.items():
            # "rounds", "rounds_asked", "rounds_counted" are counts, not pass rates.
            if rate.startswith("rounds"):
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                rates[f"tom_{experiment}_{rate}"] = float(value)
    return rates


def _decrypto_block(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    block: dict[str, Any] = {"n": len(records)}
    infos = [final_infos(r, "encoder_0") for r in records]
    endings = [decrypto_rewards.ending(r, "encoder_0") for r in records]
    _mean(block, "avg_rounds", [float(i.get("rounds", 0)) for i in infos])
    _mean(block, "avg_miscommunications", [float(i.get("miscommunications", 0)) for i in infos])
    _mean(block, "avg_interceptions", [float(i.get("interceptions", 0)) for i in infos])
    _rate(block, "team_win_rate", [e == "survived" for e in endings])
    for name in DECRYPTO_ENDINGS:
        _rate(block, f"{name}_rate", [e == name for e in endings])
    # ToM summaries: the encoder's infos hold perspective taking, the interceptor's false belief;
    # every agent's final infos carry the same `tom` summary, but read all in case one lacks it.
    per_game: list[dict[str, float]] = []
    for record in records:
        merged: dict[str, float] = {}
        for agent in DECRYPTO_AGENTS:
            merged.update(_tom_rates((record.get("infos") or {}).get(agent) or {}))
        per_game.append(merged)
    for name in sorted({k for game in per_game for k in game}):
        _mean(block, name, [g[name] for g in per_game if name in g], bounds=(0, 1), count=True)
    return block


_BLOCKS = {"tomsb": _tomsb_block, "decrypto": _decrypto_block}


def single_env_kind(records: Iterable[Mapping[str, Any]]) -> str:
    """The one env kind ("tomsb" / "decrypto") of `records`; MetricsError naming the mix (and a
    game of each kind) when they hold several, or when there are none."""
    first: dict[str, Any] = {}
    for record in records:
        first.setdefault(env_kind(record), record.get("game_id"))
    if not first:
        raise MetricsError("no episode records")
    if len(first) > 1:
        examples = ", ".join(f"{kind} (e.g. {gid!r})" for kind, gid in sorted(first.items()))
        raise MetricsError(
            f"records mix environments: {examples}; summarise each environment's run separately"
        )
    return next(iter(first))


def metrics_block(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every metric of the records' env (they must all be of one env) with its 95% CI."""
    if not records:
        return {"n": 0}
    kind = single_env_kind(records)
    reasons = [truncation_reason(r) for r in records]
    finished = [r for r, reason in zip(records, reasons, strict=True) if reason is None]
    block = _BLOCKS[kind](finished) if finished else {"n": 0}
    block["truncated"] = len(records) - len(finished)
    _rate(block, "truncated_rate", [r is not None for r in reasons])
    counted: dict[str, int] = {}
    for reason in reasons:
        if reason is not None:
            counted[reason] = counted.get(reason, 0) + 1
    if counted:
        block["truncation_reasons"] = dict(sorted(counted.items()))
    return block


def _sort_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, math.inf, value)


def summarize(
    records: Iterable[Mapping[str, Any]], group_by: list[str] | None = None
) -> dict[str, Any]:
    """Summary of `records`: overall metrics and, for each key of `group_by`, one block per value.

    A key of `group_by` may join several keys with "+" ("attacker+prior_level") to group by their
    combination; the group name is then the values joined with "/".
    """
    records, repeated = dedupe(records)
    if not records:
        raise MetricsError("no episode records to summarise")
    single_env_kind(records)
    env_ids = sorted({str(r.get("env_id")) for r in records})
    if len(env_ids) > 1:
        raise MetricsError(f"records mix environments {env_ids}; summarise them separately")
    summary: dict[str, Any] = {
        "env_id": env_ids[0],
        "n": len(records),
        "confidence": CONFIDENCE,
        "overall": metrics_block(records),
        "groups": {},
    }
    if repeated:
        summary["duplicate_keys"] = repeated
    for key in group_by or []:
        parts = key.split("+")
        buckets: dict[str, list[Mapping[str, Any]]] = {}
        for record in records:
            name = "/".join(group_value(record, part) for part in parts)
            buckets.setdefault(name, []).append(record)
        summary["groups"][key] = {
            name: metrics_block(buckets[name]) for name in sorted(buckets, key=_sort_key)
        }
    return summary


def mean_std_over(
    blocks: Sequence[Mapping[str, Any]], metrics: Sequence[str]
) -> dict[str, dict[str, float | None]]:
    """Mean and sample std of each metric across blocks (e.g. one block per seed), as the paper
    reports Decrypto results ("mean and std over 3 seeds")."""
    out: dict[str, dict[str, float | None]] = {}
    for name in metrics:
        values = [float(b[name]) for b in blocks if b.get(name) is not None]
        out[name] = {
            "mean": float(np.mean(values)) if values else None,
            "std": float(np.std(values, ddof=1)) if len(values) > 1 else (0.0 if values else None),
            "n": len(values),
        }
    return out


# ---- Decrypto replay -----------------------------------------------------------------------------


def replay_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The policy's per-round error rate vs the recorded players' (decoder: miscommunication,
    interceptor: interception), with Wilson 95% CIs, from replay records alone."""
    records = list(records)
    roles = {eval_block(r).get("replay_role") for r in records}
    if len(roles) != 1 or None in roles:
        raise MetricsError("records are not from one replay_decrypto run (eval.replay_role)")
    role = str(roles.pop())
    flag = "miscommunication" if role == "decoder" else "interception"
    policy_flags: list[bool] = []
    same_rounds: list[bool] = []
    all_rounds: list[bool] = []
    for record in records:
        detail = final_infos(record, "encoder_0").get("rounds_detail") or []
        rounds = eval_block(record)["recorded_rounds"]
        for played in detail:
            original = rounds[int(played["round"]) - 1]
            policy_flags.append(bool(played[flag]))
            same_rounds.append(_recorded_flag(original, role))
        all_rounds.extend(_recorded_flag(r, role) for r in rounds)

    def rate(flags: list[bool]) -> dict[str, Any]:
        k = sum(flags)
        return {
            "rate": k / len(flags) if flags else None,
            "rate_ci": wilson_interval(k, len(flags)),
            "rounds": len(flags),
        }

    return {
        "role": role,
        "metric": f"{flag}_rate_per_round",
        "policy": rate(policy_flags),
        "recorded_same_rounds": rate(same_rounds),
        "recorded_all_rounds": rate(all_rounds),
    }


def _recorded_flag(round_: Mapping[str, Any], role: str) -> bool:
    guess = [int(d) for d in round_[f"{role}_guess"]]
    code = [int(d) for d in round_["code"]]
    return guess != code if role == "decoder" else guess == code
