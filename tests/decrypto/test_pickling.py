"""Decrypto envs pickle mid-game (registry-wide conformance: tests/envs/test_registry_conformance.py)."""

from __future__ import annotations

import pickle

from tomgym.envs import decrypto_v0
from tomgym.envs.decrypto.parsing import answer_hints


def test_pickles_mid_game():
    env = decrypto_v0.env(tom=["perspective_taking"])
    env.reset(seed=3)
    env.step(answer_hints(["a", "b", "c"]))
    clone = pickle.loads(pickle.dumps(env))
    assert (
        clone.observe(clone.agent_selection)["prompt"] == env.observe(env.agent_selection)["prompt"]
    )
    par = decrypto_v0.parallel_env()
    par.reset(seed=3)
    pickle.loads(pickle.dumps(par))
