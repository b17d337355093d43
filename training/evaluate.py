"""Evaluation runs: TOM-SB defenders vs attacker variants, Decrypto cross-play, Decrypto replay.

Every evaluation plays through the batched runner (`training.runner.play_games`) into a run
folder (`training.run_folder.RunFolder`): `config.yaml`, `games.jsonl` (one episode record per
line, appended and fsynced as each game ends), `summary.json` and `tables/` (Markdown + CSV, made
from `games.jsonl` alone by `training.tables`). Game ids and game seeds are deterministic
functions of the evaluation's coordinates, so `resume=True` skips finished games and the
resumed run's records equal an uninterrupted run's.

Each record gains an `eval` block (what the runner cannot know): the evaluation seed, the
attacker label / Decrypto matchup, the episode index and the specs played, so `training.metrics`
can group by them.

- `evaluate_tomsb`: one game per (seed, attacker, scenario of the split, episode). Attackers are
  scripted variant names (`base`, `cross_examiner`, `deception_aware`, `bluffing`), any policy
  spec (played with the base attacker prompt), or `VARIANT=SPEC` (a policy spec given the
  variant's attacker prompt). The variant is also the env's `attacker` reset option.
- `evaluate_decrypto`: every (encoder, decoder, interceptor) combination of `models` ("all"),
  one model as encoder+decoder against another as interceptor ("competition"), or two models as
  encoder and decoder against a fixed interceptor ("adhoc"); `games` games per seed, the same
  keyword/code draws for every matchup (paired comparison); mean +- std over seeds.
- `replay_decrypto`: a policy plays the decoder or the interceptor on recorded games (our
  `games.jsonl` or the `human_games.json` format): the env is pinned to the recorded keywords and
  codes (`strict_guesses=False`, as human guesses may repeat digits), the other roles replay their
  recorded answers, and the policy's per-round miscommunication / interception rate is reported
  next to the recorded players' rate on the same rounds.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tomgym.agents.base import Policy, Turn
from tomgym.training import metrics, tables
from tomgym.training.policy_specs import make_policy
from tomgym.training.run_folder import RunFolder, RunFolderError
from tomgym.training.runner import GameSpec, RunStats, play_games

TOMSB_ENV = "tomgym/tomsb-v0"
DECRYPTO_ENV = "tomgym/decrypto-v0"
ATTACKER_VARIANTS = ("base", "cross_examiner", "deception_aware", "bluffing")
DECRYPTO_MODES = ("all", "competition", "adhoc")
DECRYPTO_AGENTS = ("encoder_0", "decoder_0", "interceptor_0")
REPLAY_ROLES = ("decoder", "interceptor")
TOMSB_GROUPS = ["attacker", "prior_level", "seed", "attacker+prior_level"]
DECRYPTO_GROUPS = ["matchup", "matchup+seed", "encoder", "decoder", "interceptor"]
DECRYPTO_HEADLINE = (
    "avg_rounds",
    "avg_miscommunications",
    "avg_interceptions",
    "team_win_rate",
)


def _spec_policy(spec: str, seed: int) -> Policy:
    """The default policy factory: build the policy a spec names."""
    return make_policy(spec, seed=seed)


class EvaluationError(ValueError):
    """Bad evaluation input (unknown attacker, empty split, unreadable games file ...)."""


def stable_seed(*parts: object) -> int:
    """A 31-bit seed from the parts (same across processes and Python versions)."""
    text = "|".join(str(p) for p in parts)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big") >> 1


class RoutedPolicy:
    """One `Policy` for the runner that sends each (game, agent) turn to the policy assigned to it.

    Lets one `play_games` call mix opponents (every attacker variant, every Decrypto matchup) so
    games of all of them fill the same batches; turns for one underlying policy are still
    answered with one `act_batch` call per tick.
    """

    name = "routed"

    def __init__(self, routes: Mapping[str, Mapping[str, Policy]]) -> None:
        self.routes = routes

    def _policies(self, game_id: str) -> list[Policy]:
        return list({id(p): p for p in self.routes[game_id].values()}.values())

    def reset(self, game_id: str) -> None:
        for policy in self._policies(game_id):
            policy.reset(game_id)

    def forget(self, game_id: str) -> None:
        for policy in self._policies(game_id):
            forget = getattr(policy, "forget", None)
            if callable(forget):
                forget(game_id)

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        groups: dict[int, list[int]] = {}
        owners: dict[int, Policy] = {}
        for index, turn in enumerate(turns):
            policy = self.routes[turn.game_id][turn.agent]
            groups.setdefault(id(policy), []).append(index)
            owners[id(policy)] = policy
        answers: list[str] = [""] * len(turns)
        for key, indices in groups.items():
            replies = owners[key].act_batch([turns[i] for i in indices])
            if len(replies) != len(indices):
                raise RuntimeError(
                    f"policy {owners[key].describe().get('name')!r} returned {len(replies)} "
                    f"answers for {len(indices)} turns"
                )
            for i, reply in zip(indices, replies, strict=True):
                answers[i] = reply
        return answers

    def close(self) -> None:
        seen: set[int] = set()
        for mapping in self.routes.values():
            for policy in mapping.values():
                if id(policy) not in seen:
                    seen.add(id(policy))
                    policy.close()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


def _run(
    folder: RunFolder,
    env_id: str,
    games: Sequence[GameSpec],
    routes: Mapping[str, Mapping[str, Policy]],
    eval_blocks: Mapping[str, dict[str, Any]],
    *,
    agents: Sequence[str],
    env_config: Mapping[str, Any] | None,
    concurrency: int,
    progress: bool,
    stats: RunStats | None,
) -> None:
    """Play the games not yet in the folder; every record is appended the moment it ends."""
    done = folder.completed_ids()
    todo = [g for g in games if g.game_id not in done]
    if not todo:
        return
    router = RoutedPolicy(routes)

    def on_record(record: dict[str, Any]) -> None:
        game_routes = routes[record["game_id"]]
        record["policies"] = {a: game_routes[a].describe() for a in record["policies"]}
        record["eval"] = eval_blocks[record["game_id"]]
        folder.append(record)

    play_games(
        env_id,
        todo,
        {agent: router for agent in agents},
        concurrency=concurrency,
        env_config=env_config,
        on_record=on_record,
        progress=progress,
        stats=stats,
    )


def _check_resume(folder: RunFolder, config: Mapping[str, Any], resume: bool) -> None:
    """On resume, every setting that shapes the game list must match the folder's config."""
    if not resume:
        return
    old = folder.config()
    for key, value in config.items():
        if key in old and old[key] != value and key not in ("concurrency",):
            raise RunFolderError(
                f"cannot resume {folder.path}: its {key} is {old[key]!r}, this run asks for {value!r}"
            )


