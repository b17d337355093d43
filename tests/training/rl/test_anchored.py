"""Teacher-anchored rollouts: who answers which turn, what enters the loss, how groups draw."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from tomgym.agents.base import BasePolicy, Turn
from tomgym.training.rl.anchored import AnchoredPolicy, draw_anchors
from tomgym.training.rl.tokens import ChatRenderer, debug_check_episode
from tomgym.training.rl.trainable import TrainablePolicy

from tests.training.rl.test_rollout import scripted_generate, turn

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def renderer(tiny_model_dir: Any) -> ChatRenderer:
    from transformers import AutoTokenizer

    return ChatRenderer(AutoTokenizer.from_pretrained(tiny_model_dir))


class Teacher(BasePolicy):
    """Answers `teacher <n>` (n counts its answers per game) and remembers resets and forgets."""

    name = "teacher"

    def __init__(self) -> None:
        self.answered: dict[str, int] = {}
        self.forgotten: list[str] = []

    def reset(self, game_id: str) -> None:
        self.answered[game_id] = 0

    def forget(self, game_id: str) -> None:
        self.forgotten.append(game_id)

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        out = []
        for t in turns:
            self.answered[t.game_id] += 1
            out.append(f"teacher {self.answered[t.game_id]}")
        return out


def test_the_teacher_opens_anchored_games_and_its_turns_stay_out_of_the_loss(
    renderer: ChatRenderer,
) -> None:
    trainable = TrainablePolicy(
        renderer, scripted_generate(renderer, ["model answer"]), episode_budget=100,
        max_turn_tokens=8,
    )  # fmt: skip
    teacher = Teacher()
    seat = AnchoredPolicy(trainable, teacher, {"a": 2, "plain": 0})
    for game in ("a", "plain"):
        seat.reset(game)
    assert "plain" not in teacher.answered  # never opened: the teacher never saw it

    assert seat.act_batch([turn("a", "one"), turn("plain", "one")]) == ["teacher 1", "model answer"]
    # A side question inside the prefix is the teacher's too, and counts no turn.
    assert seat.act_batch([turn("a", "probe?", side=True)]) == ["teacher 2"]
    assert seat.act_batch([turn("a", "two")]) == ["teacher 3"]
    assert seat.act_batch([turn("a", "three")]) == ["model answer"]

    ep = trainable.episode("a")
    eos = renderer.eos_id
    given = [
        renderer.encode("teacher 1") + [eos],
        renderer.user_suffix_ids("SYS", "two"),
        renderer.encode("teacher 3") + [eos],
        renderer.user_suffix_ids("SYS", "three"),
    ]
    own = renderer.encode("model answer") + [eos]
    assert ep.prompt_ids == renderer.first_turn_ids("SYS", "one")
    assert ep.completion_ids == [t for part in given for t in part] + own
    # Only the model's answer is trained: the teacher's turns and the messages have mask 0.
    assert ep.env_mask == [0] * sum(map(len, given)) + [1] * len(own)
    assert ep.given_turns == 2 and ep.turns == 3 and ep.sampled_tokens == len(own)
    assert [m["content"] for m in ep.messages if m["role"] == "assistant"] == [
        "teacher 1",
        "teacher 3",
        "model answer",
    ]
    assert debug_check_episode(ep, renderer, None)["token_mismatches"] == 0
    assert trainable.episode("plain").given_turns == 0

    seat.forget("a")
    seat.forget("plain")
    assert teacher.forgotten == ["a"]
    assert "a" not in trainable.episodes


def test_two_turns_of_one_game_in_one_batch_keep_the_prefix_order(renderer: ChatRenderer) -> None:
    trainable = TrainablePolicy(
        renderer, scripted_generate(renderer, ["mine"]), episode_budget=100, max_turn_tokens=8
    )
    seat = AnchoredPolicy(trainable, Teacher(), {"g": 1})
    seat.reset("g")
    assert seat.act_batch([turn("g", "one"), turn("g", "two")]) == ["teacher 1", "mine"]
    assert [m["content"] for m in trainable.episode("g").messages][1:] == [
        "one",
        "teacher 1",
        "two",
        "mine",
    ]


def test_groups_share_one_anchor_drawn_again_the_same() -> None:
    ids = [f"s0-c0-p0-r{row}-g{m}" for row in range(40) for m in range(4)]
    anchors = draw_anchors(ids, 4, [0, 1, 2], seed=5)
    assert anchors == draw_anchors(ids, 4, [0, 1, 2], seed=5)
    per_group = [{anchors[i] for i in ids[s : s + 4]} for s in range(0, len(ids), 4)]
    assert all(len(ks) == 1 for ks in per_group)
    assert set().union(*per_group) == {0, 1, 2}  # 40 groups draw every choice
    assert draw_anchors(ids, 4, [], seed=5) == {}
    assert set(draw_anchors(ids, 4, [3], seed=5).values()) == {3}
