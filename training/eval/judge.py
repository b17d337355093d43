"""LLM judging of TOM-SB episodes beside the rules: `judge_folder(path, spec)`.

The rules (`envs.tomsb.game`, `rewards.tomsb`) stay the scoring of record. A judge re-scores every
episode the way the paper's authors score theirs, with our own prompts
(`envs.tomsb.judge_prompts`): an extraction judge (did the attacker's final claim name a true value
it did not know?) and a two-stage prior-knowledge judge (stage 1: what did the attacker know
before the conversation? stage 2: is the defender's final estimate of that right?). Agreement with
the rules is measured by `training.eval.agreement` and shown in the report.

Judges (`make_judge(spec)`): `scripted:judge` (`agents.tomsb_judges`, deterministic, applies the
rules to the case file and so agrees with them) or any LLM policy spec (`default`, `hf:...`,
`vllm:...`, `openai:...,base_url=...`), sampled at temperature 0 unless the spec sets one. Every
prompt is a stateless turn (no `message` field: the `system` field plus `prompt`), so one
`act_batch` call judges a whole batch of episodes on any backend.

What a record gains, under ``record["judge"][label]`` (`label` = `judge_label(spec)`, the spec's
canonical text; one entry per judge, judging again with the same judge replaces it)::

    {"judge": <the policy's describe()>, "prompt_version": JUDGE_PROMPT_VERSION,
     "extraction": {"raw": str, "answer": {level: bool} | None, "judge_error": str | None},
     "prior":      {"raw": str, "answer": {level: name | None} | None, "judge_error": ...},
     "tom":        {"raw": str | None, "answer": {"defender_estimate": {...}, "correct": bool}
                    | None, "judge_error": ...}}

`answer` is None exactly when `judge_error` holds the one-line reason the answer was rejected;
stage 2 is not asked (raw None) when stage 1 failed. A backend failure (BackendError) is not a
judge error: it propagates, and the batches written before it are kept.

`judge_folder` re-scores a finished run folder in place, holding the folder's lock (a run still
writing it makes judging fail with `RunFolderLocked`): records are judged in batches, and after
each batch the whole `games.jsonl` is written to a temporary file and moved over the old one
(`os.replace`), so an interruption loses at most the batch in flight and never a record. Records
this judge already scored with this prompt version are skipped (so a rerun continues), unless
`force`; games the runner cut short (no env outcome) are not judged. Then `summary.json` gains
`judge_agreement` and the tables are rewritten (`tables/tomsb_judge_agreement.*`).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tomgym.agents.base import Policy, Turn
from tomgym.agents.policies import make_policy
from tomgym.agents.specs import SpecError, parse_spec
from tomgym.agents.tomsb_judges import SCRIPTED_JUDGES, make_scripted_judge
from tomgym.envs.tomsb import judge_prompts as jp
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER
from tomgym.rewards.episode import (
    EpisodeRecord,
    RecordError,
    final_infos,
    record_key,
    truncation_reason,
)
from tomgym.rewards.episode import outcome as record_outcome
from tomgym.training.eval import tables
from tomgym.training.eval.agreement import JUDGE_KEY, agreement_summary
from tomgym.training.eval.metrics import env_kind
from tomgym.training.run_folder import SUMMARY_FILE, RunFolder, RunFolderError

from tomgym.redaction import redact_data

JUDGE_AGENT = "judge"
JUDGE_SAMPLING = {"temperature": 0.0}  # judging is scoring: greedy unless the spec says otherwise
DEFAULT_BATCH_SIZE = 32


# ---- the judge policy ------------------------------------------------------------------------------


def judge_label(spec: str) -> str:
    """The canonical text of a judge spec (the key its answers are stored under), checked without
    building anything: a bad spec raises a one-line ValueError before any game is played."""
    text = spec.strip()
    if text.startswith("scripted:"):
        name = text.partition(":")[2]
        if name not in SCRIPTED_JUDGES:
            raise SpecError(f"unknown scripted judge {name!r}; valid: {list(SCRIPTED_JUDGES)}")
        return text
    parsed = parse_spec(text)
    if not parsed.is_llm:
        raise SpecError(
            f"judge spec {text!r}: expected scripted:judge or an LLM spec "
            "(default, hf:<model>, vllm:<model>, openai:<model>[,base_url=...])"
        )
    return parsed.to_string()


def make_judge(spec: str) -> Policy:
    """The judge a spec names: `scripted:<name>` or an LLM policy spec; ValueError otherwise."""
    label = judge_label(spec)
    if label.startswith("scripted:"):
        return make_scripted_judge(label.partition(":")[2])
    parsed = parse_spec(label)
    given = parsed.option_dict()
    defaults = {k: v for k, v in JUDGE_SAMPLING.items() if k not in given}
    return make_policy(parsed.with_options(**defaults) if defaults else parsed, seed=0)


# ---- cases from records ----------------------------------------------------------------------------


def _played_turns(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The accepted answers of both players, in play order (re-asks and side questions out)."""
    return [
        t
        for t in record.get("turns") or ()
        if t.get("agent") in (ATTACKER, DEFENDER)
        and t.get("valid")
        and not t.get("side_question")
        and isinstance(t.get("parsed"), Mapping)
    ]


