from __future__ import annotations

import math

import pytest
from tomgym.rewards import format_ok, length_reward
from tomgym.rewards.shaping import length_score

from tests.rewards.records import defender_turn, tomsb_record


def test_format_ok_all_valid_and_one_bad_turn() -> None:
    assert format_ok(tomsb_record(), "defender_0") == 1.0
    record = tomsb_record(format_failures=1)
    record["turns"].append(defender_turn(None, valid=False))
    assert format_ok(record, "defender_0") == 0.0


def test_format_ok_ignores_side_questions_and_other_agents() -> None:
    record = tomsb_record()
    record["turns"].append({"agent": "attacker_0", "valid": False, "side_question": False})
    side = defender_turn(None, valid=False)
    side["side_question"] = True
    record["turns"].append(side)
    assert format_ok(record, "defender_0") == 1.0


def test_format_ok_counts_env_side_failures() -> None:
    # A re-asked turn whose retry succeeded: the final turn is valid but the env counted a failure.
    assert format_ok(tomsb_record(format_failures=1), "defender_0") == 0.0


@pytest.mark.parametrize(
    ("tokens", "expected"), [(0, 1.0), (100, 1.0), (150, 0.5), (175, 0.25), (200, 0.0), (900, 0.0)]
)
def test_length_score(tokens: int, expected: float) -> None:
    assert math.isclose(length_score(tokens), expected)


def test_length_reward_counts_private_fields_only_with_any_counter() -> None:
    record = tomsb_record()
    words = " ".join(["w"] * 147)
    record["turns"] = [defender_turn({"company": "Acme"}, reflection=words)]
    record["turns"][0]["parsed"]["reply"] = " ".join(["reply"] * 1000)  # public: not counted

    def word_count(text: str) -> int:
        return len(text.split())

    # 147 reflection words + '{"company": "Acme"}' (2 words) + trust "5" (1 word) = 150 -> 0.5
    assert math.isclose(length_reward(record, word_count), 0.5)

    class Encoder:
        def encode(self, text: str, add_special_tokens: bool = True) -> list[str]:
            return text.split()

    assert math.isclose(length_reward(record, Encoder()), 0.5)
    assert math.isclose(length_reward(record, lambda t: t.split()), 0.5)


def test_length_reward_needs_a_tokenizer() -> None:
    with pytest.raises(ValueError, match="needs a tokenizer"):
        length_reward(tomsb_record(), None)
