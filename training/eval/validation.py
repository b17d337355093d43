"""Validation tables for a training run: reward and reward components, averaged per route.

The trainer's evaluation (`training.rl.trainer.evaluate`) plays validation games through the same
runner and router as every evaluation job and scores each game with the run's reward composer
(the numbers the run optimises and picks its best checkpoint by); this module turns those
scores into the table it logs and stores in `eval.jsonl`:

    {"table": {route: {metric: mean}}, "mean": {metric: mean over routes},
     "rewards": [total per game, in game order; None for dropped games], "games": n}

`format_table(result)` renders it as plain text (routes x metrics, then the mean row).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScoredGame:
    """One validation game: its route, reward total (None = dropped) and named metrics."""

    route: str
    total: float | None
    metrics: Mapping[str, float] = field(default_factory=dict)


def validation_table(games: Sequence[ScoredGame]) -> dict[str, Any]:
    """Per-route means of `reward` (the total) and every metric; dropped games count only in
    `rewards` (as None) and `games`."""
    per_route: dict[str, dict[str, list[float]]] = {}
    for game in games:
        if game.total is None:
            continue
        bucket = per_route.setdefault(game.route or "all", {})
        for name, value in {"reward": game.total, **game.metrics}.items():
            bucket.setdefault(name, []).append(float(value))
    table = {r: {k: statistics.fmean(v) for k, v in m.items()} for r, m in per_route.items()}
    names = sorted({k for m in table.values() for k in m})
    mean = {k: statistics.fmean(m[k] for m in table.values() if k in m) for k in names}
    return {
        "table": table,
        "mean": mean,
        "rewards": [g.total for g in games],
        "games": len(games),
    }


def format_table(result: Mapping[str, Any], columns: Sequence[str] | None = None) -> str:
    """A plain-text table (routes x metrics) of a `validation_table` result."""
    table = result["table"]
    cols = list(columns or sorted({k for m in table.values() for k in m}))
    lines = [" | ".join(["variant", *cols])]
    for route, m in sorted(table.items()):
        lines.append(" | ".join([route, *(f"{m.get(c, math.nan):.3f}" for c in cols)]))
    lines.append(" | ".join(["mean", *(f"{result['mean'].get(c, math.nan):.3f}" for c in cols)]))
    return "\n".join(lines)
