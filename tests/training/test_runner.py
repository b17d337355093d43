"""The batched runner and run folders: batching, refilling, failures, resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tomgym.agents.base import BasePolicy, Turn
from tomgym.training.policy_specs import make_policy, parse_agent_specs
from tomgym.training.run_folder import RunFolder, RunFolderError
from tomgym.training.runner import GameSpec, RunnerError, RunStats, play_games

from tests.cli import run_tomgym

REPO = Path(__file__).resolve().parents[2]


class CountingPolicy(BasePolicy):
    """Answers like the wrapped policy and records the size of every act_batch call."""

    def __init__(self, inner, name="counting"):
        self.inner, self.name, self.batches = inner, name, []

    def reset(self, game_id):
        self.inner.reset(game_id)

    def act_batch(self, turns):
        self.batches.append(len(turns))
        return self.inner.act_batch(turns)


class FailingPolicy(CountingPolicy):
    def __init__(self, inner, fail_after):
        super().__init__(inner, "failing")
        self.fail_after = fail_after

    def act_batch(self, turns):
        if len(self.batches) >= self.fail_after:
            raise ConnectionError("server went away")
        return super().act_batch(turns)


def tomsb_policies():
    return {
        "attacker_0": CountingPolicy(make_policy("scripted:base"), "attacker"),
        "defender_0": CountingPolicy(make_policy("scripted:tom_heuristic"), "defender"),
    }


def test_one_call_per_policy_per_tick_and_refill():
    policies = tomsb_policies()
    stats = RunStats()
    games = [GameSpec(f"g{i}", i, {"attacker": "base", "split": "test"}) for i in range(7)]
    records = play_games("tomgym/tomsb-v0", games, policies, concurrency=3, stats=stats)
    assert sorted(r["game_id"] for r in records) == [f"g{i}" for i in range(7)]
    calls = sum(stats.policy_calls.values())
    # Each tick makes at most one call per policy, and never more than `concurrency` turns a call.
    assert calls <= 2 * stats.ticks
    assert max(max(p.batches) for p in policies.values()) <= 3
    assert sum(sum(p.batches) for p in policies.values()) == stats.turns
    assert all(r["outcome"] in {"fooled", "extracted", "detected", "baited"} for r in records)
    turn = records[0]["turns"][0]
    assert {"agent", "message", "raw", "parsed", "valid", "error", "retry", "prompt"} <= set(turn)


def test_batched_and_sequential_runs_give_identical_records():
    games = [GameSpec(f"d{i}", 100 + i, {}) for i in range(5)]
    specs = {a: "embedding" for a in ("encoder_0", "decoder_0", "interceptor_0")}
    batched = play_games(
        "tomgym/decrypto-v0", games, {a: make_policy(s) for a, s in specs.items()}, concurrency=5
    )
    single = play_games(
        "tomgym/decrypto-v0", games, {a: make_policy(s) for a, s in specs.items()}, concurrency=1
    )
    key = lambda r: r["game_id"]  # noqa: E731
    assert sorted(batched, key=key) == sorted(single, key=key)


def test_policy_failure_keeps_finished_games():
    saved = []
    policies = tomsb_policies()
    policies["defender_0"] = FailingPolicy(make_policy("scripted:tom_heuristic"), fail_after=12)
    games = [GameSpec(f"g{i}", i, {"attacker": "base"}) for i in range(6)]
    with pytest.raises(RunnerError, match="server went away"):
        play_games("tomgym/tomsb-v0", games, policies, concurrency=2, on_record=saved.append)
    assert saved, "games finished before the failure were handed over"


def test_unknown_env_and_missing_agent_are_clear_errors():
    with pytest.raises(ValueError, match="unknown env id"):
        play_games("tomgym/nope-v0", [GameSpec("a", 0)], {})
    with pytest.raises(ValueError, match="no policy given"):
        play_games(
            "tomgym/tomsb-v0", [GameSpec("a", 0)], {"attacker_0": make_policy("scripted:base")}
        )
    with pytest.raises(ValueError, match="unknown policy spec"):
        make_policy("gpt-five")
    with pytest.raises(ValueError, match="unknown agent"):
        parse_agent_specs(["spy_0=random"], {}, ["encoder_0"])


def test_run_folder_repairs_torn_line_and_rejects_corruption(tmp_path):
    folder = RunFolder(tmp_path / "run")
    folder.start({"env_id": "x", "seed": 0}, resume=False)
    folder.append({"game_id": "a", "v": 1})
    with folder.games_path.open("a") as handle:
        handle.write('{"game_id": "b", "v"')  # a write cut short by a kill
    assert folder.completed_ids() == {"a"}
    folder.append({"game_id": "b", "v": 2})
    assert [r["game_id"] for r in folder.records()] == ["a", "b"]
    folder.close()  # release the lock: the refusals below are about the folder's contents
    with pytest.raises(RunFolderError, match="already holds games"):
        RunFolder(tmp_path / "run").start({"env_id": "x"}, resume=False)
    with pytest.raises(RunFolderError, match="seed 0 -> 1"):
        folder.start({"env_id": "x", "seed": 1}, resume=True)
    folder.games_path.write_text('{"game_id": "a"}\nnot json\n{"game_id": "c"}\n')
    with pytest.raises(RunFolderError, match=r"games.jsonl:2: corrupt record"):
        folder.records()


def _play(out: Path, games: int, *extra: str) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "tomgym.scripts.cli",
        "play",
        "tomsb",
        "--agent",
        "defender_0=scripted:naive",
        "--games",
        str(games),
        "--seed",
        "3",
        "--concurrency",
        "2",
        "--out",
        str(out),
        *extra,
    ]
    return subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_resume_after_sigkill_matches_uninterrupted_run(tmp_path):
    reference = _play(tmp_path / "ref", 40)
    assert reference.wait(timeout=300) == 0, reference.stderr.read()
    expected = [
        json.loads(line) for line in (tmp_path / "ref" / "games.jsonl").read_text().splitlines()
    ]

    victim = _play(tmp_path / "run", 40)
    games = tmp_path / "run" / "games.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and (not games.exists() or games.read_text().count("\n") < 5):
        time.sleep(0.05)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    with games.open("a") as handle:  # make sure the kill left a torn last line behind
        handle.write('{"game_id": "tomsb-s3-0')
    resumed = _play(tmp_path / "run", 40, "--resume")
    assert resumed.wait(timeout=300) == 0, resumed.stderr.read()
    got = [json.loads(line) for line in games.read_text().splitlines()]
    assert len(got) == 40 and len({r["game_id"] for r in got}) == 40
    key = lambda r: r["game_id"]  # noqa: E731
    assert sorted(got, key=key) == sorted(expected, key=key)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary


def test_cli_errors_are_one_line(tmp_path):
    bad = run_tomgym(
        "play", "tomsb", "--agent", "defender_0=nonsense", "--out", str(tmp_path / "x")
    )
    assert bad.returncode != 0
    assert bad.stderr.strip().count("\n") == 0 and "unknown policy spec" in bad.stderr
    bad = run_tomgym("play", "tomsb", "--split", "dev", "--agent", "defender_0=scripted:naive")
    assert bad.returncode != 0 and "split" in bad.stderr and bad.stderr.strip().count("\n") == 0


def test_turn_dataclass_prompt_property():
    turn = Turn("g", "a", {"prompt": "hello"})
    assert turn.prompt == "hello"
