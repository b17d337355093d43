"""Fixtures shared by the agent tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def loaded() -> Iterator[tuple[Any, Any]]:
    """The bundled model and tokenizer in float32 on the CPU, one torch thread (skips when the
    bundled model cannot be converted here)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.agents.engines import bundled_model

    model, tokenizer = bundled_model()
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield model, tokenizer
    torch.set_num_threads(previous)
