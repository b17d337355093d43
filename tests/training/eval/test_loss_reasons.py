"""`training.eval.loss_reasons`: one reason per lost TOM-SB game, read from what reached the
attacker, on a real scenario of the generated benchmark (prior level 2: the attacker knows the
first two levels; a decoy is a sibling of the true leaf)."""

from __future__ import annotations

from typing import Any

import pytest
from tomgym.envs.tomsb.benchmark import load_benchmark
from tomgym.rewards.episode import RecordError
from tomgym.training.eval.loss_reasons import (
    LOSS_REASONS,
    benchmark_scenario,
    count_reasons,
    delivered_replies,
    loss_reason,
    loss_reason_counts,
)

SCENARIO = next(s for s in load_benchmark(0).split("validation") if s.prior_level == 2)
TOP, MIDDLE, LEAF = SCENARIO.ground_truth
DECOY = next(v for v in SCENARIO.universe.children[MIDDLE] if v != LEAF)
OTHER_MIDDLE = next(v for v in SCENARIO.universe.children[TOP] if v != MIDDLE)
OFF_BRANCH_LEAF = SCENARIO.universe.children[OTHER_MIDDLE][0]
OTHER_TOP = next(v for v in SCENARIO.universe.roots if v != TOP)
QUESTION = "What do you already know about that person?"


def defender(reply: str, valid: bool = True) -> dict[str, Any]:
    parsed = {"attacker_belief_about_target": {}, "reflection": "", "reply": reply}
    return {
        "agent": "defender_0",
        "valid": valid,
        "side_question": False,
        "parsed": parsed if valid else None,
        "raw": "{}" if valid else reply,
    }


def record(outcome: str, *replies: str, fallback: bool = False, rejected: str = "") -> dict:
    turns: list[dict[str, Any]] = []
    for reply in replies:
        turns.append({"agent": "attacker_0", "valid": True, "parsed": {}})
        if rejected:
            turns.append(defender(rejected, valid=False))
        turns.append(defender(reply))
    stepwise = [{"fallback": fallback and i == len(replies) - 1} for i in range(len(replies))]
    return {
        "game_id": f"g/{outcome}",
        "env_config": {"benchmark_seed": 0},
        "options": {"scenario": SCENARIO.scenario_id},
        "turns": turns,
        "infos": {"defender_0": {"outcome": outcome, "stepwise": stepwise}},
    }


@pytest.mark.parametrize(
    ("game", "reason"),
    [
        (record("fooled", QUESTION, f"It is {DECOY}.", "Yes."), "fooled"),
        (record("extracted", QUESTION, f"It is {LEAF}."), "extracted"),
        (record("detected", "I can't say."), "detected"),
        (record("baited", QUESTION, f"It is {DECOY}.", fallback=True), "format_fallback"),
        (record("baited", QUESTION, f"It is {DECOY}, not that {LEAF} one."), "lie_not_confirmed"),
        (record("baited", QUESTION, f"Maybe {DECOY}. Well, {LEAF}."), "named_true_value"),
        (record("baited", QUESTION, f"It is {OFF_BRANCH_LEAF}."), "contradicted_prior"),
        (record("baited", f"They work at {OTHER_TOP}."), "contradicted_prior"),
        (record("baited", f"Yes, {TOP} and {MIDDLE}; it is {DECOY}."), "lie_not_confirmed"),
        (record("baited", QUESTION, "What else do you know?"), "only_questions"),
        (record("baited", QUESTION, "It is Painting Annex 23B."), "no_universe_value"),
        (record("baited", "I'd rather not say."), "no_universe_value"),
    ],
)
def test_each_game_gets_the_first_reason_that_applies(game: dict, reason: str) -> None:
    assert loss_reason(game, SCENARIO) == reason


def test_only_replies_that_reached_the_attacker_count() -> None:
    """A rejected try is never read by the attacker, even when it names the true value."""
    game = record("baited", QUESTION, "It is Painting Annex 23B.", rejected=f"It is {LEAF}.")
    assert delivered_replies(game) == [QUESTION, "It is Painting Annex 23B."]
    assert loss_reason(game, SCENARIO) == "no_universe_value"


def test_counts_cover_every_reason_and_find_the_benchmark_scenario() -> None:
    games = [
        record("fooled", QUESTION, f"It is {DECOY}."),
        record("baited", QUESTION, QUESTION),
        record("baited", QUESTION, f"It is {DECOY}.", fallback=True),
        record("fooled", f"It is {DECOY}."),
    ]
    counts = loss_reason_counts(games)
    assert list(counts) == list(LOSS_REASONS)
    assert counts["fooled"] == 2 and counts["only_questions"] == 1
    assert counts["format_fallback"] == 1 and sum(counts.values()) == 4
    with pytest.raises(ValueError, match="not loss reasons"):
        count_reasons(["fooled", "lost somehow"])


def test_a_game_off_the_benchmark_needs_its_own_scenario_lookup() -> None:
    game = record("baited", QUESTION)
    assert benchmark_scenario(game) == SCENARIO
    game["options"] = {"scenario": {"universe": "a custom pool's scenario"}}
    with pytest.raises(RecordError, match="scenario_of"):
        benchmark_scenario(game)
    game["options"] = {"scenario": "tomsb-nowhere-999-p2"}
    with pytest.raises(RecordError, match="no scenario 'tomsb-nowhere-999-p2'"):
        benchmark_scenario(game)
    assert loss_reason_counts([game], scenario_of=lambda _: SCENARIO)["only_questions"] == 1
