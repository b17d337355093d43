"""Markdown and CSV tables made from episode records alone (a run folder's games.jsonl).

Nothing here replays a game or reads summary.json: `write_tables(run_dir)` rebuilds every table
from `games.jsonl`, so a report can always be regenerated. Markdown cells show "value [low,
high]" (95% CI; rates as percentages); the CSV files hold the same rows with plain numbers and
separate `<metric>_ci_low` / `<metric>_ci_high` columns.

Tables written to `RUN_DIR/tables/`:
- TOM-SB: `tomsb_outcomes` (overall and per attacker variant: outcome rates on all scenarios and
  on hard ones, trajectory ToM, stepwise ToM, leaks, turns, format), `tomsb_prior_levels`
  (attacker x prior level), `tomsb_defenders` when the records hold several defenders or
  checkpoints, and `tomsb_judge_agreement` when an LLM judge scored them
  (`training.eval.agreement`).
- Decrypto: `decrypto_matchups` (per encoder/decoder/interceptor: mean +- std over seeds of the
  headline metrics, plus pooled rates with CIs), `decrypto_tom` when the ToM experiments ran, and
  `decrypto_replay` for replay runs (the policy's per-round rate vs the recorded players').

When the runner cut games short (`truncation_reason`, e.g. a context window outgrown), every
table whose rows carry it gains a `truncated %` column. Records are de-duplicated on their key
(`rewards.episode.record_key`) and must all come from one environment: a mix is refused
(`MetricsError`) before any file is written.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tomgym.rewards.episode import dedupe, eval_block, truncation_reason
from tomgym.training.eval import agreement, metrics
from tomgym.training.run_folder import RunFolder

TABLES_DIR = "tables"


@dataclass(frozen=True)
class Column:
    """One table column: `metric` in a metrics block, shown as a rate (%) or a plain number."""

    title: str
    metric: str
    rate: bool = True
    ci: bool = True
    std: bool = False  # a "mean +- std over seeds" cell: reads `metric` and `metric + "_std"`


@dataclass
class Table:
    """Rows of labelled metrics blocks plus the columns to show."""

    name: str
    title: str
    label_columns: list[str]
    columns: list[Column]
    rows: list[tuple[list[str], Mapping[str, Any]]]

    def markdown(self) -> str:
        head = self.label_columns + [c.title for c in self.columns]
        lines = [
            f"### {self.title}",
            "",
            "| " + " | ".join(head) + " |",
            "|"
            + "|".join("---" if i < len(self.label_columns) else "---:" for i in range(len(head)))
            + "|",
        ]
        for labels, block in self.rows:
            cells = [_escape(str(x)) for x in labels] + [_cell(block, c) for c in self.columns]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        head = list(self.label_columns)
        for column in self.columns:
            head.append(column.metric)
            if column.std:
                head.append(f"{column.metric}_std")
            elif column.ci:
                head += [f"{column.metric}_ci_low", f"{column.metric}_ci_high"]
        writer.writerow(head)
        for labels, block in self.rows:
            row: list[Any] = list(labels)
            for column in self.columns:
                row.append(_plain(block.get(column.metric)))
                if column.std:
                    row.append(_plain(block.get(f"{column.metric}_std")))
                elif column.ci:
                    low, high = block.get(f"{column.metric}_ci") or (None, None)
                    row += [_plain(low), _plain(high)]
            writer.writerow(row)
        return buffer.getvalue()


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def _plain(value: Any) -> Any:
    return "" if value is None else round(value, 6) if isinstance(value, float) else value


def _number(value: float, rate: bool) -> str:
    return f"{100 * value:.1f}" if rate else f"{value:.2f}"


def _cell(block: Mapping[str, Any], column: Column) -> str:
    value = block.get(column.metric)
    if value is None:
        return "-"
    if not isinstance(value, int | float):
        return _escape(str(value))
    if isinstance(value, int):
        return str(value)
    text = _number(value, column.rate)
    if column.std:
        std = block.get(f"{column.metric}_std")
        return text if std is None else f"{text} ± {_number(std, column.rate)}"
    if column.ci:
        low, high = block.get(f"{column.metric}_ci") or (None, None)
        if low is not None and high is not None:
            text += f" [{_number(low, column.rate)}, {_number(high, column.rate)}]"
    return text


def _flatten_hard(block: Mapping[str, Any]) -> dict[str, Any]:
    """The block with its `hard` sub-block's metrics as `hard_<metric>` keys."""
    flat = dict(block)
    for key, value in (block.get("hard") or {}).items():
        flat[f"hard_{key}"] = value
    return flat


ROLES = ("encoder", "decoder", "interceptor")
TRUNCATED_COLUMN = Column("truncated %", "truncated_rate")
HEADLINE = ("avg_rounds", "avg_miscommunications", "avg_interceptions", "team_win_rate")


