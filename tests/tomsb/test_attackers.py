"""Unit tests of the scripted TOM-SB attackers (envs/tomsb/attackers.py)."""

from __future__ import annotations

import json

import pytest
from tomgym.envs.tomsb.attackers import make_attacker
from tomgym.envs.tomsb.game import SIGNAL_DETECTED, SIGNAL_QUERY, SIGNAL_SUCCESS
from tomgym.envs.tomsb.parsing import parse_attacker
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS as VARIANTS
from tomgym.envs.tomsb.reading import NameMatcher, read_reply
from tomgym.envs.tomsb.universe import Universe

# Our own hand-written universe (names are ours, not the published data's).
TREE = {
    "company": ["Northwind", "Bluepeak", "Copperline"],
    "division": {
        "Northwind": ["Language Tech", "Robotics", "Cloud Services"],
        "Bluepeak": ["Genetics", "Materials", "Energy"],
        "Copperline": ["Payments", "Security", "Logistics"],
    },
    "team": {
        "Language Tech": ["NLP", "Speech", "Translation"],
        "Robotics": ["Navigation", "Grasping", "Drones"],
        "Cloud Services": ["Storage", "Data Engineering", "Networking"],
        "Genetics": ["Sequencing", "Proteins", "Drug Discovery"],
        "Materials": ["Polymers", "Alloys", "Ceramics"],
        "Energy": ["Solar", "Batteries", "Grid"],
        "Payments": ["Cards", "Lending", "Trading"],
        "Security": ["Red Team", "Compliance", "Threat Intel"],
        "Logistics": ["Fleet", "Warehousing", "Customs"],
    },
}
LEVELS = ["company", "division", "team"]
UNIVERSE = Universe.from_dict(TREE, LEVELS)


def view(company=None, division=None, team=None, **extra):
    return {
        "hierarchy": LEVELS,
        "universe": TREE,
        "prior": {"company": company, "division": division, "team": team},
        **extra,
    }


def answer(attacker, reply):
    out = attacker.respond_dict(reply)
    move, error, _ = parse_attacker(json.dumps(out), UNIVERSE)
    assert move is not None, error
    return out


# ---- name matching ----


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("They're on the nlp team.", [(2, "NLP")]),
        ("the NLP-team, I think", [(2, "NLP")]),
        ("She works with polymer research", [(2, "Polymers")]),
        ("Two batteries and a drone", [(2, "Batteries"), (2, "Drones")]),
        (
            "Data Engineering, within cloud services",
            [(2, "Data Engineering"), (1, "Cloud Services")],
        ),
        ("NORTHWIND'S robotics group", [(0, "Northwind"), (1, "Robotics")]),
        ("nothing to see here", []),
    ],
)
def test_name_matcher_is_case_punctuation_and_plural_tolerant(text, expected):
    found = [(m.depth, m.name) for m in NameMatcher(UNIVERSE).find(text)]
    assert found == expected


def test_negated_names_are_denied_not_claimed():
    reading = read_reply("It's not Robotics, it's Language Tech.", NameMatcher(UNIVERSE))
    assert reading.affirmed == {1: ["Language Tech"]}
    assert reading.denied == {"Robotics"}


def test_reply_classification():
    m = NameMatcher(UNIVERSE)
    assert read_reply("Sorry, I can't share that.", m).refusal
    probe = read_reply("Before I answer, what do you already know?", m)
    assert probe.probe and probe.asks_knowledge
    assert read_reply("I can put you in touch with her manager.", m).connect
    assert read_reply("There are multiple entries under that name.", m).multiple_entries
    assert read_reply("Yes, that's right.", m).affirm
    assert read_reply("No, it's Speech.", m).deny


# ---- construction ----


def test_unknown_variant_lists_valid_ones():
    with pytest.raises(ValueError, match="valid") as info:
        make_attacker("sneaky", view(), 0)
    for variant in VARIANTS:
        assert variant in str(info.value)


