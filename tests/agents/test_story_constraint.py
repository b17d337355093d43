"""The story a defender's plan and reply tell held to one path (`ReplyBranchConstraint` with
the true path, `constrain_story`).

Covers, on a real benchmark scenario whose lost game told a broken story ("Magnolia Court for
the street and 161 Hawthorn Crescent for the house"): the first decoy written whole fixes its
path, so a house on another street, the true street and another town are cut while the decoy
street's houses stay free; the truth fixes nothing; a name still being written fixes nothing
yet; a decoy house fixes its street; without the stated belief (`belief=False`) only the story
binds; `answer_rules(story=True)` adds the rule for a defender that knows its truth, and
`answer_options` reads that truth from the defender's view only.
"""

from __future__ import annotations

from typing import Any

import pytest
from tomgym.agents.llm.constraints import (
    AnswerOptions,
    Excluded,
    ReplyBranchConstraint,
    answer_rules,
    token_table,
)

from tests.agents.test_reply_branch_constraint import _blocked_in, _open, _paths

pytest.importorskip("torch")
pytest.importorskip("transformers")

SCENARIO = "tomsb-home_address-001-p1"  # the attacker knows the town; the street is the lie
PLAN = 'Lie.", "reply": "I will say '


def _story_rule(tokenizer: Any, *, belief: bool = True) -> tuple[ReplyBranchConstraint, Any]:
    from tomgym.envs.tomsb.benchmark import load_benchmark

    scenario = load_benchmark(0).by_id(SCENARIO)
    universe = scenario.universe
    truth = [scenario.truth_dict()[level] for level in universe.levels]
    paths = _paths(universe)
    rule = ReplyBranchConstraint(
        token_table(tokenizer), universe.levels, paths, belief=belief, truth=truth
    )
    return rule, scenario


def test_the_first_decoy_holds_the_rest_of_the_story_to_its_path(loaded) -> None:
    _, tokenizer = loaded
    rule, scenario = _story_rule(tokenizer)
    knows = scenario.prior_dict()
    assert knows == {"town": "Quinton", "street": None, "house": None}
    assert scenario.truth_dict()["street"] == "Hawthorn Crescent"
    told = PLAN + "Magnolia Court for the street and"
    # The lost game's house, on the true street: cut once it leaves the decoy street's houses.
    assert _blocked_in(tokenizer, rule, knows, told, "161 Hawthorn Crescent") is not None
    for off_path in ("Hawthorn Crescent", "169 Chestnut Way", "Port Allerton"):
        assert _blocked_in(tokenizer, rule, knows, told, off_path) is not None, off_path
    for on_path in ("76 Magnolia Court", "183 Magnolia Court", "215 Magnolia Court", "Quinton"):
        assert _blocked_in(tokenizer, rule, knows, told, on_path) is None, on_path


def test_the_truth_and_a_name_under_way_fix_nothing(loaded) -> None:
    _, tokenizer = loaded
    rule, scenario = _story_rule(tokenizer)
    knows = scenario.prior_dict()
    told = PLAN + "Hawthorn Crescent for the street and"
    for name in ("161 Hawthorn Crescent", "76 Magnolia Court", "Chestnut Way"):
        assert _blocked_in(tokenizer, rule, knows, told, name) is None, name
    # "Magnolia Court" with nothing after it may still grow into a longer name: not told yet,
    # so the next token is masked exactly as without the story.
    under_way = tokenizer.encode(_open(knows) + PLAN + "Magnolia Court")
    no_story = ReplyBranchConstraint(rule.table, rule.levels, rule.paths)
    assert rule.allowed(under_way) == no_story.allowed(under_way)
    whole = tokenizer.encode(_open(knows) + PLAN + "Magnolia Court,")
    assert set(rule.allowed(whole) or ()) > set(no_story.allowed(whole) or ())


def test_a_decoy_house_fixes_its_street(loaded) -> None:
    _, tokenizer = loaded
    rule, scenario = _story_rule(tokenizer)
    knows = scenario.prior_dict()
    told = PLAN + "161 Hawthorn Crescent for the house, on"
    assert _blocked_in(tokenizer, rule, knows, told, "Magnolia Court") is not None
    assert _blocked_in(tokenizer, rule, knows, told, "Hawthorn Crescent") is None


def test_without_the_belief_only_the_story_binds(loaded) -> None:
    _, tokenizer = loaded
    rule, _ = _story_rule(tokenizer, belief=False)
    knows_street = {"town": "Quinton", "street": "Hawthorn Crescent", "house": None}
    # The stated belief would rule Magnolia Court out; read without it, nothing is told yet.
    assert rule.allowed(tokenizer.encode(_open(knows_street))) is None
    assert _blocked_in(tokenizer, rule, knows_street, "It is", "Magnolia Court") is None
    told = "It is Magnolia Court, so"
    assert _blocked_in(tokenizer, rule, knows_street, told, "Elm Way") is not None
    assert _blocked_in(tokenizer, rule, knows_street, told, "76 Magnolia Court") is None
    assert isinstance(rule.allowed(tokenizer.encode(_open(knows_street) + told)), Excluded)


def test_answer_rules_add_the_story_for_a_defender_that_knows_its_truth(loaded) -> None:
    _, tokenizer = loaded
    rule, scenario = _story_rule(tokenizer)
    universe = scenario.universe
    names = {level: list(universe.nodes(d)) for d, level in enumerate(universe.levels)}
    truth = tuple(scenario.truth_dict()[level] for level in universe.levels)
    knowing = AnswerOptions("defender", names, rule.paths, truth)
    unknowing = AnswerOptions("defender", names, rule.paths)
    attacker = AnswerOptions("attacker", names, rule.paths, truth)
    story, nothing, none = answer_rules(
        tokenizer, [knowing, unknowing, attacker], beliefs=False, story=True
    )
    assert isinstance(story, ReplyBranchConstraint) and story.truth == truth
    assert not story.belief  # the branch rule's own switch stays off
    assert nothing is None and none is None


def test_answer_options_carry_the_truth_of_a_defender_view_only() -> None:
    import json

    from tomgym.agents.llm.constraints import answer_options
    from tomgym.envs import tomsb_v0
    from tomgym.envs.tomsb.env import ATTACKER, DEFENDER

    env = tomsb_v0.env()
    env.reset(seed=0)
    seen = dict(env.observe(DEFENDER))
    view = json.loads(seen["scenario"])
    defender = answer_options(seen)
    attacker = answer_options(dict(env.observe(ATTACKER)))
    assert defender is not None and attacker is not None
    assert defender.truth == tuple(view["ground_truth"][level] for level in view["hierarchy"])
    assert len(defender.truth) == len(view["hierarchy"])
    assert attacker.truth == ()
