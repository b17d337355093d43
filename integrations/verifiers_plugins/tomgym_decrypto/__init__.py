"""verifiers plugin `tomgym-decrypto`: Decrypto (encoder, decoder, interceptor) for verifiers v1.

verifiers' loader imports an environment/taskset/harness id as a module named after it
(`tomgym-decrypto` -> `tomgym_decrypto`) and takes the class of each kind from `__all__`, so
`vf-eval tomgym-decrypto` finds the taskset, the env and the seat harness here. The
documentation is `tomgym.integrations.verifiers_envs`.
"""

from tomgym.integrations.verifiers_envs import (
    DecryptoEnv,
    DecryptoEnvConfig,
    DecryptoTaskset,
    DecryptoTasksetConfig,
    TomgymChatHarness,
    TomgymChatHarnessConfig,
)

__all__ = [
    "DecryptoEnv",
    "DecryptoEnvConfig",
    "DecryptoTaskset",
    "DecryptoTasksetConfig",
    "TomgymChatHarness",
    "TomgymChatHarnessConfig",
]
