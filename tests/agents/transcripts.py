"""Checks shared by the full-game tests (bundled model in-process, llama.cpp over HTTP)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def check_transcript(record: Mapping[str, Any], agents: Iterable[str]) -> None:
    """Every agent has a final info, and every invalid answer was re-asked or fell back."""
    agents = tuple(agents)
    assert set(record["infos"]) == set(agents)
    for agent in agents:
        info = record["infos"][agent]
        turns = [t for t in record["turns"] if t["agent"] == agent]
        invalid = sum(not t["valid"] for t in turns)
        assert info["retries"] + info["fallbacks"] == invalid
        assert all(isinstance(t["raw"], str) for t in turns)
        assert all(t["retry"] <= 1 for t in turns)
