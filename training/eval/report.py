"""`make_report(run_dir)`: tables, PNG plots and the HTML transcript viewer from games.jsonl alone.

Writes into the run folder (and returns the paths written):
- `tables/*.md|csv` (`training.eval.tables`), `transcripts.html` (`training.eval.html_viewer`);
- TOM-SB: `plots/outcomes_by_attacker.png` (stacked outcome shares per attacker variant, all
  scenarios and hard ones), `plots/fooling_vs_tom.png` (fooled rate vs trajectory ToM per
  defender/checkpoint with 95% CIs and Pearson r; only when the run holds several);
- Decrypto: `plots/decrypto_crossplay.png` (team win rate and average rounds per matchup: rows =
  encoder/decoder team, columns = interceptor; an encoder x decoder grid when every game had the
  same interceptor, i.e. ad-hoc play); replay runs: `plots/decrypto_replay.png`.

Matplotlib runs on the Agg backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 - the backend must be chosen first
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402
from tomgym.rewards.episode import eval_block  # noqa: E402
from tomgym.training.eval import html_viewer, metrics, tables  # noqa: E402
from tomgym.training.run_folder import RunFolder, duplicate_warning  # noqa: E402

PLOTS_DIR = "plots"
OUTCOME_COLOURS = {
    "fooled": "#2e7d32",
    "baited": "#9e9e9e",
    "detected": "#f9a825",
    "extracted": "#c62828",
}


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def plot_outcomes_by_attacker(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Stacked outcome shares per attacker variant, for all scenarios and hard ones."""
    summary = metrics.summarize(records, ["attacker"])
    groups = {"all": summary["overall"], **summary["groups"]["attacker"]}
    names = list(groups)
    fig, axes = plt.subplots(1, 2, figsize=(max(8, 2.2 * len(names)), 4.2), sharey=True)
    for ax, subset in zip(axes, ("all scenarios", "hard (prior 1-2)"), strict=True):
        bottom = np.zeros(len(names))
        blocks = [
            groups[n] if subset == "all scenarios" else groups[n].get("hard", {}) for n in names
        ]
        for outcome in ("fooled", "baited", "detected", "extracted"):
            values = np.array([b.get(f"{outcome}_rate") or 0.0 for b in blocks]) * 100
            ax.bar(names, values, bottom=bottom, color=OUTCOME_COLOURS[outcome], label=outcome)
            for x, (v, b) in enumerate(zip(values, bottom, strict=True)):
                if v >= 8:
                    ax.text(
                        x,
                        b + v / 2,
                        f"{v:.0f}",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="black" if outcome in ("baited", "detected") else "white",
                    )
            bottom += values
        for x, block in enumerate(blocks):
            ax.text(x, 101, f"n={block.get('n', 0)}", ha="center", va="bottom", fontsize=8)
        ax.set_title(subset)
        ax.set_ylim(0, 108)
        ax.tick_params(axis="x", rotation=20)
    axes[0].set_ylabel("share of episodes (%)")
    defenders = sorted({str(metrics.group_value(r, "defender")) for r in records})
    fig.suptitle(f"TOM-SB outcomes per attacker variant — defender: {', '.join(defenders)}")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return _save(fig, path)


def plot_fooling_vs_tom(records: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
    """Fooled rate vs trajectory ToM, one point per defender/checkpoint (needs two or more)."""
    groups = metrics.summarize(records, ["checkpoint"])["groups"]["checkpoint"]
    if len(groups) < 2:
        return None
    names = list(groups)
    tom = np.array([groups[n]["tom_accuracy"] for n in names]) * 100
    fooled = np.array([groups[n]["fooled_rate"] for n in names]) * 100

    def err(metric: str, centre: np.ndarray) -> np.ndarray:
        cis = np.array([groups[n][f"{metric}_ci"] for n in names], dtype=float) * 100
        return np.vstack([centre - cis[:, 0], cis[:, 1] - centre])

    fig, ax = plt.subplots(figsize=(6, 5))
    ax.errorbar(
        tom,
        fooled,
        xerr=err("tom_accuracy", tom),
        yerr=err("fooled_rate", fooled),
        fmt="o",
        capsize=3,
        color="#1565c0",
        ecolor="#90a4ae",
    )
    for name, x, y in zip(names, tom, fooled, strict=True):
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    title = "Fooling vs trajectory ToM per defender"
    if len(names) >= 3 and np.std(tom) > 0 and np.std(fooled) > 0:
        r = stats.pearsonr(tom, fooled).statistic
        title += f" (Pearson r = {r:.2f})"
    ax.set(
        xlabel="trajectory ToM accuracy (%)",
        ylabel="fooled (%)",
        title=title,
        xlim=(-5, 105),
        ylim=(-5, 105),
    )
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _heatmap(
    ax: Any,
    grid: np.ndarray,
    rows: list[str],
    cols: list[str],
    title: str,
    fmt: str,
    vmin: float,
    vmax: float,
    cmap: str,
    row_labels: bool = True,
) -> Any:
    image = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows if row_labels else [])
    for (i, j), value in np.ndenumerate(grid):
        if not np.isnan(value):
            # White text on the dark ends of the colour map, black in the light middle.
            share = (value - vmin) / (vmax - vmin) if vmax > vmin else 0.5
            colour = "black" if 0.25 < share < 0.8 else "white"
            ax.text(j, i, format(value, fmt), ha="center", va="center", fontsize=9, color=colour)
    ax.set_title(title)
    return image


