"""PettingZoo's own conformance tests over every Decrypto variant, plus pickling."""

from __future__ import annotations

import pickle
import warnings

import pettingzoo
import pytest
import tomgym.envs  # noqa: F401 - registers the ids
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, render_test, seed_test
from tomgym.envs import decrypto_v0

VARIANTS = {
    "text": {},
    "tom": {"tom": ["perspective_taking", "false_belief"]},
    "structured": {"action_mode": "structured"},
    "structured_pt": {"action_mode": "structured", "tom": ["perspective_taking"]},
    "play_on_short": {"play_on": True, "max_rounds": 4},
}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.mark.parametrize("variant", VARIANTS)
def test_api(variant):
    api_test(decrypto_v0.env(**VARIANTS[variant]), num_cycles=200)


@pytest.mark.parametrize("variant", VARIANTS)
def test_parallel_api(variant):
    parallel_api_test(decrypto_v0.parallel_env(**VARIANTS[variant]), num_cycles=200)


@pytest.mark.parametrize("variant", VARIANTS)
def test_seed(variant):
    seed_test(lambda: decrypto_v0.env(**VARIANTS[variant]), num_cycles=50)
    parallel_seed_test(lambda: decrypto_v0.parallel_env(**VARIANTS[variant]))


def test_render():
    render_test(lambda render_mode=None: decrypto_v0.env(render_mode=render_mode))


@pytest.mark.parametrize("api", ["aec", "parallel"])
def test_registered_ids(api):
    env = pettingzoo.make(api, "tomgym/decrypto-v0")
    env.reset(seed=1)
    assert "encoder_0" in env.possible_agents


def test_pickles_mid_game():
    env = decrypto_v0.env(tom=["perspective_taking"])
    env.reset(seed=3)
    env.step('ANSWER: {"hints": ["a", "b", "c"]}')
    clone = pickle.loads(pickle.dumps(env))
    assert (
        clone.observe(clone.agent_selection)["prompt"] == env.observe(env.agent_selection)["prompt"]
    )
    par = decrypto_v0.parallel_env()
    par.reset(seed=3)
    pickle.loads(pickle.dumps(par))
