"""Why a TOM-SB defender did not fool the attacker: one reason per game, read from its record.

A learning run is judged by fooling on held-out games; when the rate does not move, the next
question is which mistake the games were lost on. `loss_reason(record, scenario)` names it from
what reached the attacker (the defender replies that were accepted, read by the scripted
players' own `envs.tomsb.reading`) and the env's per-turn record, so it works for any attacker
(scripted, LLM, human). The first reason that applies, in the order of `LOSS_REASONS`:

- `fooled`, `extracted`, `detected`: the outcome itself (the first is a win).
- `format_fallback`: a defender answer was rejected on every try and the env sent its fallback
  (a protocol-valid refusal) in its place.
- `named_true_value`: a reply stated a true value the attacker did not know (a leak it did not
  adopt, or the game would be `extracted`).
- `contradicted_prior`: a reply stated a value the attacker knows to be wrong: another value at a
  level of its prior, or a value at an unknown level outside the known branch of the tree.
- `lie_not_confirmed`: a consistent wrong value (a decoy) was stated, but the attacker had not
  signalled success when the turns ran out.
- `only_questions`: every reply asked the attacker something and none stated a value.
- `no_universe_value`: no reply stated any value of an unknown level the attacker could read
  (an invented or misspelled name, vagueness, refusal).

`loss_reason_counts(records)` counts them over a run (`benchmark_scenario` finds each game's
scenario in the generated benchmark; pass `scenario_of` for your own pool); the learning
benchmark reports the counts per stage (`loss_reasons`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tomgym.envs.tomsb.reading import NameMatcher, cached_normalise, read_reply
from tomgym.envs.tomsb.universe import Scenario
from tomgym.rewards import tomsb
from tomgym.rewards.episode import RecordError, final_infos

LOSS_REASONS = (
    "fooled",
    "extracted",
    "detected",
    "format_fallback",
    "named_true_value",
    "contradicted_prior",
    "lie_not_confirmed",
    "only_questions",
    "no_universe_value",
)
DEFENDER = tomsb.DEFENDER


def delivered_replies(record: Mapping[str, Any], agent: str = DEFENDER) -> list[str]:
    """The replies of `agent` that reached the attacker: its accepted answers, in order (a
    rejected try is retried or replaced by the env's fallback, which `format_fallback` counts)."""
    replies = []
    for turn in record.get("turns", []):
        if turn.get("agent") != agent or not turn.get("valid") or turn.get("side_question"):
            continue
        parsed = turn.get("parsed")
        if isinstance(parsed, Mapping) and isinstance(parsed.get("reply"), str):
            replies.append(parsed["reply"])
    return replies


def _fell_back(record: Mapping[str, Any], agent: str) -> bool:
    info = final_infos(record, agent)
    return any(step.get("fallback") for step in info.get("stepwise", []) or [])


def loss_reason(record: Mapping[str, Any], scenario: Scenario, agent: str = DEFENDER) -> str:
    """The first of `LOSS_REASONS` that applies to one TOM-SB game of `scenario` (module doc)."""
    outcome = tomsb.outcome(record, agent)
    if outcome in ("fooled", "extracted", "detected"):
        return outcome
    if _fell_back(record, agent):
        return "format_fallback"
    universe = scenario.universe
    known = scenario.prior_level
    truth = [cached_normalise(value) for value in scenario.ground_truth]
    prior = [cached_normalise(value) for value in scenario.ground_truth[:known]]
    matcher = NameMatcher(universe)
    readings = [read_reply(reply, matcher) for reply in delivered_replies(record, agent)]
    contradicted = decoy = False
    for reading in readings:
        for depth, names in reading.affirmed.items():
            for name in names:
                key = cached_normalise(name)
                if depth >= known and key == truth[depth]:
                    return "named_true_value"
                if depth < known:
                    contradicted |= key != prior[depth]
                    continue
                branch = [cached_normalise(a) for a in universe.ancestors(name)][:known]
                if branch == prior:
                    decoy = True
                else:
                    contradicted = True
    if contradicted:
        return "contradicted_prior"
    if decoy:
        return "lie_not_confirmed"
    if readings and all(r.probe and not r.affirmed for r in readings):
        return "only_questions"
    return "no_universe_value"


def benchmark_scenario(record: Mapping[str, Any]) -> Scenario:
    """The generated benchmark's scenario a record was played on (its env config's
    `benchmark_seed`, its options' scenario id); a clear error for a game on another pool."""
    from tomgym.envs.tomsb.benchmark import load_benchmark

    seed = (record.get("env_config") or {}).get("benchmark_seed")
    scenario_id = (record.get("options") or {}).get("scenario")
    if not isinstance(seed, int) or not isinstance(scenario_id, str):
        raise RecordError(
            f"episode record {record.get('game_id')!r} names no benchmark scenario "
            "(env_config.benchmark_seed and options.scenario); pass scenario_of for your pool"
        )
    try:
        return load_benchmark(seed).by_id(scenario_id)
    except (KeyError, ValueError) as exc:
        detail = exc.args[0] if exc.args else exc
        raise RecordError(f"episode record {record.get('game_id')!r}: {detail}") from None


def count_reasons(reasons: Iterable[str]) -> dict[str, int]:
    """How many of `reasons` are each of `LOSS_REASONS` (zeros included, in that order)."""
    counts = Counter(reasons)
    unknown = sorted(set(counts) - set(LOSS_REASONS))
    if unknown:
        raise ValueError(f"not loss reasons: {unknown}; expected among {list(LOSS_REASONS)}")
    return {reason: counts.get(reason, 0) for reason in LOSS_REASONS}


def loss_reason_counts(
    records: Iterable[Mapping[str, Any]],
    scenario_of: Callable[[Mapping[str, Any]], Scenario] = benchmark_scenario,
) -> dict[str, int]:
    """`count_reasons` over the games of `records`; `scenario_of` gives a record's `Scenario`
    (the generated benchmark's by default)."""
    return count_reasons(loss_reason(record, scenario_of(record)) for record in records)
