"""The defender-as-learner Gymnasium view of TOM-SB."""

from __future__ import annotations

import json
import pickle
from collections.abc import Sequence
from typing import Any

import pytest
import tomgym.envs  # noqa: F401 - registers tomgym/TomSBDefender-v0
from gymnasium.utils.env_checker import check_env
from tomgym.envs.tomsb.env import ATTACKER
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS
from tomgym.envs.tomsb.single_agent import TomSBDefenderEnv
from tomgym.envs.turn import Turn

from tests.tomsb.test_env import (
    AdoptingAttacker,
    consistent_liar,
    fixture_scenarios,
    refusing_defender,
    truthful_defender,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class CallableAttacker:
    """A fresh AdoptingAttacker per episode, as a plain callable (reset by the test itself)."""

    def __init__(self) -> None:
        self.inner = AdoptingAttacker()

    def __call__(self, obs: dict[str, Any]) -> str:
        if obs["turn"] == 1 and not obs["last_message"]:
            self.inner = AdoptingAttacker()
        return self.inner(obs)


class BatchPolicy:
    """Implements the agents.base.Policy shape: reset(game_id) + act_batch(turns)."""

    name = "adopting"

    def __init__(self) -> None:
        self.games: dict[str, AdoptingAttacker] = {}
        self.seen_turns: list[Turn] = []

    def reset(self, game_id: str) -> None:
        self.games[game_id] = AdoptingAttacker()

    def act_batch(self, turns: Sequence[Any]) -> list[str]:
        self.seen_turns.extend(turns)
        return [self.games[t.game_id](t.observation) for t in turns]


def run_episode(env: TomSBDefenderEnv, defender, **reset: Any) -> tuple[float, dict[str, Any]]:
    obs, info = env.reset(**reset)
    total, terminated = 0.0, False
    while not terminated:
        assert env.observation_space.contains(obs)
        obs, reward, terminated, truncated, info = env.step(defender(obs))
        assert truncated is False
        total += reward
    return total, info


def test_check_env_with_callable_attacker() -> None:
    check_env(TomSBDefenderEnv(attacker=CallableAttacker(), scenarios=fixture_scenarios()))


@pytest.mark.parametrize("variant", ATTACKER_VARIANTS)
def test_scripted_attackers_score_the_reference_defenders(variant: str) -> None:
    env = TomSBDefenderEnv(attacker=variant, reveal_prior=True)
    for level in (0, 1, 2):
        options = {"prior_level": level}
        reward, info = run_episode(env, truthful_defender, seed=level, options=options)
        assert (reward, info["outcome"]) == (0.0, "extracted")
        reward, info = run_episode(env, refusing_defender, seed=level, options=options)
        assert (reward, info["outcome"]) == (0.0, "detected")
        reward, info = run_episode(env, consistent_liar, seed=level, options=options)
        assert (reward, info["outcome"]) == (1.0, "fooled"), info
        assert info["attacker_variant"] == variant
        assert info["final_defender_estimate"] == info["prior"]


def test_batch_policy_attacker_gets_turns() -> None:
    policy = BatchPolicy()
    env = TomSBDefenderEnv(
        attacker=policy, scenarios=fixture_scenarios(), attacker_variant="bluffing"
    )
    reward, info = run_episode(env, truthful_defender, seed=2)
    assert info["outcome"] == "extracted" and info["attacker_variant"] == "bluffing"
    turn = policy.seen_turns[0]
    assert turn.agent == ATTACKER and turn.prompt == turn.observation["prompt"]
    assert turn.game_id in policy.games
    assert json.loads(turn.observation["scenario"])["prior"] is not None


def test_act_object_attacker() -> None:
    class Actor:
        def __init__(self) -> None:
            self.inner = AdoptingAttacker()

        def act(self, observation: dict[str, Any]) -> str:
            return self.inner(observation)

    env = TomSBDefenderEnv(attacker=Actor(), scenarios=fixture_scenarios(), max_attacker_turns=3)
    reward, info = run_episode(env, refusing_defender, seed=0)
    assert info["outcome"] == "baited" and info["turns"] == 3 and reward == 0.0


def test_invalid_defender_answers_are_reasked() -> None:
    env = TomSBDefenderEnv(attacker="base", max_retries=1)
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("no json here")
    assert obs["retry"] == 1 and not terminated and reward == 0.0
    assert info["last_parse"]["valid"] is False and info["retries"] == 1
    obs, _, _, _, info = env.step("still none")
    assert obs["retry"] == 0 and info["fallbacks"] == 1


def test_bad_attacker_argument() -> None:
    with pytest.raises(ValueError, match="attacker must be one of"):
        TomSBDefenderEnv(attacker="smart")
    with pytest.raises(TypeError, match="attacker must be"):
        TomSBDefenderEnv(attacker=42)


def test_step_after_end_raises_and_pickles() -> None:
    env = TomSBDefenderEnv(attacker="base", reveal_prior=True)
    run_episode(env, consistent_liar, seed=1)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("{}")
    env.reset(seed=4)
    clone = pickle.loads(pickle.dumps(env))
    answer = consistent_liar(env._env.observe("defender_0"))
    assert clone.step(answer)[0] == env.step(answer)[0]


def test_reset_without_seed_is_reproducible_from_last_seed() -> None:
    a = TomSBDefenderEnv(attacker="base")
    b = TomSBDefenderEnv(attacker="base")
    a.reset(seed=11)
    b.reset(seed=11)
    assert a.reset()[0] == b.reset()[0]
