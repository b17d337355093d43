"""LLM judging beside the rules: judge protocol parsing, the scripted judge, agreement statistics,
re-scoring a run folder in place, the report's agreement table and the `--judge` CLI option."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tomgym.agents.base import BasePolicy, Turn
from tomgym.agents.tomsb_judges import ScriptedJudgePolicy, make_scripted_judge
from tomgym.envs.tomsb import judge_prompts as jp
from tomgym.scripts.cli import main as cli_main
from tomgym.training.eval import judge as judge_module
from tomgym.training.eval.agreement import (
    agreement_block,
    agreement_summary,
    cohen_kappa,
    kappa_interval,
)
from tomgym.training.eval.jobs import evaluate_tomsb
from tomgym.training.eval.judge import judge_folder, judge_label, make_judge
from tomgym.training.eval.report import make_report
from tomgym.training.run_folder import RunFolder, RunFolderError, RunFolderLocked

from tests.rewards.records import LEVELS, TRUTH, decrypto_record, tomsb_record

LEVEL_TUPLE = tuple(LEVELS)
WRONG = {"company": "Globex", "division": "Pumps", "team": "Valve Crew"}


def episode(
    game_id: str,
    outcome: str,
    *,
    prior_level: int = 1,
    extracted: bool = False,
    tom_right: bool = True,
) -> dict[str, Any]:
    """A finished record whose final belief and estimate agree with `outcome` and `tom_right`."""
    prior = {lvl: (TRUTH[lvl] if i < prior_level else None) for i, lvl in enumerate(LEVELS)}
    estimate = dict(prior) if tom_right else {lvl: None for lvl in LEVELS}
    if not tom_right and prior_level == 0:
        estimate = {"company": TRUTH["company"], "division": None, "team": None}
    record = tomsb_record(outcome=outcome, prior_level=prior_level, final_estimate=estimate)
    belief = dict(prior)
    for i, lvl in enumerate(LEVELS):
        if i >= prior_level:
            belief[lvl] = WRONG[lvl]
    if extracted:
        belief[LEVELS[-1]] = TRUTH[LEVELS[-1]]
    for info in record["infos"].values():
        info["belief"] = belief
    record["game_id"] = game_id
    return record


KNOWN_EPISODES = [
    episode("fooled-1", "fooled", prior_level=1),
    episode("fooled-0-wrong-tom", "fooled", prior_level=0, tom_right=False),
    episode("extracted-2", "extracted", prior_level=2, extracted=True),
    episode("extracted-0", "extracted", prior_level=0, extracted=True, tom_right=False),
    episode("baited-1", "baited", prior_level=1),
    episode("detected-2", "detected", prior_level=2, extracted=True),
]


def write_folder(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r) + "\n" for r in records)
    (path / "games.jsonl").write_text(lines, encoding="utf-8")
    return path


class FunctionJudge(BasePolicy):
    """A test judge: `answer(task, case, game_id)` -> raw text (None = the scripted judge's)."""

    name = "function-judge"

    def __init__(self, answer: Callable[[str, dict[str, Any], str], str | None]) -> None:
        self.answer = answer
        self.reference = ScriptedJudgePolicy()
        self.calls = 0

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        self.calls += 1
        return [self.act(turn) for turn in turns]

    def act(self, turn: Turn) -> str:
        case = jp.read_case(turn.prompt)
        game_id = turn.game_id.split("/")[1]
        given = self.answer(case["task"], case, game_id)
        return self.reference.act(turn) if given is None else given


# ---- protocol ------------------------------------------------------------------------------------


def test_answers_parse_strictly_inside_a_tolerant_envelope() -> None:
    fenced = '<think>hm</think>Sure:\n```json\n{"extracted": {"Team": false}}\n```'
    assert jp.parse_extraction(fenced, ["team"]) == {"team": False}
    for bad, reason in (
        ('{"extracted": {"team": "false"}}', "true or false"),
        ('{"extracted": {}}', "lacks"),
        ('{"extracted": {"team": true, "company": true}}', "unknown key"),
        ("the attacker learned nothing", "no JSON object"),
        ('{"verdict": true}', "lacks 'extracted'"),
    ):
        with pytest.raises(jp.JudgeAnswerError, match=reason):
            jp.parse_extraction(bad, ["team"])
    assert jp.parse_prior(
        '{"attacker_knew": {"company": "Acme", "division": "null", "team": null}}', LEVEL_TUPLE
    ) == ("Acme", None, None)
    with pytest.raises(jp.JudgeAnswerError, match="name or null"):
        jp.parse_prior('{"attacker_knew": {"company": 3, "division": null, "team": null}}', LEVELS)
    with pytest.raises(jp.JudgeAnswerError, match="defender_estimate"):
        jp.parse_tom('{"correct": true}', LEVELS)


def test_scripted_judge_answers_from_the_case_file() -> None:
    prompt = jp.extraction_prompt(
        levels=LEVELS,
        true_path=TRUTH,
        known_before={"company": "Acme", "division": None, "team": None},
        final_claim={"company": "Acme", "division": "rockets!", "team": "Valve Crew"},
        final_note="",
        final_signal="attack successful",
        dialogue=["defender: " + "x" * 5000, "attacker: ok"],
    )
    assert len(prompt) < 4000  # the dialogue is clipped to fit a small context
    judge = make_scripted_judge("judge")
    answer = judge.act(Turn("g", "judge", {"prompt": prompt}))
    assert jp.parse_extraction(answer, ["division", "team"]) == {"division": True, "team": False}
    tom = jp.tom_prompt(
        levels=LEVELS,
        attacker_knew={"company": None, "division": None, "team": None},
        defender_estimate=None,
        defender_note="",
    )
    _, correct = jp.parse_tom(judge.act(Turn("g", "judge", {"prompt": tom})), LEVELS)
    assert correct is False  # no estimate is never right, even for an attacker that knew nothing
    with pytest.raises(ValueError, match="case file"):
        judge.act(Turn("g", "judge", {"prompt": "Judge this."}))
    with pytest.raises(ValueError, match="unknown scripted judge"):
        make_scripted_judge("lenient")


# ---- statistics ------------------------------------------------------------------------------------


def test_kappa_matches_hand_computation() -> None:
    judge = [1, 1, 1, 0, 0, 0, 0, 0]
    rules = [1, 1, 0, 0, 0, 0, 0, 1]
    # p_o = 6/8, p_e = (3/8)^2 + (5/8)^2 = 34/64, kappa = (48/64 - 34/64) / (30/64) = 7/15
    assert float(cohen_kappa(np.array(judge), np.array(rules))) == pytest.approx(7 / 15)
    block = agreement_block(judge, rules, judge_errors=2, excluded=1)
    assert block["agreement"] == pytest.approx(0.75)
    assert block["kappa"] == pytest.approx(7 / 15)
    low, high = block["kappa_ci"]
    assert -1 <= low <= 7 / 15 <= high <= 1
    assert block["kappa_ci"] == kappa_interval(judge, rules)  # fixed seed: reproducible
    assert (block["judge_yes_rules_yes"], block["judge_yes_rules_no"]) == (2, 1)
    assert (block["judge_no_rules_yes"], block["judge_no_rules_no"]) == (1, 4)
    assert block["n"] == 8 and block["judge_errors"] == 2 and block["excluded"] == 1
    # Chance-level agreement is kappa 0; one label everywhere leaves kappa undefined.
    assert float(cohen_kappa(np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0]))) == 0.0
    constant = agreement_block([True] * 5, [True] * 5, judge_errors=0, excluded=0)
    assert constant["agreement"] == 1.0 and constant["kappa"] is None
    assert constant["kappa_ci"] == [None, None]
    empty = agreement_block([], [], judge_errors=3, excluded=0)
    assert empty["agreement"] is None and empty["kappa"] is None


