"""`forget(game_id)`: nothing a policy keeps about a game survives it, and the runner calls it
only after `on_record`, which is where the episode player collects the trained agent's tokens.

Runs without a model: a character-level fake tokenizer stands in for a Hugging Face one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tomgym.agents.base import BasePolicy, Turn
from tomgym.training.policy_specs import make_policy
from tomgym.training.rl.episodes import EpisodePlayer, GameRow
from tomgym.training.rl.generation import Sampled
from tomgym.training.rl.opponents import ResilientPolicy
from tomgym.training.rl.tokens import ChatRenderer
from tomgym.training.rl.trainable import TrainablePolicy
from tomgym.training.routing import RoutedPolicy
from tomgym.training.runner import GameSpec, play_games

EOS = "</s>"


class CharTokenizer:
    """One token per character; id 0 is the EOS token, rendered as `</s>` in chat templates."""

    eos_token = EOS
    eos_token_id = 0

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) for c in text]}

    def apply_chat_template(
        self, messages: list[dict[str, str]], tokenize: bool, add_generation_prompt: bool
    ) -> str:
        text = "".join(f"<{m['role']}>{m['content']}{EOS}" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return "".join(chr(i) for i in ids if i != 0)


def answer_generate(text: str):
    def generate(contexts: Sequence[Sequence[int]], max_new: int) -> list[Sampled]:
        ids = [ord(c) for c in text][: max_new - 1] + [0]
        return [Sampled(ids, [-0.1] * len(ids)) for _ in contexts]

    return generate


def trainable(budget: int = 400) -> TrainablePolicy:
    return TrainablePolicy(
        ChatRenderer(CharTokenizer()),
        answer_generate("I'm not able to discuss that."),
        episode_budget=budget,
        max_turn_tokens=64,
    )


class Remembering(BasePolicy):
    """A stateful policy: keeps per-game notes until it forgets the game."""

    name = "remembering"

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.notes: dict[str, int] = {}
        self.seen_at_record: dict[str, int] = {}

    def reset(self, game_id: str) -> None:
        self.notes[game_id] = 0
        self.inner.reset(game_id)

    def forget(self, game_id: str) -> None:
        self.notes.pop(game_id, None)
        self.inner.forget(game_id)

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        for turn in turns:
            self.notes[turn.game_id] += 1
        return self.inner.act_batch(turns)


def test_trainable_forget_drops_exactly_that_game() -> None:
    policy = trainable()
    turn = {"system": "S", "message": "hello", "prompt": "hello"}
    for game in ("g1", "g2"):
        policy.reset(game)
        policy.act_batch([Turn(game, "defender_0", turn)])
    assert policy.episode("g1").sampled_tokens > 0
    policy.forget("g1")
    assert "g1" not in policy.episodes and policy.episodes["g2"].sampled_tokens > 0
    taken = policy.take_episode("g2")
    assert taken.sampled_tokens > 0 and policy.episodes == {}


def test_runner_forgets_after_on_record_and_router_keeps_nothing() -> None:
    attacker = Remembering(make_policy("scripted:base"))
    defender = Remembering(make_policy("scripted:tom_heuristic"))
    router = RoutedPolicy()
    games = []
    for i in range(4):
        game_id = f"g{i}"
        router.assign(game_id, {"attacker_0": attacker, "defender_0": defender})
        games.append(GameSpec(game_id, i, {"attacker": "base"}, {"episode": i}))

    def on_record(record: Any) -> None:
        # Per-game state is still there when the record is handed out ...
        attacker.seen_at_record[record["game_id"]] = attacker.notes[record["game_id"]]

    records = play_games(
        "tomgym/tomsb-v0",
        games,
        {"attacker_0": router, "defender_0": router},
        concurrency=2,
        env_config={"max_attacker_turns": 2},
        on_record=on_record,
    )
    # ... and gone from every policy, and from the router, once the game is over.
    assert attacker.notes == {} and defender.notes == {} and router.games == []
    assert all(count > 0 for count in attacker.seen_at_record.values())
    assert len(attacker.seen_at_record) == 4
    for record in records:
        # The record names the policies the router played the game with, and the job's block.
        assert record["policies"]["attacker_0"]["name"] == attacker.describe()["name"]
        assert record["eval"] == {"episode": int(record["game_id"][1:])}


def test_episode_player_collects_tokens_although_forget_drops_them() -> None:
    policy = trainable()
    opponent = ResilientPolicy(make_policy("scripted:base"), backoff_s=0)
    player = EpisodePlayer(
        "tomgym/tomsb-v0",
        "defender_0",
        policy,
        {"attacker_0": opponent},
        env_config={"max_attacker_turns": 2, "max_retries": 0},
    )
    row = GameRow(0, {"attacker": "base", "prior_level": 1}, 3, "base")
    episodes = player.play([("e0", row, 3), ("e1", row, 4)])
    assert [ep.game_id for ep in episodes] == ["e0", "e1"]
    for ep in episodes:
        assert ep.dropped is None and ep.record["game_id"] == ep.game_id
        assert ep.tokens.game_id == ep.game_id and ep.tokens.turns >= 1
        assert ep.tokens.sampled_tokens == sum(ep.tokens.env_mask) > 0
    assert policy.episodes == {} and opponent.failed_games == {}
