"""Wrappers that put one learner in a tomgym env for other libraries' training loops.

The other roles are answered inside the wrapper by given policies (`players`); nothing here
changes a rule, and `envs` never imports `agents` or `training` (policies are checked by shape).

- `learner`: `DecryptoLearnerEnv`, numeric Decrypto with only the learners exposed (a PettingZoo
  `ParallelEnv` for RLlib, Tianshou, CleanRL-style PPO) and `numeric_action`.
- `text`: `TextEnv` conversations for LLM-RL loops (verifiers / OpenEnv style):
  `TomSBDefenderTextEnv`, `DecryptoTextEnv`.
- `datasets`: Hugging Face `datasets` rows of episode starts, and `text_env_for_row`.
- `players`: the policies a wrapper plays the other roles with.
"""
