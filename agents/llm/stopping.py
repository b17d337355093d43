"""Stop conditions at the close of a protocol answer: decode no further once the answer is whole.

The games' answers have a closing point that can be read off the text as it is generated:

- TOM-SB answers are one JSON object: the answer is complete when the first top-level `{...}`
  outside any `<think>` block closes (braces counted outside JSON strings) and decodes as a
  dict (JSON, or the Python-style dict the TOM-SB parser also accepts).
- Decrypto answers end with a line `ANSWER: <json>`: once an `ANSWER:` marker starts a line,
  the answer is complete when the JSON value after the last marker closes, or when the marker's
  line ends with a newline after some content (`ANSWER: 3-1-4`).

One detector serves both games (`answer_complete`): the marker rule applies when a marker is
present, the object rule otherwise. It only ever stops at a point after which the games'
parsers (`envs.tomsb.parsing`, `envs.decrypto.parsing`) read the same answer as from the full
text, except when a model writes a JSON object in its reasoning before an `ANSWER:` line; free
text with no braces and no marker never stops. What counts as an object is the TOM-SB parser's
own rule (`extract_json_object`: JSON, or the Python-style dict it also accepts), and the scan is
bounded by the parsers' own `MAX_ANSWER_CHARS`; only the closing-point rules live here.
`answer_stop(tokenizer)` is the per-token stop condition over completion ids that the generation
engine takes (`agents.llm.kv_cache.CachedGenerator.generate(stop_when=...)`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tomgym.envs.decrypto import parsing as decrypto_parsing
from tomgym.envs.tomsb import parsing as tomsb_parsing

# At a line start (markdown emphasis allowed), so "my answer: no" inside a JSON reply is no marker.
_ANSWER_MARKER = re.compile(r"^[ \t*_#>`]*answer\s*[:=]\s*", re.IGNORECASE | re.MULTILINE)
_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
# Neither parser reads past its own bound, so text beyond it cannot complete an answer.
_MAX_SCAN_CHARS = min(tomsb_parsing.MAX_ANSWER_CHARS, decrypto_parsing.MAX_ANSWER_CHARS)


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket that closes the one at `start`, or None while still open."""
    depth = 0
    in_string: str | None = None
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == in_string:
                in_string = None
            continue
        if char in "\"'":
            # Single quotes count as strings only inside a value (Python-style dicts), not in
            # prose: an apostrophe in "don't" would otherwise open a string that never closes.
            if char == '"' or text[index - 1] in "{[:, ":
                in_string = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _decodes_as_dict(snippet: str) -> bool:
    """True when the TOM-SB parser reads a JSON object (or a Python-style dict) in `snippet`."""
    try:
        tomsb_parsing.extract_json_object(snippet)
    except tomsb_parsing.AnswerError:
        return False
    return True


def _visible(text: str) -> str | None:
    """The text after reasoning; None while a `<think>` block is still open."""
    text = text[:_MAX_SCAN_CHARS]
    close = text.rfind(_THINK_CLOSE)
    if close >= 0:
        return text[close + len(_THINK_CLOSE) :]
    if _THINK_OPEN in text:
        return None
    return text


def answer_complete(text: str) -> bool:
    """True once `text` holds a whole protocol answer (see module doc); cheap enough per token."""
    visible = _visible(text)
    if visible is None:
        return False
    markers = list(_ANSWER_MARKER.finditer(visible))
    if markers:
        payload = visible[markers[-1].end() :]
        stripped = payload.lstrip(" \t")
        if stripped[:1] in ("{", "["):
            offset = len(payload) - len(stripped)
            return _balanced_end(payload, offset) is not None
        line, newline, _ = stripped.partition("\n")
        return bool(newline) and bool(line.strip())
    start = visible.find("{")
    while start >= 0:
        end = _balanced_end(visible, start)
        if end is None:
            return False
        if _decodes_as_dict(visible[start:end]):
            return True
        start = visible.find("{", end)
    return False


def answer_stop(tokenizer: Any) -> Callable[[list[int]], bool]:
    """`stop_when(completion_ids)`: the decoded completion holds a whole answer (see above)."""

    def stop_when(completion_ids: list[int]) -> bool:
        return answer_complete(tokenizer.decode(completion_ids, skip_special_tokens=True))

    return stop_when
