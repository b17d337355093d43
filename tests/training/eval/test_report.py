"""Tables from JSONL alone, the HTML transcript viewer, PNG plots and the CLI error paths."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from tomgym.training.eval.html_viewer import render_html
from tomgym.training.eval.jobs import evaluate_decrypto, evaluate_tomsb
from tomgym.training.eval.report import make_report
from tomgym.training.eval.tables import write_tables
from tomgym.training.run_folder import RunFolder

REPO = Path(__file__).resolve().parents[3]
SMALL = {
    "attackers": ["base", "cross_examiner"],
    "episodes_per_scenario": 1,
    "seeds": 1,
    "max_scenarios": 3,
}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def two_defenders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder holding the games of two scripted defenders (as a checkpoint sweep would)."""
    base = tmp_path_factory.mktemp("report")
    for defender in ("naive", "tom_heuristic"):
        evaluate_tomsb(f"scripted:{defender}", out_dir=base / defender, **SMALL)
    merged = base / "merged"
    merged.mkdir()
    (merged / "games.jsonl").write_bytes(
        b"".join((base / d / "games.jsonl").read_bytes() for d in ("naive", "tom_heuristic"))
    )
    return base


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.tags: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        attributes = dict(attrs)
        if tag == "section" and attributes.get("class") == "game":
            self.ids.add(str(attributes["id"]))
        if tag == "script":
            self.scripts += 1


def test_tables_regenerate_from_jsonl_alone(two_defenders: Path, tmp_path: Path) -> None:
    run = two_defenders / "naive"
    original = {p.name: p.read_text() for p in (run / "tables").iterdir()}
    only_jsonl = tmp_path / "copy"
    only_jsonl.mkdir()
    (only_jsonl / "games.jsonl").write_bytes((run / "games.jsonl").read_bytes())
    write_tables(only_jsonl)
    regenerated = {p.name: p.read_text() for p in (only_jsonl / "tables").iterdir()}
    assert regenerated == original
    table = original["tomsb_outcomes.md"]
    assert "| all |" in table and "| base |" in table and "| cross_examiner |" in table
    header = original["tomsb_outcomes.csv"].splitlines()[0].split(",")
    assert {"attacker", "fooled_rate", "fooled_rate_ci_low", "hard_fooled_rate"} <= set(header)


def test_report_writes_plots_html_and_tables(two_defenders: Path) -> None:
    merged = two_defenders / "merged"
    paths = make_report(merged)
    names = {p.name for p in paths}
    assert {
        "outcomes_by_attacker.png",
        "fooling_vs_tom.png",
        "transcripts.html",
        "tomsb_defenders.md",
    } <= names
    for path in paths:
        assert path.stat().st_size > 0
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == PNG_MAGIC
    html = (merged / "transcripts.html").read_text()
    parser = _Collector()
    parser.feed(html)
    parser.close()
    game_ids = {r["game_id"] for r in RunFolder(merged).records()}
    assert parser.ids == {gid for gid in game_ids}  # every game, once per defender's run id
    assert parser.scripts == 1 and "details" in parser.tags


def test_single_defender_report_has_no_scatter(two_defenders: Path) -> None:
    names = {p.name for p in make_report(two_defenders / "naive")}
    assert "outcomes_by_attacker.png" in names and "fooling_vs_tom.png" not in names


def test_html_escapes_record_text(two_defenders: Path) -> None:
    record = RunFolder(two_defenders / "naive").records()[0]
    record = json.loads(json.dumps(record))
    record["game_id"] = 'g"<b>'
    record["turns"][0]["raw"] = "<script>alert(1)</script>"
    record["turns"][0]["parsed"] = {"prompt": "<img src=x onerror=alert(1)>", "reflection": "&"}
    page = render_html([record])
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_decrypto_report_heatmap(tmp_path: Path) -> None:
    out = tmp_path / "dec"
    evaluate_decrypto(["random"], mode="all", seeds=1, games=2, out_dir=out)
    paths = make_report(out)
    heatmap = next(p for p in paths if p.name == "decrypto_crossplay.png")
    assert heatmap.read_bytes()[:8] == PNG_MAGIC


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]):
    """Run `tomgym eval|report ...` in-process; returns (exit code, stdout, stderr)."""
    from tomgym.scripts import eval_cmd, report_cmd

    def run(command: str, *args: str) -> tuple[int, str, str]:
        code = (eval_cmd if command == "eval" else report_cmd).main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def _one_error_line(result: tuple[int, str, str]) -> str:
    code, _, err = result
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_cli_error_paths(cli, two_defenders: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "x")
    assert "unknown policy spec" in _one_error_line(
        cli("eval", "tomsb", "--defender", "nonsense", "--out", out)
    )
    assert "unknown split" in _one_error_line(
        cli("eval", "tomsb", "--defender", "scripted:naive", "--split", "dev", "--out", out)
    )
    assert "checkpoint not found" in _one_error_line(
        cli("eval", "tomsb", "--defender", "hf:/no/such/checkpoint/", "--out", out)
    )
    assert "unknown mode" in _one_error_line(
        cli("eval", "decrypto", "--models", "random", "--mode", "league", "--out", out)
    )
    assert "cannot read games file" in _one_error_line(
        cli(
            "eval",
            "replay",
            "--policy",
            "random",
            "--games",
            str(tmp_path / "none.json"),
            "--out",
            out,
        )
    )
    assert not Path(out).exists()
    assert "not a run folder" in _one_error_line(cli("report", str(tmp_path / "missing")))

    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    good = (two_defenders / "naive" / "games.jsonl").read_text().splitlines()
    content = good[0] + "\n{broken\n" + good[1] + "\n"
    (corrupt / "games.jsonl").write_text(content)
    assert "games.jsonl:2" in _one_error_line(cli("report", str(corrupt)))
    assert (corrupt / "games.jsonl").read_text() == content  # nothing lost

    existing = two_defenders / "naive"
    before = (existing / "games.jsonl").read_bytes()
    assert "already holds games" in _one_error_line(
        cli("eval", "tomsb", "--defender", "scripted:naive", "--out", str(existing))
    )
    assert (existing / "games.jsonl").read_bytes() == before


def test_cli_eval_and_report_succeed(cli, tmp_path: Path) -> None:
    out = tmp_path / "ok"
    result = cli(
        "eval",
        "tomsb",
        "--defender",
        "scripted:refusal",
        "--attackers",
        "base",
        "--seeds",
        "1",
        "--episodes-per-scenario",
        "1",
        "--max-scenarios",
        "2",
        "--out",
        str(out),
        "--quiet",
        "--no-report",
    )
    assert result[0] == 0, result[2]
    assert "| base |" in result[1]
    result = cli("report", str(out), "--quiet")
    assert result[0] == 0, result[2]
    assert "transcripts.html" in result[1]
