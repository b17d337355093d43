"""Chaos: a `tomgym play` run killed with SIGKILL at random points and resumed each time, with a
second writer attempted while each victim holds the folder, ends with exactly the records of an
uninterrupted run (bounded: a few seconds per round, under a minute in all)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GAMES = 200
ROUNDS = 3
CHAOS_SEED = int(os.environ.get("TOMGYM_CHAOS_SEED", "20261201"))


def _play_args(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "tomgym.scripts.cli", "play", "tomsb",
        "--agent", "defender_0=scripted:naive", "--games", str(GAMES), "--seed", "5",
        "--concurrency", "2", "--out", str(out), *extra,
    ]  # fmt: skip


def _records(out: Path) -> list[dict]:
    lines = (out / "games.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda r: r["game_id"])


def _wait_for_lock(victim: subprocess.Popen, lock: Path, deadline: float) -> bool:
    """True once `victim` holds the folder's lock (its PID is in the lock file), False if it
    ended first."""
    while time.monotonic() < deadline:
        if victim.poll() is not None:
            return False
        if lock.exists() and lock.read_text().strip() == str(victim.pid):
            return True
        time.sleep(0.01)
    raise AssertionError("the run never took its folder's lock")


def _stopped(victim: subprocess.Popen) -> bool:
    """True once `victim` is stopped (alive, holding its lock); False when it has exited."""
    _, status = os.waitpid(victim.pid, os.WUNTRACED)
    if os.WIFSTOPPED(status):
        return True
    victim.returncode = os.waitstatus_to_exitcode(status)
    assert victim.returncode == 0, victim.stderr.read()
    return False


def test_sigkill_chaos_with_a_second_writer_ends_with_the_uninterrupted_records(tmp_path):
    rng = random.Random(CHAOS_SEED)
    reference = subprocess.run(_play_args(tmp_path / "ref"), cwd=REPO, capture_output=True)
    assert reference.returncode == 0, reference.stderr
    expected = _records(tmp_path / "ref")
    assert len(expected) == GAMES

    out = tmp_path / "chaos"
    deadline = time.monotonic() + 45
    kills = 0
    for round_ in range(ROUNDS):
        extra = ("--resume",) if round_ else ()
        victim = subprocess.Popen(
            _play_args(out, *extra), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        if not _wait_for_lock(victim, out / ".lock", deadline):
            assert victim.returncode == 0, victim.stderr.read()
            break  # the run finished before this round's kill point
        time.sleep(rng.uniform(0.0, 0.5))  # a random point of the run
        # Freeze the victim (it keeps its lock) so the second writer surely meets a live holder;
        # waiting for the stop also tells whether it had already finished.
        victim.send_signal(signal.SIGSTOP)
        if not _stopped(victim):
            break  # the run finished before this round's kill point
        # A `--resume` and a fresh run into the same folder are both refused (alternating).
        second = _play_args(out, "--resume") if round_ % 2 == 0 else _play_args(out)
        refused = subprocess.run(second, cwd=REPO, capture_output=True, text=True)
        assert refused.returncode == 1, refused.stderr
        assert f"in use by process {victim.pid}" in refused.stderr, (CHAOS_SEED, refused.stderr)
        assert refused.stderr.strip().count("\n") == 0
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        victim.stderr.close()
        kills += 1
        if rng.random() < 0.5:  # a kill mid-write: leave a torn last line behind
            with (out / "games.jsonl").open("a", encoding="utf-8") as handle:
                handle.write('{"game_id": "tomsb-s5-000')
    assert kills >= 2, f"only {kills} kill(s) landed before the run finished (seed {CHAOS_SEED})"

    final = subprocess.run(_play_args(out, "--resume"), cwd=REPO, capture_output=True, text=True)
    assert final.returncode == 0, final.stderr
    got = _records(out)
    assert [r["game_id"] for r in got] == [r["game_id"] for r in expected], CHAOS_SEED
    assert got == expected, CHAOS_SEED
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["n"] == GAMES
