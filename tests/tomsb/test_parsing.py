"""Tolerant envelope, strict content: the TOM-SB answer parsers."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tomgym.envs.tomsb.game import AttackerMove, DefenderMove
from tomgym.envs.tomsb.parsing import (
    MAX_ANSWER_CHARS,
    MAX_REPLY_CHARS,
    extract_json_object,
    parse_attacker,
    parse_defender,
)
from tomgym.envs.tomsb.universe import Universe

from tests.tomsb.test_env import FIXTURE_TREE

U = Universe.from_dict(FIXTURE_TREE)
NULLS = {"company": None, "division": None, "team": None}


def attacker_obj(**over: object) -> dict:
    obj = {
        "trust_score": 4,
        "belief": {"company": "Bluefield", "division": None, "team": None},
        "reflection": "seems honest",
        "signal": "query again",
        "prompt": "Which division?",
    }
    obj.update(over)
    return obj


def defender_obj(**over: object) -> dict:
    obj = {
        "attacker_belief_about_target": {"company": "Bluefield", "division": None, "team": None},
        "attacker_trust_in_us": 5,
        "reflection": "it knows the company",
        "reply": "She is in Diagnostics.",
    }
    obj.update(over)
    return obj


def test_valid_attacker_answer() -> None:
    move, error, parsed = parse_attacker(json.dumps(attacker_obj()), U)
    assert error is None
    assert move == AttackerMove(
        4, ("Bluefield", None, None), "seems honest", "query again", "Which division?"
    )
    assert parsed == attacker_obj()


def test_valid_defender_answer() -> None:
    move, error, parsed = parse_defender(json.dumps(defender_obj()), U)
    assert error is None
    assert move == DefenderMove(
        ("Bluefield", None, None), 5, "it knows the company", "She is in Diagnostics."
    )
    assert parsed == defender_obj()


def test_names_are_canonicalised_and_null_words_accepted() -> None:
    belief = {"Company": "bluefield", "DIVISION": "cold-chain?", "team": "unknown"}
    move, error, _ = parse_attacker(json.dumps(attacker_obj(belief=belief)), U)
    assert move is None and "'Cold Chain' is a team, not a division" in error
    belief = {"company": "BLUEFIELD", "division": " vaccines ", "team": "Cold  Chain!"}
    move, error, parsed = parse_attacker(json.dumps(attacker_obj(belief=belief)), U)
    assert error is None
    assert move.belief == ("Bluefield", "Vaccines", "Cold Chain")
    assert parsed["belief"] == {
        "company": "Bluefield",
        "division": "Vaccines",
        "team": "Cold Chain",
    }
    move, _, _ = parse_attacker(json.dumps(attacker_obj(belief={**NULLS, "team": "None"})), U)
    assert move.belief == (None, None, None)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: f"```json\n{s}\n```",
        lambda s: f"Sure! Here is my answer:\n{s}\nHope that helps.",
        lambda s: f"<think>I should say {{'nope': 1}} maybe</think>\n{s}",
        lambda s: f"```\n{s}\n```\ntrailing",
        lambda s: "prefix {broken json} then " + s,
    ],
)
def test_envelopes_are_tolerated(wrap) -> None:
    move, error, _ = parse_defender(wrap(json.dumps(defender_obj())), U)
    assert error is None and move is not None


def test_single_quotes_fallback() -> None:
    text = str(defender_obj()).replace("None", "null")
    move, error, _ = parse_defender(text, U)
    assert error is None and move.attacker_belief_about_target == ("Bluefield", None, None)
    move, error, _ = parse_defender(str(defender_obj(reply="a null result")), U)
    assert error is None and move.reply == "a null result"  # literals inside strings survive


def test_outer_object_preferred_over_nested() -> None:
    # outer object broken (unquoted reply): the nested belief object must not pass for an answer
    text = json.dumps(defender_obj()).replace('"She is in Diagnostics."', "She is in Diagnostics.")
    move, error, _ = parse_defender(text, U)
    assert move is None and "missing field" in error
    # a trailing comma is rescued by the Python-literal fallback
    move, error, _ = parse_defender(json.dumps(defender_obj())[:-1] + ",}", U)
    assert error is None


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        (attacker_obj(trust_score=6), "trust_score must be between 0 and 5"),
        (attacker_obj(trust_score=True), "trust_score must be an integer"),
        (attacker_obj(trust_score="3"), "trust_score must be an integer"),
        (attacker_obj(trust_score=2.5), "trust_score must be an integer"),
        (attacker_obj(signal="done"), "signal must be one of"),
        (attacker_obj(signal="defender detected"), "only allowed at trust_score 0"),
        (attacker_obj(prompt="   "), "prompt must not be empty"),
        (attacker_obj(prompt="x" * (MAX_REPLY_CHARS + 1)), "prompt is"),
        (attacker_obj(reflection=None), "reflection must be a string"),
        (attacker_obj(belief={"company": None}), "lacks level"),
        (attacker_obj(belief={**NULLS, "city": None}), "unknown key"),
        (attacker_obj(belief={**NULLS, "team": "Atlantis"}), "is not a team in the universe"),
        (attacker_obj(belief={**NULLS, "team": 7}), "must be a name or null"),
        (attacker_obj(belief=["Bluefield"]), "belief must be an object"),
        ({k: v for k, v in attacker_obj().items() if k != "prompt"}, "missing field"),
    ],
)
def test_attacker_validation_errors(obj: dict, match: str) -> None:
    move, error, parsed = parse_attacker(json.dumps(obj), U)
    assert move is None and parsed is None
    assert match in error
    assert "\n" not in error


def test_detected_allowed_at_zero_trust() -> None:
    move, error, _ = parse_attacker(
        json.dumps(attacker_obj(trust_score=0, signal="Defender Detected")), U
    )
    assert error is None and move.signal == "defender detected"


@pytest.mark.parametrize(
    ("obj", "match"),
    [
        (defender_obj(attacker_trust_in_us=-1), "attacker_trust_in_us must be between"),
        (defender_obj(reply=""), "reply must not be empty"),
        (defender_obj(reply="y" * (MAX_REPLY_CHARS + 1)), "reply is"),
        (defender_obj(attacker_belief_about_target="Bluefield"), "must be an object"),
        (
            defender_obj(attacker_belief_about_target={**NULLS, "company": "Vaccines"}),
            "'Vaccines' is a division, not a company",
        ),
    ],
)
def test_defender_validation_errors(obj: dict, match: str) -> None:
    move, error, _ = parse_defender(json.dumps(obj), U)
    assert move is None and match in error


def test_empty_and_non_object_answers() -> None:
    assert parse_defender("", U)[1] == "answer is empty; reply with one JSON object"
    assert "no JSON object" in parse_defender("[1, 2]", U)[1]
    assert "no JSON object" in parse_attacker("just words", U)[1]


@pytest.mark.parametrize(
    "text",
    [
        "x" * 1_000_000,
        "{" * (MAX_ANSWER_CHARS - 1),
        '{"a": "' * (MAX_ANSWER_CHARS // 7),
        "{'a': [" * 2_000,
        "```" * 6_000,
        "{}" * 9_000,
        '{"reply": "' + "\\u00e9" * 3_000,
    ],
)
def test_hostile_input_is_fast(text: str) -> None:
    start = time.perf_counter()
    move, error, _ = parse_defender(text, U)
    assert move is None and error
    assert time.perf_counter() - start < 0.5


def test_oversized_answer_is_named() -> None:
    with pytest.raises(ValueError, match="the limit is"):
        extract_json_object("y" * (MAX_ANSWER_CHARS + 1))


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=300), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_arbitrary_text_returns_move_or_error(text: str) -> None:
    for parse in (parse_attacker, parse_defender):
        move, error, parsed = parse(text, U)
        assert (move is None) == (parsed is None) == (error is not None)


@settings(max_examples=100, deadline=None)
@given(
    trust=st.integers(-3, 8),
    names=st.lists(
        st.sampled_from([None, "Bluefield", "Vaccines", "Cold Chain", "x"]), min_size=3, max_size=3
    ),
)
def test_valid_iff_in_range_and_in_universe(trust: int, names: list) -> None:
    belief = dict(zip(U.levels, names, strict=True))
    move, error, _ = parse_attacker(json.dumps(attacker_obj(trust_score=trust, belief=belief)), U)
    ok_names = all(n is None or U.level_of(n) == i for i, n in enumerate(names))
    assert (move is not None) == (0 <= trust <= 5 and ok_names), error