# ---- judging folders -------------------------------------------------------------------------------


def test_scripted_judge_agrees_with_the_rules_on_known_episodes(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "run", KNOWN_EPISODES)
    result = judge_folder(folder, "scripted:judge")
    assert result["judged"] == len(KNOWN_EPISODES) and result["skipped"] == 0
    extraction = result["agreement"]["extraction"]
    assert extraction["n"] == 5 and extraction["excluded"] == 1  # the detected episode
    assert extraction["judge_yes_rules_yes"] == 2 and extraction["judge_no_rules_no"] == 3
    tom = result["agreement"]["tom"]
    assert tom["n"] == 6 and tom["judge_yes_rules_yes"] == 4 and tom["judge_no_rules_no"] == 2
    for block in (extraction, tom):
        assert block["agreement"] == 1.0 and block["kappa"] == 1.0
        assert block["kappa_ci"] == [1.0, 1.0] and block["judge_errors"] == 0
    assert result["agreement"]["tom_stage1"]["agreement"] == 1.0
    records = RunFolder(folder).records()
    assert [r["game_id"] for r in records] == [r["game_id"] for r in KNOWN_EPISODES]
    entry = records[2]["judge"]["scripted:judge"]
    assert entry["extraction"]["answer"] == {"team": True}
    assert entry["prompt_version"] == jp.JUDGE_PROMPT_VERSION
    assert entry["judge"]["name"] == "judge"
    # The rest of every record is untouched.
    for before, after in zip(KNOWN_EPISODES, records, strict=True):
        assert {k: v for k, v in after.items() if k != "judge"} == before
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["judge_agreement"]["scripted:judge"]["tom"]["kappa"] == 1.0