def _outcome_columns(hard: bool = False) -> list[Column]:
    """One rate column per TOM-SB outcome, over all games or (`hard`) the hard prior levels."""
    title, metric = ("hard ", "hard_") if hard else ("", "")
    return [Column(f"{title}{o} %", f"{metric}{o}_rate") for o in metrics.TOMSB_OUTCOMES]


COUNT_COLUMN = Column("n", "n", rate=False, ci=False)
TOM_COLUMNS = [Column("ToM %", "tom_accuracy"), Column("stepwise ToM %", "stepwise_tom")]
AVG_TURNS_COLUMN = Column("avg turns", "avg_turns", rate=False)
TOMSB_COLUMNS = [
    COUNT_COLUMN,
    *_outcome_columns(),
    Column("hard n", "hard_n", rate=False, ci=False),
    *_outcome_columns(hard=True),
    *TOM_COLUMNS,
    Column("leak penalty", "leak_penalty", rate=False),
    AVG_TURNS_COLUMN,
    Column("format failures", "format_failures", rate=False),
]
# Per prior level, the headline columns only: a level is either all hard or not hard at all.
TOMSB_LEVEL_COLUMNS = [COUNT_COLUMN, *_outcome_columns(), *TOM_COLUMNS, AVG_TURNS_COLUMN]
JUDGE_COLUMNS = [
    COUNT_COLUMN,
    Column("judge errors", "judge_errors", rate=False, ci=False),
    Column("excluded", "excluded", rate=False, ci=False),
    Column("agreement %", "agreement"),
    Column("kappa", "kappa", rate=False),
    Column("judge+ rules+", "judge_yes_rules_yes", rate=False, ci=False),
    Column("judge+ rules-", "judge_yes_rules_no", rate=False, ci=False),
    Column("judge- rules+", "judge_no_rules_yes", rate=False, ci=False),
    Column("judge- rules-", "judge_no_rules_no", rate=False, ci=False),
]
DECRYPTO_COLUMNS = [
    Column("games", "games", rate=False, ci=False),
    Column("rounds", "avg_rounds", rate=False, std=True),
    Column("miscomm.", "avg_miscommunications", rate=False, std=True),
    Column("intercepts", "avg_interceptions", rate=False, std=True),
    Column("team win %", "team_win_rate", std=True),
    Column("team win % (pooled)", "pooled_team_win_rate"),
]


def tomsb_tables(records: Sequence[Mapping[str, Any]]) -> list[Table]:
    summary = metrics.summarize(records, ["attacker", "attacker+prior_level", "defender"])
    overall = summary["overall"]
    rows = [(["all"], _flatten_hard(overall))]
    rows += [([name], _flatten_hard(b)) for name, b in summary["groups"]["attacker"].items()]
    tables = [
        Table(
            "tomsb_outcomes",
            "TOM-SB outcomes per attacker variant (95% CI; hard = prior level 1-2)",
            ["attacker"],
            TOMSB_COLUMNS,
            rows,
        )
    ]
    level_rows = [
        (["all", level], block) for level, block in overall.get("by_prior_level", {}).items()
    ]
    for name, block in summary["groups"]["attacker+prior_level"].items():
        attacker, _, level = name.rpartition("/")
        level_rows.append(([attacker, level], block))
    tables.append(
        Table(
            "tomsb_prior_levels",
            "TOM-SB per prior level (95% CI)",
            ["attacker", "prior level"],
            TOMSB_LEVEL_COLUMNS,
            level_rows,
        )
    )
    defenders = summary["groups"]["defender"]
    if len(defenders) > 1:
        tables.append(
            Table(
                "tomsb_defenders",
                "TOM-SB per defender (95% CI)",
                ["defender"],
                TOMSB_COLUMNS,
                [([name], _flatten_hard(b)) for name, b in defenders.items()],
            )
        )
    judged = agreement.agreement_rows(records)
    if judged:
        tables.append(
            Table(
                "tomsb_judge_agreement",
                "TOM-SB judges vs the rules (agreement: Wilson 95% CI; Cohen's kappa: bootstrap "
                "95% CI)",
                ["judge", "comparison"],
                JUDGE_COLUMNS,
                judged,
            )
        )
    return tables


