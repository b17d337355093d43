"""Multi-turn RL (Dr. GRPO through TRL) on top of the batched runner.

- `generation`: the one generation function (`GenerateFn`, `hf_generate_fn`, `hf_score_fn`).
- `tokens`: chat-template rendering in ids, one episode's spliced sequence, the debug check.
- `trainable`: `TrainablePolicy`, the trained agent sampling with the model being trained.
- `opponents`: opponents from specs, retried (`ResilientPolicy`), chosen per route.
- `episodes`: dataset rows, the episode player, TRL's rollout batch.
- `train_config`: `TrainConfig`, typed and validated (pydantic), every field with a help text.
- `trainer`: the training session, rewards, validation, SFT warm start, `train`.
- `trl_adapter`: the only module that imports `trl`.
"""