def _case_inputs(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the judge prompts need from one finished TOM-SB record; RecordError if it lacks it."""
    info = final_infos(record, DEFENDER)
    for key in ("prior", "ground_truth", "belief", "final_defender_estimate"):
        if key not in info:
            raise RecordError(f"episode record {record.get('game_id')!r}: final infos lack {key!r}")
    if not isinstance(info["prior"], Mapping):
        raise RecordError(f"episode record {record.get('game_id')!r}: 'prior' is not a mapping")
    played = _played_turns(record)
    attacker = [t for t in played if t["agent"] == ATTACKER]
    defender = [t for t in played if t["agent"] != ATTACKER]
    dialogue = [
        f"attacker: {t['parsed'].get('prompt', '')}"
        if t["agent"] == ATTACKER
        else f"defender: {t['parsed'].get('reply', '')}"
        for t in played
    ]
    return {
        "levels": tuple(info["prior"]),
        "prior": dict(info["prior"]),
        "truth": dict(info["ground_truth"]),
        "belief": dict(info["belief"]),
        "estimate": info["final_defender_estimate"],
        "first_note": str(attacker[0]["parsed"].get("reflection", "")) if attacker else "",
        "final_note": str(attacker[-1]["parsed"].get("reflection", "")) if attacker else "",
        "final_signal": str(attacker[-1]["parsed"].get("signal", "")) if attacker else "",
        "defender_note": str(defender[-1]["parsed"].get("reflection", "")) if defender else "",
        "dialogue": dialogue,
    }


def _turn(record: Mapping[str, Any], task: str, prompt: str) -> Turn:
    observation = {"system": jp.JUDGE_SYSTEM_PROMPT, "prompt": prompt}
    return Turn(f"judge/{record['game_id']}/{task}", JUDGE_AGENT, observation)


def _parsed(raw: str, parse: Callable[[str], Any]) -> dict[str, Any]:
    try:
        return {"raw": raw, "answer": parse(raw), "judge_error": None}
    except jp.JudgeAnswerError as exc:
        return {"raw": raw, "answer": None, "judge_error": str(exc)}


def _ask(judge: Policy, turns: Sequence[Turn]) -> list[str]:
    """One `act_batch` call; a judge that answers the wrong number of turns is a bug, not a
    judge error."""
    if not turns:
        return []
    answers = judge.act_batch(turns)
    if len(answers) != len(turns):
        raise RuntimeError(f"judge answered {len(answers)} of {len(turns)} prompts")
    return [str(a) for a in answers]


def _as_dict(levels: Sequence[str], belief: Sequence[str | None]) -> dict[str, str | None]:
    return dict(zip(levels, belief, strict=True))


def _extraction_answer(levels: Sequence[str], prior: Mapping[str, Any], text: str) -> Any:
    return jp.parse_extraction(text, jp.unknown_levels(levels, prior))


def _prior_answer(levels: Sequence[str], text: str) -> dict[str, str | None]:
    return _as_dict(levels, jp.parse_prior(text, levels))


def _tom_answer(levels: Sequence[str], text: str) -> dict[str, Any]:
    estimate, correct = jp.parse_tom(text, levels)
    return {"defender_estimate": _as_dict(levels, estimate), "correct": correct}


def judge_entries(records: Sequence[Mapping[str, Any]], judge: Policy) -> list[dict[str, Any]]:
    """Judge every record (two `act_batch` calls in all); one entry per record, in order.

    Call 1 asks the extraction and the ToM stage-1 question of every record; call 2 asks stage 2
    of the records whose stage-1 answer parsed, with that answer in the prompt.
    """
    inputs = [_case_inputs(r) for r in records]
    first: list[Turn] = []
    for record, x in zip(records, inputs, strict=True):
        extraction = jp.extraction_prompt(
            levels=x["levels"],
            true_path=x["truth"],
            known_before=x["prior"],
            final_claim=x["belief"],
            final_note=x["final_note"],
            final_signal=x["final_signal"],
            dialogue=x["dialogue"],
        )
        prior = jp.prior_prompt(
            levels=x["levels"], briefing_prior=x["prior"], first_note=x["first_note"]
        )
        first += [_turn(record, "extraction", extraction), _turn(record, "prior", prior)]
    answers = _ask(judge, first)
    entries = [
        {
            "extraction": _parsed(
                answers[2 * i], functools.partial(_extraction_answer, x["levels"], x["prior"])
            ),
            "prior": _parsed(answers[2 * i + 1], functools.partial(_prior_answer, x["levels"])),
        }
        for i, x in enumerate(inputs)
    ]
    stage2 = [i for i, entry in enumerate(entries) if entry["prior"]["answer"] is not None]
    tom_turns = [
        _turn(
            records[i],
            "tom",
            jp.tom_prompt(
                levels=inputs[i]["levels"],
                attacker_knew=entries[i]["prior"]["answer"],
                defender_estimate=inputs[i]["estimate"],
                defender_note=inputs[i]["defender_note"],
            ),
        )
        for i in stage2
    ]
    tom_answers = dict(zip(stage2, _ask(judge, tom_turns), strict=True))
    for i, entry in enumerate(entries):
        if i in tom_answers:
            parse = functools.partial(_tom_answer, inputs[i]["levels"])
            entry["tom"] = _parsed(tom_answers[i], parse)
        else:
            error = f"stage 1 failed: {entry['prior']['judge_error']}"
            entry["tom"] = {"raw": None, "answer": None, "judge_error": error}
    return entries


# ---- run folders -----------------------------------------------------------------------------------


def _rewrite(folder: RunFolder, lines: Sequence[EpisodeRecord]) -> None:
    """Replace games.jsonl with `lines` atomically (a temporary file moved over it)."""
    tmp = folder.games_path.with_suffix(".jsonl.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in lines:
            handle.write(json.dumps(redact_data(record), ensure_ascii=False, allow_nan=False))
            handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, folder.games_path)


def _update_summary(folder: RunFolder, agreement: Mapping[str, Any]) -> None:
    path = folder.path / SUMMARY_FILE
    summary: dict[str, Any] = {}
    if path.exists():
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            summary = {}  # summary.json is derived data: rebuilt rather than trusted
    summary["judge_agreement"] = dict(agreement)
    folder.write_summary(summary)


def judge_folder(
    path: str | Path,
    spec: str,
    *,
    policy: Policy | None = None,
    force: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> dict[str, Any]:
    """Judge a finished TOM-SB run folder with the judge `spec` names (see the module docstring).

    Answers are stored under the spec's canonical text (`judge_label`); `policy` gives a ready
    judge instead (then `spec`, as given, only labels its entries). Games the runner cut short
    (no env outcome) are not judged. The folder's lock is held while records are rewritten, so a
    run still writing the folder makes this fail with `RunFolderLocked`. Returns `{"judge":
    label, "judged": k, "skipped": m, "unfinished": u, "agreement": {comparison: block}}`.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    folder = RunFolder(path)
    label = spec if policy is not None else judge_label(spec)
    judge: Policy | None = None
    folder.acquire()
    try:
        lines = list(folder.iter_records())  # every line: repeated keys are written back as read
        first: dict[str, int] = {}
        for index, record in enumerate(lines):
            first.setdefault(record_key(record), index)
        unique = sorted(first.values())
        if not unique:
            raise RunFolderError(f"{folder.path} holds no finished games to judge")
        kinds = sorted({env_kind(lines[i]) for i in unique})
        if kinds != ["tomsb"]:
            raise RunFolderError(f"{folder.path}: judging is for TOM-SB runs, it holds {kinds}")
        finished = [
            i
            for i in unique
            if truncation_reason(lines[i]) is None and record_outcome(lines[i]) is not None
        ]
        todo = [
            i
            for i in finished
            if force
            or ((lines[i].get(JUDGE_KEY) or {}).get(label) or {}).get("prompt_version")
            != jp.JUDGE_PROMPT_VERSION
        ]
        judge = policy or make_judge(spec)
        description = judge.describe()
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            entries = judge_entries([lines[i] for i in chunk], judge)
            for i, entry in zip(chunk, entries, strict=True):
                judged = dict(lines[i].get(JUDGE_KEY) or {})
                judged[label] = {
                    "judge": description,
                    "prompt_version": jp.JUDGE_PROMPT_VERSION,
                    **entry,
                }
                lines[i] = {**lines[i], JUDGE_KEY: judged}
            _rewrite(folder, lines)
    finally:
        folder.close()
        if policy is None and judge is not None:
            judge.close()
    records = [lines[i] for i in unique]
    agreement = agreement_summary(records)
    _update_summary(folder, agreement)
    tables.write_tables(folder.path, records)
    return {
        "judge": label,
        "judged": len(todo),
        "skipped": len(finished) - len(todo),
        "unfinished": len(unique) - len(finished),
        "agreement": agreement.get(label, {}),
    }
