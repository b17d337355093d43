"""`Turn`: one pending decision of one agent in one game, as handed to a policy.

It lives with the environments because envs that embed an opponent (the Gymnasium defender view
of TOM-SB) build turns for it themselves, and `envs` may not import `agents`; `agents.base`
re-exports it as part of the `Policy` protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One pending decision: `observation` is the env's observation dict for `agent`.

    `side_question=True` marks a theory-of-mind probe: answer it from the current context but do
    not keep it in the game's history. `metadata` carries runner bookkeeping (never read by envs).
    """

    game_id: str
    agent: str
    observation: Mapping[str, Any]
    side_question: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_side_question(self) -> bool:
        """A theory-of-mind probe, flagged on the turn or by the env's observation."""
        return self.side_question or int(self.observation.get("side_question", 0) or 0) == 1

    @property
    def prompt(self) -> str:
        return str(self.observation["prompt"])
