"""`tomgym scenarios generate|validate` through the handlers and as a real process."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tomgym.envs.tomsb.benchmark import from_jsonl, load_benchmark
from tomgym.scripts.scenarios_cmd import add_subparser, run_scenarios_cli

REPO = Path(__file__).resolve().parents[2]


def test_generate_writes_all_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    assert run_scenarios_cli(["generate", "--out", str(out), "--seed", "0"]) == 0
    counts = {
        name: len(from_jsonl(out / f"{name}.jsonl"))
        for name in ("train", "validation", "test", "all")
    }
    assert counts == {"train": 180, "validation": 60, "test": 60, "all": 300}
    assert from_jsonl(out / "all.jsonl") == list(load_benchmark(0).scenarios)
    stdout = capsys.readouterr().out
    assert "train.jsonl: 180 scenarios, 60 universes" in stdout
    datasets = pytest.importorskip("datasets")
    hf = datasets.load_from_disk(str(out / "hf"))
    assert {k: v.num_rows for k, v in hf.items()} == {"train": 180, "validation": 60, "test": 60}
    assert set(hf["test"]["split"]) == {"test"}


def test_generate_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    assert run_scenarios_cli(["generate", "--out", str(out), "--universes", "5"]) == 0
    before = (out / "all.jsonl").read_bytes()
    capsys.readouterr()
    assert (
        run_scenarios_cli(["generate", "--out", str(out), "--seed", "3", "--universes", "5"]) == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--force" in err[0]
    assert (out / "all.jsonl").read_bytes() == before
    args = ["generate", "--out", str(out), "--seed", "3", "--universes", "5", "--force"]
    assert run_scenarios_cli(args) == 0
    assert (out / "all.jsonl").read_bytes() != before
    assert len(from_jsonl(out / "all.jsonl")) == 15


def test_validate_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    run_scenarios_cli(["generate", "--out", str(out), "--universes", "10"])
    capsys.readouterr()
    assert run_scenarios_cli(["validate", str(out / "all.jsonl")]) == 0
    stdout = capsys.readouterr().out
    assert "30 valid scenarios over 10 universes" in stdout
    assert "prior level: 0: 10, 1: 10, 2: 10" in stdout
    assert "split: train: 18, validation: 6, test: 6" in stdout


def test_validate_published_files(shared_data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tomsb = shared_data / "tomsb"
    assert run_scenarios_cli(["validate", str(tomsb / "three_layered_dataset.json")]) == 0
    stdout = capsys.readouterr().out
    assert "300 valid scenarios over 100 universes" in stdout
    assert "prior level: 0: 100, 1: 100, 2: 100" in stdout
    assert "split: not recorded" in stdout
    assert run_scenarios_cli(["validate", str(tomsb / "raw_example_3.json")]) == 0


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ")
    assert "Traceback" not in captured.err
    return lines[0]


def test_validate_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"universe": {"company": ["A", "B"')
    assert run_scenarios_cli(["validate", str(bad)]) == 1
    assert "corrupt JSON" in _one_error_line(capsys)
    assert run_scenarios_cli(["validate", str(tmp_path / "missing.jsonl")]) == 1
    assert "no such file" in _one_error_line(capsys)


def test_validate_detects_universe_leak(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    run_scenarios_cli(["generate", "--out", str(out), "--universes", "5"])
    lines = (out / "all.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["split"] = "test" if record["split"] != "test" else "train"
    leaky = tmp_path / "leaky.jsonl"
    leaky.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    capsys.readouterr()
    assert run_scenarios_cli(["validate", str(leaky)]) == 1
    assert "more than one split" in _one_error_line(capsys)


def test_too_few_universes_fail_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "few"
    assert run_scenarios_cli(["generate", "--out", str(out), "--universes", "2"]) == 1
    line = _one_error_line(capsys)
    assert "no universe for the test split" in line and "--universes 4" in line
    assert not out.exists()
    assert run_scenarios_cli(["generate", "--out", str(out), "--universes", "4"]) == 0
    capsys.readouterr()
    for split in ("train", "validation", "test"):
        assert run_scenarios_cli(["validate", str(out / f"{split}.jsonl")]) == 0


def test_add_subparser_wires_into_a_main_parser(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser(prog="tomgym")
    add_subparser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["scenarios", "generate", "--out", str(tmp_path / "x"), "--universes", "4"]
    )
    assert args.command == "scenarios"
    assert args.func(args) == 0
    assert len(from_jsonl(tmp_path / "x" / "all.jsonl")) == 12
    assert parser.parse_args(["scenarios"]).func(parser.parse_args(["scenarios"])) == 2


def test_real_process_prints_one_line_and_fails(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"scenario_id": "s1", "hierarchy": ["a", "b", "c"], "universe": {}, '
        '"ground_truth": {}, "prior_level": 0}\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "tomgym.scripts.scenarios_cmd", "validate", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"{bad}:1, scenario 's1'" in lines[0]
