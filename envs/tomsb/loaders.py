"""Load TOM-SB scenarios from the published formats and from ours, with one-line errors.

Formats recognised by `load_scenarios(path)`:
- ours: JSONL (one `Scenario.to_dict()` record per line, as written by `benchmark.to_jsonl`), or
  a JSON list/object of such records;
- the published raw scenario: an object with `universe`, `scenario_id`,
  `sensitive_fact{ground_truth, hierarchy}` and
  `agents.attacker.initial_private_beliefs{level: {value, confidence}}` (or a list of them);
- the published transformed training example: an object with the two strings
  `defender_private_information` and `attacker_target_information` (or a list of them, as in
  `three_layered_dataset.json`).

The attacker's prior level is the number of known (non-null) leading levels; a known value that
disagrees with the ground truth, a gap (a known level after an unknown one) or a fully known path
is an error. Every failure raises `ScenarioFileError` (a `UniverseError`) whose single-line
message names the file, the scenario (id, index or line) and the problem.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tomgym.envs.tomsb.universe import DEPTH, Scenario, Universe, UniverseError

from tomgym.json_text import json_document, json_lines


class ScenarioFileError(UniverseError):
    """A scenario file (or one record in it) cannot be loaded; the message says where and why."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


_SCENARIO_PREFIX = re.compile(r"^scenario '[^']*': ")


def _scenario_error(where: str, problem: str) -> ScenarioFileError:
    # `Scenario` itself prefixes its errors with its id; `where` already names it.
    return ScenarioFileError(_one_line(f"{where}: {_SCENARIO_PREFIX.sub('', problem)}"))


# ---------------------------------------------------------------------------------------------
# Shared checks
# ---------------------------------------------------------------------------------------------


def _universe(tree: Any, levels: Sequence[str]) -> Universe:
    if isinstance(tree, Mapping):
        extra = [k for k in tree if k not in levels]
        if extra:
            raise UniverseError(
                f"universe has level(s) {extra} that are not in the hierarchy {list(levels)}"
            )
    return Universe.from_dict(tree, levels)


def _prior_level(prior: Mapping[str, Any], truth: Sequence[str], levels: Sequence[str]) -> int:
    """Number of known leading levels; rejects wrong values, gaps and a fully known path."""
    missing = [lvl for lvl in levels if lvl not in prior]
    if missing:
        raise UniverseError(f"attacker prior lacks level(s) {missing}")
    unknown_levels = [k for k in prior if k not in levels]
    if unknown_levels:
        raise UniverseError(f"attacker prior has unknown level(s) {unknown_levels}")
    known = [prior[lvl] is not None for lvl in levels]
    for lvl, value, true in zip(levels, (prior[lvl] for lvl in levels), truth, strict=True):
        if value is not None and value != true:
            raise UniverseError(
                f"attacker prior says {lvl}={value!r} but the ground truth is {true!r}"
            )
    level = sum(known)
    if known != [True] * level + [False] * (DEPTH - level):
        raise UniverseError(
            f"attacker prior {dict(prior)} is not a prefix of the path "
            "(a known level follows an unknown one)"
        )
    if level == DEPTH:
        raise UniverseError("attacker prior already knows every level (nothing to extract)")
    return level


def _truth(truth: Any, levels: Sequence[str]) -> tuple[str, str, str]:
    if not isinstance(truth, Mapping):
        raise UniverseError(f"ground truth must be an object, got {type(truth).__name__}")
    missing = [lvl for lvl in levels if lvl not in truth]
    if missing:
        raise UniverseError(f"ground truth lacks level(s) {missing}")
    values = tuple(truth[lvl] for lvl in levels)
    if not all(isinstance(v, str) for v in values):
        raise UniverseError(f"ground truth values must be names, got {list(values)}")
    return values  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Raw format
# ---------------------------------------------------------------------------------------------


def _get(obj: Any, *keys: str) -> Any:
    current = obj
    walked: list[str] = []
    for key in keys:
        walked.append(key)
        if not isinstance(current, Mapping) or key not in current:
            raise UniverseError(f"missing field {'.'.join(walked)!r}")
        current = current[key]
    return current