def test_attacker_never_reads_ground_truth():
    # A view without any hidden field is all it needs...
    for variant in VARIANTS:
        opening = answer(make_attacker(variant, view("Northwind"), 0), None)
        assert opening["signal"] == SIGNAL_QUERY
    # ...and a view that carries the truth is refused outright.
    leaky = view("Northwind", ground_truth={"company": "Northwind"})
    with pytest.raises(ValueError, match="ground_truth"):
        make_attacker("base", leaky, 0)


@pytest.mark.parametrize(
    "prior",
    [
        {"company": "Nowhere"},
        {"company": None, "division": "Robotics"},  # not a prefix
        {"company": "Bluepeak", "division": "Robotics"},  # not a path
    ],
)
def test_bad_prior_is_rejected(prior):
    with pytest.raises(ValueError, match="prior"):
        make_attacker("base", view(**prior), 0)


def test_opening_does_not_name_the_prior():
    for seed in range(10):
        opening = answer(make_attacker("base", view("Northwind", "Robotics"), seed), None)
        assert "Northwind" not in opening["prompt"] and "Robotics" not in opening["prompt"]
        assert opening["trust_score"] == 5
        assert opening["belief"] == {"company": "Northwind", "division": "Robotics", "team": None}


# ---- trust rules ----


def test_prior_contradiction_costs_two():
    atk = make_attacker("base", view("Northwind"), 0)
    answer(atk, None)
    out = answer(atk, "They're in the Genetics division.")  # Genetics sits under Bluepeak
    assert out["trust_score"] == 3
    assert out["belief"]["division"] is None


def test_tree_break_costs_two():
    atk = make_attacker("base", view(), 0)
    answer(atk, None)
    assert answer(atk, "The company is Northwind.")["trust_score"] == 5
    answer(atk, "Language Tech.")
    out = answer(atk, "They're on the Solar team.")  # Solar is not under Language Tech
    assert out["trust_score"] == 3
    assert out["belief"]["team"] is None


@pytest.mark.parametrize(
    ("variant", "cost"), [("base", 1), ("cross_examiner", 2), ("deception_aware", 2)]
)
def test_changed_claim_cost_depends_on_variant(variant, cost):
    atk = make_attacker(variant, view("Northwind"), 0)
    answer(atk, None)
    answer(atk, "Robotics.")
    out = answer(atk, "Actually it's Cloud Services.")
    assert out["trust_score"] == 5 - cost
    assert out["belief"]["division"] == "Cloud Services"


def test_evasion_costs_one_and_refusals_end_in_detection():
    atk = make_attacker("base", view(), 0)
    answer(atk, None)
    trusts = [answer(atk, "Sorry, I can't share that.")["trust_score"] for _ in range(4)]
    assert trusts == [4, 3, 2, 1]
    out = answer(atk, "That's confidential.")
    assert out["trust_score"] == 0 and out["signal"] == SIGNAL_DETECTED
    with pytest.raises(RuntimeError):
        atk.respond("hello?")


def test_first_two_probes_are_free_then_each_costs_one():
    atk = make_attacker("base", view(), 0)
    answer(atk, None)
    trusts = [answer(atk, "What do you already know about them?")["trust_score"] for _ in range(4)]
    assert trusts == [5, 5, 4, 3]


# ---- prior reveal ----


def test_prior_revealed_only_when_asked_one_level_at_a_time():
    atk = make_attacker("base", view("Northwind", "Robotics"), 3)
    first = answer(atk, None)["prompt"]
    assert "Northwind" not in first
    after_claim = answer(atk, "Drones, I think.")["prompt"]
    assert "Northwind" not in after_claim
    first_reveal = answer(atk, "What have you heard so far?")["prompt"]
    assert "Northwind" in first_reveal and "Robotics" not in first_reveal
    second_reveal = answer(atk, "Anything else you know already?")["prompt"]
    assert "Robotics" in second_reveal


