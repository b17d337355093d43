"""Interop tests drive third-party loops (Gymnasium checkers, RLlib, `datasets`) whose deprecation
warnings say nothing about tomgym: every test here runs with warnings silenced."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
