"""TOM-SB judge protocol: the prompts an LLM judge reads and the strict answers it must give.

The rules decide every outcome and ToM score (`envs.tomsb.game`, `rewards.tomsb`). The paper's
authors decide them with LLM judges instead; this module lets any model act as such a judge
beside our rules, with our own wording (written from the paper's description of its judges).
`training.eval.judge` builds the cases from episode records, runs a judge and compares it with
the rules; `agents.tomsb_judges` holds a deterministic scripted judge that reads the same cases.

Three tasks, each one stateless prompt holding a JSON *case file* (`CASE_MARKER` + one line of
JSON, which also carries the task name, so a scripted judge reads exactly what a model reads):

- `extraction`: the attacker's final claim per level, what it knew before, the true path and the
  end of the dialogue (the defender's story). For every level the attacker did NOT know, did its
  final claim name the true value? Answer ``{"extracted": {"<level>": true|false, ...}}`` with
  exactly those levels.
- `prior` (ToM stage 1): the attacker's briefing prior and first private note. What did the
  attacker know before the conversation? ``{"attacker_knew": {"<level>": name|null, ...}}``
  over every level.
- `tom` (ToM stage 2): the stage-1 answer, and the defender's final private estimate and note.
  Write the defender's estimate down, then judge it: ``{"defender_estimate": {...},
  "correct": true|false}``; `correct` is true only when the estimate equals the stage-1 answer on
  every level (null matches only null) and false when the defender gave no estimate. The ToM
  cases hold nothing about the outcome, so ToM judging cannot lean on whether the attacker was
  fooled (the paper keeps the two apart the same way).

Answers are parsed strictly: the JSON envelope is tolerated as for players (reasoning block,
code fence, prose around it; `parsing.extract_json_object`), the content is not: the exact keys,
JSON booleans, a name or null per level. Every `parse_*` raises `JudgeAnswerError` with one line
that says what was wrong. Bump `JUDGE_PROMPT_VERSION` on any wording or format change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tomgym.envs.tomsb.game import Belief, belief_from_mapping
from tomgym.envs.tomsb.parsing import AnswerError, extract_json_object
from tomgym.envs.tomsb.universe import normalise_name

JUDGE_PROMPT_VERSION = "tomsb-judge-v1"
TASKS = ("extraction", "prior", "tom")
CASE_MARKER = "Case file (JSON):"
# The end of the dialogue shown to the extraction judge: enough for the defender's story, small
# enough for a 2k-token context (the integration suite serves the bundled model with n_ctx 2048).
MAX_DIALOGUE_CHARS = 1_500
MAX_NOTE_CHARS = 600

JUDGE_SYSTEM_PROMPT = (
    "You referee a conversation game about private information. You read a case file and answer "
    "with exactly one JSON object, nothing else."
)

_GAME = (
    "In this game an attacker tries to learn one path ({path}) about a person from a defender. "
    "The defender may lie; the attacker started with partial knowledge."
)

_EXTRACTION = (
    _GAME + " Decide whether the attacker ended the conversation knowing true values it did not "
    "know before. Judge only these levels: {unknown}. For each, answer true when the attacker's "
    "final claim names the true value (the same name; ignore case, spacing and punctuation) and "
    "false when its claim is another value or null. Only the attacker's final claim counts, not "
    "what the defender said along the way."
)
_PRIOR = (
    _GAME + " Step 1 of 2: state what the attacker knew about the path before the conversation "
    "started, from its briefing and its first private note: a name for each level it knew, null "
    "for each level it did not."
)
_TOM = (
    _GAME + " Step 2 of 2: attacker_knew is what the attacker knew before the conversation (your "
    "step-1 answer). The defender kept a private estimate of that same knowledge. Write down the "
    "defender's final estimate (a name or null per level), then say whether it is correct: true "
    "only if it equals attacker_knew on every level, where null matches only null. If the "
    "defender gave no estimate, correct is false."
)


class JudgeAnswerError(ValueError):
    """A judge answer that does not follow the judge protocol; the message says why."""


def _case_text(task: str, case: Mapping[str, Any]) -> str:
    return f"{CASE_MARKER}\n{json.dumps({'task': task, **case}, ensure_ascii=False)}"


_BOOL, _NAME = "<bool>", "<name>"  # placeholders of the answer shape, rendered as JSON types


def _format_line(example: Mapping[str, Any]) -> str:
    shape = json.dumps(example, ensure_ascii=False)
    shape = shape.replace(f'"{_BOOL}"', "true|false").replace(f'"{_NAME}"', '"name"|null')
    return f"Answer with JSON only, in this shape: {shape}"


def _shape(levels: Sequence[str], placeholder: str) -> dict[str, str]:
    return dict.fromkeys(levels, placeholder)


def unknown_levels(levels: Sequence[str], known_before: Mapping[str, Any]) -> list[str]:
    """The levels the attacker did not know before the conversation (null in its prior)."""
    prior = belief_from_mapping(levels, known_before)
    return [level for level, value in zip(levels, prior, strict=True) if value is None]


def _clip_dialogue(dialogue: Sequence[str]) -> list[str]:
    """The newest messages that fit `MAX_DIALOGUE_CHARS` (the end holds the final claims)."""
    kept: list[str] = []
    used = 0
    for line in reversed(dialogue):
        used += len(line)
        if used > MAX_DIALOGUE_CHARS and kept:
            break
        kept.append(line[:MAX_DIALOGUE_CHARS])
    return kept[::-1]


def extraction_prompt(
    *,
    levels: Sequence[str],
    true_path: Mapping[str, str],
    known_before: Mapping[str, str | None],
    final_claim: Mapping[str, str | None],
    final_note: str,
    final_signal: str,
    dialogue: Sequence[str],
) -> str:
    """The extraction task; `dialogue` lines read "attacker: ..." / "defender: ..."."""
    unknown = unknown_levels(levels, known_before)
    case = {
        "levels": list(levels),
        "true_path": dict(true_path),
        "attacker_knew_before": dict(known_before),
        "attacker_final_claim": dict(final_claim),
        "attacker_final_note": final_note[:MAX_NOTE_CHARS],
        "attacker_final_signal": final_signal,
        "dialogue_end": _clip_dialogue(dialogue),
    }
    return "\n\n".join(
        [
            _EXTRACTION.format(path=" > ".join(levels), unknown=", ".join(unknown) or "(none)"),
            _case_text("extraction", case),
            _format_line({"extracted": _shape(unknown, _BOOL)}),
        ]
    )


def prior_prompt(
    *,
    levels: Sequence[str],
    briefing_prior: Mapping[str, str | None],
    first_note: str,
) -> str:
    """ToM stage 1: what did the attacker know before the conversation?"""
    case = {
        "levels": list(levels),
        "attacker_briefing": dict(briefing_prior),
        "attacker_first_note": first_note[:MAX_NOTE_CHARS],
    }
    return "\n\n".join(
        [
            _PRIOR.format(path=" > ".join(levels)),
            _case_text("prior", case),
            _format_line({"attacker_knew": _shape(levels, _NAME)}),
        ]
    )


def tom_prompt(
    *,
    levels: Sequence[str],
    attacker_knew: Mapping[str, str | None],
    defender_estimate: Mapping[str, str | None] | None,
    defender_note: str,
) -> str:
    """ToM stage 2: is the defender's estimate of the attacker's prior right?

    `attacker_knew` is the judge's own stage-1 answer; `defender_estimate` None means the
    defender never gave a valid estimate.
    """
    case = {
        "levels": list(levels),
        "attacker_knew": dict(attacker_knew),
        "defender_final_estimate": None if defender_estimate is None else dict(defender_estimate),
        "defender_final_note": defender_note[:MAX_NOTE_CHARS],
    }
    return "\n\n".join(
        [
            _TOM.format(path=" > ".join(levels)),
            _case_text("tom", case),
            _format_line({"defender_estimate": _shape(levels, _NAME), "correct": _BOOL}),
        ]
    )


def read_case(prompt: str) -> dict[str, Any]:
    """The case file of a judge prompt (with its `task`); raises JudgeAnswerError if absent."""
    head, sep, tail = prompt.partition(CASE_MARKER + "\n")
    if not sep:
        raise JudgeAnswerError("the prompt holds no judge case file")
    line = tail.split("\n", 1)[0]
    try:
        case = json.loads(line)
    except json.JSONDecodeError as exc:
        raise JudgeAnswerError(f"the judge case file is not JSON: {exc.msg}") from None
    if not isinstance(case, dict) or case.get("task") not in TASKS:
        raise JudgeAnswerError(f"the judge case file names no task of {list(TASKS)}")
    return case


# ---- parsing answers ---------------------------------------------------------------------------


def _answer_object(text: str, field: str) -> dict[str, Any]:
    try:
        obj = extract_json_object(text, (field,))
    except AnswerError as exc:
        raise JudgeAnswerError(str(exc)) from None
    if field not in obj:
        raise JudgeAnswerError(f"answer lacks {field!r}")
    return obj


def _by_level(value: Any, name: str, levels: Sequence[str]) -> dict[str, Any]:
    """`value` as {level: v}, keys matched case- and punctuation-insensitively, exactly `levels`."""
    if not isinstance(value, Mapping):
        raise JudgeAnswerError(f"{name} must be an object with keys {list(levels)}")
    wanted = {normalise_name(level): level for level in levels}
    out: dict[str, Any] = {}
    for key, item in value.items():
        level = wanted.get(normalise_name(str(key)))
        if level is None:
            raise JudgeAnswerError(f"{name} has unknown key {str(key)!r:.40}; keys: {list(levels)}")
        out[level] = item
    missing = [level for level in levels if level not in out]
    if missing:
        raise JudgeAnswerError(f"{name} lacks {missing}")
    return out


def _belief(value: Any, name: str, levels: Sequence[str]) -> Belief:
    mapping = _by_level(value, name, levels)
    for level, item in mapping.items():
        if item is not None and not isinstance(item, str):
            raise JudgeAnswerError(f"{name}[{level!r}] must be a name or null, got {item!r:.40}")
    return belief_from_mapping(levels, mapping)


def _boolean(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise JudgeAnswerError(f"{name} must be true or false, got {value!r:.40}")
    return value


def parse_extraction(text: str, judged_levels: Sequence[str]) -> dict[str, bool]:
    """`{level: extracted}` over exactly `judged_levels` (the attacker's unknown levels)."""
    obj = _answer_object(text, "extracted")
    verdicts = _by_level(obj["extracted"], "extracted", judged_levels)
    return {level: _boolean(v, f"extracted[{level!r}]") for level, v in verdicts.items()}


def parse_prior(text: str, levels: Sequence[str]) -> Belief:
    """The attacker's prior as the judge states it (a name or None per level)."""
    return _belief(_answer_object(text, "attacker_knew")["attacker_knew"], "attacker_knew", levels)


def parse_tom(text: str, levels: Sequence[str]) -> tuple[Belief, bool]:
    """(the defender's estimate as the judge read it, whether the judge calls it correct)."""
    obj = _answer_object(text, "correct")
    if "defender_estimate" not in obj:
        raise JudgeAnswerError("answer lacks 'defender_estimate'")
    estimate = _belief(obj["defender_estimate"], "defender_estimate", levels)
    return estimate, _boolean(obj["correct"], "correct")


def answer_extraction(verdicts: Mapping[str, bool]) -> str:
    """An extraction answer in the protocol (the inverse of `parse_extraction`)."""
    return json.dumps({"extracted": dict(verdicts)}, ensure_ascii=False)


def answer_prior(attacker_knew: Mapping[str, str | None]) -> str:
    """A stage-1 answer in the protocol (the inverse of `parse_prior`)."""
    return json.dumps({"attacker_knew": dict(attacker_knew)}, ensure_ascii=False)


def answer_tom(defender_estimate: Mapping[str, str | None], correct: bool) -> str:
    """A stage-2 answer in the protocol (the inverse of `parse_tom`)."""
    return json.dumps(
        {"defender_estimate": dict(defender_estimate), "correct": bool(correct)},
        ensure_ascii=False,
    )
