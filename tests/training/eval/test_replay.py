"""`training.eval.replay`: a policy replays recorded Decrypto games (human format, bad files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tomgym.training.eval.jobs import EvaluationError
from tomgym.training.eval.replay import replay_decrypto
from tomgym.training.run_folder import RunFolder


def test_replay_human_games(shared_data: Path, tmp_path: Path) -> None:
    summary = replay_decrypto(
        "embedding",
        "interceptor",
        shared_data / "decrypto" / "human_games.json",
        tmp_path / "human",
    )
    assert summary["recorded_all_rounds"]["rounds"] == 72
    assert 0 < summary["policy"]["rounds"] <= 72
    records = RunFolder(tmp_path / "human").records()
    assert len(records) == 10
    # the recorded roles replayed their answers: the encoder's hints are the humans'
    game0 = next(r for r in records if r["game_id"] == "human-0")
    first_hints = next(t["parsed"]["hints"] for t in game0["turns"] if t["agent"] == "encoder_0")
    assert first_hints == ["make", "book", "sell"]


def test_replay_bad_games_file(tmp_path: Path) -> None:
    with pytest.raises(EvaluationError, match="cannot read games file"):
        replay_decrypto("random", "decoder", tmp_path / "missing.json", tmp_path / "r")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"env_id": "tomgym/decrypto-v0", "game_id": "x"}\n{not json\n')
    with pytest.raises(EvaluationError, match="bad.jsonl:1"):
        replay_decrypto("random", "decoder", bad, tmp_path / "r")
    with pytest.raises(EvaluationError, match="unknown role"):
        replay_decrypto("random", "encoder", bad, tmp_path / "r")
