"""KV-cache reuse across turns: cached generation must equal full re-encoding, token for token.

Covers: greedy answers and per-token log-probs with and without the cache on short episodes of
both games (bundled model, fp32), a chat template that re-renders earlier turns (Qwen3-style,
strips old `<think>` blocks: the cached prefix no longer matches and is cut back), LRU eviction
under a tiny cap, invalidation after a weight change, the context-window guard, the answer-close
stop condition, and the `kv_cache=` spec key.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from tomgym.agents.llm.stopping import answer_complete

from tests.agents.engines import chat_prompts

LOGPROB_TOLERANCE = 1e-4


# -- stop condition (no model) -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"attacker_trust_in_us": 3, "reply": "fine"}',
        'Sure! ```json\n{"a": {"b": [1, 2]}, "reply": "x } y"}',
        "<think>{not json</think>{'reply': None}",
        'I think 3-1-4.\nANSWER: {"guess": "3-1-4"}',
        "**ANSWER:** 3-1-4\n",
    ],
)
def test_answer_complete_at_the_close_of_the_answer(text):
    assert answer_complete(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"reply": "still {open',
        '{"attacker_trust_in_us": 3, "reply": "x"',
        '<think>{"a": 1}',  # still reasoning
        'ANSWER: {"guess": "3-1',
        "ANSWER: 3-1-4",  # the line may still grow
        "I don't know yet, let me think about it",
        '{"reply": "my answer: no"',  # a marker inside a JSON string is no marker
    ],
)
def test_answer_incomplete_keeps_decoding(text):
    assert not answer_complete(text)


# -- model fixtures ----------------------------------------------------------------------------

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _backend(loaded: tuple[Any, Any], **kwargs: Any) -> Any:
    from tomgym.agents.llm.backends.hf import HFBackend

    model, tokenizer = loaded
    return HFBackend.from_model(model, tokenizer, model_name="smollm2", **kwargs)


class _LogprobRecorder:
    """Routes a backend's text `generate` through `generate_ids` and keeps every result."""

    def __init__(self, backend: Any) -> None:
        self.results: list[Any] = []
        self.backend = backend

        def generate(chats: Any, **kwargs: Any) -> list[str]:
            results = backend.generate_ids(chats, return_logprobs=True, **kwargs)
            self.results.extend(results)
            return [r.text for r in results]

        backend.generate = generate


def _assert_same_results(cached: list[Any], plain: list[Any]) -> None:
    assert len(cached) == len(plain) and cached
    for a, b in zip(cached, plain, strict=True):
        assert a.prompt_ids == b.prompt_ids
        assert a.completion_ids == b.completion_ids
        worst = max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True))
        assert worst <= LOGPROB_TOLERANCE


def _play_both(loaded, env_id, specs, seats, env_config):
    """Play `specs` with a cached and an uncached policy; `seats(llm)` maps agents to policies."""
    from tomgym.agents.llm import LLMPolicy
    from tomgym.training.runner import play_games

    outcomes = {}
    for mode in (True, False):
        backend = _backend(loaded, kv_cache=mode)
        recorder = _LogprobRecorder(backend)
        policy = LLMPolicy(backend, name="llm", temperature=0.0, max_new_tokens=6)
        records = play_games(
            env_id,
            specs,
            seats(policy),
            concurrency=len(specs),
            env_config=env_config,
            record_prompts=False,
        )
        records = sorted(records, key=lambda r: r["game_id"])
        answers = [[t["raw"] for t in r["turns"]] for r in records]
        outcomes[mode] = (answers, recorder.results, backend.cache_stats())
    assert outcomes[True][0] == outcomes[False][0]
    _assert_same_results(outcomes[True][1], outcomes[False][1])
    assert outcomes[True][2]["cache_hits"] > 0 and outcomes[False][2]["cache_hits"] == 0
    assert outcomes[True][2]["prefill_tokens"] < outcomes[False][2]["prefill_tokens"]
    for _, _, stats in outcomes.values():  # both passes are timed
        assert stats["prefill_seconds"] > 0 and stats["decode_seconds"] > 0
    return outcomes


def test_tomsb_episodes_cached_equal_uncached(loaded):
    from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
    from tomgym.training.runner import GameSpec

    _play_both(
        loaded,
        "tomgym/tomsb-v0",
        [
            GameSpec("t0", 3, {"split": "validation", "attacker": "base"}),
            GameSpec("t1", 4, {"split": "validation", "attacker": "cross_examiner"}),
        ],
        lambda llm: {"defender_0": llm, "attacker_0": make_scripted_tomsb_policy("base", seed=0)},
        {"max_attacker_turns": 3, "max_retries": 0},
    )


