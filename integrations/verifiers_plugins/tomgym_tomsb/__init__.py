"""verifiers plugin `tomgym-tomsb`: TOM-SB (attacker vs defender) as a verifiers v1 environment.

verifiers' loader imports an environment/taskset/harness id as a module named after it
(`tomgym-tomsb` -> `tomgym_tomsb`) and takes the class of each kind from `__all__`, so
`vf-eval tomgym-tomsb` finds the taskset, the env and the seat harness here. The documentation
is `tomgym.integrations.verifiers_envs`.
"""

from tomgym.integrations.verifiers_envs import (
    TomgymChatHarness,
    TomgymChatHarnessConfig,
    TomSBEnv,
    TomSBEnvConfig,
    TomSBTaskset,
    TomSBTasksetConfig,
)

__all__ = [
    "TomSBEnv",
    "TomSBEnvConfig",
    "TomSBTaskset",
    "TomSBTasksetConfig",
    "TomgymChatHarness",
    "TomgymChatHarnessConfig",
]
