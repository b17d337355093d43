"""TOM-SB v0: the versioned entry point (`env`, `raw_env`, `parallel_env`).

`env(**config)` is the AEC environment wrapped in PettingZoo's `OrderEnforcingWrapper` (no
`AssertOutOfBoundsWrapper`: actions are free text, validated by the environment itself). See
`envs.tomsb.env` for the full documentation of spaces, rewards, endings and arguments.
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils import wrappers
from tomgym.envs.tomsb.env import parallel_env, raw_env

__all__ = ["env", "parallel_env", "raw_env"]


def env(render_mode: str | None = None, **config: Any) -> wrappers.OrderEnforcingWrapper:
    """The TOM-SB AEC environment with PettingZoo's order-enforcing wrapper."""
    return wrappers.OrderEnforcingWrapper(raw_env(render_mode=render_mode, **config))
