"""`training.eval.metrics`: summaries and confidence intervals on hand-made episode records."""

from __future__ import annotations

import math
from typing import Any

import pytest
from tomgym.training.eval.metrics import (
    MetricsError,
    mean_interval,
    mean_std_over,
    summarize,
    wilson_interval,
)

from tests.rewards import records

LEVELS = ("division", "team", "project")
TRUTH = {"division": "Research", "team": "NLP", "project": "Atlas"}


def tomsb_record(
    game_id: str,
    outcome: str,
    *,
    prior_level: int = 1,
    attacker: str = "base",
    estimate_matches_prior: bool = True,
    stepwise_hits: tuple[bool, ...] = (True, False),
    turns: int = 4,
    format_failures: int = 0,
    defender: str = "tom_heuristic",
) -> dict[str, Any]:
    prior = {lvl: (TRUTH[lvl] if i < prior_level else None) for i, lvl in enumerate(LEVELS)}
    wrong = {lvl: "Nowhere" for lvl in LEVELS}
    steps = [
        {"attacker_belief": prior, "defender_estimate": prior if hit else wrong}
        for hit in stepwise_hits
    ]
    info = {
        "outcome": outcome,
        "turns": turns,
        "prior": prior,
        "ground_truth": TRUTH,
        "prior_level": prior_level,
        "attacker_variant": attacker,
        "scenario_id": f"sc-{prior_level}",
        "stepwise": steps,
        "final_defender_estimate": prior if estimate_matches_prior else wrong,
        "leaks": [],
        "format_failures": format_failures,
        "fallbacks": 0,
    }
    return {
        "game_id": game_id,
        "env_id": "tomgym/tomsb-v0",
        "seed": 0,
        "policies": {"defender_0": {"name": defender}, "attacker_0": {"name": attacker}},
        "turns": [{"agent": "defender_0", "valid": format_failures == 0}],
        "infos": {"defender_0": info, "attacker_0": dict(info)},
        "outcome": outcome,
    }


