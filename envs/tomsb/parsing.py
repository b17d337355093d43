"""Parsing and validation of TOM-SB answers (attacker and defender JSON protocols).

Parsing is tolerant about the *envelope* and strict about the *content*:

- Envelope: a reasoning block (`<think>...</think>`) is dropped; the JSON object may sit in a
  code fence or among prose; the first decodable JSON object wins; a Python-style dict with single
  quotes (and `None`/`True`/`False` or `null`/`true`/`false`) is accepted as a fallback. Markers
  (`</think>`, code fences) count only outside the text's top-level JSON objects, so an answer
  whose strings quote them (or quote another answer) is read from its own keys.
- Content: every field of the protocol must be present with the right type and range; names must
  be names of the closed universe at the right level (matched with `normalise_name`, returned in
  canonical spelling).

Both entry points return `(move, error, parsed)`: the validated move (or None), a one-line error
that names the problem (or None), and the canonical JSON-able dict of the move (or None). Input is
bounded (`MAX_ANSWER_CHARS`) and every scan is linear or capped, so hostile text cannot stall a
step.

The encoders `answer_attacker` and `answer_defender` write an answer in the protocol (one JSON
object with the fields in protocol order, non-ASCII kept readable); every scripted or human player
writes its answers with them. They do not validate: `parse_*` / `validate_*` do that.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Mapping
from typing import Any

from tomgym.envs.tomsb.game import (
    MAX_TRUST,
    SIGNAL_DETECTED,
    SIGNALS,
    AttackerMove,
    Belief,
    DefenderMove,
)
from tomgym.envs.tomsb.universe import Universe, normalise_name

MAX_ANSWER_CHARS = 20_000  # whole raw answer (reasoning included)
MAX_REPLY_CHARS = 2_000  # the visible message (attacker `prompt`, defender `reply`)
MAX_REFLECTION_CHARS = 8_000
MAX_DECODE_ATTEMPTS = 32  # candidate '{' positions tried before giving up
MAX_TOP_LEVEL_OBJECTS = 256  # objects collected when locating markers outside JSON

ATTACKER_FIELDS = ("trust_score", "belief", "reflection", "signal", "prompt")
REQUIRED_TEXT_FIELDS = ("prompt", "reply")  # the visible messages; a reflection may be empty
DEFENDER_FIELDS = ("attacker_belief_about_target", "attacker_trust_in_us", "reflection", "reply")
_NULL_WORDS = frozenset({"", "null", "none", "unknown", "n/a", "na", "?"})
_PY_LITERALS = re.compile(r"\b(null|true|false)\b")
_PY_REPLACEMENTS = {"null": "None", "true": "True", "false": "False"}
_DECODER = json.JSONDecoder()


class AnswerError(ValueError):
    """An answer that does not follow the protocol; the message is shown to the model."""


def extract_json_object(text: str, expected_fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """The first JSON object in `text` (see module doc for what is tolerated); raises AnswerError.

    With `expected_fields`, the first object holding any of them is preferred, so an answer whose
    outer object is broken is not mistaken for one of its nested objects.
    """
    if not isinstance(text, str):
        raise AnswerError(f"answer must be text, got {type(text).__name__}")
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(f"answer is {len(text)} characters long; the limit is {MAX_ANSWER_CHARS}")
    spans = _object_spans(text)
    end_think = _last_outside(text, "</think>", spans)
    if end_think >= 0:
        text = text[end_think + len("</think>") :]
    text = text.strip()
    if not text:
        raise AnswerError("answer is empty; reply with one JSON object")
    fallback: dict[str, Any] | None = None
    for candidate in _candidates(text):
        obj = _decode(candidate, expected_fields)
        if obj is not None and (not expected_fields or any(f in obj for f in expected_fields)):
            return obj
        fallback = fallback or obj
    if fallback is not None:
        return fallback
    raise AnswerError("no JSON object found; reply with exactly one JSON object")


def _object_spans(text: str) -> list[tuple[int, int]]:
    """`(start, end)` of the top-level JSON objects of `text`, left to right; scanning resumes
    after each decoded object, so nothing inside its strings is read as structure (capped)."""
    spans: list[tuple[int, int]] = []
    pos = text.find("{")
    failures = 0
    while pos >= 0 and failures < MAX_DECODE_ATTEMPTS and len(spans) < MAX_TOP_LEVEL_OBJECTS:
        try:
            _, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            failures += 1
            pos = text.find("{", pos + 1)
            continue
        spans.append((pos, end))
        pos = text.find("{", end)
    return spans


def _outside(index: int, spans: list[tuple[int, int]]) -> bool:
    return not any(start <= index < end for start, end in spans)


def _last_outside(text: str, marker: str, spans: list[tuple[int, int]]) -> int:
    """Index of the last `marker` that is not inside a JSON object, -1 when none is."""
    index = text.rfind(marker)
    while index >= 0 and not _outside(index, spans):
        index = text.rfind(marker, 0, index)
    return index


def _candidates(text: str) -> list[str]:
    """Substrings worth decoding, most specific first: code-fence bodies (fences outside JSON
    objects only), then the whole text."""
    spans = _object_spans(text)
    fences: list[int] = []
    index = text.find("```")
    while index >= 0 and len(fences) < 8:
        if _outside(index, spans):
            fences.append(index)
        index = text.find("```", index + 3)
    found: list[str] = []
    for start, close in zip(fences[::2], fences[1::2], strict=False):
        body_start = text.find("\n", start)
        if 0 <= body_start < close:
            found.append(text[body_start + 1 : close])
    found.append(text)
    return found


def _decode(text: str, expected_fields: tuple[str, ...]) -> dict[str, Any] | None:
    first_dict: dict[str, Any] | None = None
    pos = text.find("{")
    attempts = 0
    while pos >= 0 and attempts < MAX_DECODE_ATTEMPTS:
        attempts += 1
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            obj, end = None, pos + 1
        if isinstance(obj, dict):
            if not expected_fields or any(f in obj for f in expected_fields):
                return obj
            first_dict = first_dict or obj
            # skip past the nested-object decode so its inner braces are not re-tried
            pos = text.find("{", end)
            continue
        pos = text.find("{", pos + 1)
    # Fallback for Python-style dicts ('single quotes', None): from the first '{' to the last '}'.
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        snippet = text[first : last + 1]
        for attempt in (snippet, _PY_LITERALS.sub(lambda m: _PY_REPLACEMENTS[m.group(1)], snippet)):
            try:
                with warnings.catch_warnings():
                    # compiling arbitrary text warns about escape sequences; the text is data
                    warnings.simplefilter("ignore")
                    obj = ast.literal_eval(attempt)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
                return obj
    return first_dict


def _require_fields(obj: Mapping[str, Any], fields: tuple[str, ...]) -> None:
    missing = [f for f in fields if f not in obj]
    if missing:
        raise AnswerError(f"missing field(s) {missing}; required: {list(fields)}")


def _int_in_range(value: Any, name: str, low: int = 0, high: int = MAX_TRUST) -> int:
    # bool is an int subclass; JSON 3.0 is accepted as 3, "3" is not (strict types).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AnswerError(f"{name} must be an integer {low}-{high}, got {value!r:.40}")
    if isinstance(value, float):
        if not value.is_integer():
            raise AnswerError(f"{name} must be an integer {low}-{high}, got {value!r}")
        value = int(value)
    if not low <= value <= high:
        raise AnswerError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _text(value: Any, name: str, *, limit: int) -> str:
    if not isinstance(value, str):
        raise AnswerError(f"{name} must be a string, got {type(value).__name__}")
    value = value.strip()
    if name in REQUIRED_TEXT_FIELDS and not value:
        raise AnswerError(f"{name} must not be empty")
    if len(value) > limit:
        raise AnswerError(f"{name} is {len(value)} characters long; the limit is {limit}")
    return value


NameIndex = Mapping[str, tuple[int, str]]


def parse_belief(
    value: Any, name: str, universe: Universe, index: NameIndex | None = None
) -> Belief:
    """A `{level: name|null}` object over every level, canonicalised; raises AnswerError.

    `index` is `universe.name_index()`, passed in by callers that parse many answers.
    """
    if not isinstance(value, Mapping):
        raise AnswerError(f"{name} must be an object with keys {list(universe.levels)}")
    by_key = {normalise_name(str(k)): v for k, v in value.items()}
    level_keys = [normalise_name(level) for level in universe.levels]
    missing = [
        lvl for lvl, key in zip(universe.levels, level_keys, strict=True) if key not in by_key
    ]
    if missing:
        raise AnswerError(f"{name} lacks level(s) {missing}; give a name or null for each")
    extra = sorted(str(k) for k in value if normalise_name(str(k)) not in level_keys)
    if extra:
        raise AnswerError(f"{name} has unknown key(s) {extra}; levels are {list(universe.levels)}")
    if index is None:
        index = universe.name_index()
    out: list[str | None] = []
    for depth, (level, key) in enumerate(zip(universe.levels, level_keys, strict=True)):
        raw = by_key[key]
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in _NULL_WORDS):
            out.append(None)
            continue
        if not isinstance(raw, str):
            raise AnswerError(f"{name}[{level!r}] must be a name or null, got {raw!r:.40}")
        hit = index.get(normalise_name(raw))
        if hit is None:
            raise AnswerError(f"{name}[{level!r}]: {raw!r:.60} is not a {level} in the universe")
        if hit[0] != depth:
            raise AnswerError(
                f"{name}[{level!r}]: {hit[1]!r} is a {universe.levels[hit[0]]}, not a {level}"
            )
        out.append(hit[1])
    return tuple(out)  # type: ignore[return-value]


def belief_dict(levels: tuple[str, ...], belief: Belief) -> dict[str, str | None]:
    return dict(zip(levels, belief, strict=True))


def validate_attacker(
    obj: Mapping[str, Any], universe: Universe, index: NameIndex | None = None
) -> AttackerMove:
    """Check a decoded attacker object against the protocol; raises AnswerError."""
    _require_fields(obj, ATTACKER_FIELDS)
    trust = _int_in_range(obj["trust_score"], "trust_score")
    belief = parse_belief(obj["belief"], "belief", universe, index)
    reflection = _text(obj["reflection"], "reflection", limit=MAX_REFLECTION_CHARS)
    signal = obj["signal"]
    if not isinstance(signal, str) or signal.strip().lower() not in SIGNALS:
        raise AnswerError(f"signal must be one of {list(SIGNALS)}, got {signal!r:.40}")
    signal = signal.strip().lower()
    if signal == SIGNAL_DETECTED and trust != 0:
        raise AnswerError(f"signal {SIGNAL_DETECTED!r} is only allowed at trust_score 0")
    prompt = _text(obj["prompt"], "prompt", limit=MAX_REPLY_CHARS)
    return AttackerMove(trust, belief, reflection, signal, prompt)


def validate_defender(
    obj: Mapping[str, Any], universe: Universe, index: NameIndex | None = None
) -> DefenderMove:
    """Check a decoded defender object against the protocol; raises AnswerError."""
    _require_fields(obj, DEFENDER_FIELDS)
    estimate = parse_belief(
        obj["attacker_belief_about_target"], "attacker_belief_about_target", universe, index
    )
    trust = _int_in_range(obj["attacker_trust_in_us"], "attacker_trust_in_us")
    reflection = _text(obj["reflection"], "reflection", limit=MAX_REFLECTION_CHARS)
    reply = _text(obj["reply"], "reply", limit=MAX_REPLY_CHARS)
    return DefenderMove(estimate, trust, reflection, reply)


def attacker_move_to_dict(move: AttackerMove, levels: tuple[str, ...]) -> dict[str, Any]:
    return {
        "trust_score": move.trust_score,
        "belief": belief_dict(levels, move.belief),
        "reflection": move.reflection,
        "signal": move.signal,
        "prompt": move.prompt,
    }


def defender_move_to_dict(move: DefenderMove, levels: tuple[str, ...]) -> dict[str, Any]:
    return {
        "attacker_belief_about_target": belief_dict(levels, move.attacker_belief_about_target),
        "attacker_trust_in_us": move.attacker_trust_in_us,
        "reflection": move.reflection,
        "reply": move.reply,
    }


def answer_attacker(
    *,
    trust_score: int,
    belief: Mapping[str, str | None],
    reflection: str,
    signal: str,
    prompt: str,
) -> str:
    """An attacker answer as protocol JSON text (the inverse of `parse_attacker`)."""
    obj = {
        "trust_score": int(trust_score),
        "belief": dict(belief),
        "reflection": reflection,
        "signal": signal,
        "prompt": prompt,
    }
    return json.dumps(obj, ensure_ascii=False)


def answer_defender(
    *,
    attacker_belief_about_target: Mapping[str, str | None],
    attacker_trust_in_us: int,
    reflection: str,
    reply: str,
) -> str:
    """A defender answer as protocol JSON text (the inverse of `parse_defender`)."""
    obj = {
        "attacker_belief_about_target": dict(attacker_belief_about_target),
        "attacker_trust_in_us": int(attacker_trust_in_us),
        "reflection": reflection,
        "reply": reply,
    }
    return json.dumps(obj, ensure_ascii=False)


def parse_attacker(
    text: str, universe: Universe, index: NameIndex | None = None
) -> tuple[AttackerMove | None, str | None, dict[str, Any] | None]:
    """Parse and validate an attacker answer: `(move, None, parsed)` or `(None, error, None)`."""
    try:
        move = validate_attacker(extract_json_object(text, ATTACKER_FIELDS), universe, index)
    except AnswerError as exc:
        return None, str(exc), None
    return move, None, attacker_move_to_dict(move, universe.levels)


def parse_defender(
    text: str, universe: Universe, index: NameIndex | None = None
) -> tuple[DefenderMove | None, str | None, dict[str, Any] | None]:
    """Parse and validate a defender answer: `(move, None, parsed)` or `(None, error, None)`."""
    try:
        move = validate_defender(extract_json_object(text, DEFENDER_FIELDS), universe, index)
    except AnswerError as exc:
        return None, str(exc), None
    return move, None, defender_move_to_dict(move, universe.levels)
