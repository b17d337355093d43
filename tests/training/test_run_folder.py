"""Run-folder guarantees: one writer (OS lock naming the holder's PID, no stale lock after a
kill), resume only with the exact configuration and run kind, one record per game id, nothing
secret stored, and `report` refusing mixed-environment folders without writing anything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tomgym.training.eval.jobs import evaluate_tomsb
from tomgym.training.run_folder import (
    RunFolder,
    RunFolderError,
    RunFolderLocked,
    config_diff,
)

from tests.cli import run_tomgym

DECRYPTO_RANDOM = [f"--agent={a}=random" for a in ("encoder_0", "decoder_0", "interceptor_0")]
CONFIG = {"command": "play", "env_id": "x", "seed": 0, "env_config": {}, "concurrency": 2}

HOLDER = """
import sys, time
from tomgym.training.run_folder import RunFolder
folder = RunFolder(sys.argv[1])
folder.start({"command": "play", "env_id": "x", "seed": 0, "env_config": {}}, resume=False)
print("locked", flush=True)
time.sleep(120)
"""


def _holder(path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_second_writer_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    out = tmp_path / "run"
    holder = _holder(out)
    try:
        for resume in (False, True):
            with pytest.raises(RunFolderLocked, match=rf"in use by process {holder.pid}\b") as info:
                RunFolder(out).start(CONFIG, resume=resume)
            assert info.value.pid == holder.pid
            assert "\n" not in str(info.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel released the dead holder's lock: no stale lock blocks the next run.
    folder = RunFolder(out)
    folder.start(CONFIG, resume=True)
    assert folder.locked and (out / ".lock").read_text().strip() == str(os.getpid())
    folder.close()


def test_lock_is_held_until_close_and_refusals_release_it(tmp_path: Path) -> None:
    first = RunFolder(tmp_path / "run")
    first.start(CONFIG, resume=False)
    with pytest.raises(RunFolderLocked):
        RunFolder(tmp_path / "run").start(CONFIG, resume=True)
    first.close()
    second = RunFolder(tmp_path / "run")
    with pytest.raises(RunFolderError, match="seed 0 -> 1"):
        second.start({**CONFIG, "seed": 1}, resume=True)
    assert not second.locked  # a refused start leaves the folder unlocked
    with RunFolder(tmp_path / "run") as third:
        third.start(CONFIG, resume=True)
        assert third.locked
    assert not third.locked


@pytest.mark.parametrize(
    ("change", "diff"),
    [
        ({"env_config": {"max_attacker_turns": 3}}, "env_config.max_attacker_turns unset -> 3"),
        ({"options": {"split": "train"}}, 'options.split "test" -> "train"'),
        ({"options": {"split": "test", "prior_level": 2}}, "options.prior_level unset -> 2"),
        ({"games": 5}, "games 4 -> 5"),
        ({"agents": {"defender_0": "scripted:naive"}}, "agents.defender_0"),
    ],
)
def test_resume_refuses_every_kind_of_config_change(
    tmp_path: Path, change: dict, diff: str
) -> None:
    base = {**CONFIG, "games": 4, "options": {"split": "test"}, "agents": {"defender_0": "a"}}
    folder = RunFolder(tmp_path / "run")
    folder.start(base, resume=False)
    folder.close()
    before = folder.config_path.read_bytes()
    with pytest.raises(RunFolderError) as info:
        RunFolder(tmp_path / "run").start({**base, **change}, resume=True)
    message = str(info.value)
    assert message.startswith("--resume refused: ") and diff in message and "\n" not in message
    assert folder.config_path.read_bytes() == before  # never rewritten before (or after) the check
    # how many games run at once changes no record: a resume may change it
    RunFolder(tmp_path / "run").start({**base, "concurrency": 16}, resume=True)


def test_play_resume_refuses_changed_options_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "play"
    base = ["play", "tomsb", "--agent", "defender_0=scripted:naive", "--games", "2"]
    assert run_tomgym(*base, "--out", str(out)).returncode == 0
    config = (out / "config.yaml").read_bytes()
    games = (out / "games.jsonl").read_bytes()
    for change, diff in (
        (["--max-attacker-turns", "3"], "env_config.max_attacker_turns unset -> 3"),
        (["--split", "train"], 'options.split "test" -> "train"'),
        (["--prior-level", "2"], "options.prior_level unset -> 2"),
        (["--seed", "4"], "seed 0 -> 4"),
    ):
        result = run_tomgym(*base, "--out", str(out), "--resume", *change)
        assert result.returncode == 1
        assert result.stderr.startswith(f"error: --resume refused: {diff} ("), result.stderr
        assert result.stderr.strip().count("\n") == 0
    assert (out / "config.yaml").read_bytes() == config
    assert (out / "games.jsonl").read_bytes() == games


def test_config_diff_reports_each_leaf() -> None:
    old = {"a": 1, "b": {"c": 2, "d": [1]}, "gone": True, "empty": {}}
    new = {"a": 1, "b": {"c": 3, "d": [1, 2]}, "concurrency": 9, "empty": {"x": 0}}
    assert config_diff(old, new) == [
        "b.c 2 -> 3",
        "b.d [1] -> [1, 2]",
        "empty.x unset -> 0",
        "gone true -> unset",
    ]


def test_config_diff_compares_weights_only_where_both_configs_hold_them() -> None:
    old = {"defender": "hf:m", "weights": {"defender": "sha256:aa"}}
    assert config_diff(old, {**old, "weights": {"defender": "sha256:bb"}}) == [
        'weights.defender "sha256:aa" -> "sha256:bb"'
    ]
    # A folder written before fingerprints were stored, or a model deleted since: unchecked.
    assert config_diff({"defender": "hf:m"}, old) == []
    assert config_diff(old, {"defender": "hf:m"}) == []
    assert config_diff(old, {**old, "weights": {"base": "sha256:cc"}}) == []


def test_resume_refuses_a_model_retrained_at_the_same_path(tmp_path: Path) -> None:
    from tomgym.agents.policies import make_policy

    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"first")
    spec = f"hf:{model},temperature=0"
    # The games are the naive liar's: what is checked is the stored fingerprint, not the play.
    kwargs = {
        "attackers": ["base"], "episodes_per_scenario": 1, "seeds": 1, "max_scenarios": 2,
        "concurrency": 1, "policy_factory": lambda s, seed: make_policy(
            "scripted:naive" if s == spec else s, seed=seed
        ),
    }  # fmt: skip
    out = tmp_path / "eval"
    evaluate_tomsb(spec, out_dir=out, **kwargs)
    stored = yaml.safe_load((out / "config.yaml").read_text(encoding="utf-8"))
    assert set(stored["weights"]) == {"defender"}  # the scripted attacker loads no file
    evaluate_tomsb(spec, out_dir=out, resume=True, **kwargs)  # the same weights resume
    (model / "model.safetensors").write_bytes(b"again")
    games = (out / "games.jsonl").read_bytes()
    with pytest.raises(RunFolderError, match=r"--resume refused: weights\.defender "):
        evaluate_tomsb(spec, out_dir=out, resume=True, **kwargs)
    assert (out / "games.jsonl").read_bytes() == games
    # A folder written before fingerprints were stored resumes as it did.
    del stored["weights"]
    (out / "config.yaml").write_text(yaml.safe_dump(stored, sort_keys=False), encoding="utf-8")
    evaluate_tomsb(spec, out_dir=out, resume=True, **kwargs)


def test_resume_refuses_another_run_kind(tmp_path: Path) -> None:
    small = {"attackers": ["base"], "episodes_per_scenario": 1, "seeds": 1, "max_scenarios": 1}
    eval_dir = tmp_path / "eval"
    evaluate_tomsb("scripted:naive", out_dir=eval_dir, concurrency=1, **small)
    before = (eval_dir / "games.jsonl").read_bytes()
    played = run_tomgym(
        "play", "tomsb", "--agent", "defender_0=scripted:naive", "--games", "1",
        "--out", str(eval_dir), "--resume",
    )  # fmt: skip
    assert played.returncode == 1, played.stderr
    assert "holds a run of kind eval_tomsb, this one is play" in played.stderr
    assert played.stderr.strip().count("\n") == 0
    play_dir = tmp_path / "play"
    first = run_tomgym(
        "play", "tomsb", "--agent", "defender_0=scripted:naive", "--games", "1",
        "--out", str(play_dir),
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    with pytest.raises(RunFolderError, match="holds a run of kind play, this one is eval_tomsb"):
        evaluate_tomsb("scripted:naive", out_dir=play_dir, resume=True, concurrency=1, **small)
    assert (eval_dir / "games.jsonl").read_bytes() == before
    assert len((play_dir / "games.jsonl").read_text().splitlines()) == 1


def _records_with_duplicates(tmp_path: Path) -> Path:
    out = tmp_path / "eval"
    small = {"attackers": ["base"], "episodes_per_scenario": 1, "seeds": 1, "max_scenarios": 3}
    evaluate_tomsb("scripted:naive", out_dir=out, concurrency=2, **small)
    lines = (out / "games.jsonl").read_text().splitlines(keepends=True)
    # what two unlocked writers of an older version left behind: every game twice
    (out / "games.jsonl").write_text("".join(lines + lines))
    return out


def test_records_and_summaries_count_each_game_id_once(tmp_path: Path) -> None:
    from tomgym.training.eval.metrics import summarize

    out = _records_with_duplicates(tmp_path)
    folder = RunFolder(out)
    records = folder.records()
    assert len(records) == 3 and len(folder.duplicates) == 3
    assert folder.duplicate_keys() == folder.duplicates
    raw = [json.loads(line) for line in (out / "games.jsonl").read_text().splitlines()]
    summary = summarize(raw, ["attacker"])
    assert summary["n"] == 3 and summary["overall"]["n"] == 3
    assert summary["duplicate_keys"] == folder.duplicates


def test_report_warns_about_duplicates_and_check_names_them(tmp_path: Path) -> None:
    out = _records_with_duplicates(tmp_path)
    keys = RunFolder(out).duplicate_keys()
    check = run_tomgym("report", str(out), "--check")
    assert check.returncode == 1
    assert check.stderr.startswith("warning: ") and all(k in check.stderr for k in keys)
    report = run_tomgym("report", str(out), "--quiet")
    assert report.returncode == 0, report.stderr
    assert "repeats 3 game id(s)" in report.stderr
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "games.jsonl").write_text((out / "games.jsonl").read_text().split("\n", 3)[0] + "\n")
    assert run_tomgym("report", str(clean), "--check").returncode == 0


def test_report_refuses_mixed_environments_and_writes_nothing(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    plays = {
        "tomsb": ["--agent", "defender_0=scripted:naive", "--max-attacker-turns", "2"],
        "decrypto": [*DECRYPTO_RANDOM, "--max-rounds", "2"],
    }
    for game, extra in plays.items():
        done = run_tomgym("play", game, *extra, "--games", "1", "--out", str(tmp_path / game))
        assert done.returncode == 0, done.stderr
    mixed.mkdir()
    (mixed / "games.jsonl").write_text(
        (tmp_path / "tomsb" / "games.jsonl").read_text()
        + (tmp_path / "decrypto" / "games.jsonl").read_text()
    )
    result = run_tomgym("report", str(mixed))
    assert result.returncode == 1
    assert result.stderr.startswith("error: records mix environments")
    assert result.stderr.strip().count("\n") == 0
    assert sorted(p.name for p in mixed.iterdir()) == ["games.jsonl"]  # no partial tables/


def test_inline_api_key_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    secret = "sk-inline-0123456789abcdef"
    out = tmp_path / "run"
    result = run_tomgym(
        "play", "tomsb", "--agent",
        f"defender_0=openai:gpt-test,base_url=http://127.0.0.1:9/v1,api_key={secret}",
        "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.lower().count("inline api") == 1  # refused by the spec parser
    assert secret not in result.stderr + result.stdout
    assert not out.exists()
    with pytest.raises(RunFolderError, match="inline API key"):
        RunFolder(out).start({"agents": {"a": f"openai:m,api_key={secret}"}}, resume=False)
    assert not out.exists()


def test_config_records_and_summary_are_redacted(tmp_path: Path, monkeypatch) -> None:
    from tomgym import redaction

    secret = "sk-stored-0123456789abcdef"
    redaction.register_secret("tok-registered-value-123")
    folder = RunFolder(tmp_path / "run")
    folder.start({"command": "play", "note": f"Bearer {secret}"}, resume=False)
    folder.append({"game_id": "g", "turns": [{"raw": "Authorization: tok-registered-value-123"}]})
    folder.write_summary({"config": folder.config(), "error": f"api_key={secret}"})
    folder.close()
    for path in (tmp_path / "run").iterdir():
        text = path.read_text()
        assert secret not in text and "tok-registered-value-123" not in text, path.name
    assert yaml.safe_load(folder.config_path.read_text())["note"] == "Bearer [REDACTED]"


def test_train_refuses_a_folder_in_use_before_loading_anything(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from tomgym.training.rl.train_config import TrainConfig
    from tomgym.training.rl.trainer import train

    out = tmp_path / "train"
    holder = _holder(out)
    try:
        with pytest.raises(RunFolderLocked, match=rf"in use by process {holder.pid}\b"):
            train(TrainConfig(output_dir=str(out)))
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert sorted(p.name for p in out.iterdir()) == [".lock", "config.yaml", "games.jsonl"]
