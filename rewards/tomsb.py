"""TOM-SB trajectory rewards: pure functions of one episode record (see the shared record format).

Every function takes the episode record written by the runner (``record["infos"][agent]`` holds
the env's final infos: ``outcome``, ``prior``, ``final_defender_estimate``, ``stepwise``, ``leaks``,
``prior_level``, ``ground_truth`` ...) and returns a float. Beliefs are ``{level: value | None}``
mappings (or positional sequences in level order); names are compared with
``envs.tomsb.universe.normalise_name`` (case, accents, punctuation) and ``None`` matches only
``None``.

Rewards (the paper's trajectory-level definitions, see specs/tomsb.md "Rewards"):
- `fooling`: 1.0 if the outcome is "fooled", else 0.0.
- `tom_prior`: 1.0 if the defender's final estimate of what the attacker knew *before* the
  conversation equals the attacker's true prior on every level, else 0.0.
- `stepwise_tom`: mean over defender turns of [estimate == the attacker's belief at that turn].
- `leak_penalty`: minus the fraction of the levels the attacker did not know whose true value the
  defender named at some point (0.0 = no leak, -1.0 = every unknown level leaked).

A graded fooling term for shaping (not one of the paper's rewards):
- `misled`: 1.0 if fooled; 0.0 if detected or extracted; for a game that ran out of turns
  ("baited"), the fraction of the levels the attacker did not know on which its final belief holds
  a wrong value (a decoy it adopted). Fooling is all or nothing, so a group of episodes that all
  run out of turns has no reward variance under it; `misled` still ranks the one that planted a
  decoy above the one that planted none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tomgym.envs.tomsb.game import OUTCOMES, belief_matches
from tomgym.envs.tomsb.universe import normalise_name
from tomgym.rewards.episode import RecordError, final_infos

DEFENDER = "defender_0"


def _field(info: Mapping[str, Any], key: str, record: Mapping[str, Any]) -> Any:
    if key not in info:
        raise RecordError(
            f"episode record {record.get('game_id')!r}: final infos lack {key!r} "
            "(is this a finished TOM-SB episode?)"
        )
    return info[key]


def outcome(record: Mapping[str, Any], agent: str = DEFENDER) -> str:
    """The episode's outcome, one of `envs.tomsb.game.OUTCOMES`."""
    value = _field(final_infos(record, agent), "outcome", record)
    if value not in OUTCOMES:
        raise RecordError(
            f"episode record {record.get('game_id')!r}: outcome {value!r} is not one of {OUTCOMES}"
        )
    return value


def as_belief(value: Any, levels: Sequence[str]) -> tuple[str | None, ...]:
    """A `{level: value}` mapping or positional sequence as a tuple in `levels` order."""
    if value is None:
        return tuple(None for _ in levels)
    if isinstance(value, Mapping):
        return tuple(_clean(value.get(level)) for level in levels)
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != len(levels):
            raise RecordError(f"belief {value!r} has {len(value)} slots, expected {len(levels)}")
        return tuple(_clean(v) for v in value)
    raise RecordError(f"belief must be a mapping or a list, got {type(value).__name__}")


def _clean(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text if normalise_name(text) not in ("", "null", "none", "unknown") else None


def _levels(info: Mapping[str, Any], record: Mapping[str, Any]) -> tuple[str, ...]:
    """Level names in order, read from the mapping-valued `prior` (or `ground_truth`)."""
    for key in ("prior", "ground_truth"):
        value = info.get(key)
        if isinstance(value, Mapping):
            return tuple(value)
    truth = _field(info, "ground_truth", record)
    return tuple(str(i) for i in range(len(truth)))


def fooling(record: Mapping[str, Any], agent: str = DEFENDER) -> float:
    """1.0 if the attacker was fooled, else 0.0."""
    return 1.0 if outcome(record, agent) == "fooled" else 0.0


def tom_prior(record: Mapping[str, Any], agent: str = DEFENDER) -> float:
    """1.0 if the defender's final estimate equals the attacker's true prior on every level.

    A defender that never produced a valid estimate (`final_defender_estimate` is null) scores 0.
    """
    info = final_infos(record, agent)
    levels = _levels(info, record)
    estimate = _field(info, "final_defender_estimate", record)
    if estimate is None:
        return 0.0
    prior = as_belief(_field(info, "prior", record), levels)
    return 1.0 if belief_matches(as_belief(estimate, levels), prior) else 0.0


def stepwise_tom(record: Mapping[str, Any], agent: str = DEFENDER) -> float:
    """Mean over defender turns of [defender estimate == attacker's current belief]; 0 if none.

    Turns answered by the env's fallback (the defender never gave a valid answer) count as misses.
    """
    info = final_infos(record, agent)
    levels = _levels(info, record)
    steps = _field(info, "stepwise", record)
    if not steps:
        return 0.0
    hits = 0
    for step in steps:
        if step.get("fallback"):
            continue  # the env's default answer, not an estimate: a miss
        estimate = as_belief(step.get("defender_estimate"), levels)
        actual = as_belief(step.get("attacker_belief"), levels)
        hits += belief_matches(estimate, actual)
    return hits / len(steps)


def leak_penalty(record: Mapping[str, Any], agent: str = DEFENDER) -> float:
    """Minus the fraction of unknown levels whose true value the defender named (0 = no leak)."""
    info = final_infos(record, agent)
    levels = _levels(info, record)
    truth = as_belief(_field(info, "ground_truth", record), levels)
    prior_level = int(_field(info, "prior_level", record))
    unknown = [v for v in truth[prior_level:] if v is not None]
    if not unknown:
        return 0.0
    leaked = {normalise_name(v) for v in _field(info, "leaks", record) or ()}
    return -sum(normalise_name(v) in leaked for v in unknown) / len(unknown)


def misled(record: Mapping[str, Any], agent: str = DEFENDER) -> float:
    """The graded fooling term (module doc): 1.0 fooled, 0.0 detected or extracted, else the
    share of the unknown levels where the attacker's final belief is a wrong value."""
    result = outcome(record, agent)
    if result in ("fooled", "detected", "extracted"):
        return float(result == "fooled")
    info = final_infos(record, agent)
    levels = _levels(info, record)
    unknown = range(int(_field(info, "prior_level", record)), len(levels))
    if not unknown:
        return 0.0
    truth = as_belief(_field(info, "ground_truth", record), levels)
    belief = as_belief(_field(info, "belief", record), levels)
    wrong = sum(
        belief[i] is not None and normalise_name(belief[i]) != normalise_name(truth[i] or "")
        for i in unknown
    )
    return wrong / len(unknown)


def outcome_indicators(record: Mapping[str, Any], agent: str = DEFENDER) -> dict[str, float]:
    """One-hot outcome (`outcome/fooled` ...), for logging outcome rates."""
    value = outcome(record, agent)
    return {f"outcome/{name}": float(value == name) for name in OUTCOMES}
