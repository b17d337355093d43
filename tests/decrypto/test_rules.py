"""Decrypto rules: endings, tokens, play-on, codes, seeding, ToM scoring."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tomgym.envs import decrypto_v0
from tomgym.envs.decrypto import game as rules
from tomgym.envs.decrypto.match import false_belief_scores

KEYWORDS = ["apple", "river", "castle", "piano"]


def hints(*words: str) -> str:
    return "ANSWER: " + json.dumps({"hints": list(words)})


def guess(code) -> str:
    return "ANSWER: " + json.dumps({"guess": "-".join(map(str, code))})


WRONG = {(1, 2, 3): (2, 1, 3)}


def play_round(env, *, decoder_right: bool, interceptor_right: bool) -> None:
    code = env.match.game.code
    wrong = tuple(reversed(code))
    env.step(hints("x", "y", "z"))
    env.step(guess(code if decoder_right else wrong))
    env.step(guess(code if interceptor_right else wrong))


def new_env(**options):
    env = decrypto_v0.raw_env()
    env.reset(seed=7, options={"keywords": KEYWORDS, **options})
    return env


def test_survival():
    env = new_env()
    for _ in range(8):
        play_round(env, decoder_right=True, interceptor_right=False)
    info = env.infos["decoder_0"]
    assert info["ending"] == "survived" and info["team_won"] and info["rounds"] == 8
    assert env.rewards == {"encoder_0": 1.0, "decoder_0": 1.0, "interceptor_0": -1.0}


def test_miscommunication_ending():
    env = new_env()
    play_round(env, decoder_right=False, interceptor_right=False)
    play_round(env, decoder_right=True, interceptor_right=False)
    play_round(env, decoder_right=False, interceptor_right=False)
    info = env.infos["interceptor_0"]
    assert info["ending"] == "miscommunication" and info["rounds"] == 3
    assert env.rewards["interceptor_0"] == 1.0 and env.rewards["encoder_0"] == -1.0


def test_round_one_interception_and_interception_ending():
    env = new_env()
    play_round(env, decoder_right=True, interceptor_right=True)
    assert env.match.game.interceptions == 1
    play_round(env, decoder_right=True, interceptor_right=True)
    assert env.infos["encoder_0"]["ending"] == "interception"


def test_both_tokens_in_one_round_and_both_ending():
    env = new_env()
    play_round(env, decoder_right=False, interceptor_right=True)
    game = env.match.game
    assert (game.miscommunications, game.interceptions) == (1, 1)
    play_round(env, decoder_right=False, interceptor_right=True)
    assert env.infos["encoder_0"]["ending"] == "both"


def test_second_token_in_last_round_still_loses():
    env = new_env()
    play_round(env, decoder_right=False, interceptor_right=False)
    for _ in range(6):
        play_round(env, decoder_right=True, interceptor_right=False)
    play_round(env, decoder_right=False, interceptor_right=False)
    assert env.infos["encoder_0"]["ending"] == "miscommunication"
    assert env.infos["encoder_0"]["ending_round"] == 8


def test_play_on_continues_after_interception_only():
    env = new_env(play_on=True)
    play_round(env, decoder_right=True, interceptor_right=True)
    play_round(env, decoder_right=True, interceptor_right=True)
    assert not any(env.terminations.values())
    for _ in range(6):
        play_round(env, decoder_right=True, interceptor_right=True)
    info = env.infos["encoder_0"]
    assert info["ending"] == "interception" and info["ending_round"] == 2 and info["rounds"] == 8
    assert info["interceptions"] == 8
    assert [r["after_end"] for r in info["rounds_detail"]] == [False] * 2 + [True] * 6
    env = new_env(play_on=True)
    play_round(env, decoder_right=False, interceptor_right=False)
    play_round(env, decoder_right=False, interceptor_right=False)
    assert env.infos["encoder_0"]["ending"] == "miscommunication" and all(env.terminations.values())


def test_codes_never_repeat_and_depend_only_on_seed():
    for seed in range(3000):
        rng = np.random.default_rng(seed)
        codes = rules.sample_codes(rng, 8)
        assert len(set(codes)) == 8
        assert all(len(set(c)) == 3 and set(c) <= {1, 2, 3, 4} for c in codes)
    a, b = decrypto_v0.raw_env(), decrypto_v0.raw_env()
    a.reset(seed=11)
    b.reset(seed=11, options={"keywords": KEYWORDS})  # pinned keywords must not shift the codes
    assert a.match.game.codes == b.match.game.codes


def test_same_seed_same_game_and_pinned_codes():
    a, b = decrypto_v0.raw_env(), decrypto_v0.raw_env()
    a.reset(seed=5)
    b.reset(seed=5)
    assert a.match.game.keywords == b.match.game.keywords
    assert a.observe("encoder_0")["prompt"] == b.observe("encoder_0")["prompt"]
    codes = [[1, 2, 3], [4, 3, 2], [2, 4, 1], [3, 1, 4], [1, 3, 2], [2, 1, 4], [4, 1, 3], [3, 4, 1]]
    a.reset(seed=99, options={"keywords": KEYWORDS, "codes": codes})
    assert [list(c) for c in a.match.game.codes] == codes
    with pytest.raises(ValueError, match="repeats"):
        a.reset(seed=1, options={"codes": [[1, 2, 3], [1, 2, 3]]})
    with pytest.raises(ValueError, match="distinct"):
        a.reset(seed=1, options={"keywords": ["a", "a", "b", "c"]})


def test_retries_then_fallback_counted():
    env = decrypto_v0.raw_env(max_retries=2)
    env.reset(seed=1)
    for _ in range(3):
        assert env.agent_selection == "encoder_0"
        env.step("I refuse to answer")
    info = env.infos["encoder_0"]
    assert info["retries"] == 2 and info["fallbacks"] == 1
    assert env.match.game.hints == ("no_hint",) * 3
    obs = env.observe("decoder_0")
    assert obs["retry"] == 0 and obs["hints"] == ("no_hint",) * 3


def test_retry_message_explains():
    env = decrypto_v0.raw_env()
    env.reset(seed=1)
    env.step("nope")
    obs = env.observe("encoder_0")
    assert obs["retry"] == 1 and "could not be used" in obs["message"]


def test_wrong_action_type_raises():
    env = decrypto_v0.raw_env()
    env.reset(seed=1)
    with pytest.raises(TypeError):
        env.step(3)
    par = decrypto_v0.parallel_env()
    par.reset(seed=1)
    with pytest.raises(ValueError, match="not in the game"):
        par.step({"encoder_0": "x", "nobody": "y"})
    with pytest.raises(ValueError, match="needs actions"):
        par.step({"decoder_0": "x"})


def test_interceptor_never_sees_keywords_or_decoder_guess():
    env = new_env()
    env.step(hints("fruit", "water", "music"))
    env.step(guess((1, 2, 3)))
    obs = env.observe("interceptor_0")
    assert obs["keywords"] == ("",) * 4
    for word in KEYWORDS:
        assert word not in obs["prompt"].lower()
    assert "1-2-3" not in obs["prompt"] or env.match.game.code == (1, 2, 3)


def test_perspective_taking_scores():
    env = decrypto_v0.raw_env(tom=["perspective_taking"])
    env.reset(seed=2, options={"keywords": KEYWORDS})
    code = env.match.game.code
    env.step(hints("a", "b", "c"))
    assert env.observe("encoder_0")["side_question"] == 1
    env.step(guess(code))  # Alice expects interception
    env.step(guess(code))
    env.step(guess(code))  # Eve intercepts
    pt = env.match.tom_summary()["perspective_taking"]
    assert pt == {
        "rounds": 1,
        "predicted_interceptor": 1.0,
        "predicted_interceptor_when_intercepted": 1.0,
        "expected_interception": 1.0,
    }


def test_false_belief_questions_from_round_two_and_scoring():
    env = decrypto_v0.raw_env(tom=["false_belief"])
    env.reset(seed=2, options={"keywords": KEYWORDS})
    play_round(env, decoder_right=True, interceptor_right=False)
    env.step(hints("a", "b", "c"))
    env.step(guess(env.match.game.code))
    kinds = []
    for answer in (
        ["w", "x", "y", "z"],
        ["w", "x", "y", "z"],
        ["APPLE", "river", "castle", "piano"],
    ):
        obs = env.observe("interceptor_0")
        kinds.append(obs["question"])
        assert obs["side_question"] == 1
        if obs["question"] >= 5:
            assert obs["keywords"] == tuple(KEYWORDS)
        env.step("ANSWER: " + json.dumps({"keywords": answer}))
    assert kinds == [4, 5, 6]
    scores = env.match.tom_summary()["false_belief"]
    assert scores["rounds_counted"] == 1
    assert scores["weak_rc"] == 1.0 and scores["strong_rc"] == 1.0
    assert scores["weak_fb"] == 0.0 and scores["strong_fb"] == 0.0
    assert scores["self_other_consistency"] == 0.0


def test_false_belief_only_counts_wrong_vanilla_rounds():
    probes = [{"round": 2, "fb_vanilla": KEYWORDS, "fb_rc": KEYWORDS, "fb_fb": KEYWORDS}]
    assert false_belief_scores(probes, KEYWORDS)["rounds_counted"] == 0
    assert false_belief_scores(probes, KEYWORDS)["weak_rc"] is None


def test_keyword_list_replaceable(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("# mine\nalpha\nbeta\ngamma\ndelta\n")
    env = decrypto_v0.raw_env(keyword_list=str(words))
    env.reset(seed=0)
    assert set(env.match.game.keywords) == {"alpha", "beta", "gamma", "delta"}
    assert len(rules.load_keyword_list()) >= 680
    with pytest.raises(ValueError, match="cannot read"):
        decrypto_v0.raw_env(keyword_list=str(tmp_path / "missing.txt"))