def decrypto_matchup_rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per matchup: headline metrics' mean and std over evaluation seeds, plus the pooled block.

    Records are bucketed by their (encoder, decoder, interceptor) values directly rather than by
    parsing group names, since specs may hold any character ("hf:runs/a/checkpoint-10").
    """
    buckets: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for record in records:
        key = tuple(metrics.group_value(record, role) for role in ROLES)
        buckets.setdefault(key, []).append(record)  # type: ignore[arg-type]
    rows = []
    for (encoder, decoder, interceptor), games in sorted(buckets.items()):
        pooled = metrics.metrics_block(games)
        per_seed: dict[str, list[Mapping[str, Any]]] = {}
        for record in games:
            per_seed.setdefault(metrics.group_value(record, "seed"), []).append(record)
        seed_blocks = [metrics.metrics_block(g) for g in per_seed.values()]
        row: dict[str, Any] = {
            "encoder": encoder,
            "decoder": decoder,
            "interceptor": interceptor,
            "games": pooled["n"],
            "seeds": len(seed_blocks),
            "pooled": pooled,
        }
        for name, values in metrics.mean_std_over(seed_blocks, HEADLINE).items():
            row[name] = values["mean"]
            row[f"{name}_std"] = values["std"]
        row["pooled_team_win_rate"] = pooled["team_win_rate"]
        row["pooled_team_win_rate_ci"] = pooled["team_win_rate_ci"]
        row["truncated_rate"] = pooled["truncated_rate"]
        row["truncated_rate_ci"] = pooled["truncated_rate_ci"]
        rows.append(row)
    return rows


def decrypto_tables(records: Sequence[Mapping[str, Any]]) -> list[Table]:
    if any("replay_role" in eval_block(r) for r in records):
        return [replay_table(records)]
    rows = decrypto_matchup_rows(records)
    tables = [
        Table(
            "decrypto_matchups",
            "Decrypto per matchup (mean ± std over seeds; pooled win rate with 95% CI)",
            ["encoder", "decoder", "interceptor"],
            DECRYPTO_COLUMNS,
            [([r["encoder"], r["decoder"], r["interceptor"]], r) for r in rows],
        )
    ]
    tom_metrics = sorted(
        {
            k
            for r in rows
            for k in r["pooled"]
            if k.startswith("tom_") and not k.endswith(("_ci", "_n"))
        }
    )
    if tom_metrics:
        tables.append(
            Table(
                "decrypto_tom",
                "Decrypto theory-of-mind rates (mean of per-game rates, 95% CI)",
                ["encoder", "decoder", "interceptor"],
                [Column(m.removeprefix("tom_").replace("_", " "), m) for m in tom_metrics],
                [([r["encoder"], r["decoder"], r["interceptor"]], r["pooled"]) for r in rows],
            )
        )
    return tables


def replay_table(records: Sequence[Mapping[str, Any]]) -> Table:
    summary = metrics.replay_summary(records)
    policy = next(iter(records))["policies"][f"{summary['role']}_0"].get("name", "policy")
    rows = []
    for label, key in (
        (str(policy), "policy"),
        ("recorded players, same rounds", "recorded_same_rounds"),
        ("recorded players, all rounds", "recorded_all_rounds"),
    ):
        block = summary[key]
        rows.append(
            (
                [label],
                {"rounds": block["rounds"], "rate": block["rate"], "rate_ci": block["rate_ci"]},
            )
        )
    return Table(
        "decrypto_replay",
        f"Decrypto replay as {summary['role']}: {summary['metric'].replace('_', ' ')} (95% CI)",
        ["player"],
        [Column("rounds", "rounds", rate=False, ci=False), Column("rate %", "rate")],
        rows,
    )


def make_tables(records: Sequence[Mapping[str, Any]]) -> list[Table]:
    """Every table the records support (see the module docstring)."""
    records = dedupe(records)[0]
    if not records:
        raise metrics.MetricsError("no episode records to tabulate")
    kind = metrics.single_env_kind(records)
    made = tomsb_tables(records) if kind == "tomsb" else decrypto_tables(records)
    if any(truncation_reason(r) is not None for r in records):
        for table in made:
            if any("truncated_rate" in block for _, block in table.rows):
                table.columns = [*table.columns, TRUNCATED_COLUMN]
    return made


def write_tables(
    run_dir: str | Path, records: Sequence[Mapping[str, Any]] | None = None
) -> list[Path]:
    """Write `tables/<name>.md`, `tables/<name>.csv` and `tables/all.md`; returns the paths.

    `records` default to the run folder's games.jsonl (pass them only to avoid a second read).
    """
    run_dir = Path(run_dir)
    if records is None:
        records = RunFolder(run_dir).records()
    made = make_tables(records)  # before anything is written: bad records leave no partial tables/
    out = run_dir / TABLES_DIR
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for table in made:
        for suffix, text in ((".md", table.markdown()), (".csv", table.csv())):
            path = out / f"{table.name}{suffix}"
            path.write_text(text, encoding="utf-8")
            paths.append(path)
    combined = out / "all.md"
    combined.write_text("\n".join(t.markdown() for t in made), encoding="utf-8")
    paths.append(combined)
    return paths