def test_decrypto_episodes_cached_equal_uncached(loaded):
    from tomgym.training.runner import GameSpec

    agents = ("encoder_0", "decoder_0", "interceptor_0")
    _play_both(
        loaded,
        "tomgym/decrypto-v0",
        [GameSpec("d0", 1)],
        lambda llm: {a: llm for a in agents},
        {"max_rounds": 2, "max_retries": 0},
    )


def _token_turns(backend: Any, first: list[int], follow_ups: list[list[int]], keys: list[Any]):
    """`conversation_turns` from `first` plus a distinct last token per row."""
    return conversation_turns(
        backend, [list(first) + [k] for k in range(len(keys))], follow_ups, keys
    )


def conversation_turns(
    backend: Any, firsts: list[list[int]], follow_ups: list[list[int]], keys: list[Any]
) -> list[list[Any]]:
    """A trainer-style token-in/token-out loop over one conversation per row, starting from
    `firsts`: context += greedy completion (+EOS) + the next follow-up; each turn's results."""
    contexts = [list(f) for f in firsts]
    history = []
    for follow in follow_ups:
        results = backend.generate_ids(
            prompt_ids=contexts, temperature=0.0, max_new_tokens=5, keys=keys
        )
        history.append(results)
        eos = backend.eos_token_ids[0]
        contexts = [
            c + r.completion_ids + ([] if r.finished else [eos]) + follow
            for c, r in zip(contexts, results, strict=True)
        ]
    return history


def test_rows_of_different_cached_lengths_batch_correctly(loaded):
    cached = _backend(loaded)
    plain = _backend(loaded, kv_cache=False)
    tok = cached.tokenizer
    first = cached.prompt_ids([{"role": "user", "content": "Count to five."}])
    follow = [tok("\nuser\nGo on please.\nassistant\n", add_special_tokens=False)["input_ids"]] * 3
    keys = [("g0", "a"), ("g1", "a"), ("g2", "a")]
    # Give the rows different cached lengths: g1 starts a turn earlier than the others.
    cached.generate_ids(prompt_ids=[first + [7]], temperature=0.0, max_new_tokens=3, keys=[keys[1]])
    for a, b in zip(
        _token_turns(cached, first, follow, keys),
        _token_turns(plain, first, follow, keys),
        strict=True,
    ):
        _assert_same_results(a, b)
    stats = cached.cache_stats()
    assert stats["reused_tokens"] > 0 and stats["prefix_mismatches"] >= 1  # g1 diverged


QWEN3_LIKE_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' %}"
    "{%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}"
    "{{- '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
)


def test_template_that_rerenders_history_falls_back_and_stays_exact(loaded):
    """Qwen3 style: the generation prompt holds an empty think block that the re-rendered history
    drops, so the cached ids stop being a prefix; the cache is cut back, never trusted blindly."""
    from tomgym.agents.base import Turn
    from tomgym.agents.llm import LLMPolicy

    model, tokenizer = loaded
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.chat_template = QWEN3_LIKE_TEMPLATE
    results = {}
    for mode in (True, False):
        backend = _backend((model, tokenizer), kv_cache=mode)
        recorder = _LogprobRecorder(backend)
        policy = LLMPolicy(backend, name="q", temperature=0.0, max_new_tokens=6)
        turns = []
        for text in ["Name a colour.", "Another one?", "And a third?"]:
            obs = {"system": "Be brief.", "message": text, "prompt": text, "retry": 0}
            turns.append(policy.act_batch([Turn("g", "player", obs)])[0])
        results[mode] = (turns, recorder.results, backend.cache_stats())
    assert results[True][0] == results[False][0]
    _assert_same_results(results[True][1], results[False][1])
    assert results[True][2]["prefix_mismatches"] == 2  # every follow-up turn diverged
    assert results[True][2]["reused_tokens"] > 0  # the common prefix was still reused


def test_lru_eviction_under_a_tiny_cap_falls_back_to_full_encode(loaded):
    cached = _backend(loaded, kv_cache_max_tokens=60)
    plain = _backend(loaded, kv_cache=False)
    tok = cached.tokenizer
    first = tok(
        "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False
    )["input_ids"]
    follow = [
        tok(
            "<|im_end|>\n<|im_start|>user\nMore<|im_end|>\n<|im_start|>assistant\n",
            add_special_tokens=False,
        )["input_ids"]
    ] * 4
    keys = [("g0", "a"), ("g1", "a"), ("g2", "a")]
    for a, b in zip(
        _token_turns(cached, first, follow, keys),
        _token_turns(plain, first, follow, keys),
        strict=True,
    ):
        _assert_same_results(a, b)
    stats = cached.cache_stats()
    assert stats["evictions"] > 0
    assert stats["cached_tokens"] <= 60 and stats["peak_cached_tokens"] <= 60


