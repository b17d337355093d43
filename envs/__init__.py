"""tomgym environments: Decrypto and TOM-SB as PettingZoo text environments.

Importing this package registers every environment id with PettingZoo (`tomgym/decrypto-v0`,
`tomgym/tomsb-v0`) and the single-agent TOM-SB defender view with Gymnasium
(`tomgym/TomSBDefender-v0`). Environment modules are imported lazily, so `import tomgym.envs` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium
from pettingzoo import aec_registry, parallel_registry
from pettingzoo import register as _pz_register

# id -> versioned shim module (the shim exports env, raw_env, parallel_env)
ENV_MODULES: dict[str, str] = {
    "tomgym/decrypto-v0": "tomgym.envs.decrypto_v0",
    "tomgym/tomsb-v0": "tomgym.envs.tomsb_v0",
}
# Decrypto with numeric features for decoder/interceptor (see envs/decrypto/numeric.py)
NUMERIC_DECRYPTO_ID = "tomgym/decrypto-numeric-v0"
GYM_DEFENDER_ID = "tomgym/TomSBDefender-v0"
_SHIMS = {"decrypto_v0", "tomsb_v0"}


def _register_all() -> None:
    for env_id, module in ENV_MODULES.items():
        if env_id not in aec_registry:
            _pz_register("aec", env_id, f"{module}:env")
        if env_id not in parallel_registry:
            _pz_register("parallel", env_id, f"{module}:parallel_env")
    if NUMERIC_DECRYPTO_ID not in aec_registry:
        _pz_register("aec", NUMERIC_DECRYPTO_ID, "tomgym.envs.decrypto.numeric:numeric_env")
        _pz_register(
            "parallel", NUMERIC_DECRYPTO_ID, "tomgym.envs.decrypto.numeric:numeric_parallel_env"
        )
    if GYM_DEFENDER_ID not in gymnasium.registry:
        gymnasium.register(
            id=GYM_DEFENDER_ID, entry_point="tomgym.envs.tomsb.single_agent:TomSBDefenderEnv"
        )


def __getattr__(name: str) -> Any:
    # `from tomgym.envs import decrypto_v0` imports the shim on first use only.
    if name in _SHIMS:
        return importlib.import_module(f"tomgym.envs.{name}")
    raise AttributeError(f"module 'tomgym.envs' has no attribute {name!r}")


_register_all()
