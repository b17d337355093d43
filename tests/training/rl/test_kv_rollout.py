"""KV-cache reuse in the trainer's rollouts: the trained policy's recorded tokens and log-probs
are the same with and without the cache (fp32, both games), finished games leave no cache, and
no cache survives into an optimisation step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

LOGPROB_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def tiny(tiny_model_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir), AutoTokenizer.from_pretrained(
        tiny_model_dir
    )


def _play(tiny, env_id, agent, opponents, env_config, games, *, cached, temperature):
    import torch
    from tomgym.agents.llm.kv_cache import KVCacheStore
    from tomgym.training.rl.episodes import EpisodePlayer
    from tomgym.training.rl.generation import hf_generate_fn
    from tomgym.training.rl.tokens import ChatRenderer
    from tomgym.training.rl.trainable import TrainablePolicy

    model, tokenizer = tiny
    store = KVCacheStore() if cached else None
    generate = hf_generate_fn(model, tokenizer, temperature=temperature, store=store)
    policy = TrainablePolicy(
        ChatRenderer(tokenizer), generate, episode_budget=40, max_turn_tokens=8
    )
    player = EpisodePlayer(env_id, agent, policy, opponents(), env_config=env_config)
    torch.manual_seed(11)
    episodes = player.play(games)
    return episodes, generate.cache_stats(), store


def _compare(tiny, env_id, agent, opponents, env_config, games, temperature=0.0):
    cached, stats, store = _play(
        tiny, env_id, agent, opponents, env_config, games, cached=True, temperature=temperature
    )
    plain, plain_stats, _ = _play(
        tiny, env_id, agent, opponents, env_config, games, cached=False, temperature=temperature
    )
    for a, b in zip(cached, plain, strict=True):
        assert a.tokens.turns >= 2, "a one-turn episode cannot reuse a cache"
        assert a.tokens.prompt_ids == b.tokens.prompt_ids
        assert a.tokens.completion_ids == b.tokens.completion_ids
        assert a.tokens.env_mask == b.tokens.env_mask
        worst = max(abs(x - y) for x, y in zip(a.tokens.logprobs, b.tokens.logprobs, strict=True))
        assert worst <= LOGPROB_TOLERANCE
    assert stats["reused_tokens"] > 0 and plain_stats["reused_tokens"] == 0
    assert stats["prefill_tokens"] < plain_stats["prefill_tokens"]
    assert len(store) == 0, "finished games must leave no cache behind (forget)"
    assert not store.prefixes(), "nor a shared prefix that no game starts with"
    return stats


def _compare_tomsb(tiny, options: dict[str, Any], games: list[tuple[str, int]], **kwargs):
    """`_compare` on TOM-SB games of one training row (`options`), the defender trained
    against the scripted base attacker; `games` are (game id, seed)."""
    from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
    from tomgym.training.rl.episodes import GameRow
    from tomgym.training.rl.opponents import ResilientPolicy

    row = GameRow(0, options, 5, "base")
    return _compare(
        tiny,
        "tomgym/tomsb-v0",
        "defender_0",
        lambda: {"attacker_0": ResilientPolicy(make_scripted_tomsb_policy("base"))},
        {"max_attacker_turns": 3, "max_retries": 0},
        [(game, row, seed) for game, seed in games],
        **kwargs,
    )


def test_tomsb_rollout_cached_equals_uncached(tiny) -> None:
    _compare_tomsb(tiny, {"prior_level": 1, "attacker": "base"}, [("t0", 5), ("t1", 6)])


def test_tomsb_group_rollout_shares_its_first_prompt(tiny) -> None:
    """Two games of one scenario (a Dr. GRPO group): their common first prompt is prefilled
    once, and the recorded tokens and log-probs still equal full re-encoding."""
    from tomgym.envs.tomsb.benchmark import load_benchmark

    scenario = load_benchmark().filter(split="train", prior_level=1)[0].scenario_id
    stats = _compare_tomsb(tiny, {"scenario": scenario, "attacker": "base"}, [("t0", 5), ("t1", 6)])
    assert stats["shared_prefix_hits"] == 2 and stats["prefixes_cached"] == 1
    assert stats["shared_prefix_tokens"] > 300  # the rules and the universe


def test_tomsb_sampled_rollout_cached_equals_uncached(tiny) -> None:
    """One game at a time, so both paths draw the same random numbers in the same order."""
    _compare_tomsb(tiny, {"prior_level": 1, "attacker": "base"}, [("s0", 5)], temperature=0.7)


def test_decrypto_rollout_cached_equals_uncached(tiny) -> None:
    from tomgym.training.rl.episodes import GameRow
    from tomgym.training.rl.opponents import ResilientPolicy, build_opponent

    def opponents() -> dict[str, Any]:
        return {
            a: ResilientPolicy(build_opponent("decrypto:random", seed=1, model_path=""))
            for a in ("decoder_0", "interceptor_0")
        }

    _compare(
        tiny,
        "tomgym/decrypto-v0",
        "encoder_0",
        opponents,
        {"max_rounds": 2, "max_retries": 0},
        [("d0", GameRow(0, {}, 3, ""), 3)],
    )


def test_answer_stop_keeps_the_answer_and_appends_a_masked_eos(tiny) -> None:
    from tomgym.agents.base import Turn
    from tomgym.training.rl.generation import Sampled
    from tomgym.training.rl.tokens import ChatRenderer
    from tomgym.training.rl.trainable import TrainablePolicy

    renderer = ChatRenderer(tiny[1])
    answer = renderer.encode('{"reply": "no"}')

    def generate(contexts, max_new):
        return [Sampled(list(answer), [-0.1] * len(answer), "answer") for _ in contexts]

    policy = TrainablePolicy(renderer, generate, episode_budget=64, max_turn_tokens=32)
    policy.reset("g")
    obs = {"system": "S", "message": "hi", "prompt": "hi"}
    assert policy.act_batch([Turn("g", "defender_0", obs)]) == ['{"reply": "no"}']
    ep = policy.episode("g")
    assert ep.completion_ids == [*answer, renderer.eos_id]
    assert ep.env_mask == [1] * len(answer) + [0]
    assert ep.answer_stops == 1 and ep.capped_turns == 0


def test_context_window_turns_are_never_fed(tiny) -> None:
    from tomgym.agents.base import Turn
    from tomgym.training.rl.generation import hf_generate_fn
    from tomgym.training.rl.tokens import ChatRenderer
    from tomgym.training.rl.trainable import TrainablePolicy

    model, tokenizer = tiny
    generate = hf_generate_fn(model, tokenizer, temperature=0.0)
    generate.engine.context_window = 60
    policy = TrainablePolicy(
        ChatRenderer(tokenizer), generate, episode_budget=64, max_turn_tokens=4, fallback="F"
    )
    short = {"system": "", "message": "hi", "prompt": "hi"}
    long = {"system": "", "message": "word " * 80, "prompt": "x"}
    for game in ("short", "long"):
        policy.reset(game)
    answers = policy.act_batch(
        [Turn("short", "defender_0", short), Turn("long", "defender_0", long)]
    )
    assert answers[1] == "F"
    assert policy.episode("long").context_window_turns == 1
    assert sum(policy.episode("long").env_mask) == 0
    assert policy.episode("short").sampled_tokens > 0


def test_no_cache_survives_into_an_optimisation_step(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Games that are never forgotten would leave their caches: only the rollout's own
    invalidation can empty the store before TRL optimises; the log-probs sampled after a step
    match a re-score with the new weights."""
    from tomgym.training.rl.trainable import TrainablePolicy
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    from tests.training.rl.test_trainer import make_config

    monkeypatch.setattr(TrainablePolicy, "forget", lambda self, game_id: None)
    cfg = make_config(tmp_path, tiny_model_dir, max_steps=2, debug_check_tokens=True)
    session = TrainingSession(cfg)
    trainer = build_trainer(session)
    seen: list[tuple[int, int]] = []
    original = trainer._compute_loss

    def compute_loss(model: Any, inputs: dict) -> Any:
        seen.append((len(session.kv_store), session.kv_store.cached_tokens))
        return original(model, inputs)

    trainer._compute_loss = compute_loss
    trainer.train()
    assert len(seen) == 2 and seen == [(0, 0), (0, 0)]
    assert session.kv_store.stats.invalidations >= 2
    logs = [h for h in trainer.state.log_history if "rollout/reused_tokens" in h]
    assert len(logs) == 2 and all(h["rollout/reused_tokens"] > 0 for h in logs)
    # A group's games play one scenario: their first prompt was prefilled once.
    assert all(h["rollout/shared_prefix_tokens"] > 0 for h in logs)
    assert all(h["debug/logprob_deviation_max"] < LOGPROB_TOLERANCE for h in logs)