def finish_run(folder: RunFolder, group_by: list[str]) -> dict[str, Any]:
    """summary.json and tables/ from the folder's games.jsonl alone."""
    records = folder.records()
    summary = metrics.summarize(records, group_by)
    summary["config"] = folder.config()
    folder.write_summary(summary)
    tables.write_tables(folder.path, records)
    return summary


# ---- TOM-SB --------------------------------------------------------------------------------------


def parse_attacker(entry: str) -> tuple[str, str, str]:
    """`entry` -> (label, attacker prompt variant, policy spec); see the module docstring."""
    entry = entry.strip()
    if not entry:
        raise EvaluationError("empty attacker name")
    if entry in ATTACKER_VARIANTS:
        return entry, entry, f"scripted:{entry}"
    if entry.startswith("scripted:") and entry.partition(":")[2] in ATTACKER_VARIANTS:
        variant = entry.partition(":")[2]
        return variant, variant, entry
    head, sep, spec = entry.partition("=")
    if sep and head in ATTACKER_VARIANTS and ":" not in head:
        return f"{head}={spec}", head, spec
    if entry.startswith("scripted:"):
        raise EvaluationError(
            f"unknown scripted attacker {entry!r}; variants: {', '.join(ATTACKER_VARIANTS)}"
        )
    return entry, "base", entry