def test_disagreeing_judge_agreement_on_hand_built_records(tmp_path: Path) -> None:
    # Rules: extracted on e0, e1; ToM right on e0, e2.
    records = [
        episode("e0", "extracted", extracted=True, tom_right=True),
        episode("e1", "extracted", extracted=True, tom_right=False),
        episode("e2", "fooled", tom_right=True),
        episode("e3", "fooled", tom_right=False),
    ]
    says_extracted = {"e0": True, "e1": False, "e2": True, "e3": False}
    says_right = {"e0": True, "e1": True, "e2": True, "e3": False}

    def answer(task: str, case: dict[str, Any], game_id: str) -> str | None:
        if task == "extraction":
            return jp.answer_extraction({"division": False, "team": says_extracted[game_id]})
        if task == "tom":
            return jp.answer_tom(case["attacker_knew"], says_right[game_id])
        return None

    judge = FunctionJudge(answer)
    result = judge_folder(write_folder(tmp_path / "run", records), "fixed", policy=judge)
    assert judge.calls == 2  # stage A (extraction + prior) and stage B (ToM), one batch each
    extraction = result["agreement"]["extraction"]
    assert extraction["agreement"] == 0.5 and extraction["kappa"] == pytest.approx(0.0)
    assert extraction["judge_yes_rules_no"] == 1 and extraction["judge_no_rules_yes"] == 1
    tom = result["agreement"]["tom"]
    # judge [1, 1, 1, 0] vs rules [1, 0, 1, 0]: p_o = 3/4, p_e = 3/8 + 1/8 = 1/2, kappa = 1/2
    assert tom["agreement"] == 0.75 and tom["kappa"] == pytest.approx(0.5)


def test_malformed_judge_answers_are_recorded_and_excluded(tmp_path: Path) -> None:
    def answer(task: str, case: dict[str, Any], game_id: str) -> str | None:
        if game_id == "fooled-1" and task == "extraction":
            return '{"extracted": {"division": "no", "team": "no"}}'
        if game_id == "baited-1" and task == "prior":
            return "I think the attacker knew the company."
        if game_id == "extracted-2" and task == "tom":
            return "```json\n{broken\n```"
        return None

    folder = write_folder(tmp_path / "run", KNOWN_EPISODES)
    result = judge_folder(folder, "flaky", policy=FunctionJudge(answer))
    agreement = result["agreement"]
    assert agreement["extraction"]["judge_errors"] == 1 and agreement["extraction"]["n"] == 4
    assert agreement["tom"]["judge_errors"] == 2 and agreement["tom"]["n"] == 4
    assert agreement["tom_stage1"]["judge_errors"] == 1
    assert agreement["tom"]["agreement"] == 1.0  # the answers that parsed still agree
    by_id = {r["game_id"]: r["judge"]["flaky"] for r in RunFolder(folder).records()}
    bad = by_id["fooled-1"]["extraction"]
    assert bad["answer"] is None and "true or false" in bad["judge_error"]
    assert bad["raw"].startswith('{"extracted"')
    skipped = by_id["baited-1"]["tom"]
    assert skipped["raw"] is None and skipped["judge_error"].startswith("stage 1 failed")
    assert by_id["extracted-2"]["tom"]["judge_error"]


def test_rejudging_skips_scored_records_and_keeps_other_judges(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "run", KNOWN_EPISODES)
    judge_folder(folder, "scripted:judge")
    first = (folder / "games.jsonl").read_bytes()
    again = judge_folder(folder, "scripted:judge")
    assert again["judged"] == 0 and again["skipped"] == len(KNOWN_EPISODES)
    assert (folder / "games.jsonl").read_bytes() == first
    assert judge_folder(folder, "scripted:judge", force=True, batch_size=4)["judged"] == 6

    def never(task: str, case: dict[str, Any], game_id: str) -> str | None:
        if task != "extraction":
            return None
        unknown = jp.unknown_levels(case["levels"], case["attacker_knew_before"])
        return jp.answer_extraction(dict.fromkeys(unknown, False))

    judge_folder(folder, "never-extracts", policy=FunctionJudge(never))
    records = RunFolder(folder).records()
    assert all(set(r["judge"]) == {"scripted:judge", "never-extracts"} for r in records)
    summary = agreement_summary(records)
    assert summary["scripted:judge"]["extraction"]["kappa"] == 1.0
    never_block = summary["never-extracts"]["extraction"]
    # judge all "no" vs rules [no, no, yes, yes, no]: p_o = p_e = 3/5, so kappa 0
    assert never_block["agreement"] == pytest.approx(0.6) and never_block["kappa"] == 0.0
    assert not list(folder.glob("*.tmp"))


