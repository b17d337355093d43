"""`tomgym demo`'s closing table: every stage's rates, Dr. GRPO's paired gain with the games it
moved, and how each stage's games ended (only the reasons some stage has)."""

from __future__ import annotations

from tomgym.scripts.demo_cmd import STAGE_LABELS, stage_table
from tomgym.training.eval.loss_reasons import LOSS_REASONS


def test_the_closing_table_shows_gains_moved_games_and_loss_reasons() -> None:
    rates = {"naive_liar": 0.05, "base": 0.0, "warmstart": 0.45, "grpo": 0.5}
    reasons = {stage: dict.fromkeys(LOSS_REASONS, 0) for stage in STAGE_LABELS}
    reasons["warmstart"].update(fooled=9, format_fallback=6, no_universe_value=5)
    reasons["grpo"].update(fooled=10, format_fallback=4, no_universe_value=6)
    reasons["base"].update(format_fallback=20)
    reasons["naive_liar"].update(fooled=1, detected=19)
    diff = {"mean": 0.05, "n": 20, "up": 2, "down": 1, "ci95": [-0.1, 0.2]}
    report = {
        "fooled_rate": rates,
        "tom_accuracy": rates,
        "format_ok_rate": rates,
        "grpo_minus_warmstart_fooled": diff,
        "grpo_minus_warmstart_tom": {"mean": 0.0, "n": 20, "up": 0, "down": 0},
        "loss_reasons": reasons,
    }
    table = stage_table(report)
    assert "| after Dr. GRPO | 50% | 50% | 50% |" in table
    assert (
        "fooled: +0.05 over 20 games (95% paired bootstrap CI [-0.10, +0.20]); games up 2, down 1"
        in table
    )
    assert "tom: +0.00 over 20 games; games up 0, down 0" in table
    header = "| stage | fooled | detected | format_fallback | no_universe_value |"
    assert header in table and "extracted" not in table
    assert "| after the SFT warm start | 9 | 0 | 6 | 5 |" in table
    assert "| scripted naive liar (reference) | 1 | 19 | 0 | 0 |" in table