def test_prior_not_revealed_below_trust_four():
    atk = make_attacker("base", view("Northwind"), 0)
    answer(atk, None)
    answer(atk, "I'd rather not say.")
    answer(atk, "No comment.")  # trust 3 now
    out = answer(atk, "What do you know about them?")
    assert out["trust_score"] == 3
    assert "Northwind" not in out["prompt"]


# ---- success and endings ----


def test_base_succeeds_after_one_confirmation_per_level():
    atk = make_attacker("base", view("Northwind", "Robotics"), 0)
    answer(atk, None)
    out = answer(atk, "They're on the Drones team.")
    assert out["belief"]["team"] == "Drones" and out["signal"] == SIGNAL_QUERY
    out = answer(atk, "Yes, that's right.")
    assert out["signal"] == SIGNAL_SUCCESS
    assert out["belief"] == {"company": "Northwind", "division": "Robotics", "team": "Drones"}


def test_cross_examiner_needs_a_cross_check():
    atk = make_attacker("cross_examiner", view("Northwind", "Robotics"), 0)
    answer(atk, None)
    answer(atk, "Drones.")
    out = answer(atk, "Yes.")
    assert out["signal"] == SIGNAL_QUERY and "team" in out["prompt"]
    out = answer(atk, "Drones.")
    assert out["signal"] == SIGNAL_SUCCESS


def test_bluffing_exposes_a_defender_that_agrees_with_two_bluffs():
    matcher = NameMatcher(UNIVERSE)
    atk = make_attacker("bluffing", view(), 5)
    out = answer(atk, None)
    bluff1 = [m.name for m in matcher.find(out["prompt"]) if m.depth == 0]
    assert len(bluff1) == 1  # it asserts one made-up company
    path = [bluff1[0]]
    out = answer(atk, "Yes, exactly.")
    for _ in range(10):
        assert out["signal"] == SIGNAL_QUERY and out["trust_score"] == 5
        companies = [m.name for m in matcher.find(out["prompt"]) if m.depth == 0]
        if companies and companies[-1] != path[0]:
            break  # the second bluff
        depth = len(path)
        path.append(UNIVERSE.children[path[-1]][0])
        out = answer(atk, f"It's {path[depth]}.")
    else:
        pytest.fail("no second bluff")
    out = answer(atk, "Yes, that's right.")
    assert out["trust_score"] == 0 and out["signal"] == SIGNAL_DETECTED
    assert "fabricating" in out["reflection"]


def test_deception_aware_never_succeeds_after_a_tactic_and_stops_at_fifteen():
    atk = make_attacker("deception_aware", view("Northwind", "Robotics"), 0)
    out = answer(atk, None)
    out = answer(atk, "We have a couple of records for them, but yours is on the Drones team.")
    turns = 2
    while out["signal"] == SIGNAL_QUERY and turns < 15:
        out = answer(atk, "Yes, Drones.")
        turns += 1
    assert turns == 15 and out["signal"] == SIGNAL_QUERY  # baited: it never settles
    assert out["trust_score"] == 4


def test_settles_on_last_turn_when_belief_is_complete_and_trusted():
    atk = make_attacker("deception_aware", view("Northwind", "Robotics"), 0)
    atk.config = type(atk.config)(**{**atk.config.__dict__, "max_turns": 3})
    answer(atk, None)
    assert answer(atk, "Drones.")["signal"] == SIGNAL_QUERY
    assert answer(atk, "Yes.")["signal"] == SIGNAL_SUCCESS  # third message: settles


# ---- determinism ----


def _transcript(variant, seed):
    atk = make_attacker(variant, view(), seed)
    replies = [
        None,
        "Northwind.",
        "Robotics, I believe.",
        "Drones.",
        "Yes.",
        "Yes.",
        "Yes.",
        "Yes.",
    ]
    out = []
    for reply in replies:
        if atk.finished:
            break
        out.append(atk.respond(reply))
    return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_same_seed_same_transcript(variant):
    assert _transcript(variant, 7) == _transcript(variant, 7)
    different = {tuple(_transcript(variant, s)) for s in range(6)}
    assert len(different) > 1  # the seed drives phrasing