def _raw_to_scenario(obj: Any, where: str, source: str | None) -> Scenario:
    if not isinstance(obj, Mapping):
        raise _scenario_error(
            where, f"a raw scenario must be a JSON object, got {type(obj).__name__}"
        )
    sid = obj.get("scenario_id")
    label = f"{where}, scenario {sid!r}" if isinstance(sid, str) else where
    try:
        if not isinstance(sid, str) or not sid.strip():
            raise UniverseError("missing or empty field 'scenario_id'")
        levels = _get(obj, "sensitive_fact", "hierarchy")
        if (
            not isinstance(levels, list)
            or len(levels) != DEPTH
            or not all(isinstance(x, str) for x in levels)
        ):
            raise UniverseError(
                f"sensitive_fact.hierarchy must list {DEPTH} level names, got {levels!r}"
            )
        universe = _universe(_get(obj, "universe"), levels)
        truth = _truth(_get(obj, "sensitive_fact", "ground_truth"), levels)
        beliefs = _get(obj, "agents", "attacker", "initial_private_beliefs")
        if not isinstance(beliefs, Mapping):
            raise UniverseError("agents.attacker.initial_private_beliefs must be an object")
        prior: dict[str, Any] = {}
        confidence: dict[str, Any] = {}
        for lvl, belief in beliefs.items():
            if not isinstance(belief, Mapping) or "value" not in belief:
                raise UniverseError(
                    f"initial_private_beliefs.{lvl} must be an object with a 'value', got {belief!r}"
                )
            prior[lvl] = belief["value"]
            confidence[lvl] = belief.get("confidence")
        level = _prior_level(prior, truth, levels)
        attacker = obj["agents"]["attacker"].get("name", "Eve")
        defender_info = obj["agents"].get("defender")
        defender = (
            defender_info.get("name", "the subject")
            if isinstance(defender_info, Mapping)
            else "the subject"
        )
        fact_type = obj["sensitive_fact"].get("type")
        return Scenario(
            scenario_id=sid,
            universe=universe,
            ground_truth=truth,
            prior_level=level,
            person=str(defender),
            theme="/".join(levels),
            attacker_name=str(attacker),
            extra=MappingProxyType(
                {
                    "format": "raw",
                    "source": source,
                    "fact_type": fact_type,
                    "prior_confidence": confidence,
                }
            ),
        )
    except UniverseError as exc:
        raise _scenario_error(label, str(exc)) from None


def load_raw_scenario(obj_or_path: Mapping[str, Any] | str | Path) -> Scenario:
    """One scenario in the published raw format, from a parsed object or a JSON file."""
    if isinstance(obj_or_path, str | Path):
        path = Path(obj_or_path)
        return _raw_to_scenario(_read_json(path), str(path), str(path))
    return _raw_to_scenario(obj_or_path, "raw scenario", None)


# ---------------------------------------------------------------------------------------------
# Transformed format
# ---------------------------------------------------------------------------------------------

_DEFENDER_PERSON = re.compile(r"^You are managing information for: *(?P<v>.*?) *$", re.M)
_ATTACKER_NAME = re.compile(r"^Your Name: *(?P<v>.*?) *$", re.M)
_GOAL_TARGET = re.compile(r"^Primary Goal:.*?about the target \((?P<v>[^)]*)\)", re.M)
_UNIVERSE_HEAD = re.compile(r"^Universe\b[^\n]*:[ \t]*$", re.M)
_TRUTH_HEAD = re.compile(r"^Ground Truth Information\b[^\n]*:[ \t]*$", re.M)
_PRIOR_HEAD = re.compile(r"^Your Initial Private Beliefs\b[^\n]*:[ \t]*$", re.M)
_DECODER = json.JSONDecoder()


def _json_after(text: str, head: re.Pattern[str], field: str, what: str) -> Any:
    """The JSON value that starts on the line after the header `head` in `text`."""
    match = head.search(text)
    if match is None:
        raise UniverseError(f"{field} has no '{what}' section")
    start = match.end()
    while start < len(text) and text[start].isspace():
        start += 1
    try:
        value, _ = _DECODER.raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise UniverseError(
            f"{field}: the {what} JSON is malformed ({exc.msg} at char {exc.pos})"
        ) from None
    return value


def _line_value(text: str, pattern: re.Pattern[str], field: str, what: str) -> str:
    match = pattern.search(text)
    if match is None or not match.group("v"):
        raise UniverseError(f"{field} has no {what}")
    return match.group("v")


