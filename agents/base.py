"""The `Policy` protocol every tomgym player implements.

A policy answers a *batch* of turns at once, possibly from many concurrent games, so that the
runner can make one model call per policy per tick. Each turn names its game and agent, which lets
stateful policies (LLM conversations, scripted attackers tracking trust) keep per-game state.

Contract:
- `reset(game_id)` is called before a game starts (and may be called again to forget it).
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

    def act_batch(self, turns: Sequence[Turn]) -> list[str]: ...

    def close(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...


class BasePolicy:
    """Convenience base: per-game reset is a no-op, `describe` reports the name."""

    name: str = "policy"

    def reset(self, game_id: str) -> None:  # noqa: B027 - optional hook
        pass

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        return [self.act(turn) for turn in turns]

    def act(self, turn: Turn) -> str:
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "scripted"}
