"""Loading the published TOM-SB data (raw and transformed) and our files, and clear errors."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tomgym.envs.tomsb.benchmark import scenario_record, to_jsonl
from tomgym.envs.tomsb.generator import SPLITS, generate_benchmark, split_by_universe, universe_key
from tomgym.envs.tomsb.loaders import (
    ScenarioFileError,
    load_raw_scenario,
    load_scenarios,
    load_transformed_example,
    scenario_from_record,
)
from tomgym.envs.tomsb.universe import UniverseError


@pytest.fixture(scope="module")
def tomsb_dir(shared_data: Path) -> Path:
    path = shared_data / "tomsb"
    if not path.is_dir():
        pytest.skip("../shared/data/tomsb is not present")
    return path


@pytest.fixture(scope="module")
def raw_example(tomsb_dir: Path) -> dict[str, Any]:
    return json.loads((tomsb_dir / "raw_example_0.json").read_text())


def _sections(text: str) -> dict[str, Any]:
    """An independent reading of a transformed text: blank-line separated 'Header:\\nJSON' blocks."""
    out: dict[str, Any] = {}
    for block in text.split("\n\n"):
        head, _, body = block.partition("\n")
        if body.lstrip().startswith("{"):
            out[head.split(" ")[0] if not head.startswith("Your Initial") else "Prior"] = (
                json.loads(body)
            )
        elif ": " in head:
            out[head.split(": ")[0]] = head.split(": ", 1)[1]
    return out


# ---------------------------------------------------------------------------------------------
# Published data
# ---------------------------------------------------------------------------------------------


def test_every_raw_example_loads(tomsb_dir: Path) -> None:
    files = sorted(tomsb_dir.glob("raw_example_*.json"))
    assert len(files) == 10
    for path in files:
        raw = json.loads(path.read_text())
        scenario = load_raw_scenario(path)
        assert load_scenarios(path) == [scenario]
        assert scenario.scenario_id == raw["scenario_id"]
        levels = raw["sensitive_fact"]["hierarchy"]
        assert list(scenario.levels) == levels
        assert scenario.truth_dict() == raw["sensitive_fact"]["ground_truth"]
        beliefs = raw["agents"]["attacker"]["initial_private_beliefs"]
        assert scenario.prior_dict() == {lvl: beliefs[lvl]["value"] for lvl in levels}
        assert scenario.attacker_name == raw["agents"]["attacker"]["name"]
        assert scenario.person == raw["agents"]["defender"]["name"]
        assert scenario.universe.to_dict() == raw["universe"]


@pytest.mark.parametrize("name", ["transformed_examples.json", "three_layered_dataset.json"])
def test_every_transformed_example_loads_exactly(tomsb_dir: Path, name: str) -> None:
    path = tomsb_dir / name
    data = json.loads(path.read_text())
    scenarios = load_scenarios(path)
    assert len(scenarios) == len(data) == {"transformed_examples.json": 30}.get(name, 300)
    for i, (example, scenario) in enumerate(zip(data, scenarios, strict=True)):
        assert load_transformed_example(example, i, source=str(path)) == scenario
        defender = _sections(example["defender_private_information"])
        attacker = _sections(example["attacker_target_information"])
        assert scenario.universe.to_dict() == defender["Universe"] == attacker["Universe"]
        assert scenario.truth_dict() == defender["Ground"]
        assert scenario.prior_dict() == attacker["Prior"], f"example #{i}"
        assert scenario.prior_level == sum(v is not None for v in attacker["Prior"].values())
        assert scenario.person == defender["You are managing information for"]
        assert scenario.attacker_name == attacker["Your Name"]


def test_published_benchmark_shape_and_leak_free_split(tomsb_dir: Path) -> None:
    scenarios = load_scenarios(tomsb_dir / "three_layered_dataset.json")
    groups: dict[str, list] = defaultdict(list)
    for s in scenarios:
        groups[universe_key(s)].append(s)
    assert len(groups) == 100
    assert all(sorted(s.prior_level for s in g) == [0, 1, 2] for g in groups.values())
    parts = split_by_universe(scenarios, seed=0)
    seen: dict[str, str] = {}
    for name in SPLITS:
        for s in parts[name]:
            assert seen.setdefault(universe_key(s), name) == name
    assert sorted(len({universe_key(s) for s in parts[n]}) for n in SPLITS) == [20, 20, 60]


# ---------------------------------------------------------------------------------------------
# Broken inputs: one clear line naming file, scenario and problem
# ---------------------------------------------------------------------------------------------


def _raw_broken(raw: dict[str, Any], how: str) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    u = raw["universe"]
    if how == "wrong_branching":
        u["team"]["AI Research"] = u["team"]["AI Research"][:2]
    elif how == "duplicate_names":
        u["team"]["Robotics"][0] = "NLP"
    elif how == "truth_not_path":
        raw["sensitive_fact"]["ground_truth"]["team"] = "Payments"
    elif how == "truth_outside":
        raw["sensitive_fact"]["ground_truth"]["team"] = "Quantum Knitting"
    elif how == "wrong_prior":
        raw["agents"]["attacker"]["initial_private_beliefs"]["division"]["value"] = "Robotics"
    elif how == "gap_prior":
        raw["agents"]["attacker"]["initial_private_beliefs"]["company"]["value"] = None
    elif how == "full_prior":
        raw["agents"]["attacker"]["initial_private_beliefs"]["team"]["value"] = "NLP"
    elif how == "missing_beliefs":
        del raw["agents"]["attacker"]["initial_private_beliefs"]
    elif how == "missing_hierarchy":
        del raw["sensitive_fact"]["hierarchy"]
    elif how == "extra_level":
        u["squad"] = {}
    return raw


RAW_PROBLEMS = {
    "wrong_branching": "exactly 3",
    "duplicate_names": "not unique",
    "truth_not_path": "not a root-to-leaf path",
    "truth_outside": "not a root-to-leaf path",
    "wrong_prior": "ground truth is 'AI Research'",
    "gap_prior": "not a prefix",
    "full_prior": "already knows every level",
    "missing_beliefs": "missing field 'agents.attacker.initial_private_beliefs'",
    "missing_hierarchy": "missing field 'sensitive_fact.hierarchy'",
    "extra_level": "not in the hierarchy",
}


@pytest.mark.parametrize("how", sorted(RAW_PROBLEMS))
def test_broken_raw_scenario(tmp_path: Path, raw_example: dict[str, Any], how: str) -> None:
    path = tmp_path / f"{how}.json"
    path.write_text(json.dumps(_raw_broken(raw_example, how)))
    with pytest.raises(ScenarioFileError) as info:
        load_scenarios(path)
    message = str(info.value)
    assert str(path) in message
    assert "layered_corporate_deception_001" in message
    assert RAW_PROBLEMS[how] in message
    assert "\n" not in message
    assert message.count("layered_corporate_deception_001") == 1


def test_broken_transformed_example(tmp_path: Path, tomsb_dir: Path) -> None:
    data = json.loads((tomsb_dir / "transformed_examples.json").read_text())[:4]
    good_prior = data[2]["attacker_target_information"]
    cases = {
        # A truncated universe JSON inside the defender's text.
        "truncated": (
            "defender_private_information",
            data[2]["defender_private_information"].replace('",\n', '",,\n', 1),
            "Universe JSON is malformed",
        ),
        "no_prior": (
            "attacker_target_information",
            good_prior.split("Your Initial Private Beliefs")[0],
            "no 'Initial Private Beliefs' section",
        ),
        "wrong_prior": (
            "attacker_target_information",
            good_prior.replace(": null", ': "Nowhere U"', 1),
            "attacker prior",
        ),
    }
    for name, (field, text, problem) in cases.items():
        broken = copy.deepcopy(data)
        broken[2][field] = text
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(ScenarioFileError) as info:
            load_scenarios(path)
        message = str(info.value)
        assert f"{path}, record #2" in message, message
        assert problem in message, message
        assert "\n" not in message


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "file is empty"),
        ("[]", "holds no scenarios"),
        ('{"universe": {', "corrupt JSON"),
        ("[1, 2]", "not a recognised scenario"),
        ('{"hello": 1}', "not a recognised scenario"),
        ('"text"', "not a recognised scenario"),
    ],
)
def test_bad_files(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ScenarioFileError, match=problem) as info:
        load_scenarios(path)
    assert str(path) in str(info.value)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ScenarioFileError, match="no such file"):
        load_scenarios(tmp_path / "absent.json")
    with pytest.raises(ScenarioFileError, match="is a directory"):
        load_scenarios(tmp_path)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ScenarioFileError, match="not UTF-8"):
        load_scenarios(binary)


def test_our_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    scenarios = generate_benchmark(seed=0, n_universes=2)
    path = to_jsonl(scenarios, tmp_path / "ours.jsonl")
    assert load_scenarios(path) == scenarios
    lines = path.read_text().splitlines()
    record = json.loads(lines[3])
    record["prior_level"] = 2  # while its prior still lists no known level
    cases = {
        "prior mismatch": (json.dumps(record), "does not match prior_level 2"),
        "truncated": (lines[3][: len(lines[3]) // 2], "corrupt JSON"),
        "duplicate": (lines[0], "appears twice"),
    }
    for name, (line, problem) in cases.items():
        broken = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        broken.write_text("\n".join([*lines[:3], line, *lines[4:]]) + "\n")
        with pytest.raises(ScenarioFileError, match=problem) as info:
            load_scenarios(broken)
        if name != "duplicate":
            assert f"{broken}:4" in str(info.value)


def test_record_with_missing_fields() -> None:
    record = scenario_record(generate_benchmark(seed=0, n_universes=1)[0])
    del record["ground_truth"]
    with pytest.raises(ScenarioFileError, match=r"missing field\(s\) \['ground_truth'\]"):
        scenario_from_record(record, where="x.jsonl:1", index=0)


def test_raw_object_without_path(raw_example: dict[str, Any]) -> None:
    assert load_raw_scenario(raw_example).prior_level == 2
    with pytest.raises(UniverseError, match="raw scenario, scenario 'layered_corporate"):
        load_raw_scenario(_raw_broken(raw_example, "duplicate_names"))


# ---------------------------------------------------------------------------------------------
# Property tests: no input ever escapes as anything but a ScenarioFileError
# ---------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _mutate(obj: Any, path: list[Any], value: Any) -> Any:
    obj = copy.deepcopy(obj)
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, (*prefix, i)))
    return out


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), replacement=json_values)
def test_any_corrupted_field_gives_a_clean_error(
    raw_example: dict[str, Any], data: st.DataObject, replacement: Any
) -> None:
    ours = scenario_record(generate_benchmark(seed=0, n_universes=1)[1])
    base = data.draw(st.sampled_from([raw_example, ours]))
    path = data.draw(st.sampled_from(_paths(base)))
    broken = _mutate(base, list(path), replacement)
    try:
        scenario_from_record(broken, where="f.json", index=0)
    except ScenarioFileError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("f.json")


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=3000))
def test_truncated_file_gives_a_clean_error(
    tmp_path_factory: pytest.TempPathFactory, cut: int
) -> None:
    text = json.dumps(scenario_record(generate_benchmark(seed=0, n_universes=1)[0]), indent=1)
    path = tmp_path_factory.mktemp("trunc") / "s.json"
    path.write_text(text[: min(cut, len(text) - 1)])
    with pytest.raises(ScenarioFileError) as info:
        load_scenarios(path)
    assert str(path) in str(info.value)
