"""Shared fixtures: the optional `../shared` test data (tests skip cleanly without it); and, when
`make test` runs the suite in parallel (pytest-xdist), the CPU threads each worker may use and the
order the workers take the tests in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data`, or skip the test when the checkout has no `../shared` beside it."""
    data = SHARED_DIR / "data"
    if not data.is_dir():
        pytest.skip("../shared/data is not present")
    return data


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist worker, share the machine's cores between the workers: each gets
    `cores // workers` torch/OpenMP threads (at least one), also inherited by the processes
    its tests start. Oversubscribed torch threads spin against each other (README, "LLM backend on
    this CPU": about ten times slower), so the split is what makes parallel workers pay off."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    # The cores this process may run on (a container's affinity), not the host's count.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = str(max(1, (cores or 1) // int(workers)))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = threads
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, the `slow` tests first (stable otherwise): they are three quarters of
    the suite's time, and started last one of them alone would keep a worker busy after the
    others ran out of tests. Every worker collects the same order, as xdist requires."""
    if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
