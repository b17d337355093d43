"""One policy object for the runner that hands each game's turns to the policies assigned to it.

`RoutedPolicy` lets one `play_games` call mix opponents (every attacker variant, every Decrypto
matchup, the trained model next to frozen opponents) so that games of all of them fill the same
batches; the turns for one underlying policy are still answered with one `act_batch` call per
tick. Assignments are per game and per agent: `assign(game_id, {agent: policy})`.

Per-game state and `forget`: the `Policy` protocol's `forget(game_id)` drops everything a policy
keeps about one finished game. The router forwards `reset` and `forget` to the game's policies
and drops the game's assignment on `forget`, so a long run keeps no per-game state. `forget_game`
is the one place in `training/` that calls `forget` on a policy it was handed; it also accepts a
user's duck-typed policy that predates `forget` in the protocol (it keeps nothing to drop).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tomgym.agents.base import Policy, Turn


def forget_game(policy: Any, game_id: str) -> None:
    """`policy.forget(game_id)`; a policy without `forget` keeps no per-game state to drop."""
    forget = getattr(policy, "forget", None)
    if forget is not None:
        forget(game_id)


def distinct(policies: Any) -> list[Any]:
    """The distinct objects among `policies` (by identity), in first-seen order."""
    return list({id(p): p for p in policies}.values())


class RoutedPolicy:
    """Routes every (game, agent) turn to the policy assigned to that game and agent.

    `assignments` (optional) gives initial `game_id -> {agent: policy}` entries; `assign` adds
    more. `close()` closes every distinct policy ever assigned.
    """

    def __init__(
        self,
        assignments: Mapping[str, Mapping[str, Policy]] | None = None,
        *,
        name: str = "routed",
    ) -> None:
        self.name = name
        self._games: dict[str, dict[str, Policy]] = {}
        self._known: dict[int, Policy] = {}
        for game_id, policies in (assignments or {}).items():
            self.assign(game_id, policies)

    def assign(self, game_id: str, policies: Mapping[str, Policy]) -> None:
        """Play `game_id`'s turns of each agent in `policies` with that policy."""
        self._games[game_id] = dict(policies)
        for policy in policies.values():
            self._known.setdefault(id(policy), policy)

    def policy_for(self, game_id: str, agent: str) -> Policy:
        try:
            return self._games[game_id][agent]
        except KeyError:
            raise KeyError(f"no policy assigned to agent {agent!r} of game {game_id!r}") from None

    def policies_of(self, game_id: str) -> list[Policy]:
        """The distinct policies assigned to one game ([] when it has no assignment)."""
        return distinct(self._games.get(game_id, {}).values())

    @property
    def games(self) -> list[str]:
        """Games with a live assignment (not yet forgotten)."""
        return list(self._games)

    def reset(self, game_id: str) -> None:
        for policy in self.policies_of(game_id):
            policy.reset(game_id)

    def forget(self, game_id: str) -> None:
        for policy in self.policies_of(game_id):
            forget_game(policy, game_id)
        self._games.pop(game_id, None)

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        groups: dict[int, list[int]] = {}
        owners: dict[int, Policy] = {}
        for index, turn in enumerate(turns):
            policy = self.policy_for(turn.game_id, turn.agent)
            groups.setdefault(id(policy), []).append(index)
            owners[id(policy)] = policy
        answers: list[str] = [""] * len(turns)
        for key, indices in groups.items():
            replies = owners[key].act_batch([turns[i] for i in indices])
            if len(replies) != len(indices):
                raise RuntimeError(
                    f"policy {owners[key].describe().get('name')!r} returned {len(replies)} "
                    f"answers for {len(indices)} turns"
                )
            for i, reply in zip(indices, replies, strict=True):
                answers[i] = reply
        return answers

    def close(self) -> None:
        for policy in self._known.values():
            policy.close()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}
