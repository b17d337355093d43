"""A defender's plan names a real value of each level its belief leaves unknown
(`PlanConstraint`, `constrain_plan`).

Covers: the scripted teacher's own answers (what the warm start imitates) pass every token
through the plan, story, branch and asked-level rules together (the plan's phrase has one owner,
`agents.tomsb_defenders.plan_item`); the plans of lost games of the levels-1-2 warm start are cut
where they left the game ("say Accounting for the desk", not a desk; "9th Artillery Brigade for
the battalion", a brigade), and a name must go on into its own level; the probe's "before I say
anything" and lower-case words stay free; a belief unread or filling every level leaves the plan
alone; `answer_rules(plans=True)` adds the rule for defenders only.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tomgym.agents.llm.constraints import (
    AllOf,
    AnswerOptions,
    Excluded,
    PlanConstraint,
    answer_options,
    answer_rules,
    token_table,
)
from tomgym.envs.tomsb.benchmark import load_benchmark
from tomgym.envs.tomsb.universe import Scenario

from tests.agents.test_tomsb_defenders import played

pytest.importorskip("torch")
pytest.importorskip("transformers")


def _scenario(scenario_id: str) -> Scenario:
    return load_benchmark(0).by_id(scenario_id)


def _names(scenario: Scenario) -> dict[str, list[str]]:
    universe = scenario.universe
    return {level: list(universe.nodes(d)) for d, level in enumerate(universe.levels)}


def _planning(belief: Any, plan: str) -> str:
    stated = json.dumps({"attacker_belief_about_target": belief, "attacker_trust_in_us": 5})
    return stated[:-1] + ', "reflection": "' + plan


def _blocked(tokenizer: Any, rule: Any, prefix: str, text: str) -> int | None:
    """The index of the first token of `text` (written after `prefix`) that `rule` does not
    allow; None when all of it can be written."""
    ids = tokenizer.encode(prefix)
    for index, token in enumerate(tokenizer.encode(text)):
        answer = rule.allowed(ids)
        if answer is not None and (
            token in set(answer) if isinstance(answer, Excluded) else token not in set(answer)
        ):
            return index
        ids = [*ids, token]
    return None


def test_the_teachers_own_answers_pass_every_defender_rule(loaded) -> None:
    _, tokenizer = loaded
    checked_plans = 0
    for scenario in list(load_benchmark(0).split("validation"))[::10]:
        for observation, answer in played(scenario, "tom_heuristic", "base"):
            options = answer_options(observation)
            rules = answer_rules(
                tokenizer,
                [options],
                beliefs=False,
                branches=True,
                story=True,
                plans=True,
                asked=True,
            )[0]
            # Plan and branch rules on every turn; the asked-level rule where a level is asked.
            assert isinstance(rules, AllOf)
            assert len(rules.rules) == (2 if options.asked is None else 3)
            assert _blocked(tokenizer, rules, "", answer) is None, (scenario.scenario_id, answer)
            checked_plans += " say " in answer and "say anything" not in answer
    assert checked_plans >= 6


def test_plans_of_lost_games_are_held_to_the_levels_left_unknown(loaded) -> None:
    _, tokenizer = loaded
    table = token_table(tokenizer)
    banking = _scenario("tomsb-banking-005-p2")  # the attacker knows the bank and division
    rule = PlanConstraint(table, _names(banking))
    planning = _planning(banking.prior_dict(), "I will confirm them and say")
    assert _blocked(tokenizer, rule, planning, " Accounting for the desk") == 0
    desk = next(n for n in _names(banking)["desk"] if n[0].isupper())
    assert _blocked(tokenizer, rule, planning, f" {desk} for the desk.") is None
    military = _scenario("tomsb-military-005-p2")  # the command and brigade are known
    rule = PlanConstraint(table, _names(military))
    planning = _planning(military.prior_dict(), "I will confirm them and say")
    assert military.prior_dict()["battalion"] is None
    assert _blocked(tokenizer, rule, planning, " 9th Artillery Brigade for the battalion")
    battalion = "9th Logistics Battalion"
    assert battalion in _names(military)["battalion"]
    assert _blocked(tokenizer, rule, planning, f" {battalion} for the battalion.") is None
    assert _blocked(tokenizer, rule, planning, f" {battalion} for the brigade") is not None


def test_every_unknown_level_is_planned_in_order(loaded) -> None:
    _, tokenizer = loaded
    home = _scenario("tomsb-home_address-001-p1")  # the attacker knows the town
    rule = PlanConstraint(token_table(tokenizer), _names(home))
    planning = _planning(home.prior_dict(), "I will confirm it and say")
    street_then_house = " Magnolia Court for the street and 76 Magnolia Court for the house."
    assert _blocked(tokenizer, rule, planning, street_then_house) is None
    # The second item is the house: a street there is cut.
    told = planning + " Magnolia Court for the street and"
    assert _blocked(tokenizer, rule, told, " Chestnut Way") is not None
    # Once the levels are all said, the plan ends as the model likes.
    assert rule.allowed(tokenizer.encode(planning + street_then_house[:-1])) is None


@pytest.mark.parametrize(
    "plan",
    [
        "I do not know what they know yet. I will ask what they know before I say",
        "I will say",  # free: see the belief below
    ],
)
def test_probes_lower_case_and_full_beliefs_leave_the_plan_alone(loaded, plan: str) -> None:
    _, tokenizer = loaded
    home = _scenario("tomsb-home_address-001-p1")
    rule = PlanConstraint(token_table(tokenizer), _names(home))
    known = dict(zip(home.levels, home.ground_truth, strict=True))
    belief = home.prior_dict() if "before" in plan else known
    assert rule.allowed(tokenizer.encode(_planning(belief, plan))) is None
    assert rule.allowed(tokenizer.encode(_planning("null", "I will say"))) is None
    lower = _planning(home.prior_dict(), "I will confirm it and say anything")
    assert rule.allowed(tokenizer.encode(lower)) is None


def test_answer_rules_add_the_plan_rule_for_defenders_only(loaded) -> None:
    _, tokenizer = loaded
    names = _names(_scenario("tomsb-home_address-001-p1"))
    defender, attacker = AnswerOptions("defender", names), AnswerOptions("attacker", names)
    with_rule, without = answer_rules(tokenizer, [defender, attacker], beliefs=False, plans=True)
    assert isinstance(with_rule, PlanConstraint)
    assert without is None
