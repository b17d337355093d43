"""Validation tables for a training run: reward and reward components, averaged per route.

The trainer's evaluation (`training.rl.trainer.evaluate`) plays validation games through the same
runner and router as every evaluation job and scores each game with the run's reward composer
(the numbers the run optimises and picks its best checkpoint by); this module turns those
scores into the table it logs and stores in `eval.jsonl`:

    {"table": {route: {metric: mean}}, "mean": {metric: mean over routes},
     "rewards": [total per game, in game order; None for dropped games], "games": n,
     "truncated": {reason: games}}

Games the runner cut short (a conversation that outgrew the context window: the record's
`truncation_reason`) are scored like any other game and also counted in `truncated`.
`format_table(result)` renders it as plain text (routes x metrics, then the mean row, then a
line naming the truncated games when there are any).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ScoredGame:
    """One validation game: its route, reward total (None = dropped), named metrics and, for a
    game the runner cut short, its record's `truncation_reason`."""

    route: str
    total: float | None
    metrics: Mapping[str, float] = field(default_factory=dict)
    truncation_reason: str | None = None


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
    truncated: dict[str, int] = {}
    for game in games:
        if game.truncation_reason is not None:
            truncated[game.truncation_reason] = truncated.get(game.truncation_reason, 0) + 1
    return {
        "table": table,
        "mean": mean,
        "rewards": [g.total for g in games],
        "games": len(games),
        "truncated": dict(sorted(truncated.items())),
    }


def format_table(result: Mapping[str, Any], columns: Sequence[str] | None = None) -> str:
    """A plain-text table (routes x metrics) of a `validation_table` result."""
    table = result["table"]
    cols = list(columns or sorted({k for m in table.values() for k in m}))
    lines = [" | ".join(["variant", *cols])]
    for route, m in sorted(table.items()):
        lines.append(" | ".join([route, *(f"{m.get(c, math.nan):.3f}" for c in cols)]))
    lines.append(" | ".join(["mean", *(f"{result['mean'].get(c, math.nan):.3f}" for c in cols)]))
    truncated = result.get("truncated") or {}
    if truncated:
        reasons = ", ".join(f"{n} {reason}" for reason, n in truncated.items())
        lines.append(f"truncated: {sum(truncated.values())} of {result['games']} games ({reasons})")
    return "\n".join(lines)