def plot_decrypto_crossplay(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Team win rate and average rounds per matchup as heatmaps."""
    rows = tables.decrypto_matchup_rows(records)
    interceptors = sorted({r["interceptor"] for r in rows})
    if len(interceptors) == 1:  # ad-hoc: encoder x decoder against one interceptor
        row_names = sorted({r["encoder"] for r in rows})
        col_names = sorted({r["decoder"] for r in rows})
        index = {(r["encoder"], r["decoder"]): r for r in rows}
        xlabel, ylabel = "decoder", "encoder"
        subtitle = f"interceptor: {interceptors[0]}"
    else:
        row_names = sorted({f"{r['encoder']} + {r['decoder']}" for r in rows})
        col_names = interceptors
        index = {(f"{r['encoder']} + {r['decoder']}", r["interceptor"]): r for r in rows}
        xlabel, ylabel = "interceptor", "encoder + decoder"
        subtitle = "team vs interceptor"
    shape = (len(row_names), len(col_names))
    win = np.full(shape, np.nan)
    rounds = np.full(shape, np.nan)
    for i, rn in enumerate(row_names):
        for j, cn in enumerate(col_names):
            row = index.get((rn, cn))
            if row is not None:
                win[i, j] = 100 * (row["team_win_rate"] or 0.0)
                rounds[i, j] = row["avg_rounds"] or 0.0
    width = max(9, 1.3 * len(col_names) * 2 + 4)
    fig, axes = plt.subplots(
        1, 2, figsize=(width, max(3.5, 0.5 * len(row_names) + 2)), layout="constrained"
    )
    for ax, grid, title, fmt, vmax, cmap in (
        (axes[0], win, "team win rate (%)", ".0f", 100, "RdYlGn"),
        (axes[1], rounds, "average rounds", ".1f", 8, "viridis"),
    ):
        image = _heatmap(
            ax, grid, row_names, col_names, title, fmt, 0, vmax, cmap, row_labels=ax is axes[0]
        )
        ax.set_xlabel(xlabel)
        fig.colorbar(image, ax=ax, fraction=0.046)
    axes[0].set_ylabel(ylabel)
    fig.suptitle(f"Decrypto cross-play ({subtitle}; mean over seeds)")
    return _save(fig, path)


def plot_decrypto_replay(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """The replaying policy's per-round error rate next to the recorded players'."""
    summary = metrics.replay_summary(records)
    keys = ("policy", "recorded_same_rounds", "recorded_all_rounds")
    labels = ["policy", "recorded\n(same rounds)", "recorded\n(all rounds)"]
    values = np.array([(summary[k]["rate"] or 0.0) * 100 for k in keys])
    cis = np.array(
        [[np.nan if c is None else c * 100 for c in summary[k]["rate_ci"]] for k in keys]
    )
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(
        labels,
        values,
        color=["#1565c0", "#78909c", "#b0bec5"],
        yerr=np.vstack([values - cis[:, 0], cis[:, 1] - values]),
        capsize=4,
    )
    ax.set_ylabel(f"{summary['metric'].replace('_', ' ')} (%)")
    ax.set_title(f"Decrypto replay as {summary['role']} (95% CI)")
    return _save(fig, path)


def check_run_folder(run_dir: str | Path) -> list[str]:
    """One-line warnings about a run folder's records (repeated game ids, written by versions
    without run-folder locks); [] for a clean folder. Reads games.jsonl only."""
    folder = RunFolder(run_dir)
    repeated = folder.duplicate_keys()
    return [duplicate_warning(folder, repeated)] if repeated else []


def make_report(run_dir: str | Path) -> list[Path]:
    """Regenerate every table, plot and the transcript viewer of a run folder; returns the paths.

    Records are de-duplicated on their key (game id and players; see `check_run_folder` for the warning); records
    that mix environments are refused with `MetricsError` before any file is written."""
    run_dir = Path(run_dir)
    records = RunFolder(run_dir).records()
    if not records:
        raise metrics.MetricsError(f"{run_dir} holds no finished games yet")
    kind = metrics.single_env_kind(records)
    paths = list(tables.write_tables(run_dir, records))
    plots = run_dir / PLOTS_DIR
    if kind == "tomsb":
        paths.append(plot_outcomes_by_attacker(records, plots / "outcomes_by_attacker.png"))
        scatter = plot_fooling_vs_tom(records, plots / "fooling_vs_tom.png")
        if scatter is not None:
            paths.append(scatter)
    elif any("replay_role" in eval_block(r) for r in records):
        paths.append(plot_decrypto_replay(records, plots / "decrypto_replay.png"))
    else:
        paths.append(plot_decrypto_crossplay(records, plots / "decrypto_crossplay.png"))
    paths.append(html_viewer.write_html(run_dir, records))
    return paths
