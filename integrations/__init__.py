"""tomgym games as environments of other LLM-RL libraries.

These adapters sit above `envs`, `agents` and `rewards` (a seat may be a tomgym policy, and
rewards come from `tomgym.rewards`); each drives the registered PettingZoo env and re-implements
no rule. Each library is imported only by its own module:

- `tomgym.integrations.verifiers_envs`: verifiers v1 multi-agent envs (`Env.run(task, agents)`),
  found by the verifiers ids `tomgym-tomsb` / `tomgym-decrypto` (plugin packages `tomgym_tomsb`,
  `tomgym_decrypto`). Extra: `tomgym[verifiers]`.
- `tomgym.integrations.textarena_envs`: `textarena.Env` subclasses, registered in TextArena's
  registry as `tomgym/tomsb-v0` and `tomgym/decrypto-v0` on import. Extra: `tomgym[textarena]`.
- `tomgym.integrations.games`: what both share (seats, episode records, seat rewards).
"""
