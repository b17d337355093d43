"""Generator, themes, splits and the Benchmark API (no shared data needed)."""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from tomgym.envs.tomsb.benchmark import (
    Benchmark,
    from_jsonl,
    hf_rows,
    load_benchmark,
    to_hf_dataset,
    to_jsonl,
)
from tomgym.envs.tomsb.generator import (
    SPLITS,
    generate_benchmark,
    generate_universe,
    split_by_universe,
    universe_id_of,
    universe_key,
)
from tomgym.envs.tomsb.themes import (
    ATTACKER_NAMES,
    PERSON_NAMES,
    THEMES,
    Children,
    Words,
)
from tomgym.envs.tomsb.universe import Universe, normalise_name

ID_PATTERN = re.compile(r"^tomsb-(?P<theme>[a-z_]+)-(?P<k>\d{3})-p(?P<level>[012])$")


@pytest.fixture(scope="module")
def benchmark() -> list:
    return generate_benchmark(seed=0)


def test_universe_id_of_strips_only_a_prior_level_suffix() -> None:
    # Prefixed ids (bench_heldout keys games by benchmark seed) keep their prefix.
    assert universe_id_of("seed1/tomsb-banking-002-p2") == "seed1/tomsb-banking-002"
    # Published or hand-written ids are their own universe.
    for own in ("example-3", "tomsb-x-p", "-p1", "step-pa", "tomsb-banking-002"):
        assert universe_id_of(own) == own


def test_three_hundred_valid_scenarios(benchmark: list) -> None:
    assert len(benchmark) == 300
    assert len({s.scenario_id for s in benchmark}) == 300
    per_universe: dict[str, list] = defaultdict(list)
    for s in benchmark:
        match = ID_PATTERN.match(s.scenario_id)
        assert match, s.scenario_id
        assert match["theme"] == s.theme
        assert int(match["level"]) == s.prior_level
        assert s.scenario_id.startswith(s.extra["universe_id"])
        assert universe_id_of(s.scenario_id) == s.extra["universe_id"] == universe_key(s)
        # The universe survives a round trip through the published layout and validation.
        assert Universe.from_dict(s.universe.to_dict(), s.levels) == s.universe
        names = [n for d in range(3) for n in s.universe.nodes(d)]
        assert len({normalise_name(n) for n in names}) == 39
        assert s.universe.is_path(s.prior)
        assert s.person in PERSON_NAMES and s.attacker_name in ATTACKER_NAMES
        per_universe[s.extra["universe_id"]].append(s)
    assert len(per_universe) == 100
    for group in per_universe.values():
        # One universe = one secret seen at the three prior levels, as in the paper.
        assert sorted(s.prior_level for s in group) == [0, 1, 2]
        assert len({s.ground_truth for s in group}) == 1
        assert len({(s.person, s.attacker_name) for s in group}) == 1
    distinct_trees = {json.dumps(s.universe.to_dict()) for s in benchmark}
    assert len(distinct_trees) == 100


def test_every_theme_used_evenly(benchmark: list) -> None:
    counts = Counter(s.theme for s in benchmark if s.prior_level == 0)
    assert set(counts) == {t.name for t in THEMES}
    assert len(THEMES) >= 12
    assert max(counts.values()) - min(counts.values()) <= 1


def test_same_seed_same_bytes_different_seed_differs(tmp_path: Path) -> None:
    to_jsonl(generate_benchmark(seed=7), tmp_path / "a.jsonl")
    to_jsonl(generate_benchmark(seed=7), tmp_path / "b.jsonl")
    to_jsonl(generate_benchmark(seed=8), tmp_path / "c.jsonl")
    a, b, c = ((tmp_path / f"{x}.jsonl").read_bytes() for x in "abc")
    assert a == b
    assert a != c
    trees_7 = {json.loads(line)["universe"].__repr__() for line in a.splitlines()}
    trees_8 = {json.loads(line)["universe"].__repr__() for line in c.splitlines()}
    assert not trees_7 & trees_8


