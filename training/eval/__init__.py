"""Evaluation on top of the batched runner: jobs that write run folders, and what reads them.

- `jobs`: TOM-SB defender vs attacker variants, Decrypto cross-play; the shared
  `play_into_folder` / `finish_run` steps.
- `replay`: a policy replays recorded Decrypto games (ours or the human-games format).
- `metrics`: summaries with 95% confidence intervals from episode records alone.
- `tables`: Markdown/CSV tables rebuilt from `games.jsonl` alone.
- `report`: tables, plots and the HTML viewer for a run folder.
- `html_viewer`: the self-contained transcript page.
- `validation`: the trainer's per-route reward tables (`validation_table`, `format_table`).
"""