def _transformed_to_scenario(
    obj: Any, where: str, scenario_id: str, source: str | None
) -> Scenario:
    try:
        if not isinstance(obj, Mapping):
            raise UniverseError(
                f"a transformed example must be a JSON object, got {type(obj).__name__}"
            )
        texts = {}
        for key in ("defender_private_information", "attacker_target_information"):
            if not isinstance(obj.get(key), str):
                raise UniverseError(f"missing or non-text field {key!r}")
            texts[key] = obj[key]
        dtext = texts["defender_private_information"]
        atext = texts["attacker_target_information"]
        tree = _json_after(dtext, _UNIVERSE_HEAD, "defender_private_information", "Universe")
        attacker_tree = _json_after(
            atext, _UNIVERSE_HEAD, "attacker_target_information", "Universe"
        )
        if tree != attacker_tree:
            raise UniverseError("the defender's and the attacker's universes differ")
        if not isinstance(tree, Mapping):
            raise UniverseError(f"universe must be a JSON object, got {type(tree).__name__}")
        levels = list(tree)
        universe = _universe(tree, levels)
        truth_obj = _json_after(
            dtext, _TRUTH_HEAD, "defender_private_information", "Ground Truth Information"
        )
        truth = _truth(truth_obj, levels)
        prior = _json_after(
            atext, _PRIOR_HEAD, "attacker_target_information", "Initial Private Beliefs"
        )
        if not isinstance(prior, Mapping):
            raise UniverseError(f"attacker prior must be a JSON object, got {type(prior).__name__}")
        level = _prior_level(prior, truth, levels)
        person = _line_value(dtext, _DEFENDER_PERSON, "defender_private_information", "person name")
        attacker = _line_value(
            atext, _ATTACKER_NAME, "attacker_target_information", "attacker name"
        )
        target = _GOAL_TARGET.search(atext)
        if target is not None and target.group("v") != person:
            raise UniverseError(
                f"the attacker's target {target.group('v')!r} is not the defender's person {person!r}"
            )
        return Scenario(
            scenario_id=scenario_id,
            universe=universe,
            ground_truth=truth,
            prior_level=level,
            person=person,
            theme="/".join(levels),
            attacker_name=attacker,
            extra=MappingProxyType({"format": "transformed", "source": source}),
        )
    except UniverseError as exc:
        raise _scenario_error(where, str(exc)) from None


def load_transformed_example(
    obj: Mapping[str, Any], index: int, *, source: str | None = None
) -> Scenario:
    """One published transformed example; its id is `{source stem or 'transformed'}-{index:04d}`."""
    stem = Path(source).stem if source else "transformed"
    where = f"{source or 'transformed example'}, example #{index}"
    return _transformed_to_scenario(obj, where, f"{stem}-{index:04d}", source)


# ---------------------------------------------------------------------------------------------
# Our format and auto-detection
# ---------------------------------------------------------------------------------------------

_OUR_KEYS = ("scenario_id", "hierarchy", "universe", "ground_truth", "prior_level")


def _ours_to_scenario(obj: Any, where: str, source: str | None) -> Scenario:
    if not isinstance(obj, Mapping):
        raise _scenario_error(where, f"a scenario must be a JSON object, got {type(obj).__name__}")
    sid = obj.get("scenario_id")
    label = f"{where}, scenario {sid!r}" if isinstance(sid, str) else where
    try:
        missing = [k for k in _OUR_KEYS if k not in obj]
        if missing:
            raise UniverseError(f"missing field(s) {missing}")
        levels = obj["hierarchy"]
        if (
            not isinstance(levels, list)
            or len(levels) != DEPTH
            or not all(isinstance(x, str) for x in levels)
        ):
            raise UniverseError(f"hierarchy must list {DEPTH} level names, got {levels!r}")
        _universe(obj["universe"], levels)
        truth = _truth(obj["ground_truth"], levels)
        prior_level = obj["prior_level"]
        if isinstance(prior_level, bool) or prior_level not in (0, 1, 2):
            raise UniverseError(f"prior_level must be 0, 1 or 2, got {prior_level!r}")
        if "prior" in obj:
            # The redundant prior must agree with prior_level, so a hand-edited file cannot
            # silently disagree with itself.
            if not isinstance(obj["prior"], Mapping):
                raise UniverseError("prior must be an object")
            if _prior_level(obj["prior"], truth, levels) != prior_level:
                raise UniverseError(
                    f"prior {dict(obj['prior'])} does not match prior_level {prior_level}"
                )
        scenario = Scenario.from_dict(obj)
    except UniverseError as exc:
        raise _scenario_error(label, str(exc)) from None
    extra = obj.get("extra") or {}
    if not isinstance(extra, Mapping):
        raise _scenario_error(label, "extra must be an object")
    # No "source" is added: a file we wrote reads back into exactly the scenarios written.
    merged = dict(extra)
    if "split" in obj and obj["split"] is not None:
        merged["split"] = obj["split"]
    if "universe_id" in obj and obj["universe_id"] is not None:
        merged["universe_id"] = obj["universe_id"]
    return Scenario(
        scenario_id=scenario.scenario_id,
        universe=scenario.universe,
        ground_truth=scenario.ground_truth,
        prior_level=scenario.prior_level,
        person=scenario.person,
        theme=scenario.theme,
        attacker_name=scenario.attacker_name,
        extra=MappingProxyType(merged),
    )


