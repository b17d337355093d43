"""Versioned entry point of the Decrypto environment (`tomgym/decrypto-v0`).

`env(**config)` is the AEC env wrapped for safe use, `raw_env` the bare AEC env, `parallel_env` the
native Parallel env (one step per phase). See `envs.decrypto.env` for the full contract.
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils import wrappers
from tomgym.envs.decrypto.env import parallel_env, raw_env
from tomgym.envs.decrypto.numeric import numeric_env, numeric_parallel_env, numeric_raw_env

__all__ = [
    "env",
    "raw_env",
    "parallel_env",
    "numeric_env",
    "numeric_raw_env",
    "numeric_parallel_env",
]


def env(render_mode: str | None = None, **config: Any) -> wrappers.OrderEnforcingWrapper:
    """The Decrypto AEC env with PettingZoo's order-enforcing wrapper.

    (No out-of-bounds wrapper: actions are free text, validated and re-asked inside the env.)
    """
    return wrappers.OrderEnforcingWrapper(raw_env(render_mode=render_mode, **config))