def test_invalidation_after_a_weight_change_drops_stale_caches(loaded):
    model, tokenizer = loaded
    model = copy.deepcopy(model)
    invalidated, stale = _backend((model, tokenizer)), _backend((model, tokenizer))
    chat = [{"role": "user", "content": "Say something about the sea."}]
    key = [("g", "a")]
    first = invalidated.generate_ids([chat], temperature=0.0, max_new_tokens=4, keys=key)[0]
    stale.generate_ids([chat], temperature=0.0, max_new_tokens=4, keys=key)
    follow = [
        *chat,
        {"role": "assistant", "content": first.text},
        {"role": "user", "content": "More."},
    ]
    # An "optimisation step": the weights change in place, then the documented invalidation.
    with torch.no_grad():
        for layer in model.model.layers[:4]:
            layer.self_attn.k_proj.weight.mul_(1.5)
    invalidated.invalidate_cache()
    fresh = _backend((model, tokenizer), kv_cache=False).generate_ids(
        [follow], temperature=0.0, max_new_tokens=4
    )[0]
    after = invalidated.generate_ids([follow], temperature=0.0, max_new_tokens=4, keys=key)[0]
    _assert_same_results([after], [fresh])
    assert invalidated.cache_stats()["invalidations"] == 1
    # Without the invalidation the old weights' cache leaks into the answer: the check can fail.
    leaked = stale.generate_ids([follow], temperature=0.0, max_new_tokens=4, keys=key)[0]
    assert stale.cache_stats()["reused_tokens"] > 0
    n = min(len(leaked.logprobs), len(fresh.logprobs))
    assert (
        max(abs(x - y) for x, y in zip(leaked.logprobs[:n], fresh.logprobs[:n], strict=True)) > 1e-3
    )


def test_context_window_is_never_exceeded(loaded):
    from tomgym.agents.llm.kv_cache import ContextWindowExceeded

    backend = _backend(loaded)
    backend.engine.context_window = 40
    short = [[1, 2, 3]]
    long = [list(range(1, 38))]
    with pytest.raises(ContextWindowExceeded) as info:
        backend.generate_ids(
            prompt_ids=short + long, temperature=0.0, max_new_tokens=4, keys=["a", "b"]
        )
    assert info.value.rows == [(1, "b", 37)] and info.value.reason == "context_window"
    assert backend.cache_stats()["requests"] == 0  # nothing was generated


def test_answer_stop_ends_rows_at_the_close_of_the_json(loaded):
    backend = _backend(loaded)
    chat = [
        {
            "role": "user",
            "content": 'Reply with exactly this JSON and nothing else: {"reply": "ok"}',
        }
    ]
    stopped = backend.generate_ids([chat], temperature=0.0, max_new_tokens=40)[0]
    unstopped = _backend(loaded, stop_at_answer=False).generate_ids(
        [chat], temperature=0.0, max_new_tokens=40
    )[0]
    # The stopped completion is a prefix of the free one, cut exactly where the answer closed.
    n = len(stopped.completion_ids)
    assert stopped.completion_ids == unstopped.completion_ids[:n]
    text = backend.tokenizer.decode(stopped.completion_ids)
    if answer_complete(text):
        assert not stopped.finished
        assert not answer_complete(backend.tokenizer.decode(stopped.completion_ids[:-1]))
    else:
        assert n == 40 or stopped.finished


def test_spec_key_turns_the_cache_off():
    from tomgym.agents.specs import convert_option, option_types

    assert option_types("hf")["kv_cache"] is bool
    assert convert_option("kv_cache", "false", bool) is False
    from tomgym.agents.llm import make_llm_policy

    try:
        policy = make_llm_policy("default,kv_cache=false,device=cpu,dtype=float32")
    except Exception as exc:  # the bundled model may be absent
        pytest.skip(str(exc))
    assert policy.backend.kv_cache is False and policy.describe()["kv_cache"] is False
    policy.close()