def _tomsb_scenarios(split: str, benchmark_seed: int, max_scenarios: int | None) -> list[Any]:
    from tomgym.envs.tomsb.benchmark import load_benchmark

    try:
        scenarios = load_benchmark(benchmark_seed).split(split)
    except ValueError as exc:
        raise EvaluationError(str(exc)) from None
    if max_scenarios is not None:
        if max_scenarios < 1:
            raise EvaluationError(f"max_scenarios must be >= 1, got {max_scenarios}")
        # Stratify by prior level (the benchmark lists universes x levels) so a small subset
        # still covers easy and hard scenarios: take scenarios round-robin over levels.
        by_level: dict[int, list[Any]] = {}
        for scenario in scenarios:
            by_level.setdefault(scenario.prior_level, []).append(scenario)
        interleaved = [
            s
            for group in itertools.zip_longest(*(by_level[k] for k in sorted(by_level)))
            for s in group
            if s is not None
        ]
        scenarios = interleaved[:max_scenarios]
    if not scenarios:
        raise EvaluationError(f"split {split!r} holds no scenarios")
    return scenarios


def evaluate_tomsb(
    defender_spec: str,
    attackers: Sequence[str] = ATTACKER_VARIANTS,
    split: str = "test",
    episodes_per_scenario: int = 2,
    seeds: int = 3,
    out_dir: str | Path = "runs/eval-tomsb",
    concurrency: int = 8,
    resume: bool = False,
    *,
    max_scenarios: int | None = None,
    benchmark_seed: int = 0,
    env_config: Mapping[str, Any] | None = None,
    progress: bool = False,
    stats: RunStats | None = None,
    policy_factory: Callable[[str, int], Policy] | None = None,
) -> dict[str, Any]:
    """Evaluate a defender against attacker variants on a benchmark split; returns the summary.

    Games: for each evaluation seed s < `seeds`, attacker, scenario and episode e, game id
    `s{s}/{attacker}/{scenario_id}/e{e}` with env seed `stable_seed(game id)`. The defender is
    built once (seed 0) and plays every game; the game id decides its sampling stream.
    """
    if episodes_per_scenario < 1 or seeds < 1:
        raise EvaluationError("episodes_per_scenario and seeds must be >= 1")
    if not attackers:
        raise EvaluationError("no attackers given")
    factory = policy_factory or _spec_policy
    parsed = [parse_attacker(a) for a in attackers]
    labels = [label for label, _, _ in parsed]
    if len(set(labels)) != len(labels):
        raise EvaluationError(f"attackers repeat: {labels}")
    scenarios = _tomsb_scenarios(split, benchmark_seed, max_scenarios)
    config = {
        "kind": "eval_tomsb",
        "env_id": TOMSB_ENV,
        "defender": defender_spec,
        "attackers": list(attackers),
        "split": split,
        "episodes_per_scenario": episodes_per_scenario,
        "seeds": seeds,
        "max_scenarios": max_scenarios,
        "benchmark_seed": benchmark_seed,
        "env_config": dict(env_config or {}),
    }
    folder = RunFolder(out_dir)
    _check_resume(folder, config, resume)
    # Build every policy before touching the folder: a bad spec fails with nothing written.
    defender = factory(defender_spec, 0)
    attacker_policies = {label: factory(spec, 0) for label, _, spec in parsed}
    folder.start(config, resume=resume)

    games: list[GameSpec] = []
    routes: dict[str, dict[str, Policy]] = {}
    blocks: dict[str, dict[str, Any]] = {}
    for seed in range(seeds):
        for label, variant, spec in parsed:
            for scenario in scenarios:
                for episode in range(episodes_per_scenario):
                    game_id = f"s{seed}/{label}/{scenario.scenario_id}/e{episode}"
                    options = {
                        "scenario": scenario.scenario_id,
                        "split": split,
                        "attacker": variant,
                    }
                    games.append(GameSpec(game_id, stable_seed(game_id), options))
                    routes[game_id] = {
                        "defender_0": defender,
                        "attacker_0": attacker_policies[label],
                    }
                    blocks[game_id] = {
                        "seed": seed,
                        "attacker": label,
                        "attacker_spec": spec,
                        "defender_spec": defender_spec,
                        "scenario": scenario.scenario_id,
                        "episode": episode,
                    }
    run_config = {"benchmark_seed": benchmark_seed, "split": split, **dict(env_config or {})}
    try:
        _run(
            folder,
            TOMSB_ENV,
            games,
            routes,
            blocks,
            agents=("attacker_0", "defender_0"),
            env_config=run_config,
            concurrency=concurrency,
            progress=progress,
            stats=stats,
        )
    finally:
        for policy in {id(p): p for p in [defender, *attacker_policies.values()]}.values():
            policy.close()
    return finish_run(folder, TOMSB_GROUPS)


