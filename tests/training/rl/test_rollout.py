"""Token-in/token-out rollouts: masks, splicing, budget, fallbacks, opponents, dropped games."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from tomgym.agents.base import BasePolicy, Turn
from tomgym.training.rl.episodes import EpisodePlayer, GameRow, group_games, trl_batch
from tomgym.training.rl.generation import Sampled
from tomgym.training.rl.opponents import PolicyPerRoute, ResilientPolicy, game_failure, opponent_for
from tomgym.training.rl.tokens import ChatRenderer, debug_check_episode
from tomgym.training.rl.trainable import TrainablePolicy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def renderer(tiny_model_dir: Any) -> ChatRenderer:
    from transformers import AutoTokenizer

    return ChatRenderer(AutoTokenizer.from_pretrained(tiny_model_dir))


def scripted_generate(renderer: ChatRenderer, answers: list[str], cap_hit: set[int] = frozenset()):
    """A GenerateFn replaying fixed answers (index = call number); EOS unless in `cap_hit`."""
    calls = {"n": 0}

    def generate(contexts: Sequence[Sequence[int]], max_new: int) -> list[Sampled]:
        out = []
        for _ in contexts:
            k = calls["n"]
            calls["n"] += 1
            ids = renderer.encode(answers[k % len(answers)])
            if k not in cap_hit:
                ids = [*ids, renderer.eos_id, 7, 7]  # tokens after EOS must be dropped
            out.append(Sampled(ids[: max_new + 3], [-0.5] * len(ids[: max_new + 3])))
        return out

    return generate


def turn(game: str, message: str, side: bool = False) -> Turn:
    obs = {"system": "SYS", "message": message, "prompt": message, "side_question": int(side)}
    return Turn(game, "defender_0", obs, side)


def test_mask_is_exactly_the_sampled_tokens(renderer: ChatRenderer) -> None:
    answers = ["first answer", "second answer that is long"]
    policy = TrainablePolicy(
        renderer,
        scripted_generate(renderer, answers, cap_hit={1}),
        episode_budget=100,
        max_turn_tokens=4,
    )
    policy.reset("g")
    assert policy.act_batch([turn("g", "hello")]) == ["first answer"]
    second = policy.act_batch([turn("g", "again")])[0]
    ep = policy.episode("g")
    first_ids = renderer.encode("first answer") + [renderer.eos_id]
    second_ids = renderer.encode("second answer that is long")[:4]
    glue = renderer.user_suffix_ids("SYS", "again")
    assert ep.prompt_ids == renderer.first_turn_ids("SYS", "hello")
    assert ep.completion_ids == first_ids + glue + second_ids + [renderer.eos_id]
    assert ep.env_mask == [1] * len(first_ids) + [0] * len(glue) + [1] * 4 + [0]
    assert second == renderer.tokenizer.decode(second_ids)
    assert ep.sampled_tokens == len(first_ids) + 4 and ep.capped_turns == 1
    # The spliced sequence is exactly a fresh render of the conversation.
    assert debug_check_episode(ep, renderer, None)["token_mismatches"] == 0


def test_ids_a_constraint_forced_get_mask_zero(renderer: ChatRenderer) -> None:
    ids = renderer.encode("a forced key then a choice")
    forced = [True, True] + [False] * (len(ids) - 2)

    def generate(contexts: Sequence[Sequence[int]], max_new: int) -> list[Sampled]:
        return [Sampled([*ids, renderer.eos_id], [-0.5] * (len(ids) + 1), "eos", forced)]

    policy = TrainablePolicy(renderer, generate, episode_budget=100, max_turn_tokens=32)
    policy.reset("g")
    policy.act_batch([turn("g", "hello")])
    ep = policy.episode("g")
    # Forced ids stay in the sequence (the model read them) but out of the loss; the EOS, which
    # `forced` does not cover, is the model's own choice.
    assert ep.completion_ids == [*ids, renderer.eos_id]
    assert ep.env_mask == [0, 0] + [1] * (len(ids) - 2) + [1]
    assert ep.forced_tokens == 2 and ep.sampled_tokens == len(ids) + 1


def test_budget_then_fallback_with_mask_zero(renderer: ChatRenderer) -> None:
    policy = TrainablePolicy(
        renderer,
        scripted_generate(renderer, ["a b c d e f g h"], cap_hit={0}),
        episode_budget=3,
        max_turn_tokens=8,
        fallback="FALLBACK",
    )
    policy.reset("g")
    policy.act_batch([turn("g", "one")])
    assert policy.act_batch([turn("g", "two")]) == ["FALLBACK"]
    ep = policy.episode("g")
    assert ep.sampled_tokens == 3 and sum(ep.env_mask) == 3 and ep.fallback_turns == 1
    tail = renderer.encode("FALLBACK") + [renderer.eos_id]
    assert ep.completion_ids[-len(tail) :] == tail and ep.env_mask[-len(tail) :] == [0] * len(tail)


def test_side_questions_never_enter_the_sequence(renderer: ChatRenderer) -> None:
    policy = TrainablePolicy(
        renderer,
        scripted_generate(renderer, ["x", "probe answer", "y"]),
        episode_budget=50,
        max_turn_tokens=8,
    )
    policy.reset("g")
    policy.act_batch([turn("g", "one")])
    before = list(policy.episode("g").completion_ids)
    assert policy.act_batch([turn("g", "what will Eve guess?", side=True)]) == ["probe answer"]
    assert policy.episode("g").completion_ids == before


def test_a_constraining_generate_gets_each_contexts_answer_options(renderer: ChatRenderer) -> None:
    from tomgym.agents.llm.constraints import answer_options
    from tomgym.envs import tomsb_v0
    from tomgym.envs.tomsb.env import DEFENDER

    seen: list[Any] = []

    def generate(contexts: Sequence[Sequence[int]], max_new: int, **kwargs: Any) -> list[Sampled]:
        seen.append(kwargs.get("answer_options"))
        ids = [*renderer.encode("{}"), renderer.eos_id]
        return [Sampled(ids, [-0.1] * len(ids)) for _ in contexts]

    env = tomsb_v0.env()
    env.reset(seed=0)
    tomsb_turn = Turn("t", DEFENDER, dict(env.observe(DEFENDER)))
    policy = TrainablePolicy(renderer, generate, episode_budget=50, max_turn_tokens=8)
    policy.act_batch([tomsb_turn, turn("g", "a Decrypto clue")])
    generate.constrain_beliefs = True  # type: ignore[attr-defined]
    policy.act_batch([tomsb_turn, turn("g", "again")])
    generate.constrain_beliefs = False  # type: ignore[attr-defined]
    generate.constrain_replies = True  # type: ignore[attr-defined]
    policy.act_batch([tomsb_turn, turn("g", "and again")])
    generate.constrain_replies = False  # type: ignore[attr-defined]
    generate.constrain_format = True  # type: ignore[attr-defined]
    policy.act_batch([tomsb_turn, turn("g", "once more")])
    options = [answer_options(tomsb_turn.observation), None]
    assert options[0] is not None and options[0].role == "defender"
    assert seen == [None, options, options, options]


class Flaky(BasePolicy):
    name = "flaky"

    def __init__(self, fail_games: set[str]) -> None:
        self.fail_games = fail_games
        self.calls = 0

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        self.calls += 1
        if any(t.game_id in self.fail_games for t in turns):
            raise ConnectionError("backend down")
        return ["ok"] * len(turns)


def test_resilient_policy_retries_then_drops_only_failed_games() -> None:
    inner = Flaky({"bad"})
    policy = ResilientPolicy(inner, max_retries=2, backoff_s=0)
    out = policy.act_batch([Turn("bad", "a", {}), Turn("good", "a", {})])
    assert "bad" in policy.failed_games and "good" not in policy.failed_games
    assert out == ["I cannot continue.", "ok"]
    assert policy.act_batch([Turn("good", "a", {})]) == ["ok"]  # later turns of good games work
    per_route = PolicyPerRoute(lambda route: ResilientPolicy(Flaky({"bad"}), backoff_s=0))
    base = opponent_for(per_route, "base")
    assert opponent_for(per_route, "base") is base and opponent_for(per_route, "x") is not base
    base.act_batch([Turn("bad", "a", {})])
    assert game_failure([base], "bad") is not None and game_failure([base], "good") is None
    base.forget("bad")  # the failure is per-game state: gone once the game is forgotten
    assert game_failure([base], "bad") is None


def test_group_games_members_share_row_and_differ_in_id() -> None:
    row = GameRow(3, {"scenario": "s"}, 11, "base")
    games = group_games(
        [row.encode()] * 3 + [GameRow(4, {}, 12, "x").encode()] * 3,
        tag="t",
        base_seed=0,
        shared_seed=False,
    )
    assert [g[0] for g in games[:3]] == ["t-r3-g0", "t-r3-g1", "t-r3-g2"]
    assert len({g[2] for g in games}) == 6
    shared = group_games([row.encode()] * 2, tag="t", base_seed=0, shared_seed=True)
    assert {g[2] for g in shared} == {11}
    with pytest.raises(ValueError, match="not an encoded GameRow"):
        GameRow.decode("hello")


def test_real_episode_splices_exactly_and_rescoring_matches(
    renderer: ChatRenderer, tiny_model_dir: Any
) -> None:
    """A real TOM-SB game against a scripted attacker, sampled with a (tiny) real model."""
    from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy
    from tomgym.training.rl.generation import hf_generate_fn, hf_score_fn
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    policy = TrainablePolicy(
        renderer,
        hf_generate_fn(model, renderer.tokenizer, temperature=1.0),
        episode_budget=24,
        max_turn_tokens=8,
    )
    player = EpisodePlayer(
        "tomgym/tomsb-v0",
        "defender_0",
        policy,
        {"attacker_0": ResilientPolicy(make_scripted_tomsb_policy("base"))},
        env_config={"max_attacker_turns": 2, "max_retries": 1},
    )
    row = GameRow(0, {"prior_level": 1, "attacker": "base"}, 5, "base")
    episodes = player.play([("e0", row, 5), ("e1", row, 6)])
    assert all(ep.dropped is None and ep.record["outcome"] for ep in episodes)
    for ep in episodes:
        check = debug_check_episode(ep.tokens, renderer, hf_score_fn(model, temperature=1.0))
        # Random-weight samples need not be canonical tokenizations of their own text (the reason
        # the trainer never re-tokenises), so only sampled tokens may differ from a fresh render.
        assert check["token_mismatches"] <= ep.tokens.sampled_tokens
        fresh = renderer.fresh_ids(ep.tokens.messages)
        assert fresh[: len(ep.tokens.prompt_ids)] == ep.tokens.prompt_ids
        assert check["max_logprob_deviation"] < 1e-3
        assert ep.tokens.sampled_tokens <= 24
    batch, metrics = trl_batch(episodes, renderer)
    assert [sum(m) for m in batch["env_mask"]] == [ep.tokens.sampled_tokens for ep in episodes]
    assert metrics["rollout/episodes"] == 2


def test_row_and_episode_seeds_are_deterministic_and_distinct() -> None:
    """One seed rule (`envs.seeding.derive_seed`): same inputs, same seeds in every process;
    other run seeds or tags, other seeds."""
    from tomgym.training.rl.train_config import TrainConfig
    from tomgym.training.rl.trainer import build_rows

    def rows(seed: int) -> list[int]:
        cfg = TrainConfig(env_id="tomgym/decrypto-v0", decrypto_rows=6, seed=seed)
        return [r.seed for r in build_rows(cfg)]

    assert rows(0) == rows(0) and len(set(rows(0))) == 6
    assert set(rows(0)).isdisjoint(rows(1))
    prompts = [GameRow(0, {}, 1, "").encode()] * 3
    games = group_games(prompts, tag="s0", base_seed=4, shared_seed=False)
    assert games == group_games(prompts, tag="s0", base_seed=4, shared_seed=False)
    assert len({g[2] for g in games}) == 3
    other = group_games(prompts, tag="s1", base_seed=4, shared_seed=False)
    assert {g[2] for g in games}.isdisjoint(g[2] for g in other)