def detect_format(obj: Any) -> str:
    """ "ours", "raw", "transformed" or "unknown" for one parsed record."""
    if not isinstance(obj, Mapping):
        return "unknown"
    if "defender_private_information" in obj or "attacker_target_information" in obj:
        return "transformed"
    if "sensitive_fact" in obj:
        return "raw"
    if "hierarchy" in obj and "prior_level" in obj:
        return "ours"
    return "unknown"


def scenario_from_record(
    obj: Any, *, where: str, index: int, source: str | None = None
) -> Scenario:
    """Parse one record of any recognised format (`where` names it in errors)."""
    kind = detect_format(obj)
    if kind == "ours":
        return _ours_to_scenario(obj, where, source)
    if kind == "raw":
        return _raw_to_scenario(obj, where, source)
    if kind == "transformed":
        stem = Path(source).stem if source else "transformed"
        return _transformed_to_scenario(obj, where, f"{stem}-{index:04d}", source)
    got = f"keys {sorted(obj)[:8]}" if isinstance(obj, Mapping) else type(obj).__name__
    raise _scenario_error(
        where,
        f"not a recognised scenario (ours, raw or transformed); got {got}",
    )


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ScenarioFileError(f"{path}: is a directory, not a scenario file") from None
    except UnicodeDecodeError as exc:
        raise ScenarioFileError(
            f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    except OSError as exc:
        raise ScenarioFileError(_one_line(f"{path}: cannot read ({exc.strerror or exc})")) from None


def _read_json(path: Path) -> Any:
    return json_document(_read_text(path), path, ScenarioFileError)


def _looks_like_jsonl(path: Path, text: str) -> bool:
    if path.suffix == ".jsonl":
        return True
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2 or not lines[0].lstrip().startswith("{"):
        return False
    try:
        json.loads(lines[0])
    except json.JSONDecodeError:
        return False
    return True


def load_scenarios(path: str | Path) -> list[Scenario]:
    """Every scenario in `path`, whatever its recognised format (see module docstring)."""
    path = Path(path)
    text = _read_text(path)
    if not text.strip():
        raise ScenarioFileError(f"{path}: file is empty")
    source = str(path)
    scenarios: list[Scenario] = []
    if _looks_like_jsonl(path, text):
        for lineno, obj in json_lines(text.splitlines(), path, ScenarioFileError):
            where = f"{path}:{lineno}"
            scenarios.append(
                scenario_from_record(obj, where=where, index=len(scenarios), source=source)
            )
    else:
        data = json_document(text, path, ScenarioFileError)
        if (
            isinstance(data, Mapping)
            and detect_format(data) == "unknown"
            and isinstance(data.get("scenarios"), list)
        ):
            data = data["scenarios"]
        records = data if isinstance(data, list) else [data]
        if isinstance(data, list) and not data:
            raise ScenarioFileError(f"{path}: the JSON list holds no scenarios")
        for i, obj in enumerate(records):
            where = f"{path}, record #{i}" if isinstance(data, list) else str(path)
            scenarios.append(scenario_from_record(obj, where=where, index=i, source=source))
    if not scenarios:
        raise ScenarioFileError(f"{path}: no scenarios found")
    seen: dict[str, int] = {}
    for i, scenario in enumerate(scenarios):
        if scenario.scenario_id in seen:
            raise ScenarioFileError(
                f"{path}: scenario id {scenario.scenario_id!r} appears twice "
                f"(records #{seen[scenario.scenario_id]} and #{i})"
            )
        seen[scenario.scenario_id] = i
    return scenarios
