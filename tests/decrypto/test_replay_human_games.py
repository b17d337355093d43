"""Conformance with real play: the 10 recorded human games replay exactly through the env."""

from __future__ import annotations

import json

import pytest
from tomgym.envs import decrypto_v0


def _answer(hints=None, guess=None) -> str:
    if hints is not None:
        return "ANSWER: " + json.dumps({"hints": hints})
    return "ANSWER: " + json.dumps({"guess": "-".join(map(str, guess))})


@pytest.fixture(scope="module")
def human_games(shared_data):
    data = json.loads((shared_data / "decrypto" / "human_games.json").read_text())
    return data["games"]


def test_all_72_rounds_replay(human_games):
    assert len(human_games) == 10
    replayed_rounds = 0
    for game in human_games:
        turns = game["turns"]
        env = decrypto_v0.raw_env(strict_guesses=False)
        env.reset(
            seed=game["env_seed"],
            options={
                "keywords": game["keywords"],
                "codes": [t["code"] for t in turns],
                "play_on": game["outcome"]["play_continued_after_end"],
            },
        )
        for turn in turns:
            assert env.match.game.code == tuple(turn["code"])
            env.step(_answer(hints=turn["hints"]))
            env.step(_answer(guess=turn["decoder_guess"]))
            env.step(_answer(guess=turn["interceptor_guess"]))
            last = env.match.game.history[-1]
            assert last.miscommunication == turn["miscommunication"], (
                game["game_index"],
                turn["turn"],
            )
            assert last.interception == turn["interception"], (game["game_index"], turn["turn"])
            assert last.miscommunications == turn["miscommunications"]
            assert last.interceptions == turn["interceptions"]
            assert last.after_end == turn["after_game_end"]
            assert env.match.logs["interceptor_0"].fallbacks == 0
            replayed_rounds += 1
        assert all(env.terminations.values()), f"game {game['game_index']} did not end"
        info = env.infos["encoder_0"]
        assert info["ending"] == game["outcome"]["result"]
        assert info["ending_round"] == game["outcome"]["end_turn"]
        assert info["rounds"] == len(turns)
        winner = game["outcome"]["winner"]
        assert info["team_won"] == (winner == "encoder_decoder")
    assert replayed_rounds == 72


def test_repeated_digit_guess_is_wrong_not_a_crash(human_games):
    repeated = [
        (g, t) for g in human_games for t in g["turns"] if len(set(t["interceptor_guess"])) < 3
    ]
    assert repeated, "the recorded data holds repeated-digit guesses"
    env = decrypto_v0.raw_env()  # strict mode: re-asked, then a never-matching fallback
    env.reset(seed=0, options={"keywords": ["a", "b", "c", "d"], "codes": [[1, 2, 3]]})
    env.step(_answer(hints=["x", "y", "z"]))
    env.step(_answer(guess=[1, 2, 3]))
    env.step(_answer(guess=[2, 3, 3]))
    assert env.infos["interceptor_0"]["last_parse"]["valid"] is False
    assert env.infos["interceptor_0"]["retries"] == 1
