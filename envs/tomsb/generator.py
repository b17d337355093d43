"""Deterministic TOM-SB benchmark generator and universe-level train/validation/test splits.

`generate_benchmark(seed, n_universes)` builds `n_universes` universes from our own word banks
(`envs.tomsb.themes`), themes dealt round-robin in a seed-shuffled order so that every theme is
used (100 universes over 15 themes: 6 or 7 each). Each universe gets one person, one attacker and
one ground-truth leaf, and yields three scenarios, one per attacker prior level (0, 1 and 2 known
leading levels), as in the paper's 100 x 3 = 300 benchmark.

Ids are stable for a given seed: universe `tomsb-{theme}-{k:03d}` (k counts universes within
the theme) and scenario `tomsb-{theme}-{k:03d}-p{level}`. `Scenario.extra` records
`universe_id`, `fact_type`, `generator_seed` and, once split, `split`.

All randomness comes from `numpy.random.default_rng` seeded by `(seed, universe index)`, so the
first n universes do not depend on how many are generated in total.

`split_by_universe` puts every universe (all its prior levels) in exactly one split; the
published split leaked universes between train and eval, which ours never does.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

import numpy as np
from tomgym.envs.tomsb.themes import ATTACKER_NAMES, PERSON_NAMES, THEMES, Theme, draw_tree
from tomgym.envs.tomsb.universe import Scenario, Universe

SPLITS = ("train", "validation", "test")
PRIOR_LEVELS = (0, 1, 2)


PRIOR_LEVEL_SUFFIX = "-p"
"""Joins a universe id and a prior level into the id of that universe's scenario."""


def scenario_id_for(universe_id: str, level: int) -> str:
    """The id of `universe_id`'s scenario at prior `level` (`tomsb-{theme}-{k:03d}-p{level}`)."""
    return f"{universe_id}{PRIOR_LEVEL_SUFFIX}{level}"


def universe_id_of(scenario_id: str) -> str:
    """The universe id in a scenario id written by `scenario_id_for`; any other id (a published
    scenario's) is returned as it is, its own universe. Works on prefixed ids too
    (`seed1/tomsb-banking-002-p2` -> `seed1/tomsb-banking-002`)."""
    stem, suffix, level = scenario_id.rpartition(PRIOR_LEVEL_SUFFIX)
    return stem if suffix and stem and level.isdigit() else scenario_id


def generate_universe(theme: Theme, rng: np.random.Generator) -> Universe:
    """One validated universe of `theme`."""
    return Universe.from_dict(draw_tree(theme, rng), theme.levels)


def generate_benchmark(seed: int = 0, n_universes: int = 100) -> list[Scenario]:
    """`n_universes` x 3 prior levels scenarios, ordered by universe then prior level."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if isinstance(n_universes, bool) or not isinstance(n_universes, int) or n_universes < 1:
        raise ValueError(f"n_universes must be a positive integer, got {n_universes!r}")
    order = np.random.default_rng([int(seed), 0xBEEF]).permutation(len(THEMES))
    per_theme: dict[str, int] = defaultdict(int)
    scenarios: list[Scenario] = []
    for index in range(n_universes):
        theme = THEMES[int(order[index % len(THEMES)])]
        k = per_theme[theme.name]
        per_theme[theme.name] += 1
        rng = np.random.default_rng([int(seed), index])
        universe = generate_universe(theme, rng)
        leaves = universe.leaves()
        truth = leaves[int(rng.integers(len(leaves)))]
        person = PERSON_NAMES[int(rng.integers(len(PERSON_NAMES)))]
        attacker = ATTACKER_NAMES[int(rng.integers(len(ATTACKER_NAMES)))]
        universe_id = f"tomsb-{theme.name}-{k:03d}"
        for level in PRIOR_LEVELS:
            scenarios.append(
                Scenario(
                    scenario_id=scenario_id_for(universe_id, level),
                    universe=universe,
                    ground_truth=truth,
                    prior_level=level,
                    person=person,
                    theme=theme.name,
                    attacker_name=attacker,
                    extra=MappingProxyType(
                        {
                            "universe_id": universe_id,
                            "fact_type": theme.fact_type,
                            "generator_seed": int(seed),
                        }
                    ),
                )
            )
    return scenarios


def universe_key(scenario: Scenario) -> str:
    """What identifies a scenario's universe: `extra["universe_id"]`, else the tree itself.

    Falling back to the tree's content lets published data (which has no universe ids) be split
    by universe too.
    """
    uid = scenario.extra.get("universe_id") if scenario.extra else None
    if uid:
        return str(uid)
    return json.dumps(
        [list(scenario.levels), scenario.universe.to_dict()], sort_keys=True, ensure_ascii=False
    )


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    try:
        values = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):
        raise ValueError(f"fractions must be 3 numbers, got {fractions!r}") from None
    if len(values) != len(SPLITS) or any(not np.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"fractions must be 3 non-negative numbers, got {list(fractions)}")
    if abs(sum(values) - 1.0) > 1e-6:
        raise ValueError(f"fractions must sum to 1, got {list(fractions)} (sum {sum(values)})")
    return values  # type: ignore[return-value]


def split_by_universe(
    scenarios: Sequence[Scenario],
    fractions: Sequence[float] = (0.6, 0.2, 0.2),
    seed: int = 0,
) -> dict[str, list[Scenario]]:
    """Split into "train", "validation", "test" by universe, stratified by theme.

    Universes are grouped by theme (each group shuffled by `seed`, themes in a seeded order) and
    dealt one by one to the split that is furthest below its target share (a largest-deficit
    deal), so the totals match `fractions` to within one universe and each theme is spread over
    the splits in proportion as far as its size allows. Scenarios come back with
    `extra["split"]` set and in their input order within each split.
    """
    weights = _check_fractions(fractions)
    groups: dict[str, list[int]] = {}
    themes: dict[str, str] = {}
    for i, scenario in enumerate(scenarios):
        key = universe_key(scenario)
        groups.setdefault(key, []).append(i)
        if themes.setdefault(key, scenario.theme) != scenario.theme:
            raise ValueError(
                f"scenario {scenario.scenario_id!r}: universe {key[:60]!r} has two themes "
                f"({themes[key]!r} and {scenario.theme!r})"
            )
    rng = np.random.default_rng([int(seed), 0x5EED])
    by_theme: dict[str, list[str]] = defaultdict(list)
    for key in groups:
        by_theme[themes[key]].append(key)
    theme_names = sorted(by_theme)
    theme_order = [theme_names[int(i)] for i in rng.permutation(len(theme_names))]
    sequence: list[str] = []
    for theme in theme_order:
        keys = sorted(by_theme[theme])
        sequence.extend(keys[int(i)] for i in rng.permutation(len(keys)))

    counts = [0, 0, 0]
    assignment: dict[str, str] = {}
    for dealt, key in enumerate(sequence, start=1):
        deficits = [w * dealt - c for w, c in zip(weights, counts, strict=True)]
        best = max(range(len(SPLITS)), key=lambda s: (deficits[s], -s))
        counts[best] += 1
        assignment[key] = SPLITS[best]

    out: dict[str, list[Scenario]] = {name: [] for name in SPLITS}
    for scenario in scenarios:
        split = assignment[universe_key(scenario)]
        extra = MappingProxyType({**dict(scenario.extra or {}), "split": split})
        out[split].append(replace(scenario, extra=extra))
    return out