def test_rows_finishing_at_different_steps_equal_rows_decoded_alone(loaded):
    """Finished rows idle in the batch and leave it in compactions; neither changes a row's
    tokens, log-probs or the cache its next turn reuses."""
    from tomgym.agents.llm.kv_cache import CachedGenerator, KVCacheStore

    model, tokenizer = loaded

    def engine() -> CachedGenerator:
        return CachedGenerator(
            model,
            eos_token_ids=[tokenizer.eos_token_id],
            pad_token_id=tokenizer.pad_token_id or 0,
            context_window=None,
            store=KVCacheStore(),
        )

    def stop(ids: list[int]) -> bool:  # rows stop after 2-9 tokens, depending on their first
        return len(ids) >= 2 + ids[0] % 8

    texts = ["Name a colour.", "Count to ten.", "Say hello.", "List three fruits.", "Why?"]
    prompts = chat_prompts(tokenizer, texts)
    follow = tokenizer("\nuser\nAnd then?\nassistant\n", add_special_tokens=False)["input_ids"]
    keys = [f"g{i}" for i in range(len(prompts))]
    batched, alone = engine(), engine()
    kw = {"max_new_tokens": 12, "temperature": 0.0, "stop_when": stop}
    first = batched.generate(prompts, keys, **kw)
    assert len({len(c.ids) for c in first}) >= 3  # rows really finish at different steps
    second = batched.generate(
        [p + c.ids + follow for p, c in zip(prompts, first, strict=True)], keys, **kw
    )
    for i, prompt in enumerate(prompts):
        (one,) = alone.generate([prompt], [keys[i]], **kw)
        (two,) = alone.generate([prompt + one.ids + follow], [keys[i]], **kw)
        for got, want in ((first[i], one), (second[i], two)):
            assert got.ids == want.ids and got.finish_reason == want.finish_reason
            worst = max(abs(a - b) for a, b in zip(got.logprobs, want.logprobs, strict=True))
            assert worst <= LOGPROB_TOLERANCE
    assert batched.stats.cache_hits == alone.stats.cache_hits == len(prompts)


# -- conversation buffers and the batch-buffer pool (no model) -------------------------------


def _kv(heads: int, length: int, dim: int, start: float) -> tuple[Any, Any]:
    keys = torch.arange(start, start + heads * length * dim, dtype=torch.float32)
    keys = keys.reshape(heads, length, dim)
    return keys, -keys


def test_entry_extends_in_place_and_grows_when_full():
    from tomgym.agents.llm.kv_cache import _Entry

    heads, dim = 2, 3
    first = _kv(heads, 4, dim, 0.0)
    entry = _Entry([], [(torch.zeros(heads, 6, dim), torch.zeros(heads, 6, dim))])
    entry.extend([1, 2, 3, 4], [[first]])
    buffer = entry.layers[0][0]
    second, third = _kv(heads, 1, dim, 100.0), _kv(heads, 1, dim, 200.0)
    entry.extend([5, 6], [[second, third]])  # two runs of one position each, as after padding
    assert entry.layers[0][0].data_ptr() == buffer.data_ptr()  # fitted: no new buffer
    grow = _kv(heads, 5, dim, 300.0)
    entry.extend([7, 8, 9, 10, 11], [[grow]])  # 11 > capacity 6: the buffer doubles at least
    assert entry.layers[0][0].shape[1] >= 11
    keys, values = entry.kv(0)
    expected = torch.cat([first[0], second[0], third[0], grow[0]], dim=1)
    assert torch.equal(keys, expected) and torch.equal(values, -expected)
    assert entry.token_ids == list(range(1, 12))

    cropped = entry.cropped(5)  # a re-rendered prompt: keep 5 tokens, overwrite from there
    cropped.extend([42], [[third]])
    assert cropped.token_ids == [1, 2, 3, 4, 5, 42]
    assert torch.equal(cropped.kv(0)[0][:, 5:], third[0])
    with pytest.raises(RuntimeError, match="KV for 1 positions, 2 token ids"):
        cropped.extend([1, 2], [[second]])


def test_buffer_pool_reuses_the_last_batch_memory():
    from tomgym.agents.llm.kv_cache import _BufferPool

    pool = _BufferPool()
    first = pool.take((2, 3, 10, 4), torch.float32, "cpu")
    pool.give([first])
    again = pool.take((2, 3, 11, 4), torch.float32, "cpu")  # a little longer: the headroom fits
    assert again.data_ptr() == first.data_ptr() and again.shape == (2, 3, 11, 4)
    pool.give([again])
    bigger = pool.take((4, 3, 50, 4), torch.float32, "cpu")  # does not fit: fresh memory
    assert bigger.data_ptr() != first.data_ptr()
    pool.give([bigger])
    pool.clear()
    assert pool.take((1, 1, 1, 1), torch.float64, "cpu").data_ptr() != bigger.data_ptr()


def test_conversations_outgrowing_their_buffers_stay_exact(loaded):
    cached = _backend(loaded)
    plain = _backend(loaded, kv_cache=False)
    tok = cached.tokenizer
    first = tok("Hi", add_special_tokens=False)["input_ids"]
    # Each follow-up is longer than the conversation so far: every turn regrows the buffers.
    follow = [tok(" and then" * n, add_special_tokens=False)["input_ids"] for n in (8, 20, 45)]
    keys = [("g0", "a"), ("g1", "a")]
    for a, b in zip(
        _token_turns(cached, first, follow, keys),
        _token_turns(plain, first, follow, keys),
        strict=True,
    ):
        _assert_same_results(a, b)
    assert cached.cache_stats()["cache_hits"] == 4