# ---- Decrypto cross-play ---------------------------------------------------------------------------


def decrypto_matchups(
    models: Sequence[str], mode: str = "all", interceptor: str | None = None
) -> list[tuple[str, str, str]]:
    """(encoder, decoder, interceptor) specs for a mode (see the module docstring)."""
    if not models:
        raise EvaluationError("no models given")
    if mode == "all":
        return list(itertools.product(models, repeat=3))
    if mode == "competition":
        return [(team, team, eve) for team in models for eve in models]
    if mode == "adhoc":
        eve = interceptor or models[0]
        return [(enc, dec, eve) for enc in models for dec in models]
    raise EvaluationError(f"unknown mode {mode!r}; valid modes: {', '.join(DECRYPTO_MODES)}")


def evaluate_decrypto(
    models: Sequence[str],
    mode: str = "all",
    seeds: int = 3,
    games: int = 32,
    out_dir: str | Path = "runs/eval-decrypto",
    concurrency: int = 8,
    resume: bool = False,
    *,
    interceptor: str | None = None,
    env_config: Mapping[str, Any] | None = None,
    progress: bool = False,
    stats: RunStats | None = None,
    policy_factory: Callable[[str, int], Policy] | None = None,
) -> dict[str, Any]:
    """Decrypto cross-play: `games` games per seed for each matchup; returns the summary.

    Game `g` of seed `s` has env seed `stable_seed("decrypto", s, g)` in every matchup, so all
    matchups face the same keywords and codes. The summary's `matchups` list holds, per
    matchup, the headline metrics' mean and std over seeds.
    """
    if seeds < 1 or games < 1:
        raise EvaluationError("seeds and games must be >= 1")
    factory = policy_factory or _spec_policy
    matchups = decrypto_matchups(list(models), mode, interceptor)
    config = {
        "kind": "eval_decrypto",
        "env_id": DECRYPTO_ENV,
        "models": list(models),
        "mode": mode,
        "interceptor": interceptor,
        "seeds": seeds,
        "games": games,
        "env_config": dict(env_config or {}),
    }
    folder = RunFolder(out_dir)
    _check_resume(folder, config, resume)
    specs = sorted({spec for matchup in matchups for spec in matchup})
    built = {spec: factory(spec, 0) for spec in specs}
    folder.start(config, resume=resume)

    game_specs: list[GameSpec] = []
    routes: dict[str, dict[str, Policy]] = {}
    blocks: dict[str, dict[str, Any]] = {}
    for index, matchup in enumerate(matchups):
        for seed in range(seeds):
            for game in range(games):
                game_id = f"m{index}/s{seed}/g{game}"
                game_specs.append(GameSpec(game_id, stable_seed("decrypto", seed, game)))
                routes[game_id] = {
                    a: built[s] for a, s in zip(DECRYPTO_AGENTS, matchup, strict=True)
                }
                blocks[game_id] = {
                    "seed": seed,
                    "game": game,
                    "matchup": index,
                    "encoder_spec": matchup[0],
                    "decoder_spec": matchup[1],
                    "interceptor_spec": matchup[2],
                }
    try:
        _run(
            folder,
            DECRYPTO_ENV,
            game_specs,
            routes,
            blocks,
            agents=DECRYPTO_AGENTS,
            env_config=env_config,
            concurrency=concurrency,
            progress=progress,
            stats=stats,
        )
    finally:
        for policy in built.values():
            policy.close()
    summary = finish_run(folder, DECRYPTO_GROUPS)
    summary["matchups"] = [
        {k: v for k, v in row.items() if k != "pooled"}
        for row in tables.decrypto_matchup_rows(folder.records())
    ]
    folder.write_summary(summary)
    return summary


