"""`training.eval.jobs`: run folders, deterministic ids, resume after a kill, Decrypto cross-play
(and a replay of its games) — scripted/baseline policies only (no LLM)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tomgym.agents.specs import parse_attacker
from tomgym.training.eval.jobs import (
    EvaluationError,
    decrypto_matchups,
    evaluate_decrypto,
    evaluate_tomsb,
)
from tomgym.training.eval.replay import load_recorded_games, replay_decrypto
from tomgym.training.run_folder import RunFolder, RunFolderError

SMALL = {
    "attackers": ["base", "bluffing"],
    "split": "test",
    "episodes_per_scenario": 1,
    "seeds": 2,
    "max_scenarios": 3,
    "concurrency": 4,
}


def _sorted_records(path: Path) -> list[dict]:
    return sorted(RunFolder(path).records(), key=lambda r: r["game_id"])


@pytest.fixture(scope="module")
def tomsb_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval") / "tomsb"
    evaluate_tomsb("scripted:naive", out_dir=out, **SMALL)
    return out


def test_tomsb_eval_writes_run_folder(tomsb_run: Path) -> None:
    for name in (
        "config.yaml",
        "games.jsonl",
        "summary.json",
        "tables/tomsb_outcomes.md",
        "tables/tomsb_outcomes.csv",
        "tables/tomsb_prior_levels.md",
    ):
        assert (tomsb_run / name).is_file(), name
    config = yaml.safe_load((tomsb_run / "config.yaml").read_text())
    assert config["defender"] == "scripted:naive" and config["split"] == "test"
    records = _sorted_records(tomsb_run)
    assert len(records) == 2 * 2 * 3  # seeds x attackers x scenarios
    assert {r["eval"]["attacker"] for r in records} == {"base", "bluffing"}
    assert {r["infos"]["defender_0"]["attacker_variant"] for r in records} == {"base", "bluffing"}
    # the stratified subset covers every prior level
    assert {r["infos"]["defender_0"]["prior_level"] for r in records} == {0, 1, 2}
    assert all(r["policies"]["attacker_0"]["name"] == r["eval"]["attacker"] for r in records)
    summary = json.loads((tomsb_run / "summary.json").read_text())
    assert summary["n"] == 12
    assert set(summary["groups"]["attacker"]) == {"base", "bluffing"}
    assert "fooled_rate_ci" in summary["overall"] and "hard" in summary["overall"]


def test_resume_after_kill_equals_uninterrupted_run(tomsb_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "killed"
    evaluate_tomsb("scripted:naive", out_dir=out, **SMALL)
    games = out / "games.jsonl"
    lines = games.read_bytes().splitlines(keepends=True)
    # Simulate a kill mid-write: five whole games, then half of the sixth line.
    games.write_bytes(b"".join(lines[:5]) + lines[5][: len(lines[5]) // 2])
    with pytest.raises(RunFolderError, match="corrupt record"):
        RunFolder(out).records()
    with pytest.raises(RunFolderError, match="already holds games"):
        evaluate_tomsb("scripted:naive", out_dir=out, **SMALL)
    evaluate_tomsb("scripted:naive", out_dir=out, resume=True, **SMALL)
    assert _sorted_records(out) == _sorted_records(tomsb_run)


def test_resume_refuses_a_different_evaluation(tomsb_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    out.mkdir()
    for name in ("config.yaml", "games.jsonl"):
        (out / name).write_bytes((tomsb_run / name).read_bytes())
    before = (out / "games.jsonl").read_bytes()
    with pytest.raises(RunFolderError, match="defender"):
        evaluate_tomsb("scripted:tom_heuristic", out_dir=out, resume=True, **SMALL)
    assert (out / "games.jsonl").read_bytes() == before


def test_bad_input_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "bad"
    with pytest.raises(ValueError, match="unknown policy spec"):
        evaluate_tomsb("no-such-policy", out_dir=out, **SMALL)
    with pytest.raises(EvaluationError, match="unknown split"):
        evaluate_tomsb("scripted:naive", out_dir=out, **{**SMALL, "split": "dev"})
    with pytest.raises(EvaluationError, match="unknown scripted TOM-SB policy"):
        evaluate_tomsb("scripted:naive", out_dir=out, **{**SMALL, "attackers": ["scripted:x"]})
    assert not out.exists()


def test_prior_levels_keep_only_those_scenarios(tmp_path: Path) -> None:
    small = {**SMALL, "attackers": ["base"], "seeds": 1, "max_scenarios": 4}
    evaluate_tomsb("scripted:naive", out_dir=tmp_path / "hard", prior_levels=[2], **small)
    records = RunFolder(tmp_path / "hard").records()
    assert len(records) == 4
    assert {r["infos"]["defender_0"]["prior_level"] for r in records} == {2}
    assert yaml.safe_load((tmp_path / "hard" / "config.yaml").read_text())["prior_levels"] == [2]
    for bad in ([], [3]):
        with pytest.raises(EvaluationError, match="prior_levels"):
            evaluate_tomsb("scripted:naive", out_dir=tmp_path / "bad", prior_levels=bad, **small)
    assert not (tmp_path / "bad").exists()


def test_parse_attacker_forms() -> None:
    def triple(entry: str) -> tuple[str, str, str]:
        parsed = parse_attacker(entry)
        return parsed.label, parsed.variant, parsed.spec.to_string()

    assert triple("bluffing") == ("bluffing", "bluffing", "scripted:bluffing")
    assert triple("scripted:base") == ("base", "base", "scripted:base")
    assert triple("cross_examiner=openai:m") == (
        "cross_examiner=openai:m",
        "cross_examiner",
        "openai:m",
    )
    assert triple("default") == ("default", "base", "default")


def test_decrypto_matchups_modes() -> None:
    assert len(decrypto_matchups(["a", "b"], "all")) == 8
    assert decrypto_matchups(["a", "b"], "competition") == [
        ("a", "a", "a"),
        ("a", "a", "b"),
        ("b", "b", "a"),
        ("b", "b", "b"),
    ]
    assert {m[2] for m in decrypto_matchups(["a", "b"], "adhoc", "c")} == {"c"}
    with pytest.raises(EvaluationError, match="unknown mode"):
        decrypto_matchups(["a"], "league")


def test_decrypto_crossplay_and_replay_of_our_games(tmp_path: Path) -> None:
    out = tmp_path / "dec"
    summary = evaluate_decrypto(
        ["random", "embedding"], mode="competition", seeds=2, games=2, out_dir=out
    )
    records = RunFolder(out).records()
    assert len(records) == 4 * 2 * 2
    # every matchup faces the same keyword/code draws (paired comparison)
    seeds_by_matchup: dict[int, list[int]] = {}
    for r in sorted(records, key=lambda r: r["game_id"]):
        seeds_by_matchup.setdefault(r["eval"]["matchup"], []).append(r["seed"])
    assert len({tuple(s) for s in seeds_by_matchup.values()}) == 1
    assert len(summary["matchups"]) == 4
    row = next(
        m
        for m in summary["matchups"]
        if m["encoder"] == "embedding" and m["interceptor"] == "random"
    )
    assert row["seeds"] == 2 and row["games"] == 4 and row["team_win_rate_std"] is not None
    assert (out / "tables" / "decrypto_matchups.md").is_file()

    replay = replay_decrypto("random", "decoder", out / "games.jsonl", tmp_path / "replay")
    recorded = load_recorded_games(out / "games.jsonl")
    assert replay["recorded_all_rounds"]["rounds"] == sum(len(g["rounds"]) for g in recorded)
    assert replay["policy"]["rounds"] >= 1 and replay["metric"] == "miscommunication_rate_per_round"