def test_first_universes_do_not_depend_on_total() -> None:
    assert generate_benchmark(seed=3, n_universes=10) == generate_benchmark(seed=3)[:30]


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_bad_seed_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="seed"):
        generate_benchmark(seed=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("theme", THEMES, ids=lambda t: t.name)
def test_each_theme_builds_many_distinct_valid_universes(theme) -> None:
    trees = set()
    for seed in range(40):
        universe = generate_universe(theme, np.random.default_rng(seed))
        assert universe.levels == theme.levels
        trees.add(json.dumps(universe.to_dict()))
    assert len(trees) == 40
    # Fixed word banks must not clash across levels, or draws would silently shrink.
    banks = [p.bank() if isinstance(p, Words | Children) else [] for p in theme.pools]
    flat = [normalise_name(n) for bank in banks for n in bank]
    assert len(flat) == len(set(flat)), theme.name


def test_split_has_no_universe_leak_and_right_sizes(benchmark: list) -> None:
    parts = split_by_universe(benchmark, seed=0)
    assert set(parts) == set(SPLITS)
    universes = {name: {universe_key(s) for s in part} for name, part in parts.items()}
    assert not universes["train"] & universes["validation"]
    assert not universes["train"] & universes["test"]
    assert not universes["validation"] & universes["test"]
    assert [len(universes[n]) for n in SPLITS] == [60, 20, 20]
    assert sum(len(p) for p in parts.values()) == 300
    for name, part in parts.items():
        assert all(s.extra["split"] == name for s in part)
        assert Counter(s.prior_level for s in part) == {
            0: len(part) // 3,
            1: len(part) // 3,
            2: len(part) // 3,
        }
    # Stratified: every theme (6-7 universes) has universes in training and in evaluation.
    train_themes = {s.theme for s in parts["train"]}
    eval_themes = {s.theme for s in parts["validation"] + parts["test"]}
    assert train_themes == eval_themes == {t.name for t in THEMES}


def test_split_deterministic_and_seeded(benchmark: list) -> None:
    def ids(parts: dict) -> dict:
        return {k: [s.scenario_id for s in v] for k, v in parts.items()}

    assert ids(split_by_universe(benchmark, seed=1)) == ids(split_by_universe(benchmark, seed=1))
    assert ids(split_by_universe(benchmark, seed=1)) != ids(split_by_universe(benchmark, seed=2))


@pytest.mark.parametrize("fractions", [(0.5, 0.5), (0.6, 0.3, 0.3), (1.2, -0.1, -0.1), ("a", 1, 0)])
def test_bad_fractions(benchmark: list, fractions: tuple) -> None:
    with pytest.raises(ValueError, match="fractions"):
        split_by_universe(benchmark, fractions=fractions)


def test_split_with_zero_share(benchmark: list) -> None:
    parts = split_by_universe(benchmark[:30], fractions=(0.8, 0.2, 0.0))
    assert len(parts["test"]) == 0
    assert len(parts["train"]) == 24 and len(parts["validation"]) == 6


def test_load_benchmark_api_and_speed() -> None:
    start = time.perf_counter()
    fresh = load_benchmark.__wrapped__(seed=11)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"generating the benchmark took {elapsed:.2f} s"
    assert isinstance(fresh, Benchmark) and len(fresh) == 300
    bench = load_benchmark()
    assert load_benchmark() is bench
    assert [len(bench.split(n)) for n in SPLITS] == [180, 60, 60]
    first = bench.scenarios[0]
    assert bench.by_id(first.scenario_id) is first
    with pytest.raises(KeyError, match="no scenario 'nope'"):
        bench.by_id("nope")
    with pytest.raises(ValueError, match="train, validation, test"):
        bench.split("eval")
    hard_test = bench.filter(split="test", prior_level=2)
    assert len(hard_test) == 20
    assert all(s.prior_level == 2 and s.extra["split"] == "test" for s in hard_test)
    assert len(bench.filter(prior_level=0)) == 100
    assert len(bench.filter()) == 300
    with pytest.raises(ValueError, match="prior_level"):
        bench.filter(prior_level=3)
    # Returned lists are copies: changing one cannot corrupt the cached benchmark.
    bench.split("train").clear()
    assert len(bench.split("train")) == 180


def test_jsonl_round_trip_and_atomic_write(tmp_path: Path) -> None:
    bench = load_benchmark()
    path = to_jsonl(bench.scenarios, tmp_path / "sub" / "all.jsonl")
    back = from_jsonl(path)
    assert back == list(bench.scenarios)
    assert not list(path.parent.glob(".*.tmp"))
    first = json.loads(path.read_text().splitlines()[0])
    assert first["split"] == bench.scenarios[0].extra["split"]
    assert first["universe_id"] == bench.scenarios[0].extra["universe_id"]


def test_hf_dataset_columns() -> None:
    pytest.importorskip("datasets")
    scenarios = load_benchmark().split("validation")
    ds = to_hf_dataset(scenarios)
    assert ds.num_rows == 60
    assert set(ds.column_names) == set(hf_rows(scenarios))
    row = ds[5]
    s = scenarios[5]
    assert row["scenario_id"] == s.scenario_id and row["split"] == "validation"
    assert Universe.from_dict(json.loads(row["universe"]), row["hierarchy"]) == s.universe
    assert tuple(row["ground_truth"]) == s.ground_truth
    assert tuple(row["prior"]) == s.prior and row["prior_level"] == s.prior_level


def test_scenarios_copy_and_pickle() -> None:
    import copy
    import pickle

    scenario = load_benchmark().scenarios[4]
    assert copy.deepcopy(scenario) == scenario
    assert pickle.loads(pickle.dumps(scenario)) == scenario
    with pytest.raises(TypeError):
        scenario.extra["split"] = "train"  # type: ignore[index]  # the cached copy is read-only
