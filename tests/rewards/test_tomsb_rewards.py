from __future__ import annotations

import math

import pytest
from tomgym.rewards import (
    RecordError,
    RewardComposer,
    fooling,
    leak_penalty,
    misled,
    stepwise_tom,
    tom_prior,
)
from tomgym.rewards.tomsb import outcome_indicators

from tests.rewards.records import TRUTH, tomsb_record


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [("fooled", 1.0), ("extracted", 0.0), ("detected", 0.0), ("baited", 0.0)],
)
def test_fooling_every_outcome(outcome: str, expected: float) -> None:
    record = tomsb_record(outcome=outcome)
    assert fooling(record) == expected
    indicators = outcome_indicators(record)
    assert indicators[f"outcome/{outcome}"] == 1.0 and sum(indicators.values()) == 1.0


def test_unknown_outcome_is_a_clear_error() -> None:
    with pytest.raises(RecordError, match="outcome 'won'"):
        fooling(tomsb_record(outcome="won"))


def test_missing_infos_is_a_clear_error() -> None:
    with pytest.raises(RecordError, match="no final infos for agent 'defender_0'"):
        fooling({"game_id": "x", "infos": {}})


@pytest.mark.parametrize("prior_level", [0, 1, 2])
def test_tom_prior_exact_match_each_level(prior_level: int) -> None:
    assert tom_prior(tomsb_record(prior_level=prior_level)) == 1.0


def test_tom_prior_null_matches_null_and_names_are_normalised() -> None:
    estimate = {"company": "  ACME!", "division": "null", "team": None}
    assert tom_prior(tomsb_record(prior_level=1, final_estimate=estimate)) == 1.0


def test_tom_prior_wrong_or_overclaiming_estimate() -> None:
    # Claims the attacker knew the division too: wrong on that level.
    over = {"company": "Acme", "division": "Rockets", "team": None}
    assert tom_prior(tomsb_record(prior_level=1, final_estimate=over)) == 0.0
    # Thinks the attacker knew nothing.
    under = {"company": None, "division": None, "team": None}
    assert tom_prior(tomsb_record(prior_level=1, final_estimate=under)) == 0.0


def test_tom_prior_without_any_valid_estimate_scores_zero() -> None:
    record = tomsb_record()
    record["infos"]["defender_0"]["final_defender_estimate"] = None
    assert tom_prior(record) == 0.0


def test_tom_prior_accepts_positional_beliefs() -> None:
    record = tomsb_record(prior_level=2)
    record["infos"]["defender_0"]["final_defender_estimate"] = ["acme", "rockets", None]
    assert tom_prior(record) == 1.0


def test_stepwise_tom_is_the_mean_over_turns() -> None:
    a = {"company": "Acme", "division": None, "team": None}
    b = {"company": "Acme", "division": "Decoy", "team": None}
    steps = [
        {"attacker_belief": a, "defender_estimate": a},
        {"attacker_belief": b, "defender_estimate": a},
        {"attacker_belief": b, "defender_estimate": b},
    ]
    assert math.isclose(stepwise_tom(tomsb_record(stepwise=steps)), 2 / 3)
    assert stepwise_tom(tomsb_record(stepwise=[], turns=[])) == 0.0


@pytest.mark.parametrize(
    ("prior_level", "leaks", "expected"),
    [
        (1, [], 0.0),
        (1, ["Rockets"], -0.5),
        (1, ["rockets", "THRUST LAB"], -1.0),
        (0, ["Acme"], -1 / 3),
        (2, ["Rockets"], 0.0),  # the attacker already knew it: not a leak
    ],
)
def test_leak_penalty(prior_level: int, leaks: list[str], expected: float) -> None:
    record = tomsb_record(
        outcome="extracted" if leaks else "fooled", prior_level=prior_level, leaks=leaks
    )
    assert math.isclose(leak_penalty(record), expected)


def test_truth_fixture_is_consistent() -> None:
    assert tomsb_record()["infos"]["defender_0"]["ground_truth"] == TRUTH


@pytest.mark.parametrize(("outcome", "expected"), [("fooled", 1.0), ("detected", 0.0)])
def test_misled_is_fooling_where_the_game_was_decided(outcome: str, expected: float) -> None:
    wrong = {"company": "Acme", "division": "Jets", "team": "Wing Lab"}
    assert misled(tomsb_record(outcome=outcome, final_belief=wrong)) == expected


def test_misled_gives_an_extraction_nothing_for_the_decoys_beside_it() -> None:
    half = {"company": "Acme", "division": "Jets", "team": TRUTH["team"]}
    assert misled(tomsb_record(outcome="extracted", final_belief=half)) == 0.0


@pytest.mark.parametrize(
    ("division", "team", "expected"),
    [
        (None, None, 0.0),  # nothing planted: the turns ran out
        ("Jets", None, 0.5),  # one decoy adopted of two unknown levels
        ("Jets", "Wing Lab", 1.0),
        ("ROCKETS", "Wing Lab", 0.5),  # a true value (names normalised) is no decoy
    ],
)
def test_misled_grades_a_game_that_ran_out_of_turns(
    division: str | None, team: str | None, expected: float
) -> None:
    belief = {"company": "Acme", "division": division, "team": team}
    record = tomsb_record(outcome="baited", prior_level=1, final_belief=belief)
    assert misled(record) == expected
    # Where fooling is flat (0 for every baited game), the graded term still ranks them.
    total, parts = RewardComposer({"fooling": 1.0, "misled": 0.5}, gate=None)(record)
    assert parts["fooling"] == 0.0 and total == 0.5 * expected


def test_misled_without_unknown_levels_is_zero() -> None:
    assert misled(tomsb_record(outcome="baited", prior_level=3)) == 0.0
