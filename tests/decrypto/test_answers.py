"""Decrypto answer encoders (`answer_*`) round-trip through the parsers; `code_text` notation."""

from __future__ import annotations

import pytest
from tomgym.envs.decrypto.parsing import (
    answer_guess,
    answer_hints,
    answer_keywords,
    code_text,
    parse_guess,
    parse_hints,
    parse_keywords,
)


def test_answer_lines_are_canonical_and_parse_back() -> None:
    assert answer_guess((3, 1, 4)) == 'ANSWER: {"guess": "3-1-4"}'
    assert parse_guess(answer_guess([2, 4, 1])) == ((2, 4, 1), None)
    hints = ("éclair", "sea", "dog")
    assert answer_hints(hints) == 'ANSWER: {"hints": ["éclair", "sea", "dog"]}'
    assert parse_hints(answer_hints(hints)) == (hints, None)
    words = ("ocean", "guitar", "doctor", "winter")
    assert parse_keywords(answer_keywords(words)) == (words, None)


@pytest.mark.parametrize(("code", "text"), [((1, 2, 3), "1-2-3"), (None, "none")])
def test_code_text(code, text) -> None:
    assert code_text(code) == text
