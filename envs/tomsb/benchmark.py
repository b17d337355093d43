"""The tomgym TOM-SB benchmark: 300 generated scenarios with a universe-level split, and I/O.

`load_benchmark(seed=0)` generates (in memory, in well under a second, cached per seed) the
100 universes x 3 prior levels of `generator.generate_benchmark` and splits them 60/20/20 by
universe (`generator.split_by_universe`, stratified by theme): no universe appears in two splits.
Every scenario records its split in `Scenario.extra["split"]` and its universe in
`Scenario.extra["universe_id"]`.

Serialisation:
- `to_jsonl` / `from_jsonl`: one JSON object per line, `Scenario.to_dict()` plus `universe_id`,
  `split` and `extra` (everything else in `Scenario.extra`). Output is byte-identical for the same
  scenarios, so the same seed always gives the same files.
- `to_hf_dataset`: a `datasets.Dataset` with one row per scenario; columns `scenario_id`,
  `universe_id`, `split`, `theme`, `person`, `attacker_name`, `hierarchy` (3 level names),
  `universe` (the tree as a JSON string: level names differ between themes, so a nested column
  would not have one schema), `ground_truth` (3 names, coarse to fine), `prior_level` (0-2),
  `prior` (3 names or nulls). `datasets` is imported only inside this function.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from tomgym.envs.tomsb.generator import SPLITS, generate_benchmark, split_by_universe
from tomgym.envs.tomsb.loaders import ScenarioFileError, load_scenarios
from tomgym.envs.tomsb.universe import Scenario

DEFAULT_N_UNIVERSES = 100


@dataclass(frozen=True)
class Benchmark:
    """An immutable, split set of scenarios; lists returned by its methods are fresh copies."""

    seed: int
    scenarios: tuple[Scenario, ...]
    _index: dict[str, Scenario] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, Scenario] = {}
        for scenario in self.scenarios:
            if scenario.scenario_id in index:
                raise ValueError(f"duplicate scenario id {scenario.scenario_id!r}")
            split = (scenario.extra or {}).get("split")
            if split not in SPLITS:
                raise ValueError(
                    f"scenario {scenario.scenario_id!r} has no valid split (got {split!r})"
                )
            index[scenario.scenario_id] = scenario
        object.__setattr__(self, "_index", index)

    @property
    def split_names(self) -> tuple[str, ...]:
        return SPLITS

    def split(self, name: str) -> list[Scenario]:
        """Scenarios of one split ("train", "validation" or "test"), in benchmark order."""
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; valid splits are {', '.join(SPLITS)}")
        return [s for s in self.scenarios if s.extra["split"] == name]

    def by_id(self, scenario_id: str) -> Scenario:
        try:
            return self._index[scenario_id]
        except KeyError:
            raise KeyError(
                f"no scenario {scenario_id!r} in the benchmark (seed {self.seed}); ids look like "
                f"{self.scenarios[0].scenario_id!r}"
            ) from None

    def filter(self, split: str | None = None, prior_level: int | None = None) -> list[Scenario]:
        """Scenarios matching every given criterion (None = any)."""
        pool = self.split(split) if split is not None else list(self.scenarios)
        if prior_level is not None:
            if prior_level not in (0, 1, 2):
                raise ValueError(f"prior_level must be 0, 1 or 2, got {prior_level!r}")
            pool = [s for s in pool if s.prior_level == prior_level]
        return pool

    def __len__(self) -> int:
        return len(self.scenarios)


@lru_cache(maxsize=8)
def load_benchmark(seed: int = 0) -> Benchmark:
    """The generated benchmark for `seed` (cached; generating takes well under a second)."""
    scenarios = generate_benchmark(seed=seed, n_universes=DEFAULT_N_UNIVERSES)
    by_id = {
        s.scenario_id: s for part in split_by_universe(scenarios, seed=seed).values() for s in part
    }
    return Benchmark(seed=seed, scenarios=tuple(by_id[s.scenario_id] for s in scenarios))


# ---------------------------------------------------------------------------------------------
# Serialisation
# ---------------------------------------------------------------------------------------------

_TOP_LEVEL_EXTRA = ("universe_id", "split")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def scenario_record(scenario: Scenario) -> dict[str, Any]:
    """Our JSON record of one scenario (the inverse of `loaders.load_scenarios` on JSONL)."""
    extra = dict(scenario.extra or {})
    record = scenario.to_dict()
    for key in _TOP_LEVEL_EXTRA:
        record[key] = extra.pop(key, None)
    record["extra"] = _plain(extra)
    return record


def to_jsonl(scenarios: Iterable[Scenario], path: str | Path) -> Path:
    """Write one record per line; atomic (a failed write leaves any old file untouched)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for scenario in scenarios:
        try:
            lines.append(json.dumps(scenario_record(scenario), ensure_ascii=False))
        except TypeError as exc:
            raise ValueError(
                f"scenario {scenario.scenario_id!r}: extra holds a non-JSON value ({exc})"
            ) from None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write("".join(line + "\n" for line in lines))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def from_jsonl(path: str | Path) -> list[Scenario]:
    """Scenarios written by `to_jsonl` (any format `load_scenarios` knows is accepted too)."""
    scenarios = load_scenarios(path)
    if not scenarios:
        raise ScenarioFileError(f"{path}: no scenarios found")
    return scenarios


def hf_rows(scenarios: Sequence[Scenario]) -> dict[str, list[Any]]:
    """Column-major rows for `to_hf_dataset` (kept separate so it works without `datasets`)."""
    columns: dict[str, list[Any]] = {
        name: []
        for name in (
            "scenario_id", "universe_id", "split", "theme", "person", "attacker_name",
            "hierarchy", "universe", "ground_truth", "prior_level", "prior",
        )
    }  # fmt: skip
    for s in scenarios:
        extra = s.extra or {}
        columns["scenario_id"].append(s.scenario_id)
        columns["universe_id"].append(extra.get("universe_id"))
        columns["split"].append(extra.get("split"))
        columns["theme"].append(s.theme)
        columns["person"].append(s.person)
        columns["attacker_name"].append(s.attacker_name)
        columns["hierarchy"].append(list(s.levels))
        columns["universe"].append(json.dumps(s.universe.to_dict(), ensure_ascii=False))
        columns["ground_truth"].append(list(s.ground_truth))
        columns["prior_level"].append(s.prior_level)
        columns["prior"].append(list(s.prior))
    return columns


def import_datasets() -> Any:
    """The `datasets` module (imported only when a dataset is built), or one clear ImportError."""
    try:
        import datasets
    except ImportError:
        raise ImportError(
            'building a dataset needs the `datasets` package: pip install "tomgym[train]"'
        ) from None
    return datasets


def hf_features(datasets: Any) -> dict[str, Any]:
    """The `datasets` feature type of every `hf_rows` column."""
    text = datasets.Value("string")
    return {
        "scenario_id": text,
        "universe_id": text,
        "split": text,
        "theme": text,
        "person": text,
        "attacker_name": text,
        "hierarchy": datasets.List(text),
        "universe": text,
        "ground_truth": datasets.List(text),
        "prior_level": datasets.Value("int8"),
        "prior": datasets.List(text),
    }


def to_hf_dataset(scenarios: Sequence[Scenario]) -> Any:
    """A `datasets.Dataset` with one row per scenario (columns in the module docstring)."""
    datasets = import_datasets()
    features = datasets.Features(hf_features(datasets))
    return datasets.Dataset.from_dict(hf_rows(list(scenarios)), features=features)
