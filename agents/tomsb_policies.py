"""Scripted TOM-SB players as `Policy` objects: the scripted defenders and attackers by name.

`make_scripted_tomsb_policy(name, seed)` wraps a defender strategy
(`agents.tomsb_defenders.DEFENDER_STRATEGIES`) or an attacker variant
(`envs.tomsb.protocol.ATTACKER_VARIANTS`, played by `envs.tomsb.attackers`) as an
`agents.base.Policy`.

Contract:
- One scripted player per game id, built on the game's first turn from the observation's
  `scenario` field (the role view of `envs.tomsb.protocol`) with the per-game seed
  `derive_seed(seed, game_id, role)`; the same seed and game id always play the same game.
- A defender answers the observation's `last_message`; an attacker answers
  `protocol.pending_reply(observation)` (None, i.e. its opening message, at turn 1).
- A re-ask (`retry` > 0) repeats the game's last answer without advancing the script.
- `reset(game_id)` and `forget(game_id)` drop the game's player and last answer; `close()` drops
  every game's.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from tomgym.agents.base import BasePolicy, Turn
from tomgym.agents.tomsb_defenders import DEFENDER_STRATEGIES, ScriptedDefender, make_defender
from tomgym.envs.seeding import derive_seed
from tomgym.envs.tomsb.attackers import ScriptedAttacker, make_attacker
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS, pending_reply, view_from_observation


class _ScriptedTomSBPolicy(BasePolicy):
    """Per-game scripted players of one role; subclasses build a player and feed it a turn."""

    role = "player"
    kind = "name"  # what `name` picks among `names`: a defender strategy, an attacker variant
    names: Collection[str] = ()

    def __init__(self, name: str, seed: int = 0) -> None:
        if name not in self.names:
            raise ValueError(f"unknown {self.role} {self.kind} {name!r}; valid: {list(self.names)}")
        self.name = name
        self.seed = int(seed)
        self._players: dict[str, Any] = {}
        self._last_answer: dict[str, str] = {}

    def reset(self, game_id: str) -> None:
        self.forget(game_id)

    def forget(self, game_id: str) -> None:
        self._players.pop(game_id, None)
        self._last_answer.pop(game_id, None)

    def close(self) -> None:
        self._players.clear()
        self._last_answer.clear()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "scripted", "role": self.role, "seed": self.seed}

    def act(self, turn: Turn) -> str:
        obs = turn.observation
        if int(obs.get("retry", 0) or 0) > 0 and turn.game_id in self._last_answer:
            return self._last_answer[turn.game_id]
        player = self._players.get(turn.game_id)
        if player is None:
            try:
                view = view_from_observation(obs)
            except ValueError as exc:
                raise ValueError(f"game {turn.game_id!r}: {exc}") from None
            seed = derive_seed(self.seed, turn.game_id, self.role)
            player = self._players[turn.game_id] = self._build(view, seed)
        answer = self._answer(player, turn)
        self._last_answer[turn.game_id] = answer
        return answer

    def _build(self, view: dict[str, Any], seed: int) -> Any:
        raise NotImplementedError

    def _answer(self, player: Any, turn: Turn) -> str:
        raise NotImplementedError


class ScriptedDefenderPolicy(_ScriptedTomSBPolicy):
    role = "defender"
    kind = "strategy"
    names = DEFENDER_STRATEGIES

    def _build(self, view: dict[str, Any], seed: int) -> ScriptedDefender:
        return make_defender(self.name, view, seed)

    def _answer(self, player: ScriptedDefender, turn: Turn) -> str:
        return player.respond(str(turn.observation.get("last_message") or ""))


class ScriptedAttackerPolicy(_ScriptedTomSBPolicy):
    role = "attacker"
    kind = "variant"
    names = ATTACKER_VARIANTS

    def _build(self, view: dict[str, Any], seed: int) -> ScriptedAttacker:
        return make_attacker(self.name, view, seed)

    def _answer(self, player: ScriptedAttacker, turn: Turn) -> str:
        return player.respond(pending_reply(turn.observation))


def make_scripted_tomsb_policy(name: str, seed: int = 0) -> BasePolicy:
    """A scripted TOM-SB policy: a defender strategy or an attacker variant, by name."""
    if name in DEFENDER_STRATEGIES:
        return ScriptedDefenderPolicy(name, seed)
    if name in ATTACKER_VARIANTS:
        return ScriptedAttackerPolicy(name, seed)
    raise ValueError(
        f"unknown scripted TOM-SB policy {name!r}; defenders: {list(DEFENDER_STRATEGIES)}, "
        f"attackers: {list(ATTACKER_VARIANTS)}"
    )
