"""The `Policy` protocol every tomgym player implements.

A policy answers a *batch* of turns at once, possibly from many concurrent games, so that the
runner can make one model call per policy per tick. Each turn names its game and agent, which lets
stateful policies (LLM conversations, scripted attackers tracking trust) keep per-game state.

Contract:
- `reset(game_id)` is called before a game starts: start `game_id` afresh.
- `forget(game_id)` is called once a game is over: drop every piece of state kept for `game_id`
  (conversations, trust trackers, random streams, last answers ...), so that long runs keep
  memory flat. Afterwards the policy holds nothing for `game_id`; a later turn of that id starts
  a new game. Forgetting a game the policy never saw is a no-op. A policy that wraps others
  forwards `forget` to each of them.
- `act_batch(turns)` returns exactly one answer string per turn, in order. Answers are the raw
  text an environment expects; the environment parses and validates them.
- A turn with `side_question=True` is a theory-of-mind probe: answer it from the current context,
  but do not keep it (or its answer) in the game's history.
- `close()` releases resources (servers, GPU memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from tomgym.envs.turn import Turn

__all__ = ["BasePolicy", "Policy", "Turn"]


@runtime_checkable
class Policy(Protocol):
    name: str

    def reset(self, game_id: str) -> None: ...

    def forget(self, game_id: str) -> None: ...

    def act_batch(self, turns: Sequence[Turn]) -> list[str]: ...

    def close(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...


class BasePolicy:
    """Convenience base for stateless policies: `reset` and `forget` are no-ops, `describe`
    reports the name. A subclass that keeps per-game state overrides both."""

    name: str = "policy"

    def reset(self, game_id: str) -> None:  # noqa: B027 - optional hook
        pass

    def forget(self, game_id: str) -> None:  # noqa: B027 - optional hook
        pass

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        return [self.act(turn) for turn in turns]

    def act(self, turn: Turn) -> str:
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "scripted"}
