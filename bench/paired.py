"""Two settings compared in one run, in interleaved pairs: the rule every A/B benchmark here uses.

A CPU's speed drifts within a session (another VM on the host, thermal limits), so the settings
alternate which goes first from pair to pair (AB, BA, AB, ...): a machine that slows down during
the run weighs on both alike. The summary is the median of each and the ratio of the medians,
plus each pair's own ratio, so a reader sees whether the pairs agree.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence


def ratio(numerator: float, denominator: float) -> float | None:
    """`numerator / denominator` to 3 decimals; None where the denominator measured nothing."""
    return round(numerator / denominator, 3) if denominator > 0 else None


def interleaved(names: Sequence[str], pairs: int) -> Iterator[tuple[int, str]]:
    """(pair, name) in play order: `names` in order on even pairs, reversed on odd ones."""
    for pair in range(pairs):
        for name in names if pair % 2 == 0 else list(reversed(names)):
            yield pair, name


def summary(runs: dict[str, list[float]], first: str, second: str) -> dict[str, object]:
    """Medians of every setting's readings, `{first}_vs_{second}` (ratio of the medians) and
    `pair_ratios` (first / second, pair by pair)."""
    medians = {name: statistics.median(values) for name, values in runs.items()}
    return {
        "median": medians,
        f"{first}_vs_{second}": ratio(medians[first], medians[second]),
        "pair_ratios": [ratio(a, b) for a, b in zip(runs[first], runs[second], strict=True)],
    }
