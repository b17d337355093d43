"""A defender's plan and reply on the branch its own belief states (`ReplyBranchConstraint`).

Covers: the names the stated belief rules out (another value of a level it fills, a name under
one) cannot be opened in the reply, whole or as a word under way, while the names it allows
(the true one included), sentence words and lower-case words stay free; a name of several words
shared by both sides is cut where it leaves the branch; no belief, an all-null or unreadable one,
or text outside the reply constrain nothing; `answer_rules` adds the rule for defenders only;
and the bundled model, sampling hot, never names a ruled-out value.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tomgym.agents.llm.constraints import (
    AllOf,
    AnswerOptions,
    Excluded,
    ReplyBranchConstraint,
    answer_rules,
    token_table,
)
from tomgym.envs.tomsb.parsing import DEFENDER_FIELDS
from tomgym.envs.tomsb.universe import Universe

from tests.agents.test_reply_name_constraint import OpensCapitalised, _hot_samples, _opener

pytest.importorskip("torch")
pytest.importorskip("transformers")

LEVELS = ["chain", "region", "store"]
TREE = {
    "chain": ["Starling Outfitters", "Keystone Stores", "Quarry Market"],
    "region": {
        "Starling Outfitters": ["Gulf Coast", "Prairie Provinces", "California Coast"],
        "Keystone Stores": ["Ohio Valley", "Great Lakes", "Gulf Shores"],
        "Quarry Market": ["Pacific Rim", "Desert Southwest", "Northern Plains"],
    },
    "store": {
        "Gulf Coast": ["Lakemont Plaza", "Hollis Outlet", "Ironbridge Superstore"],
        "Prairie Provinces": ["Redcliff Mall", "Brookdale Centre", "Sable Point"],
        "California Coast": ["Marlow Yard", "Ventana Store", "Oakhurst Depot"],
        "Ohio Valley": ["Cinder Works", "Tolland Row", "Wexford Hall"],
        "Great Lakes": ["Duluth Pier", "Erie Landing", "Huron Gate"],
        "Gulf Shores": ["Pelican Bay", "Mobile Point", "Dauphin Square"],
        "Pacific Rim": ["Tidewater", "Harbor View", "Seaview Annex"],
        "Desert Southwest": ["Mesa Verde", "Sagebrush", "Canyon Gate"],
        "Northern Plains": ["Prairie Dog", "Bison Hall", "Flint Hills"],
    },
}
UNIVERSE = Universe.from_dict(TREE, LEVELS)
PATHS = {
    name: (*UNIVERSE.ancestors(name), name) for depth in range(3) for name in UNIVERSE.nodes(depth)
}
NAMES = {level: list(UNIVERSE.nodes(depth)) for depth, level in enumerate(LEVELS)}
BELIEF, REPLY = DEFENDER_FIELDS[0], DEFENDER_FIELDS[3]


def _open(belief: Any) -> str:
    stated = json.dumps(belief) if not isinstance(belief, str) else belief
    return f'{{"{BELIEF}": {stated}, "attacker_trust_in_us": 4, "reflection": "Lie.", "{REPLY}": "'


KNOWS_REGION = {"chain": "Starling Outfitters", "region": "Gulf Coast", "store": None}


def _on_branch(path: tuple[str, ...]) -> bool:
    """Whether a name with this path agrees with `KNOWS_REGION` on every level it fills."""
    return all(
        KNOWS_REGION[level] in (None, value) for level, value in zip(LEVELS, path, strict=False)
    )


def _rule(tokenizer: Any) -> ReplyBranchConstraint:
    return ReplyBranchConstraint(token_table(tokenizer), LEVELS, PATHS)


def _paths(universe: Universe) -> dict[str, tuple[str, ...]]:
    return {
        name: (*universe.ancestors(name), name)
        for depth in range(3)
        for name in universe.nodes(depth)
    }


def _blocked_in(
    tokenizer: Any, rule: ReplyBranchConstraint, belief: Any, reply: str, name: str
) -> int | None:
    """`_blocked_at` under another universe's `rule`."""
    ids = tokenizer.encode(_open(belief) + reply)
    for index, token in enumerate(tokenizer.encode(" " + name)):
        answer = rule.allowed(ids)
        if answer is not None and token in set(answer):
            return index
        ids = [*ids, token]
    return None


def _banned(tokenizer: Any, belief: Any, reply: str) -> set[int]:
    answer = _rule(tokenizer).allowed(tokenizer.encode(_open(belief) + reply))
    assert answer is None or isinstance(answer, Excluded)
    return set(answer or ())


