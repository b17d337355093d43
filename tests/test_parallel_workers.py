"""`make test`'s parallel workers (tests/conftest.py): each worker keeps to its share of the cores."""

from __future__ import annotations

import os

import pytest


@pytest.mark.skipif(
    not os.environ.get("PYTEST_XDIST_WORKER_COUNT"), reason="runs only in a pytest-xdist worker"
)
def test_a_worker_uses_its_share_of_the_cores() -> None:
    torch = pytest.importorskip("torch")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    threads = torch.get_num_threads()
    # Oversubscribed, the workers' torch threads spin against each other.
    assert threads == 1 or threads * workers <= (cores or 1)
    # The processes a test starts inherit the same share.
    assert os.environ["OMP_NUM_THREADS"] == str(threads)
