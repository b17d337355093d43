"""A defender's reply answers the level the attacker asks for (`ReplyLevelConstraint`,
`constrain_asked`).

Covers: the asked level is read as the scripted defenders read it (`asked_depth`), and every
question the scripted attackers ask is read as the level it was written for, while their
confirmations, bluffs and reveals ask for none; the lost game's reply (the college again when
the attacker asked for the department) is cut at the college's first token, while a department,
a sentence word before it, and the college after the department stay free, and the plan is
not read; `answer_options` reads the asked level from the observation's `last_message`;
`answer_rules(asked=True)` adds the rule for a defender that is asked a level below the top
only; the scripted teacher's own answers pass it (with every other defender rule too:
tests/agents/test_plan_constraint.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tomgym.agents.llm.constraints import (
    AnswerOptions,
    ReplyLevelConstraint,
    answer_options,
    answer_rules,
    token_table,
)
from tomgym.agents.tomsb_defenders import asked_depth
from tomgym.envs.tomsb import attackers
from tomgym.envs.tomsb.benchmark import load_benchmark

from tests.agents.test_plan_constraint import _blocked, _names, _scenario
from tests.agents.test_tomsb_defenders import played

pytest.importorskip("torch")
pytest.importorskip("transformers")

LEVELS = ("university", "college", "department")
QUESTIONS = (
    attackers._OPEN,
    attackers._OPEN_UNDER,
    attackers._OPEN_AGAIN,
    attackers._CROSS_PARENT,
    attackers._CROSS_SELF,
    attackers._CROSS_ROOT,
)
NOT_QUESTIONS = (
    attackers._CONFIRM,
    attackers._PUSHBACK,
    attackers._BLUFF_OPEN,
    attackers._BLUFF_LATER,
    attackers._REVEAL,
    attackers._NOTHING,
)
FILL = {
    "person": "that person",
    "parent": "School of Law",
    "child": "Corporate Law",
    "child_level": "department",
    "value": "School of Law",
    "claimed": "School of Medicine",
}


@pytest.mark.parametrize("depth", [1, 2])
def test_every_attacker_question_is_read_as_its_level(depth: int) -> None:
    for templates in QUESTIONS:
        for template in templates:
            question = template.format(level=LEVELS[depth], **FILL)
            assert asked_depth(question, LEVELS) == depth, question
    for templates in NOT_QUESTIONS:
        for template in templates:
            said = template.format(level=LEVELS[depth], **FILL)
            assert asked_depth(said, LEVELS) is None, said
    two_levels = "Well, I know the university: Bramley. Got it. Inside Bramley, what college?"
    assert asked_depth(two_levels, LEVELS) == 1


SCENARIO = "tomsb-education-005-p1"  # the attacker knows the university; the lost game's
COLLEGE = "School of Architecture"  # decoy college, said again when the department was asked


def _reply_rule(tokenizer: Any, asked: int = 2) -> tuple[ReplyLevelConstraint, dict]:
    names = _names(_scenario(SCENARIO))
    return ReplyLevelConstraint(token_table(tokenizer), names, asked), names


REPLY = '{"reflection": "I will say it.", "reply": "'


def test_the_reply_answers_the_level_asked(loaded) -> None:
    _, tokenizer = loaded
    rule, names = _reply_rule(tokenizer)
    department = names["department"][0]
    assert COLLEGE in names["college"]
    assert _blocked(tokenizer, rule, REPLY, f"{COLLEGE}, as far as I know.") == 0
    assert _blocked(tokenizer, rule, REPLY, "Bramley State University.") is not None
    for free in (f"That would be {department}.", f"{department}, in {COLLEGE}."):
        assert _blocked(tokenizer, rule, REPLY, free) is None, free
    # A college is the answer when the college is asked; the university still is not.
    college_rule, _ = _reply_rule(tokenizer, asked=1)
    assert _blocked(tokenizer, college_rule, REPLY, f"The college is {COLLEGE}.") is None
    assert _blocked(tokenizer, college_rule, REPLY, "Bramley State University.") is not None
    # The reflection is not the reply: the plan names what it likes.
    plan = '{"reflection": "I will say '
    assert _blocked(tokenizer, rule, plan, f"{COLLEGE} for the college") is None


def test_answer_options_read_the_level_asked_and_rules_follow_it(loaded) -> None:
    _, tokenizer = loaded
    scenario = _scenario(SCENARIO)
    observation, _ = played(scenario, "tom_heuristic", "base")[0]
    for message, depth in (("Which department in School of Law is she in?", 2), ("Hi", None)):
        options = answer_options({**observation, "last_message": message})
        assert options is not None and options.asked == depth
        rules = answer_rules(tokenizer, [options], beliefs=False, asked=True)
        assert isinstance(rules[0], ReplyLevelConstraint) == (depth is not None)
    names = _names(scenario)
    attacker = AnswerOptions("attacker", names, asked=2)
    top = AnswerOptions("defender", names, asked=0)
    assert answer_rules(tokenizer, [attacker], beliefs=False, asked=True) == [None]
    rule = answer_rules(tokenizer, [top], beliefs=False, asked=True)[0]
    assert rule is None or rule.allowed(tokenizer.encode(REPLY + "Bramley")) is None


def test_the_teachers_replies_answer_what_they_are_asked(loaded) -> None:
    _, tokenizer = loaded
    asked_turns = 0
    for scenario in list(load_benchmark(0).split("validation"))[::7]:
        for observation, answer in played(scenario, "tom_heuristic", "base"):
            options = answer_options(observation)
            rule = answer_rules(tokenizer, [options], beliefs=False, asked=True)[0]
            if rule is None:
                continue
            asked_turns += 1
            reply = json.loads(answer)["reply"]
            assert _blocked(tokenizer, rule, "", answer) is None, (scenario.scenario_id, reply)
    assert asked_turns >= 10
