"""Tolerant parsing and strict validation of Decrypto answers.

Players answer with a line `ANSWER: <json>` (the paper's format). Parsing is tolerant: code
fences, prose around the answer, a missing `ANSWER:` marker, a bare list, or guesses written as
"3-1-4", "[3, 1, 4]", "3,1,4" or "314" are all read. Validation is strict: 3 non-empty hints of
bounded length, 3 distinct digits from 1..4, 4 non-empty keywords. Every `parse_*` function
returns `(value, None)` on success or `(None, reason)` where `reason` is a sentence shown to the
player.

Encoders write the canonical answer line that the parsers read back: `answer_hints(hints)` ->
`ANSWER: {"hints": ["a", "b", "c"]}`, `answer_guess(code)` -> `ANSWER: {"guess": "3-1-4"}` (also
the answer to an interceptor-prediction question), `answer_keywords(words)` ->
`ANSWER: {"keywords": ["w", "x", "y", "z"]}`; non-ASCII is kept readable. They do not validate.
`code_text(code)` is the code notation itself ("3-1-4", "none" for no code), used by the answer
lines and by the prompts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

MAX_ANSWER_CHARS = 20_000  # longer answers are cut before parsing (keeps parsing linear and fast)
MAX_HINT_CHARS = 60
MAX_KEYWORD_CHARS = 60
MAX_JSON_STARTS = 64  # bounded so adversarial text with many brackets stays cheap

_ANSWER_RE = re.compile(r"answer\s*[:=]\s*", re.IGNORECASE)
_FENCE_RE = re.compile(r"```(?:json)?", re.IGNORECASE)
_GUESS_RE = re.compile(r"(?<!\d)([0-9])\s*[-,/ ]?\s*([0-9])\s*[-,/ ]?\s*([0-9])(?!\d)")


def _candidate_payloads(text: str) -> list[str]:
    """Text after the last `ANSWER:` marker first, then the whole answer."""
    text = _FENCE_RE.sub(" ", text[:MAX_ANSWER_CHARS])
    matches = list(_ANSWER_RE.finditer(text))
    payloads = [text[matches[-1].end() :]] if matches else []
    payloads.append(text)
    return payloads


def _first_json(payload: str) -> Any:
    """The first JSON value (object or list) that decodes from `payload`, else None."""
    decoder = json.JSONDecoder()
    starts = [i for i, c in enumerate(payload) if c in "{["][:MAX_JSON_STARTS]
    for start in starts:
        char = payload[start]
        if char in "{[":
            try:
                value, _ = decoder.raw_decode(payload, start)
            except (json.JSONDecodeError, RecursionError):
                continue
            return value
    return None


def _field(text: str, key: str) -> Any:
    for payload in _candidate_payloads(text):
        value = _first_json(payload)
        if isinstance(value, dict):
            lowered = {str(k).lower(): v for k, v in value.items()}
            if key in lowered:
                return lowered[key]
        elif isinstance(value, list):
            return value
    return None


def parse_hints(text: str) -> tuple[tuple[str, str, str] | None, str | None]:
    value = _field(text, "hints")
    if value is None:
        return (
            None,
            'no hints found; answer with a line like ANSWER: {"hints": ["word", "word", "word"]}',
        )
    if not isinstance(value, list) or len(value) != 3:
        return None, "exactly 3 hints are required, one per code digit"
    hints = []
    for hint in value:
        if not isinstance(hint, str | int | float) or not str(hint).strip():
            return None, "every hint must be a non-empty string"
        hint = " ".join(str(hint).split())
        if len(hint) > MAX_HINT_CHARS:
            return None, f"hints must be at most {MAX_HINT_CHARS} characters"
        hints.append(hint)
    return tuple(hints), None  # type: ignore[return-value]


def parse_guess(text: str, *, strict: bool = True) -> tuple[tuple[int, ...] | None, str | None]:
    """A code guess. `strict=False` accepts repeated digits (recorded play): such a guess is simply wrong."""
    value = _field(text, "guess")
    candidates: list[str] = []
    if isinstance(value, list):
        candidates.append("".join(str(v) for v in value))
    elif value is not None:
        candidates.append(str(value))
    if not candidates:
        candidates.extend(_candidate_payloads(text))
    for candidate in candidates:
        match = _GUESS_RE.search(candidate[:2000])
        if match:
            digits = tuple(int(d) for d in match.groups())
            if any(d < 1 or d > 4 for d in digits):
                return None, "a guess uses only the digits 1, 2, 3 and 4"
            if strict and len(set(digits)) != 3:
                return None, "a guess must use 3 distinct digits (e.g. 3-1-4)"
            return digits, None
    return None, 'no guess found; answer with a line like ANSWER: {"guess": "3-1-4"}'


def parse_keywords(text: str) -> tuple[tuple[str, str, str, str] | None, str | None]:
    value = _field(text, "keywords")
    if value is None:
        return (
            None,
            'no keywords found; answer with a line like ANSWER: {"keywords": ["w", "x", "y", "z"]}',
        )
    if not isinstance(value, list) or len(value) != 4:
        return None, "exactly 4 keywords are required, in the order of their digits"
    words = []
    for word in value:
        if not isinstance(word, str | int | float) or not str(word).strip():
            return None, "every keyword must be a non-empty string"
        word = " ".join(str(word).split())
        if len(word) > MAX_KEYWORD_CHARS:
            return None, f"keywords must be at most {MAX_KEYWORD_CHARS} characters"
        words.append(word)
    return tuple(words), None  # type: ignore[return-value]


def code_text(code: Sequence[int] | None) -> str:
    """A code or guess in the game's notation, "3-1-4"; "none" when there is none."""
    return "none" if code is None else "-".join(str(int(d)) for d in code)


def _answer_line(payload: dict[str, Any]) -> str:
    return "ANSWER: " + json.dumps(payload, ensure_ascii=False)


def answer_hints(hints: Sequence[str]) -> str:
    """The encoder's answer: `ANSWER: {"hints": [...]}` (inverse of `parse_hints`)."""
    return _answer_line({"hints": list(hints)})


def answer_guess(code: Sequence[int]) -> str:
    """A decoder/interceptor guess or prediction: `ANSWER: {"guess": "3-1-4"}`."""
    return _answer_line({"guess": code_text(code)})


def answer_keywords(words: Sequence[str]) -> str:
    """A keyword-question answer: `ANSWER: {"keywords": [...]}` (inverse of `parse_keywords`)."""
    return _answer_line({"keywords": list(words)})
