"""Shared fixtures: the optional `../shared` test data (tests skip cleanly without it)."""

from __future__ import annotations

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
