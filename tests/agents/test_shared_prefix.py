"""Shared prompt prefixes: a prefix several new conversations start with is prefilled once.

Covers: the plan (which prefixes, nested, the one token left to feed, known prefixes), cached
generation with shared prefixes equal to full re-encoding token for token (greedy ids, log-probs
within 1e-4) over several turns, the tokens it saves, a shared prefix never written by the
conversations that extend it, reuse by a later call, `forget` and `invalidate` dropping
prefixes, a cap smaller than the prefix, and the `kv_cache_share_prefixes` spec key.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tomgym.agents.llm.kv_cache import SharedPrefix, plan_shared_prefixes  # noqa: E402

from tests.agents.test_kv_cache import (  # noqa: E402
    _assert_same_results,
    _backend,
    conversation_turns,
)

# -- the plan (no model) -----------------------------------------------------------------------

SYSTEM = list(range(1000, 1100))  # a 100-token preamble every prompt starts with


def test_plan_nests_a_common_preamble_and_each_groups_own_text():
    group_a = SYSTEM + list(range(1, 81))
    group_b = SYSTEM + list(range(200, 281))
    prompts = [group_a + [5], group_a + [6], group_b + [7, 8], group_b + [9], SYSTEM + [3] * 90]
    plan = plan_shared_prefixes(prompts, known=[], min_tokens=64)
    assert plan == [tuple(SYSTEM), tuple(group_a), tuple(group_b)]


def test_plan_leaves_one_token_to_feed_and_ignores_short_or_lone_prefixes():
    prompt = SYSTEM + [1, 2]
    # Identical prompts share all but their last token (its logits start the completion).
    assert plan_shared_prefixes([prompt, prompt], [], 64) == [tuple(prompt[:-1])]
    # One prompt is a prefix of the other: the shorter still feeds its last token.
    assert plan_shared_prefixes([SYSTEM, SYSTEM + [4, 5]], [], 64) == [tuple(SYSTEM[:-1])]
    assert plan_shared_prefixes([SYSTEM[:40] + [1], SYSTEM[:40] + [2]], [], 64) == []
    assert plan_shared_prefixes([SYSTEM + [1]], [], 64) == []  # nobody to share with


def test_plan_builds_only_what_known_prefixes_do_not_cover():
    deeper = SYSTEM + list(range(1, 70))
    prompts = [deeper + [1], deeper + [2]]
    assert plan_shared_prefixes(prompts, [tuple(SYSTEM)], 64) == [tuple(deeper)]
    # 69 tokens past a known 100 is above the minimum; 30 past it would not be.
    assert plan_shared_prefixes(prompts, [tuple(deeper[:-30])], 64) == []


# -- generation with the bundled model -----------------------------------------------------------


def _preamble(tokenizer: Any) -> list[int]:
    text = (
        "You are the defender in a long game. The rules: answer in one JSON object, keep every "
        "claim consistent with what you said before, stay inside the universe of names given, "
        "and never reveal the true path. The universe: north, south, east and west regions, "
        "each with three cities and three districts per city, listed in the order of the map."
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) >= 64, "the preamble must be long enough to be shared"
    return ids


def _group_turns(backend: Any, firsts: list[list[int]], keys: list[Any], turns: int = 3):
    """`turns` greedy turns of each conversation, a short follow-up after each."""
    follow = backend.tokenizer("\nuser\nGo on.\nassistant\n", add_special_tokens=False)["input_ids"]
    return conversation_turns(backend, firsts, [follow] * turns, keys)


def _group_prompts(tokenizer: Any) -> list[list[int]]:
    """Two groups of two games (one scenario each, like Dr. GRPO groups) behind one preamble."""
    preamble = _preamble(tokenizer)
    scenario = [
        tokenizer(
            f" Scenario {name}: " + "the target lives in the east. " * 12, add_special_tokens=False
        )["input_ids"]
        for name in ("alpha", "beta")
    ]
    return [preamble + scenario[g] + [100 + i] for g in (0, 1) for i in (0, 1)]


def test_shared_prefixes_equal_full_encoding_and_save_their_tokens(loaded):
    firsts = _group_prompts(loaded[1])
    keys = [("g0", "d"), ("g1", "d"), ("g2", "d"), ("g3", "d")]
    shared, unshared, plain = (
        _backend(loaded, kv_cache=cache, kv_cache_share_prefixes=share)
        for cache, share in ((True, True), (True, False), (False, True))
    )
    runs = {name: _group_turns(b, firsts, keys) for name, b in
            (("shared", shared), ("unshared", unshared), ("plain", plain))}  # fmt: skip
    for other in ("unshared", "plain"):
        for a, b in zip(runs["shared"], runs[other], strict=True):
            _assert_same_results(a, b)
    stats, without = shared.cache_stats(), unshared.cache_stats()
    # The preamble, then each group's scenario on top of it: three prefixes, four games.
    assert stats["prefixes_cached"] == 3 and stats["shared_prefix_hits"] == 4
    assert without["prefixes_cached"] == 0 and without["shared_prefix_hits"] == 0
    group_prefix = len(firsts[0]) - 1
    # Both groups share the preamble and the token(s) of " Scenario".
    root = next(n for n, (a, b) in enumerate(zip(firsts[0], firsts[2], strict=False)) if a != b)
    # Without sharing each game prefills its first prompt; with it, each prefix once.
    saved = 4 * group_prefix - (root + 2 * (group_prefix - root))
    assert without["prefill_tokens"] - stats["prefill_tokens"] == saved
    assert stats["full_encodes"] == 0 and without["full_encodes"] == 4


def test_a_shared_prefix_is_never_written_and_serves_later_games(loaded):
    backend, plain = _backend(loaded), _backend(loaded, kv_cache=False)
    firsts = _group_prompts(loaded[1])[:2]  # one group: identical scenario, distinct last token
    # Both games extend the prefix's buffers' spare room unless they copy it first: the
    # second would overwrite the first's later positions.
    keys = [("g0", "d"), ("g1", "d")]
    for a, b in zip(
        _group_turns(backend, firsts, keys), _group_turns(plain, firsts, keys), strict=True
    ):
        _assert_same_results(a, b)
    store = backend.engine.store
    [(ids, entry)] = store.prefixes().items()
    snapshot = [(k[:, : len(ids)].clone(), v[:, : len(ids)].clone()) for k, v in entry.layers]
    later = firsts[0][:-1] + [555]  # a game of the same scenario starting afterwards
    for a, b in zip(
        _group_turns(backend, [later], [("g9", "d")]),
        _group_turns(plain, [later], [("g9", "d")]),
        strict=True,
    ):
        _assert_same_results(a, b)
    for (k, v), (k0, v0) in zip(entry.layers, snapshot, strict=True):
        assert torch.equal(k[:, : len(ids)], k0) and torch.equal(v[:, : len(ids)], v0)
    stats = backend.cache_stats()
    assert stats["shared_prefix_hits"] == 3 and stats["prefixes_cached"] == 1


def test_forget_and_invalidate_drop_shared_prefixes(loaded):
    backend = _backend(loaded)
    firsts = _group_prompts(loaded[1])
    games = ["g0", "g1", "g2", "g3"]
    _group_turns(backend, firsts, [(g, "d") for g in games], turns=1)
    store = backend.engine.store
    assert len(store) == 4 and len(store.prefixes()) == 3
    assert not any(isinstance(k, SharedPrefix) for k in store.keys())  # noqa: SIM118 (the store's own keys())
    # Keys are tuples; a predicate that only understands them never sees a prefix key.
    backend.forget_conversations("g0")
    backend.forget_conversations("g1")
    assert len(store) == 2 and len(store.prefixes()) == 2  # group alpha's own prefix is gone
    backend.forget_conversations("g2")
    backend.forget_conversations("g3")
    assert len(store) == 0 and not store.prefixes() and store.cached_tokens == 0
    _group_turns(backend, firsts, [(g, "d") for g in games], turns=1)
    backend.invalidate_cache()
    assert not store.prefixes() and store.cached_tokens == 0


def test_a_cap_below_the_prefix_keeps_generation_exact(loaded):
    firsts = _group_prompts(loaded[1])
    keys = [(g, "d") for g in ("g0", "g1", "g2", "g3")]
    tiny = _backend(loaded, kv_cache_max_tokens=60)
    plain = _backend(loaded, kv_cache=False)
    for a, b in zip(
        _group_turns(tiny, firsts, keys), _group_turns(plain, firsts, keys), strict=True
    ):
        _assert_same_results(a, b)
    assert tiny.cache_stats()["evictions"] > 0 and tiny.engine.store.cached_tokens <= 60


def test_spec_key_turns_prefix_sharing_off():
    from tomgym.agents.specs import convert_option, option_types

    assert option_types("hf")["kv_cache_share_prefixes"] is bool
    from tomgym.agents.llm import make_llm_policy

    try:
        policy = make_llm_policy("default,kv_cache_share_prefixes=false,device=cpu,dtype=float32")
    except Exception as exc:  # the bundled model may be absent
        pytest.skip(str(exc))
    assert policy.backend.engine.store.share_prefixes is False
    assert convert_option("kv_cache_share_prefixes", "true", bool) is True
    policy.close()