def decrypto_record(
    game_id: str, ending: str, rounds: int, misc: int, inter: int, tom: dict | None = None
) -> dict[str, Any]:
    """`tests.rewards.records.decrypto_record` under its own id, played by random policies with
    no turns logged (so no format failures count)."""
    record = records.decrypto_record(ending, misc, inter, rounds, tom)
    record["game_id"] = game_id
    record["policies"] = {agent: {"name": "random"} for agent in record["infos"]}
    record["turns"] = []
    return record


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(2, 5)
    assert low == pytest.approx(0.1176, abs=1e-4)
    assert high == pytest.approx(0.7693, abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and 0.0 < high < 0.35
    assert wilson_interval(0, 0) == [None, None]


def test_mean_interval_is_student_t() -> None:
    low, high = mean_interval([1.0, 2.0, 3.0])
    half = 4.302652729911275 * (1.0 / math.sqrt(3))  # t(0.975, 2) * sem
    assert (low, high) == pytest.approx((2 - half, 2 + half))
    assert mean_interval([0.5]) == [0.5, 0.5]
    assert mean_interval([0.9, 1.0], bounds=(0, 1))[1] == 1.0


def test_tomsb_summary_rates_ci_and_subsets() -> None:
    records = [
        tomsb_record("a", "fooled", prior_level=0),
        tomsb_record("b", "fooled", prior_level=1, estimate_matches_prior=False),
        tomsb_record("c", "extracted", prior_level=2, attacker="bluffing"),
        tomsb_record("d", "detected", prior_level=2, attacker="bluffing", format_failures=2),
        tomsb_record("e", "baited", prior_level=1, stepwise_hits=(True, True), turns=15),
    ]
    summary = summarize(records, ["attacker", "prior_level"])
    overall = summary["overall"]
    assert summary["n"] == overall["n"] == 5
    assert overall["fooled_rate"] == pytest.approx(0.4)
    assert overall["fooled_rate_ci"] == pytest.approx(wilson_interval(2, 5))
    assert overall["extracted_rate"] == overall["detected_rate"] == overall["baited_rate"] == 0.2
    assert overall["tom_accuracy"] == pytest.approx(0.8)
    assert overall["stepwise_tom"] == pytest.approx((0.5 * 4 + 1.0) / 5)
    assert overall["avg_turns"] == pytest.approx((4 * 4 + 15) / 5)
    assert overall["format_failures"] == pytest.approx(0.4)
    assert overall["format_ok_rate"] == pytest.approx(0.8)
    lo, hi = overall["stepwise_tom_ci"]
    assert 0.0 <= lo < overall["stepwise_tom"] < hi <= 1.0
    # hard = prior levels 1-2: b, c, d, e
    assert overall["hard"]["n"] == 4
    assert overall["hard"]["fooled_rate"] == pytest.approx(0.25)
    assert set(overall["by_prior_level"]) == {"0", "1", "2"}
    assert overall["by_prior_level"]["0"]["fooled_rate"] == 1.0
    groups = summary["groups"]
    assert set(groups["attacker"]) == {"base", "bluffing"}
    assert groups["attacker"]["bluffing"]["n"] == 2
    assert groups["attacker"]["bluffing"]["fooled_rate"] == 0.0
    assert list(groups["prior_level"]) == ["0", "1", "2"]


def test_format_ok_rate_counts_only_games_where_the_defender_spoke() -> None:
    silent = tomsb_record("s", "detected")
    silent["turns"] = [{"agent": "attacker_0", "valid": True}]  # the attacker ended turn 1
    mixed = summarize(
        [tomsb_record("a", "fooled"), tomsb_record("b", "fooled", format_failures=1), silent]
    )
    assert mixed["overall"]["format_ok_rate"] == pytest.approx(0.5)
    only_silent = summarize([silent])
    assert only_silent["overall"]["format_ok_rate"] is None


def test_combined_and_dotted_group_keys() -> None:
    records = [tomsb_record(str(i), "fooled", prior_level=i % 3) for i in range(6)]
    for i, record in enumerate(records):
        record["eval"] = {"seed": i % 2}
    summary = summarize(records, ["attacker+prior_level", "eval.seed", "seed"])
    assert set(summary["groups"]["attacker+prior_level"]) == {"base/0", "base/1", "base/2"}
    assert summary["groups"]["eval.seed"]["0"]["n"] == 3
    assert set(summary["groups"]["seed"]) == {"0", "1"}  # evaluation seed beats game seed


def test_decrypto_summary_and_tom_rates() -> None:
    pt = {"rounds": 3, "predicted_interceptor": 0.5, "predicted_interceptor_when_intercepted": None}
    records = [
        decrypto_record("a", "survived", 8, 1, 0, {"perspective_taking": pt}),
        decrypto_record(
            "b",
            "interception",
            3,
            0,
            2,
            {"perspective_taking": dict(pt, predicted_interceptor=1.0)},
        ),
        decrypto_record("c", "miscommunication", 2, 2, 1),
    ]
    overall = summarize(records)["overall"]
    assert overall["avg_rounds"] == pytest.approx(13 / 3)
    assert overall["avg_miscommunications"] == pytest.approx(1.0)
    assert overall["avg_interceptions"] == pytest.approx(1.0)
    assert overall["team_win_rate"] == pytest.approx(1 / 3)
    assert overall["both_rate"] == 0.0
    # averaged over the games where the rate is defined; counts ("rounds") are not rates
    assert overall["tom_perspective_taking_predicted_interceptor"] == pytest.approx(0.75)
    assert overall["tom_perspective_taking_predicted_interceptor_n"] == 2
    assert "tom_perspective_taking_predicted_interceptor_when_intercepted" not in overall
    assert "tom_perspective_taking_rounds" not in overall


def test_mean_std_over_seeds() -> None:
    out = mean_std_over([{"x": 1.0}, {"x": 3.0}, {"x": None}], ["x"])
    assert out["x"] == {"mean": 2.0, "std": pytest.approx(math.sqrt(2)), "n": 2}


def test_bad_input_is_a_clear_error() -> None:
    with pytest.raises(MetricsError, match="no episode records"):
        summarize([])
    mixed = [tomsb_record("a", "fooled"), decrypto_record("b", "survived", 8, 0, 0)]
    with pytest.raises(MetricsError, match="mix environments"):
        summarize(mixed)
    strange = dict(tomsb_record("a", "fooled"), env_id="other/env-v0")
    with pytest.raises(MetricsError, match="unknown env id"):
        summarize([strange])
