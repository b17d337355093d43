"""Jobs on top of the environments: the batched runner, evaluation and RL training.

- `runner`: many games at once, one `act_batch` call per policy per tick, one episode record
  per finished game (`tomgym.rewards.episode.EpisodeRecord`).
- `routing`: `RoutedPolicy`, the one router (per game and agent), and `forget_game`.
- `run_folder`: `config.yaml` + `games.jsonl` + `summary.json`, crash-safe and resumable.
- `policy_specs`: `--agent AGENT=SPEC` per agent over a game's defaults (the spec grammar and
  parser are `tomgym.agents.specs`).
- `eval/`: evaluation jobs, the play/human game plans (`eval/plans.py`), metrics, tables,
  reports, the HTML viewer.
- `rl/`: episode tokens, the episode player, the Dr. GRPO trainer and its TRL adapter.

`eval` and `rl` import the runner, never the other way round; `rl` uses `eval` for its
validation tables, `eval` never imports `rl`.
"""
