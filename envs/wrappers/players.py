"""The scripted/LLM players inside a wrapper: the roles the learner does not play.

A wrapper answers every non-learner turn itself with the `policies` given for those roles
(objects with `act_batch(turns) -> list[str]`, the `agents.base.Policy` protocol; `envs` may not
import `agents`, so they are checked by shape). `PolicyTable` resets each policy per episode and
makes it `forget` the previous episode, so per-game state stays flat over many episodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tomgym.envs.turn import Turn


def check_policies(policies: Mapping[str, Any], needed: Sequence[str]) -> dict[str, Any]:
    missing = [a for a in needed if a not in policies]
    if missing:
        raise ValueError(f"no policy given for {missing}; pass policies={{agent: policy}}")
    extra = sorted(set(policies) - set(needed))
    if extra:
        raise ValueError(f"policies given for {extra}, which are learners or not Decrypto agents")
    for agent in needed:
        if not hasattr(policies[agent], "act_batch"):
            raise TypeError(
                f"policy for {agent} must have act_batch(turns) (agents.base.Policy), got "
                f"{type(policies[agent]).__name__}"
            )
    return {a: policies[a] for a in needed}


def episode_game_id(prefix: str, seed: int | None, episode: int) -> str:
    # Seeded games get an id of the seed alone, so the policies' per-game random streams (and
    # hence the whole game) replay identically; unseeded ones count episodes.
    return f"{prefix}-seed{seed}" if seed is not None else f"{prefix}-episode{episode}"


class PolicyTable:
    """The scripted/LLM players of one env: per-game reset and forget, batched answers."""

    def __init__(self, policies: Mapping[str, Any]) -> None:
        self.policies = dict(policies)
        self.game_id = ""

    def _distinct(self) -> list[Any]:
        seen: dict[int, Any] = {}
        for policy in self.policies.values():
            seen.setdefault(id(policy), policy)
        return list(seen.values())

    def new_game(self, game_id: str) -> None:
        for policy in self._distinct():
            if self.game_id and hasattr(policy, "forget"):
                policy.forget(self.game_id)  # keeps memory flat over millions of episodes
            if hasattr(policy, "reset"):
                policy.reset(game_id)
        self.game_id = game_id

    def answer(self, agent: str, observation: Mapping[str, Any]) -> str:
        turn = Turn(
            self.game_id,
            agent,
            observation,
            side_question=bool(int(observation.get("side_question", 0) or 0)),
        )
        answers = self.policies[agent].act_batch([turn])
        if len(answers) != 1:
            raise RuntimeError(f"policy for {agent} returned {len(answers)} answers for 1 turn")
        return answers[0]