# ---- Decrypto replay -------------------------------------------------------------------------------


def _guess_text(code: Sequence[int]) -> str:
    return "ANSWER: " + json.dumps({"guess": "-".join(str(int(d)) for d in code)})


def _hints_text(hints: Sequence[str]) -> str:
    return "ANSWER: " + json.dumps({"hints": list(hints)})


def load_recorded_games(path: str | Path) -> list[dict[str, Any]]:
    """Recorded Decrypto games as [{"game_id", "seed", "keywords", "play_on", "rounds": [{"code",
    "hints", "decoder_guess", "interceptor_guess"}]}], from our games.jsonl (Decrypto records)
    or the human_games.json format ({"games": [{"keywords", "turns": [...], ...}]})."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvaluationError(f"cannot read games file {path}: {exc.strerror or exc}") from None
    games: list[dict[str, Any]] = []
    stripped = text.lstrip()
    if stripped.startswith("{") and '"games"' in stripped[:20000] and "\n{" not in stripped:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvaluationError(
                f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})"
            ) from None
        for index, game in enumerate(data.get("games") or []):
            try:
                games.append(
                    {
                        "game_id": f"human-{game.get('game_index', index)}",
                        "seed": int(game.get("env_seed", index)),
                        "keywords": list(game["keywords"]),
                        "play_on": bool(
                            (game.get("outcome") or {}).get("play_continued_after_end")
                        ),
                        "rounds": [
                            {
                                "code": list(t["code"]),
                                "hints": list(t["hints"]),
                                "decoder_guess": list(t["decoder_guess"]),
                                "interceptor_guess": list(t["interceptor_guess"]),
                            }
                            for t in game["turns"]
                        ],
                    }
                )
            except (KeyError, TypeError) as exc:
                raise EvaluationError(f"{path}: game {index} lacks field {exc}") from None
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EvaluationError(f"{path}:{number}: corrupt record ({exc.msg})") from None
            if "decrypto" not in str(record.get("env_id", "")):
                raise EvaluationError(f"{path}:{number}: not a Decrypto episode record")
            info = (record.get("infos") or {}).get("encoder_0") or {}
            detail = info.get("rounds_detail")
            if not detail or "keywords" not in info:
                raise EvaluationError(
                    f"{path}:{number}: record lacks infos.encoder_0.keywords/rounds_detail"
                )
            games.append(
                {
                    "game_id": str(record["game_id"]),
                    "seed": int(record.get("seed") or 0),
                    "keywords": list(info["keywords"]),
                    "play_on": bool((record.get("env_config") or {}).get("play_on", False)),
                    "rounds": [
                        {k: r[k] for k in ("code", "hints", "decoder_guess", "interceptor_guess")}
                        for r in detail
                    ],
                }
            )
    if not games:
        raise EvaluationError(f"{path} holds no games")
    return games


class RecordedPlayer:
    """Replays the recorded answers of one game per round (hints for the encoder, guesses)."""

    name = "recorded"

    def __init__(self, games: Mapping[str, Mapping[str, Any]]) -> None:
        self.games = games

    def reset(self, game_id: str) -> None:
        pass

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        answers = []
        for turn in turns:
            rounds = self.games[turn.game_id]["rounds"]
            played = rounds[min(int(turn.observation.get("round", 1)), len(rounds)) - 1]
            if turn.agent == "encoder_0":
                answers.append(_hints_text(played["hints"]))
            else:
                role = turn.agent.split("_")[0]
                answers.append(_guess_text(played[f"{role}_guess"]))
        return answers

    def close(self) -> None:
        pass

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "recorded"}


def replay_decrypto(
    policy_spec: str,
    role: str = "decoder",
    games_file: str | Path = "",
    out_dir: str | Path = "runs/replay-decrypto",
    *,
    concurrency: int = 8,
    resume: bool = False,
    progress: bool = False,
    policy_factory: Callable[[str, int], Policy] | None = None,
) -> dict[str, Any]:
    """Let `policy_spec` play `role` on recorded games; compare its per-round error rate.

    The env runs at most as many rounds as were recorded (`max_rounds`), so every round has
    recorded hints. A policy whose mistakes end a game earlier than the recording plays fewer
    rounds; the recorded players' rate is therefore given both on the rounds the policy played
    (`recorded_rate_same_rounds`, the fair comparison) and on all recorded rounds.
    """
    if role not in REPLAY_ROLES:
        raise EvaluationError(f"unknown role {role!r}; valid roles: {', '.join(REPLAY_ROLES)}")
    factory = policy_factory or _spec_policy
    recorded = load_recorded_games(games_file)
    by_id = {g["game_id"]: g for g in recorded}
    config = {
        "kind": "replay_decrypto",
        "env_id": DECRYPTO_ENV,
        "policy": policy_spec,
        "role": role,
        "games_file": str(Path(games_file).resolve()),
    }
    folder = RunFolder(out_dir)
    _check_resume(folder, config, resume)
    policy = factory(policy_spec, 0)
    folder.start(config, resume=resume)
    player = RecordedPlayer(by_id)
    agent = f"{role}_0"
    game_specs, routes, blocks = [], {}, {}
    for game in recorded:
        options = {
            "keywords": game["keywords"],
            "codes": [r["code"] for r in game["rounds"]],
            "play_on": game["play_on"],
            "max_rounds": len(game["rounds"]),
        }
        game_specs.append(GameSpec(game["game_id"], game["seed"], options))
        routes[game["game_id"]] = {a: (policy if a == agent else player) for a in DECRYPTO_AGENTS}
        # The recorded rounds travel in the record, so tables regenerate from games.jsonl alone.
        blocks[game["game_id"]] = {
            "replay_role": role,
            "policy_spec": policy_spec,
            "recorded_rounds": game["rounds"],
        }
    try:
        _run(
            folder,
            DECRYPTO_ENV,
            game_specs,
            routes,
            blocks,
            agents=DECRYPTO_AGENTS,
            env_config={"strict_guesses": False},
            concurrency=concurrency,
            progress=progress,
            stats=None,
        )
    finally:
        policy.close()
    records = folder.records()
    summary = replay_summary(records)
    summary["overall"] = metrics.summarize(records)["overall"]
    summary["config"] = folder.config()
    folder.write_summary(summary)
    tables.write_tables(folder.path, records)
    return summary


def replay_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The policy's per-round error rate vs the recorded players' (decoder: miscommunication,
    interceptor: interception), with Wilson 95% CIs, from replay records alone."""
    records = list(records)
    roles = {(r.get("eval") or {}).get("replay_role") for r in records}
    if len(roles) != 1 or None in roles:
        raise EvaluationError("records are not from one replay_decrypto run (eval.replay_role)")
    role = str(roles.pop())
    flag = "miscommunication" if role == "decoder" else "interception"
    policy_flags: list[bool] = []
    same_rounds: list[bool] = []
    all_rounds: list[bool] = []
    for record in records:
        detail = ((record.get("infos") or {}).get("encoder_0") or {}).get("rounds_detail") or []
        rounds = record["eval"]["recorded_rounds"]
        for played in detail:
            original = rounds[int(played["round"]) - 1]
            policy_flags.append(bool(played[flag]))
            same_rounds.append(_recorded_flag(original, role))
        all_rounds.extend(_recorded_flag(r, role) for r in rounds)

    def rate(flags: list[bool]) -> dict[str, Any]:
        k = sum(flags)
        return {
            "rate": k / len(flags) if flags else None,
            "rate_ci": metrics.wilson_interval(k, len(flags)),
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
