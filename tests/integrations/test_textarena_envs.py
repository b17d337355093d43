"""Whole TOM-SB and Decrypto episodes through TextArena's own loop, against the runner's record.

The loop is TextArena's (`make`, `reset(num_players, seed)`, `get_observation`, `step`, `close`);
the players replay what scripted tomgym policies answered when the batched runner played the same
seed, so each observation must be that turn's prompt, each player the agent that answered it, and
the final rewards, infos and record those of the runner.
"""

from __future__ import annotations

from typing import Any

import pytest

ta = pytest.importorskip("textarena")

from tomgym.integrations.textarena_envs import TEXTARENA_IDS  # noqa: E402
from tomgym.rewards import RewardComposer  # noqa: E402
from tomgym.training.policy_specs import make_policy  # noqa: E402
from tomgym.training.runner import GameSpec, play_games  # noqa: E402

TOMSB_SPECS = {"attacker_0": "scripted:base", "defender_0": "scripted:tom_heuristic"}
DECRYPTO_SPECS = {"encoder_0": "random", "decoder_0": "random", "interceptor_0": "random"}


def reference_record(
    env_id: str, seed: int, specs: dict[str, str], env_config: dict[str, Any]
) -> dict[str, Any]:
    policies = {agent: make_policy(spec, seed=seed) for agent, spec in specs.items()}
    [record] = play_games(env_id, [GameSpec("g", seed)], policies, env_config=env_config)
    return record


def play_textarena_loop(env: Any, num_players: int, seed: int, reference: dict) -> tuple:
    """TextArena's standard loop, each player answering as the runner's turn did."""
    env.reset(num_players=num_players, seed=seed)
    turns = iter(reference["turns"])
    done = False
    steps = 0
    while not done:
        player_id, observation = env.get_observation()
        turn = next(turns)
        assert env.players[player_id] == turn["agent"]
        assert observation == turn["prompt"]
        done, _ = env.step(action=turn["raw"])
        steps += 1
    assert next(turns, None) is None
    rewards, game_info = env.close()
    return steps, rewards, game_info


def strip_prompts(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in turn.items() if k != "prompt"} for turn in record["turns"]]


def test_ids_are_registered_with_textarena() -> None:
    from textarena.envs.registration import ENV_REGISTRY

    for env_id in TEXTARENA_IDS:
        assert env_id in ENV_REGISTRY and f"{env_id}-raw" in ENV_REGISTRY


def test_tomsb_episode_through_textarena_matches_the_runner() -> None:
    env_config = {"split": "test", "max_attacker_turns": 6}
    reference = reference_record("tomgym/tomsb-v0", 11, TOMSB_SPECS, env_config)
    env = ta.make("tomgym/tomsb-v0", **env_config)
    steps, rewards, game_info = play_textarena_loop(env, 2, 11, reference)
    assert steps == len(reference["turns"])
    assert rewards == {0: reference["rewards"]["attacker_0"], 1: reference["rewards"]["defender_0"]}
    record = game_info[1]["tomgym_record"]
    assert record["outcome"] == reference["outcome"] == game_info[0]["outcome"]
    assert record["infos"] == reference["infos"]
    assert record["turns"] == strip_prompts(reference)
    expected, _ = RewardComposer({"fooling": 1.0}, gate="format", agent="defender_0")(reference)
    assert game_info[1]["tomgym_reward"] == expected
    assert game_info[0]["tomgym_reward"] == reference["rewards"]["attacker_0"]


def test_decrypto_episode_through_textarena_matches_the_runner() -> None:
    reference = reference_record("tomgym/decrypto-v0", 4, DECRYPTO_SPECS, {})
    env = ta.make("tomgym/decrypto-v0")
    steps, rewards, game_info = play_textarena_loop(env, 3, 4, reference)
    assert steps == len(reference["turns"])
    agents = ("encoder_0", "decoder_0", "interceptor_0")
    assert rewards == {i: reference["rewards"][a] for i, a in enumerate(agents)}
    assert game_info[2]["tomgym_record"]["infos"] == reference["infos"]
    assert {info["outcome"] for info in game_info.values()} == {reference["outcome"]}


def test_raw_id_gives_textarena_messages_and_seeds_reproduce() -> None:
    env = ta.make("tomgym/decrypto-v0-raw")
    env.reset(num_players=3, seed=9)
    player_id, messages = env.get_observation()
    assert player_id == 0
    [(sender, text, kind)] = messages
    assert sender == ta.GAME_ID and kind == ta.ObservationType.PROMPT
    again = ta.make("tomgym/decrypto-v0")
    again.reset(num_players=3, seed=9)
    assert again.get_observation() == (0, text)
    assert again.pending_observation()["keywords"] == env.pending_observation()["keywords"]


def test_wrong_number_of_players_is_refused() -> None:
    env = ta.make("tomgym/tomsb-v0")
    with pytest.raises(ValueError, match="played by 2 players"):
        env.reset(num_players=3, seed=0)