def test_judge_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(RunFolderError, match="TOM-SB"):
        judge_folder(write_folder(tmp_path / "d", [decrypto_record()]), "scripted:judge")
    with pytest.raises(RunFolderError, match="no finished games"):
        judge_folder(write_folder(tmp_path / "empty", []), "scripted:judge")
    with pytest.raises(RunFolderError, match="holds no games.jsonl"):
        judge_folder(tmp_path / "missing", "scripted:judge")
    with pytest.raises(ValueError, match="expected scripted:judge or an LLM spec"):
        make_judge("random")
    with pytest.raises(ValueError, match="unknown scripted judge"):
        make_judge("scripted:base")
    folder = write_folder(tmp_path / "run", KNOWN_EPISODES)
    with pytest.raises(ValueError, match="batch_size"):
        judge_folder(folder, "scripted:judge", batch_size=0)
    writer = RunFolder(folder)
    writer.acquire()  # a run still writing the folder
    try:
        with pytest.raises(RunFolderLocked):
            judge_folder(folder, "scripted:judge")
    finally:
        writer.close()
    assert "judge" not in RunFolder(folder).records()[0]


def test_games_cut_short_are_not_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Only the judging is under test here: the tables' handling of cut games is not.
    monkeypatch.setattr(judge_module.tables, "write_tables", lambda *args, **kwargs: [])
    cut = episode("cut", "fooled")
    cut["truncation_reason"] = "context_window"
    cut["outcome"] = None
    for info in cut["infos"].values():
        del info["outcome"]
    folder = write_folder(tmp_path / "run", [*KNOWN_EPISODES, cut])
    result = judge_folder(folder, "scripted:judge")
    assert (result["judged"], result["unfinished"]) == (len(KNOWN_EPISODES), 1)
    assert "judge" not in RunFolder(folder).records()[-1]


def test_llm_judges_sample_greedily_unless_the_spec_says_otherwise() -> None:
    pytest.importorskip("openai")
    url = "base_url=http://127.0.0.1:9/v1,api_key_env=TOMGYM_NO_KEY"
    greedy = make_judge(f"openai:judge-model,{url}")
    warm = make_judge(f"openai:judge-model,{url},temperature=0.3")
    assert greedy.temperature == 0.0 and warm.temperature == 0.3
    assert judge_label(f"openai:judge-model, {url}") == f"openai:judge-model,{url}"
    greedy.close()
    warm.close()


# ---- on real runs, in the report and on the command line ---------------------------------------------


def play_run_to_judge(out: Path, max_scenarios: int, **evaluate: Any) -> Path:
    """`out` holds a small TOM-SB evaluation: the scripted ToM defender against the base and the
    bluffing attacker, one episode of each of `max_scenarios` scenarios."""
    evaluate_tomsb(
        "scripted:tom_heuristic",
        ["base", "bluffing"],
        episodes_per_scenario=1,
        seeds=1,
        max_scenarios=max_scenarios,
        out_dir=out,
        **evaluate,
    )
    return out


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return play_run_to_judge(tmp_path_factory.mktemp("judge") / "run", max_scenarios=6)


def test_scripted_judge_agrees_with_the_rules_on_played_games(scripted_run: Path) -> None:
    result = judge_folder(scripted_run, "scripted:judge")
    for name, block in result["agreement"].items():
        assert block["agreement"] == 1.0, name
        assert block["judge_errors"] == 0 and block["kappa"] in (1.0, None)
    assert result["agreement"]["tom"]["n"] == len(RunFolder(scripted_run).records())


def test_report_and_cli_show_the_agreement_table(
    scripted_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["eval", "tomsb", "--judge", "scripted:judge", "--out", str(scripted_run)]) == 0
    printed = capsys.readouterr().out
    assert "judge" in printed and "scripted:judge" in printed
    make_report(scripted_run)
    table = (scripted_run / "tables" / "tomsb_judge_agreement.md").read_text()
    assert "kappa" in table and "scripted:judge" in table
    assert "trajectory ToM" in table and "extraction" in table
    assert "kappa" in (scripted_run / "tables" / "all.md").read_text()
    csv_head = (scripted_run / "tables" / "tomsb_judge_agreement.csv").read_text().splitlines()[0]
    assert "kappa_ci_low" in csv_head and "agreement_ci_high" in csv_head


def test_cli_errors_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["eval", "tomsb", "--out", str(tmp_path / "x")]) == 1
    assert "--defender" in capsys.readouterr().err
    assert cli_main(["eval", "tomsb", "--judge", "scripted:judge", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and len(err.strip().splitlines()) == 1
    fresh = tmp_path / "fresh"
    args = ["eval", "tomsb", "--defender", "scripted:naive", "--judge", "scripted:lenient"]
    assert cli_main([*args, "--out", str(fresh)]) == 1
    assert "unknown scripted judge" in capsys.readouterr().err
    assert not fresh.exists()  # refused before any game was played