def _blocked_at(tokenizer: Any, belief: Any, reply: str, name: str) -> int | None:
    """The index of the first of `name`'s tokens (written after `reply`) that the rule bans,
    None when the whole name can be written."""
    ids = tokenizer.encode(_open(belief) + reply)
    for index, token in enumerate(tokenizer.encode(" " + name)):
        answer = _rule(tokenizer).allowed(ids)
        if answer is not None and token in set(answer):
            return index
        ids = [*ids, token]
    return None


def test_names_the_stated_belief_rules_out_cannot_be_written(loaded) -> None:
    _, tokenizer = loaded
    ruled_out = [n for n, path in PATHS.items() if not _on_branch(path)]
    assert len(ruled_out) == 39 - 5  # all but the known chain and region, and their 3 stores
    for name in ruled_out:
        assert _blocked_at(tokenizer, KNOWS_REGION, "", name) is not None, name
    banned = _banned(tokenizer, KNOWS_REGION, "")
    assert _opener(tokenizer, "Redcliff Mall") in banned  # cut at its first token, " Red"
    # " C" and " T" also begin sentence words ("Could", "The"): those names are cut next.
    assert _opener(tokenizer, "Cinder Works") not in banned
    assert _blocked_at(tokenizer, KNOWS_REGION, "", "Cinder Works") == 1
    # On the branch: the decoys beside the true store, the true store, the known values.
    for name in ("Hollis Outlet", "Ironbridge Superstore", "Lakemont Plaza", "Starling Outfitters"):
        assert _blocked_at(tokenizer, KNOWS_REGION, "", name) is None, name
    # Sentence words and lower-case words stay free.
    for word in ("The", "I", "That", "probably", "not"):
        assert _opener(tokenizer, word) not in banned, word


def test_a_word_under_way_cannot_carry_on_into_a_ruled_out_name(loaded) -> None:
    _, tokenizer = loaded
    # "Gulf" begins the kept "Gulf Coast" and the ruled-out "Gulf Shores" (another chain's).
    banned = _banned(tokenizer, KNOWS_REGION, "It is Gulf")
    assert tokenizer.encode(" Shores")[0] in banned
    assert tokenizer.encode(" Coast")[0] not in banned
    # A new word after the start of a name of several words is checked as one.
    assert _opener(tokenizer, "Redcliff Mall") in _banned(tokenizer, KNOWS_REGION, "It is Great")
    # A name opened bare after punctuation is checked too.
    assert _opener(tokenizer, "Redcliff", spaced=False) in _banned(tokenizer, KNOWS_REGION, "(")


def _benchmark_rule(tokenizer: Any, scenario: str) -> tuple[ReplyBranchConstraint, Any]:
    """The rule over one bundled benchmark scenario's universe, and the scenario."""
    from tomgym.envs.tomsb.benchmark import load_benchmark

    found = load_benchmark(0).by_id(scenario)
    universe = found.universe
    return ReplyBranchConstraint(token_table(tokenizer), universe.levels, _paths(universe)), found


def test_lower_case_names_are_left_alone_as_the_spelling_rule_leaves_them(loaded) -> None:
    """Cloud regions and clusters are written in lower case ("staging-ingest-37"). Held to the
    branch while the spelling rule leaves them alone, a plan cut off a ruled-out cluster went on
    into a non-name ("canary-analysis-06") and a won game was lost; so this rule leaves them
    alone too, until both hold them."""
    _, tokenizer = loaded
    rule, scenario = _benchmark_rule(tokenizer, "tomsb-cloud_infrastructure-002-p2")
    knows = scenario.prior_dict()
    assert knows == {"provider": "Silverline Cloud", "region": "ap-northeast-1", "cluster": None}
    assert scenario.universe.ancestors("staging-ingest-37") == ["Silverline Cloud", "eu-west-1"]
    said = "The region is ap-northeast-1 and the cluster is"
    assert _blocked_in(tokenizer, rule, knows, said, "staging-ingest-37") is None
    # A capitalised name of another provider is still cut.
    other = next(n for n in scenario.universe.nodes(0) if n != "Silverline Cloud")
    assert _blocked_in(tokenizer, rule, knows, "It is", other) is not None


