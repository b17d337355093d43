"""Teacher-anchored rollouts: the scripted teacher opens a game, the model plays on from there.

A small model that almost never wins a game on its own gives Dr. GRPO almost no winning
episode to move towards (issue 13: about 1 sampled episode in 8 fooled the attacker at prior
levels 1 and 2). Starting some groups after a teacher's first turns (as in R^3's reverse
curriculum and BREAD's expert-anchored branches) puts the model's own samples where the game
is decided, behind a start it could not yet find, so its continuations differ in outcome more
often and the group's advantages speak about those turns.

- `AnchoredPolicy`: the trained agent's seat for one rollout. In a game with anchor k, the
  teacher answers the agent's first k main turns (side questions during them too); each is
  taken into the model's sequence with mask 0 (`TrainablePolicy.record_answer`: the model chose
  nothing there, so neither the loss nor its advantage reaches those tokens); the model answers
  every later turn as in an ordinary rollout. Games without an anchor are ordinary rollouts.
- `draw_anchors`: one anchor per group, drawn from `TrainConfig.teacher_prefix_turns` by a
  derived seed, so a resumed run draws the same, and every model member of a group plays on
  after as many of the teacher's turns (the group compares continuations, not starts; the
  teacher's turns themselves may differ with each member's attacker seed).

Evaluation never anchors: the defender is always scored playing every turn itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tomgym.agents.base import BasePolicy, Policy, Turn
from tomgym.envs.seeding import derive_seed
from tomgym.training.rl.trainable import TrainablePolicy
from tomgym.training.routing import forget_game


class AnchoredPolicy(BasePolicy):
    """The trained agent's seat: `teacher` plays each game's first `anchors[game_id]` main
    turns, `trainable` the rest (see module doc). Policies are reset and forgotten with it."""

    def __init__(
        self, trainable: TrainablePolicy, teacher: Policy, anchors: Mapping[str, int]
    ) -> None:
        self.trainable = trainable
        self.teacher = teacher
        self.anchors = {game: int(k) for game, k in anchors.items() if int(k) > 0}
        self.name = trainable.name
        self.taught: dict[str, int] = {}  # main turns the teacher has answered, per anchored game

    def describe(self) -> dict[str, Any]:
        return {**self.trainable.describe(), "anchored_games": len(self.anchors)}

    def reset(self, game_id: str) -> None:
        self.trainable.reset(game_id)
        if game_id in self.anchors:
            self.taught[game_id] = 0
            self.teacher.reset(game_id)

    def forget(self, game_id: str) -> None:
        self.trainable.forget(game_id)
        if self.taught.pop(game_id, None) is not None:
            forget_game(self.teacher, game_id)

    def _teacher_turn(self, turn: Turn, claimed: dict[str, int]) -> bool:
        """Whether the teacher answers `turn`; counts the main turns it takes, in batch order."""
        game = turn.game_id
        if game not in self.taught:
            return False
        taken = self.taught[game] + claimed.get(game, 0)
        if taken >= self.anchors[game]:
            return False
        if not turn.is_side_question:
            claimed[game] = claimed.get(game, 0) + 1
        return True

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        claimed: dict[str, int] = {}
        by_teacher = [self._teacher_turn(turn, claimed) for turn in turns]
        answers: list[str] = [""] * len(turns)
        taught = [i for i, t in enumerate(by_teacher) if t]
        if taught:
            # The teacher's turns of a game come before the model's (the prefix), so they are
            # taken into the sequence before the model answers from it.
            texts = self.teacher.act_batch([turns[i] for i in taught])
            for i, text in zip(taught, texts, strict=True):
                self.trainable.record_answer(turns[i], text)
                answers[i] = text
        for game, count in claimed.items():
            self.taught[game] += count
        own = [i for i, t in enumerate(by_teacher) if not t]
        if own:
            for i, text in zip(own, self.trainable.act_batch([turns[i] for i in own]), strict=True):
                answers[i] = text
        return answers


def draw_anchors(
    game_ids: Sequence[str], group: int, choices: Sequence[int], *, seed: int
) -> dict[str, int]:
    """Each game's anchor: the games of one group (each run of `group` ids, in order) share one
    k, drawn from `choices` by `derive_seed(seed, "anchor", <the group's first id>)`, so a resumed
    run draws the same. Empty `choices`: no anchors."""
    anchors: dict[str, int] = {}
    if not choices:
        return anchors
    for start in range(0, len(game_ids), group):
        members = game_ids[start : start + group]
        k = int(choices[derive_seed(seed, "anchor", members[0]) % len(choices)])
        anchors.update(dict.fromkeys(members, k))
    return anchors
