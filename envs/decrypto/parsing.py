"""Tolerant parsing and strict validation of Decrypto answers.

Players answer with a line `ANSWER: <json>` (the paper's format). Parsing is tolerant: code
fences, prose around the answer, a missing `ANSWER:` marker, a bare list, or guesses written as
"3-1-4", "[3, 1, 4]", "3,1,4" or "314" are all read. Fields come only from the answer's own keys:
the text is scanned once for top-level JSON values (a value's strings and nested values are never
scanned again), an `ANSWER:` marker counts only outside them, and the answer is the first value
after the last marker (else the first top-level value holding the key): its key (`hints`,
`guess`, `keywords`), or the value itself when it is a bare list. So a hint that reads `answer: [1, 2, 3]` stays a hint. Validation is strict: 3 non-empty hints of
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

MAX_ANSWER_CHARS = 20_000  # longer answers are refused: a cut JSON value could be misread
MAX_HINT_CHARS = 60
MAX_KEYWORD_CHARS = 60
MAX_JSON_STARTS = 64  # bounded so adversarial text with many brackets stays cheap

MAX_JSON_VALUES = 256  # top-level values collected (each decode is linear in its own length)

_ANSWER_RE = re.compile(r"answer\s*[:=]\s*", re.IGNORECASE)
_OPEN_RE = re.compile(r"[{\[]")
_DECODER = json.JSONDecoder()
_GUESS_RE = re.compile(r"(?<!\d)([0-9])\s*[-,/ ]?\s*([0-9])\s*[-,/ ]?\s*([0-9])(?!\d)")


def _json_values(text: str) -> list[tuple[int, int, Any]]:
    """`(start, end, value)` of every top-level JSON object or list in `text`, left to right.

    Scanning resumes after each decoded value, so brackets and markers inside its strings are
    never read as structure; failed starts are capped at `MAX_JSON_STARTS`."""
    values: list[tuple[int, int, Any]] = []
    pos = failures = 0
    while failures < MAX_JSON_STARTS and len(values) < MAX_JSON_VALUES:
        match = _OPEN_RE.search(text, pos)
        if match is None:
            break
        try:
            value, end = _DECODER.raw_decode(text, match.start())
        except (json.JSONDecodeError, RecursionError):
            failures += 1
            pos = match.start() + 1
            continue
        values.append((match.start(), end, value))
        pos = end
    return values


def _answer_region(text: str) -> tuple[str, list[Any]]:
    """(the text the answer is read from, the JSON values that may be the answer).

    The region is the text after the last `ANSWER:` marker outside every JSON value (the whole
    text without one); the candidates are the first value after that marker, else (no marker,
    or nothing decodable after it: "the answer is above") every top-level value."""
    values = _json_values(text)
    spans = [(start, end) for start, end, _ in values]
    marker_end = None
    for match in _ANSWER_RE.finditer(text):
        inside = any(start <= match.start() < end for start, end in spans)
        if not inside:
            marker_end = match.end()
    if marker_end is None:
        return text, [value for _, _, value in values]
    after = [value for start, _, value in values if start >= marker_end]
    return text[marker_end:], after[:1] or [value for _, _, value in values]


def _field(text: str, key: str) -> Any:
    """The answer's `key` field (case-insensitive), or the answer itself when it is a bare list."""
    for value in _answer_region(text)[1]:
        if isinstance(value, dict):
            lowered = {str(k).lower(): v for k, v in value.items()}
            if key in lowered:
                return lowered[key]
        elif isinstance(value, list):
            return value
    return None


def _too_long(text: str) -> str | None:
    if len(text) > MAX_ANSWER_CHARS:
        return f"the answer is {len(text)} characters long; the limit is {MAX_ANSWER_CHARS}"
    return None


def parse_hints(text: str) -> tuple[tuple[str, str, str] | None, str | None]:
    if _too_long(text):
        return None, _too_long(text)
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
    if _too_long(text):
        return None, _too_long(text)
    value = _field(text, "guess")
    candidates: list[str] = []
    if isinstance(value, list):
        candidates.append("".join(str(v) for v in value))
    elif value is not None:
        candidates.append(str(value))
    if not candidates:
        candidates.append(_answer_region(text)[0])
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
    if _too_long(text):
        return None, _too_long(text)
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
