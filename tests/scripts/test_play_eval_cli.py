"""`tomgym play` / `tomgym eval` / `tomgym demo` from the command line (in process): one-line
errors for bad input, prompt variants by name, options of the other game rejected, a user's own
scenario file, the progress bar and the note naming a defaulted LLM player."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tomgym.scripts.cli import main

REPO = Path(__file__).resolve().parents[2]
RANDOM_DECRYPTO = [
    "--agent",
    "encoder_0=random",
    "--agent",
    "decoder_0=random",
    "--agent",
    "interceptor_0=random",
]
SCRIPTED_TOMSB = ["--agent", "defender_0=scripted:naive", "--max-attacker-turns", "2"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error(result: tuple[int, str, str]) -> str:
    code, _, err = result
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def records(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "games.jsonl").read_text().splitlines()]


def test_negative_seed_is_one_line(capsys, tmp_path: Path) -> None:
    line = one_error(run(capsys, "play", "decrypto", *RANDOM_DECRYPTO, "--seed", "-1"))
    assert "--seed must be >= 0, got -1" in line
    line = one_error(
        run(capsys, "human", "tomsb", "--as", "defender_0", "--seed", "-1", "--out", str(tmp_path))
    )
    assert "--seed must be >= 0" in line


def test_scripted_attacker_as_defender_names_the_roles(capsys) -> None:
    line = one_error(run(capsys, "play", "tomsb", "--agent", "defender_0=scripted:base"))
    assert "scripted:base is a TOM-SB attacker, but defender_0 is the defender" in line


def test_messages_keep_their_quotes(capsys) -> None:
    line = one_error(run(capsys, "play", "tomsb", "--agent", "defender_0"))
    assert line.endswith("got 'defender_0'")
    line = one_error(run(capsys, "play", "tomsb", "--agent", "spy_0=random"))
    assert "unknown agent 'spy_0';" in line


def test_tomsb_prompt_variant_by_name_in_play(capsys, tmp_path: Path) -> None:
    out = tmp_path / "p"
    code, _, err = run(
        capsys,
        "play",
        "tomsb",
        *SCRIPTED_TOMSB,
        "--prompt-variant",
        "tom_misleading",
        "--out",
        str(out),
        "--quiet",
    )
    assert code == 0, err
    (record,) = records(out)
    assert record["options"]["prompt_variant"] == "tom_misleading"
    assert record["infos"]["defender_0"]["prompt_variant"] == "tom_misleading"
    line = one_error(run(capsys, "play", "tomsb", *SCRIPTED_TOMSB, "--prompt-variant", "2"))
    assert "defender prompt name, got '2'" in line and "naive_misleading" in line


def test_decrypto_prompt_variant_range(capsys, tmp_path: Path) -> None:
    line = one_error(run(capsys, "play", "decrypto", *RANDOM_DECRYPTO, "--prompt-variant", "3"))
    assert "must be 0..2, got '3'" in line
    out = tmp_path / "d"
    code, _, err = run(
        capsys,
        "play",
        "decrypto",
        *RANDOM_DECRYPTO,
        "--prompt-variant",
        "2",
        "--max-rounds",
        "1",
        "--out",
        str(out),
        "--quiet",
    )
    assert code == 0, err
    assert records(out)[0]["options"]["prompt_variant"] == 2


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["play", "tomsb", *SCRIPTED_TOMSB, "--tom", "pt"], "--tom is a decrypto option"),
        (["play", "tomsb", *SCRIPTED_TOMSB, "--play-on"], "--play-on is a decrypto option"),
        (
            ["play", "decrypto", *RANDOM_DECRYPTO, "--reveal-prior"],
            "--reveal-prior is a tomsb option",
        ),
        (["play", "decrypto", *RANDOM_DECRYPTO, "--split", "train"], "--split is a tomsb option"),
        (["play", "decrypto", *RANDOM_DECRYPTO, "--tom", "telepathy"], "unknown --tom"),
        (["eval", "decrypto", "--models", "random", "--prompt-variant", "7", "--out", "x"], "0..2"),
        (
            [
                "eval",
                "tomsb",
                "--defender",
                "scripted:naive",
                "--prompt-variant",
                "1",
                "--out",
                "x",
            ],
            "defender prompt name",
        ),
    ],
)
def test_options_of_the_other_game_and_bad_variants_are_rejected(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], reason: str
) -> None:
    monkeypatch.chdir(tmp_path)
    assert reason in one_error(run(capsys, *argv))
    assert not (tmp_path / "x").exists()


def test_eval_tomsb_prompt_variant_and_own_scenario_file(capsys, tmp_path: Path) -> None:
    from tomgym.envs.tomsb.benchmark import to_jsonl
    from tomgym.envs.tomsb.generator import generate_benchmark

    mine = generate_benchmark(seed=11, n_universes=1)
    scenario_file = to_jsonl(mine, tmp_path / "mine.jsonl")
    out = tmp_path / "e"
    code, _, err = run(
        capsys,
        "eval",
        "tomsb",
        "--defender",
        "scripted:naive",
        "--attackers",
        "base",
        "--scenarios",
        str(scenario_file),
        "--prompt-variant",
        "refusal",
        "--seeds",
        "1",
        "--episodes-per-scenario",
        "1",
        "--max-attacker-turns",
        "2",
        "--out",
        str(out),
        "--no-report",
        "--quiet",
    )
    assert code == 0, err
    played = records(out)
    assert sorted(r["infos"]["defender_0"]["scenario_id"] for r in played) == sorted(
        s.scenario_id for s in mine
    )
    assert {r["infos"]["defender_0"]["prompt_variant"] for r in played} == {"refusal"}
    line = one_error(
        run(
            capsys,
            "eval",
            "tomsb",
            "--defender",
            "scripted:naive",
            "--scenarios",
            str(tmp_path / "none.jsonl"),
            "--out",
            str(tmp_path / "e2"),
        )
    )
    assert "none.jsonl" in line


def test_eval_prior_levels_filter_and_its_bad_input(capsys, tmp_path: Path) -> None:
    base = ["eval", "tomsb", "--defender", "scripted:naive", "--attackers", "base", "--seeds", "1"]
    base += ["--episodes-per-scenario", "1", "--max-scenarios", "3", "--max-attacker-turns", "2"]
    out = tmp_path / "hard"
    code, _, err = run(capsys, *base, "--prior-levels", "1,2", "--out", str(out), "--no-report")
    assert code == 0, err
    assert {r["infos"]["defender_0"]["prior_level"] for r in records(out)} <= {1, 2}
    line = one_error(run(capsys, *base, "--prior-levels", "two", "--out", str(tmp_path / "x")))
    assert "--prior-levels" in line
    assert not (tmp_path / "x").exists()


def test_play_shows_the_progress_bar(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    from tomgym.training import runner

    shown: list[int] = []

    class Bar:
        def __init__(self, total: int) -> None:
            shown.append(total)

        def update(self, record: Any) -> None:
            shown.append(-1)

        def close(self) -> None:
            pass

    monkeypatch.setattr(runner, "_Progress", Bar)
    code, _, err = run(capsys, "play", "decrypto", *RANDOM_DECRYPTO, "--games", "2")
    assert code == 0, err
    assert shown == [2, -1, -1]
    shown.clear()
    assert run(capsys, "play", "decrypto", *RANDOM_DECRYPTO, "--quiet")[0] == 0
    assert shown == []


def test_play_tomsb_says_the_defender_defaults_to_the_model(
    capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tomgym.training import policy_specs

    def stop(*args: Any, **kwargs: Any) -> None:
        raise ValueError("stopped before loading a model")

    monkeypatch.setattr(policy_specs, "build_policies", stop)
    code, _, err = run(capsys, "play", "tomsb")
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 2
    assert lines[0].startswith("note: defender_0 is played by default")
    assert "--agent defender_0=SPEC" in lines[0]
    # Given explicitly: no note.
    code, _, err = run(capsys, "play", "tomsb", "--agent", "defender_0=default")
    assert err.strip().splitlines() == ["error: stopped before loading a model"]


def test_demo_help_wall_time_matches_the_readme() -> None:
    from tomgym.scripts import demo_cmd

    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    doc = " ".join((demo_cmd.__doc__ or "").split())
    claim = re.search(r"(\d+) minutes from scratch, about (\d+) minutes with the warm start", doc)
    assert claim, "the demo's help states its measured wall time"
    scratch, cached = claim.groups()
    measured = re.search(
        r"`make demo` from a fresh clone \*\*[\d,]+ s \((\d+) minutes\)\*\* including setup.*?"
        r"second run takes \*\*[\d,]+ s \(([\d.]+) minutes\)\*\*",
        readme,
    )
    assert measured, "the README states the demo's measured wall time, from scratch and cached"
    assert scratch == measured.group(1)
    assert int(cached) == round(float(measured.group(2)))


def test_max_retries_reaches_the_env_and_its_bad_input_is_one_line(capsys, tmp_path: Path) -> None:
    # The learning benchmark plays with one re-ask; a user reproduces it from the command line.
    evaluate = ["eval", "tomsb", "--defender", "scripted:naive", "--attackers", "base"]
    evaluate += ["--seeds", "1", "--episodes-per-scenario", "1", "--max-scenarios", "2"]
    evaluate += ["--max-attacker-turns", "2", "--no-report", "--quiet"]
    code, _, err = run(capsys, *evaluate, "--max-retries", "1", "--out", str(tmp_path / "e"))
    assert code == 0, err
    assert {r["env_config"]["max_retries"] for r in records(tmp_path / "e")} == {1}
    code, _, err = run(capsys, "play", "tomsb", *SCRIPTED_TOMSB, "--games", "1",
                       "--max-retries", "0", "--out", str(tmp_path / "p"))  # fmt: skip
    assert code == 0, err
    assert records(tmp_path / "p")[0]["env_config"]["max_retries"] == 0
    line = one_error(run(capsys, *evaluate, "--max-retries", "-1", "--out", str(tmp_path / "x")))
    assert "--max-retries must be >= 0, got -1" in line
    line = one_error(run(capsys, "play", "decrypto", *RANDOM_DECRYPTO, "--max-retries", "2"))
    assert "--max-retries is a tomsb option" in line