def test_a_level_slot_is_held_to_that_levels_names_on_the_branch(loaded) -> None:
    """In "The battalion is 2...", the known brigade "23rd Armored Brigade", which also begins
    with "2", once let a battalion of another brigade through; in the slot only battalions
    count, so the digit is cut at once."""
    _, tokenizer = loaded
    rule, scenario = _benchmark_rule(tokenizer, "tomsb-military-002-p2")
    knows = scenario.prior_dict()
    assert knows["brigade"] == "23rd Armored Brigade"
    assert scenario.universe.ancestors("2nd Signal Battalion")[1] != "23rd Armored Brigade"
    at = _blocked_in(tokenizer, rule, knows, "The battalion is", "2nd Signal Battalion")
    assert at is not None
    assert tokenizer.decode(tokenizer.encode(" 2nd Signal Battalion")[: at + 1]).strip() == "2"
    for kept in scenario.universe.nodes(2):
        if scenario.universe.ancestors(kept)[1] == "23rd Armored Brigade":
            assert _blocked_in(tokenizer, rule, knows, "The battalion is", kept) is None, kept
    # Out of the slot, the known brigade's name is free as before.
    assert _blocked_in(tokenizer, rule, knows, "Yes,", "23rd Armored Brigade") is None


def test_only_a_filled_level_rules_names_out(loaded) -> None:
    _, tokenizer = loaded
    knows_chain = {"chain": "Starling Outfitters", "region": None, "store": None}
    banned = _banned(tokenizer, knows_chain, "")
    # Any store under the known chain may be named; another chain's may not.
    assert _opener(tokenizer, "Redcliff Mall") not in banned
    assert _opener(tokenizer, "Marlow Yard") not in banned
    assert _blocked_at(tokenizer, knows_chain, "", "Cinder Works") is not None
    assert _opener(tokenizer, "Keystone Stores") in banned


@pytest.mark.parametrize(
    "belief",
    [
        {"chain": None, "region": None, "store": None},  # the attacker knows nothing
        '{"chain": "Starling Outfitters", "region": ',  # unfinished: no belief stated yet
        "null",
    ],
)
def test_no_readable_belief_rules_nothing_out(loaded, belief: Any) -> None:
    _, tokenizer = loaded
    assert _rule(tokenizer).allowed(tokenizer.encode(_open(belief))) is None


def test_the_reflection_that_plans_the_lie_is_held_to_the_branch_too(loaded) -> None:
    _, tokenizer = loaded
    planning = _open(KNOWS_REGION).rsplit('"reflection"', 1)[0] + '"reflection": "I will say'
    answer = _rule(tokenizer).allowed(tokenizer.encode(planning))
    assert isinstance(answer, Excluded)
    assert _opener(tokenizer, "Redcliff Mall") in set(answer)
    assert _opener(tokenizer, "Hollis Outlet") not in set(answer)


def test_text_outside_the_reflection_and_reply_is_left_alone(loaded) -> None:
    _, tokenizer = loaded
    before_reply = _open(KNOWS_REGION).rsplit(f'"{REPLY}"', 1)[0]
    assert _rule(tokenizer).allowed(tokenizer.encode(before_reply)) is None
    closed = _open(KNOWS_REGION) + 'Hollis Outlet." '
    assert _rule(tokenizer).allowed(tokenizer.encode(closed)) is None


def test_answer_rules_add_the_branch_rule_for_defenders_only(loaded) -> None:
    _, tokenizer = loaded
    defender = AnswerOptions("defender", NAMES, PATHS)
    attacker = AnswerOptions("attacker", NAMES, PATHS)
    with_rule, without = answer_rules(tokenizer, [defender, attacker], replies=True, branches=True)
    assert isinstance(with_rule, AllOf)
    assert any(isinstance(rule, ReplyBranchConstraint) for rule in with_rule.rules)
    assert not any(isinstance(r, ReplyBranchConstraint) for r in getattr(without, "rules", ()))
    answer = with_rule.allowed(tokenizer.encode(_open(KNOWS_REGION)))
    assert isinstance(answer, Excluded) and _opener(tokenizer, "Redcliff Mall") in set(answer)


def test_the_bundled_model_never_names_a_ruled_out_value(loaded) -> None:
    _, tokenizer = loaded
    model, _ = loaded
    prefix = _open(KNOWS_REGION)
    opens = OpensCapitalised(tokenizer, len(tokenizer.encode(prefix)))
    rule = AllOf([_rule(tokenizer), opens])
    ruled_out = [n for n, path in PATHS.items() if not _on_branch(path)]
    samples = [t for seed in (1, 2) for t in _hot_samples_after(loaded, rule, prefix, seed)]
    for text in samples:
        assert not any(name[:4] in text for name in ruled_out), text


def _hot_samples_after(loaded: Any, rule: Any, prefix: str, seed: int) -> list[str]:
    """`_hot_samples` with this file's answer prefix in place of that file's."""
    import tests.agents.test_reply_name_constraint as names

    saved = names.OPEN
    names.OPEN = prefix
    try:
        return _hot_samples(loaded, rule, "", seed)
    finally:
        names.OPEN = saved
