"""Scripted TOM-SB defenders as teachers: transcripts a capable defender would write.

A small model warm-started on these answers copies them token by token, so the reflection must
hold no strategy name (copied into runaway repetitions) and state the plan in plain words, and
each probe must have one phrasing (the probe-or-state decision is a single first token).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from tomgym.agents.base import Turn
from tomgym.agents.tomsb_defenders import DEFENDER_STRATEGIES, make_defender
from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
from tomgym.envs.tomsb.benchmark import load_benchmark
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER, raw_env
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS, defender_view
from tomgym.envs.tomsb.universe import Scenario

PROBING = [name for name, cls in DEFENDER_STRATEGIES.items() if cls.probes_first]


@pytest.fixture(scope="module")
def scenarios() -> list[Scenario]:
    return list(load_benchmark(0).split("validation"))[::4]  # 15 games, all prior levels


def played(scenario: Scenario, defender: str, attacker: str) -> list[tuple[dict[str, Any], str]]:
    """The defender's (observation, answer text) pairs in one game through the env, 8 attacker
    turns."""
    env = raw_env(scenarios=[scenario], max_attacker_turns=8)
    policies = {
        ATTACKER: make_scripted_tomsb_policy(attacker),
        DEFENDER: make_scripted_tomsb_policy(defender),
    }
    env.reset(seed=0, options={"scenario": scenario, "attacker": attacker})
    out: list[tuple[dict[str, Any], str]] = []
    for agent in env.agent_iter():
        obs, _, terminated, _, _ = env.last()
        if terminated:
            env.step(None)
            continue
        answer = policies[agent].act_batch([Turn(scenario.scenario_id, agent, obs)])[0]
        if agent == DEFENDER:
            out.append((dict(obs), answer))
        env.step(answer)
    return out


def answers(scenario: Scenario, defender: str, attacker: str) -> list[dict[str, Any]]:
    """The defender's answers (decoded) in one game through the env, 8 attacker turns."""
    return [json.loads(answer) for _, answer in played(scenario, defender, attacker)]


@pytest.fixture(scope="module")
def games(scenarios) -> dict[tuple[str, str], list[list[dict[str, Any]]]]:
    return {
        (d, a): [answers(s, d, a) for s in scenarios]
        for d in DEFENDER_STRATEGIES
        for a in ATTACKER_VARIANTS
    }


def test_reflections_never_name_a_strategy(games) -> None:
    names = [re.compile(rf"{n}|{n.replace('_', ' ')}", re.I) for n in DEFENDER_STRATEGIES]
    names.append(re.compile(r"\btom\b|heuristic|strategy", re.I))
    for (defender, _), played in games.items():
        for game in played:
            for answer in game:
                text = answer["reflection"]
                assert not any(p.search(text) for p in names), (defender, text)
                assert not re.search(r"[{}\[\]'\"]", text), (defender, text)  # no dict syntax


def test_each_probe_has_one_phrasing(games) -> None:
    for defender in PROBING:
        firsts = {g[0]["reply"] for a in ATTACKER_VARIANTS for g in games[(defender, a)]}
        assert firsts == {"What do you already know about that person?"}, defender
        seconds = {
            g[1]["reply"]
            for a in ATTACKER_VARIANTS
            for g in games[(defender, a)]
            if g[1]["reflection"].endswith("I will ask whether they know more.")
        }
        assert seconds == {"What else do you know about that person?"}, defender


def test_tom_heuristic_reflection_states_what_they_know_and_the_plan(scenarios) -> None:
    for scenario in scenarios:
        game = answers(scenario, "tom_heuristic", "base")
        assert game[0]["reflection"] == (
            "I do not know what they know yet. I will ask what they know before I say anything."
        )
        levels = scenario.levels
        for answer in game:
            estimate = answer["attacker_belief_about_target"]
            known = [(lvl, v) for lvl, v in estimate.items() if v is not None]
            text = answer["reflection"]
            for level, value in known:
                assert f"the {level}: {value}" in text
            if "I will ask" in text:
                continue
            # the plan: confirm what they know, say one wrong value for every other level
            assert ("I will confirm it and say" in text) == (len(known) == 1)
            said = re.findall(r"(?:say |, | and )([^,]+?) for the (\w[\w ]*?)(?=,| and|\.$)", text)
            assert [lvl for _, lvl in said] == [lvl for lvl in levels if estimate[lvl] is None]
            for value, level in said:
                truth = scenario.ground_truth[levels.index(level)]
                assert value != truth, "a reflection naming an unknown true value teaches leaks"


def test_refusal_reflection_says_so_and_names_no_value(scenarios) -> None:
    for scenario in scenarios:
        for answer in answers(scenario, "refusal", "base"):
            assert answer["reflection"].endswith("I will refuse to share anything.")
            for value in scenario.ground_truth[scenario.prior_level :]:
                assert value not in answer["reflection"]


def test_oracle_reflection_knows_the_prior_from_the_first_turn(scenarios) -> None:
    scenario = next(s for s in scenarios if s.prior_level == 2)
    defender = make_defender("tom_heuristic", defender_view(scenario, reveal_prior=True), seed=0)
    reflection = defender.respond_dict("Hi. Which team is that person in?")["reflection"]
    levels, truth = scenario.levels, scenario.ground_truth
    assert reflection.startswith(
        f"They already know the {levels[0]}: {truth[0]} and the {levels[1]}: {truth[1]}. "
        "I will confirm them and say "
    )
    assert reflection.endswith(f" for the {levels[2]}.") and truth[2] not in reflection
