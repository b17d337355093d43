"""Behaviour matrix: scripted defenders vs scripted attackers on the benchmark's test split.

These tests pin what makes the scripted attackers a real opponent in which theory of mind pays:
truth leaks, refusal is caught, lies against the prior are caught, prior-consistent lies after
probing fool, and each attacker variant catches the flaw it was built for.
"""

from __future__ import annotations

import json

import pytest
from tomgym.agents.base import Turn
from tomgym.agents.tomsb_defenders import BASELINE_DEFENDERS, DEFENDER_STRATEGIES
from tomgym.agents.tomsb_matrix import outcome_rates, play_scripted_episode, run_matrix
from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
from tomgym.envs.tomsb.benchmark import load_benchmark
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS as VARIANTS
from tomgym.envs.tomsb.protocol import defender_view

NAIVE_STRATEGIES = [s for s in DEFENDER_STRATEGIES if s != "tom_heuristic"]


@pytest.fixture(scope="module")
def scenarios():
    return load_benchmark(seed=0).split("test")


@pytest.fixture(scope="module")
def matrix(scenarios):
    # ~2k episodes through the env: a few seconds on one core.
    return run_matrix(scenarios)


def rates(matrix, defender, attacker, *, prior_levels=(0, 1, 2)):
    return outcome_rates(r for r in matrix[defender][attacker] if r.prior_level in prior_levels)


@pytest.mark.parametrize("attacker", VARIANTS)
def test_truthful_is_always_extracted(matrix, attacker):
    assert rates(matrix, "truthful", attacker)["extracted"] == 1.0


@pytest.mark.parametrize("attacker", VARIANTS)
def test_refusal_never_fools(matrix, attacker):
    r = rates(matrix, "refusal", attacker)
    assert r["fooled"] == 0.0 and r["extracted"] == 0.0
    assert r["detected"] + r["baited"] == 1.0


@pytest.mark.parametrize("attacker", VARIANTS)
def test_prior_contradicting_lies_almost_never_fool_on_hard(matrix, attacker):
    r = rates(matrix, "prior_contradicting", attacker, prior_levels=(1, 2))
    assert r["n"] >= 20
    assert r["fooled"] <= 0.05


def test_probing_then_consistent_lies_fool_base(matrix):
    assert rates(matrix, "tom_heuristic", "base")["fooled"] > 0.5
    assert rates(matrix, "tom_heuristic", "base", prior_levels=(1, 2))["fooled"] > 0.5


def test_theory_of_mind_pays_on_hard_scenarios(matrix):
    # Same consistent liar, with and without learning the prior first.
    informed = rates(matrix, "tom_heuristic", "base", prior_levels=(1, 2))["fooled"]
    blind = rates(matrix, "naive", "base", prior_levels=(1, 2))["fooled"]
    assert informed - blind >= 0.5


def test_cross_examiner_catches_story_changer(matrix):
    assert rates(matrix, "story_changer", "base")["fooled"] > 0.8
    assert rates(matrix, "story_changer", "cross_examiner")["fooled"] <= 0.05


def test_bluffing_catches_bluff_adopter(matrix):
    assert rates(matrix, "bluff_adopter", "base", prior_levels=(0,))["fooled"] > 0.8
    r = rates(matrix, "bluff_adopter", "bluffing", prior_levels=(0,))
    assert r["fooled"] <= 0.05 and r["detected"] >= 0.9


def test_deception_aware_catches_connect_offers_and_multiple_entries(matrix):
    assert rates(matrix, "connector", "base")["fooled"] > 0.8
    assert rates(matrix, "connector", "deception_aware")["fooled"] <= 0.05


@pytest.mark.parametrize("defender", NAIVE_STRATEGIES)
def test_no_naive_strategy_beats_all_four(matrix, defender):
    worst = min(rates(matrix, defender, a)["fooled"] for a in VARIANTS)
    assert worst < 0.5, f"{defender} fools every attacker variant at least half the time"


def test_episodes_end_within_fifteen_attacker_turns(matrix):
    for row in matrix.values():
        for results in row.values():
            assert all(1 <= r.attacker_turns <= 15 for r in results)


def test_every_scripted_answer_is_valid_protocol(scenarios):
    # The driver raises on any answer the env re-asks (the env's parsers reject it).
    for scenario in scenarios[::6]:
        for defender in DEFENDER_STRATEGIES:
            for attacker in VARIANTS:
                play_scripted_episode(scenario, defender, attacker, seed=1)


def test_oracle_prior_lets_tom_heuristic_skip_probing(scenarios):
    hard = [s for s in scenarios if s.prior_level == 2][:5]
    for scenario in hard:
        with_oracle = play_scripted_episode(scenario, "tom_heuristic", "base", reveal_prior=True)
        without = play_scripted_episode(scenario, "tom_heuristic", "base")
        assert with_oracle.outcome == "fooled"
        assert with_oracle.attacker_turns < without.attacker_turns


def test_policies_play_through_the_env(scenarios):
    from tomgym.envs.tomsb.env import raw_env

    env = raw_env(scenarios=scenarios[:6])
    for defender in BASELINE_DEFENDERS:
        policies = {
            "attacker_0": make_scripted_tomsb_policy("base", seed=3),
            "defender_0": make_scripted_tomsb_policy(defender, seed=3),
        }
        for i, scenario in enumerate(scenarios[:6]):
            game_id = f"g{i}"
            env.reset(seed=i, options={"scenario": scenario})
            info = {}
            for agent in env.agent_iter():
                obs, _, term, trunc, info = env.last()
                if term or trunc:
                    env.step(None)
                    continue
                answer = policies[agent].act_batch([Turn(game_id, agent, obs)])[0]
                json.loads(answer)
                env.step(answer)
            assert info["retries"] == 0 and info["fallbacks"] == 0
            assert info["outcome"] in {"fooled", "extracted", "detected", "baited"}
            if defender == "refusal":
                assert info["outcome"] in {"detected", "baited"}


def test_policy_repeats_its_answer_on_a_reask(scenarios):
    scenario = scenarios[0]
    policy = make_scripted_tomsb_policy("tom_heuristic", seed=0)
    obs = {
        "scenario": json.dumps(defender_view(scenario)),
        "last_message": "Which team?",
        "retry": 0,
    }
    first = policy.act_batch([Turn("g", "defender_0", obs)])[0]
    again = policy.act_batch([Turn("g", "defender_0", {**obs, "retry": 1})])[0]
    assert again == first
    assert policy.describe()["name"] == "tom_heuristic"
    with pytest.raises(ValueError, match="unknown scripted TOM-SB policy 'oracle'"):
        make_scripted_tomsb_policy("oracle")
