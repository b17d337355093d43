"""`forget(game_id)`: every stateful policy in `agents/` drops all it kept for that game.

Each case plays real turns of two games, forgets one, and checks that no attribute of the policy
still holds the forgotten game id (as a key, a set member or the first element of a tuple key),
while the other game's state is untouched; then that the forgotten game replays from scratch.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

import pettingzoo
import pytest
import tomgym.envs  # noqa: F401 - registers the ids
from tomgym.agents.base import BasePolicy, Policy, Turn
from tomgym.agents.decrypto_baselines import RandomDecryptoPolicy
from tomgym.agents.human import HumanPolicy
from tomgym.agents.llm.policy import LLMPolicy
from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
from tomgym.envs.decrypto.parsing import answer_hints
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER, raw_env
from tomgym.envs.tomsb.single_agent import TomSBDefenderEnv

from tests.agents.test_llm_policy import FakeBackend
from tests.agents.test_llm_policy import turn as llm_turn
from tests.tomsb.test_env import fixture_scenarios, refusing_defender

GAMES = ("g1", "g2")


def _mentions(value: Any, game_id: str) -> bool:
    keys: Iterable[Any] = ()
    if isinstance(value, dict):
        keys = value.keys()
    elif isinstance(value, set | frozenset):
        keys = value
    return any(k == game_id or (isinstance(k, tuple) and k and k[0] == game_id) for k in keys)


def held_games(policy: Any) -> set[str]:
    """The game ids any attribute of `policy` keeps state under."""
    return {g for g in GAMES for v in vars(policy).values() if _mentions(v, g)}


def _tomsb_turns(agent: str) -> Callable[[str], Turn]:
    env = raw_env(scenarios=fixture_scenarios()[:1])

    def make(game_id: str) -> Turn:
        env.reset(seed=0)
        if agent == DEFENDER:
            env.step(
                make_scripted_tomsb_policy("base").act_batch(
                    [Turn("x", ATTACKER, env.observe(ATTACKER))]
                )[0]
            )
        return Turn(game_id, agent, env.observe(agent))

    return make


def _decrypto_turn(game_id: str, agent: str = "decoder_0") -> Turn:
    env = pettingzoo.make("aec", "tomgym/decrypto-v0", max_rounds=2)
    env.reset(seed=1)
    env.step(answer_hints(["a", "b", "c"]))
    return Turn(game_id, agent, env.observe(agent))


def _lines(lines: list[str]) -> Callable[[str], str]:
    feed = iter(lines)
    return lambda prompt: next(feed)


CASES: dict[str, tuple[Callable[[], Any], Callable[[str], Turn]]] = {
    "scripted_attacker": (
        lambda: make_scripted_tomsb_policy("bluffing", 1),
        _tomsb_turns(ATTACKER),
    ),
    "scripted_defender": (
        lambda: make_scripted_tomsb_policy("tom_heuristic", 1),
        _tomsb_turns(DEFENDER),
    ),
    "random_decrypto": (lambda: RandomDecryptoPolicy(seed=2), _decrypto_turn),
    "llm": (lambda: LLMPolicy(FakeBackend(), name="p"), lambda g: llm_turn(g, "a", "hello")),
    "human": (
        lambda: HumanPolicy(_lines(["1-2-3", "2-1-4"]), io.StringIO(), confirm=False),
        _decrypto_turn,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_forget_drops_all_state_of_that_game_only(case: str) -> None:
    build, make_turn = CASES[case]
    policy = build()
    assert isinstance(policy, Policy)
    for game_id in GAMES:
        policy.reset(game_id)
        policy.act_batch([make_turn(game_id)])
    assert held_games(policy) == set(GAMES), "the check must see the state it expects to drop"
    policy.forget("g1")
    assert held_games(policy) == {"g2"}
    policy.forget("g1")  # forgetting twice (or a game never seen) is a no-op
    policy.forget("never-played")
    assert held_games(policy) == {"g2"}


@pytest.mark.parametrize("case", ["scripted_attacker", "scripted_defender", "random_decrypto"])
def test_a_forgotten_game_replays_from_scratch(case: str) -> None:
    build, make_turn = CASES[case]
    policy = build()
    first = policy.act_batch([make_turn("g1")])
    policy.forget("g1")
    assert policy.act_batch([make_turn("g1")]) == first


def test_base_policy_forget_is_a_no_op_hook() -> None:
    class Echo(BasePolicy):
        def act(self, turn: Turn) -> str:
            return "x"

    policy = Echo()
    policy.forget("g1")
    assert isinstance(policy, Policy)


def test_single_agent_env_forgets_each_episode_of_a_policy_attacker() -> None:
    attacker = make_scripted_tomsb_policy("base", 0)
    env = TomSBDefenderEnv(attacker=attacker, scenarios=fixture_scenarios(), max_retries=0)
    seen: list[str] = []
    for seed in (1, 2):
        env.reset(seed=seed)
        seen.extend(held_games_of(attacker))
        assert len(held_games_of(attacker)) == 1  # only the episode being played
        env.step(refusing_defender({}))
    env.close()
    assert held_games_of(attacker) == set() and len(set(seen)) == 2


def held_games_of(policy: Any) -> set[str]:
    return {k for v in vars(policy).values() if isinstance(v, dict) for k in v}
