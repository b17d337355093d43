"""Observation/action spaces shared by the tomgym environments."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces


class FreeText(spaces.Text):
    """A `Text` space that accepts any Python string within its length bounds.

    Gymnasium's stock `Text` checks each character against a fixed charset, which rejects spaces
    and non-ASCII characters that prompts and LLM answers contain. Sampling draws printable ASCII
    strings of at most `sample_max_length` characters: a space may admit a million characters (so
    no answer is rejected for length) while random-agent tests stay fast.
    """

    def __init__(
        self,
        max_length: int,
        *,
        min_length: int = 0,
        sample_max_length: int = 256,
        seed: Any = None,
    ) -> None:
        charset = "".join(chr(c) for c in range(32, 127))
        super().__init__(max_length=max_length, min_length=min_length, charset=charset, seed=seed)
        self.sample_max_length = max(min_length, min(sample_max_length, max_length))

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = int(self.np_random.integers(self.min_length, self.sample_max_length + 1))
        codes = self.np_random.integers(32, 127, size=length)
        return "".join(map(chr, codes))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"FreeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, FreeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )


def clip_text(text: str, max_length: int) -> str:
    """Cut `text` so it fits a FreeText of `max_length` (keeps the end, where the question is)."""
    if len(text) <= max_length:
        return text
    marker = "[...]\n"
    return marker + text[-(max_length - len(marker)) :]


def int_box(low: int, high: int, shape: tuple[int, ...] = ()) -> spaces.Box:
    return spaces.Box(low=low, high=high, shape=shape, dtype=np.int64)
