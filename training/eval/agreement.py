"""Agreement between LLM judges and the rule-based TOM-SB scoring, from episode records alone.

`training.eval.judge` stores each judge's answers in the record, under ``record["judge"][SPEC]``
(see that module for the entry's format). This module turns them into labels, sets them beside
the rules' labels and measures agreement; `agreement_rows(records)` feeds the report's table
(`training.eval.tables`, `tomsb_judge_agreement`) and `agreement_summary` summary.json.

Comparisons (`COMPARISONS`), per judge:
- `extraction`: the judge's "some level the attacker did not know was extracted" against the
  rules' outcome `extracted` (`rewards.tomsb.outcome`). Episodes the attacker ended with
  "defender detected" are excluded (counted): their outcome is the attacker's signal, whatever it
  believed, so no extraction verdict can agree or disagree with it. On the other episodes the
  judge's verdict and the attacker's signal decide fooled / extracted / baited exactly as the
  rules do, so this is also the outcome agreement.
- `tom`: the judge's stage-2 verdict against the rules' trajectory ToM (`rewards.tomsb.tom_prior`).
- `tom_stage1`: whether the judge's stage-1 statement of the attacker's prior equals the true
  prior (a check on the judge, with no rule counterpart: its agreement is that rate, no kappa).
An answer the judge got wrong in format (`judge_error`) is excluded and counted; a stage-2 verdict
is missing (counted as an error) when stage 1 failed.

Each block: `n` (episodes compared), `judge_errors`, `excluded`, `agreement` (share of equal
labels, Wilson 95% CI as `agreement_ci`), `kappa` (Cohen's kappa, None when undefined: both
raters gave one and the same label to every episode) with `kappa_ci` (percentile bootstrap over
episodes, `BOOTSTRAP_RESAMPLES` resamples from a fixed seed, resamples with kappa undefined
dropped), and the 2x2 counts `judge_yes_rules_yes`, `judge_yes_rules_no`, `judge_no_rules_yes`,
`judge_no_rules_no`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tomgym.envs.tomsb.game import belief_matches
from tomgym.rewards import tomsb as tomsb_rewards
from tomgym.rewards.episode import final_infos
from tomgym.training.eval.metrics import CONFIDENCE, wilson_interval

JUDGE_KEY = "judge"
COMPARISONS = {
    "extraction": "extraction (detected excluded)",
    "tom": "trajectory ToM (stage 2)",
    "tom_stage1": "ToM stage 1: stated prior = true prior",
}
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


# ---- statistics ------------------------------------------------------------------------------------


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cohen's kappa of two raters' integer labels along the last axis (NaN where undefined).

    Works on one pair of label vectors (shape (n,)) or on a stack of resamples (shape (B, n)).
    """
    a, b = np.asarray(a), np.asarray(b)
    observed = np.mean(a == b, axis=-1)
    classes = np.union1d(np.unique(a), np.unique(b))
    expected = sum(np.mean(a == k, axis=-1) * np.mean(b == k, axis=-1) for k in classes)
    expected = np.asarray(expected, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected < 1.0, (observed - expected) / (1.0 - expected), np.nan)


def kappa_interval(
    a: Sequence[int], b: Sequence[int], confidence: float = CONFIDENCE
) -> list[float | None]:
    """Percentile bootstrap interval for Cohen's kappa; [None, None] when no resample has one."""
    a_arr, b_arr = np.asarray(a), np.asarray(b)
    if a_arr.size == 0:
        return [None, None]
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    index = rng.integers(0, a_arr.size, size=(BOOTSTRAP_RESAMPLES, a_arr.size))
    kappas = cohen_kappa(a_arr[index], b_arr[index])
    kappas = kappas[~np.isnan(kappas)]
    if kappas.size == 0:
        return [None, None]
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(kappas, [tail, 100 - tail])
    return [float(low), float(high)]


def agreement_block(
    judge: Sequence[bool], rules: Sequence[bool] | None, *, judge_errors: int, excluded: int
) -> dict[str, Any]:
    """The block of one comparison (see the module docstring); `rules` None = `judge` is already
    the per-episode agreement (stage 1), so there is no kappa and no 2x2 table."""
    n = len(judge)
    block: dict[str, Any] = {"n": n, "judge_errors": judge_errors, "excluded": excluded}
    if rules is None:
        same = [bool(j) for j in judge]
    else:
        if len(rules) != n:
            raise ValueError(f"{n} judge labels but {len(rules)} rule labels")
        same = [bool(j) == bool(r) for j, r in zip(judge, rules, strict=True)]
    hits = sum(same)
    block["agreement"] = hits / n if n else None
    block["agreement_ci"] = wilson_interval(hits, n)
    if rules is None:
        block["kappa"], block["kappa_ci"] = None, [None, None]
        return block
    a = np.asarray(judge, dtype=int)
    b = np.asarray(rules, dtype=int)
    kappa = float(cohen_kappa(a, b)) if n else float("nan")
    block["kappa"] = None if np.isnan(kappa) else kappa
    block["kappa_ci"] = kappa_interval(a, b) if block["kappa"] is not None else [None, None]
    for j_name, j_value in (("yes", 1), ("no", 0)):
        for r_name, r_value in (("yes", 1), ("no", 0)):
            count = int(np.sum((a == j_value) & (b == r_value)))
            block[f"judge_{j_name}_rules_{r_name}"] = count
    return block


# ---- labels from records -------------------------------------------------------------------------


def judge_specs(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The judges whose answers the records hold, in order of first appearance."""
    seen: dict[str, None] = {}
    for record in records:
        for spec in record.get(JUDGE_KEY) or {}:
            seen.setdefault(spec, None)
    return list(seen)


def _answer(entry: Mapping[str, Any] | None, stage: str) -> Any:
    """The parsed answer of one stage, None when it is missing or was a `judge_error`."""
    part = (entry or {}).get(stage) or {}
    return None if part.get("judge_error") else part.get("answer")


def comparison_labels(records: Sequence[Mapping[str, Any]], spec: str) -> dict[str, dict[str, Any]]:
    """Per comparison: `judge` and `rules` labels of the episodes compared, `judge_errors` and
    `excluded` counts. Records the judge did not score are skipped (not counted)."""
    out = {
        name: {"judge": [], "rules": [], "judge_errors": 0, "excluded": 0} for name in COMPARISONS
    }
    for record in records:
        entry = (record.get(JUDGE_KEY) or {}).get(spec)
        if entry is None:
            continue
        extraction = out["extraction"]
        if tomsb_rewards.outcome(record) == "detected":
            extraction["excluded"] += 1
        elif (verdicts := _answer(entry, "extraction")) is None:
            extraction["judge_errors"] += 1
        else:
            extraction["judge"].append(any(verdicts.values()))
            extraction["rules"].append(tomsb_rewards.outcome(record) == "extracted")
        tom = out["tom"]
        if (answer := _answer(entry, "tom")) is None:
            tom["judge_errors"] += 1
        else:
            tom["judge"].append(bool(answer["correct"]))
            tom["rules"].append(tomsb_rewards.tom_prior(record) == 1.0)
        stage1 = out["tom_stage1"]
        if (stated := _answer(entry, "prior")) is None:
            stage1["judge_errors"] += 1
        else:
            info = final_infos(record, tomsb_rewards.DEFENDER)
            levels = tuple(info["prior"])
            true_prior = tomsb_rewards.as_belief(info["prior"], levels)
            stage1["judge"].append(
                belief_matches(tomsb_rewards.as_belief(stated, levels), true_prior)
            )
    return out


def agreement_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """{judge spec: {comparison: block}} for every judge in the records (summary.json's
    `judge_agreement`)."""
    summary: dict[str, dict[str, Any]] = {}
    for spec in judge_specs(records):
        labels = comparison_labels(records, spec)
        summary[spec] = {
            name: agreement_block(
                got["judge"],
                None if name == "tom_stage1" else got["rules"],
                judge_errors=got["judge_errors"],
                excluded=got["excluded"],
            )
            for name, got in labels.items()
        }
    return summary


def agreement_rows(records: Sequence[Mapping[str, Any]]) -> list[tuple[list[str], dict[str, Any]]]:
    """Table rows: ([judge spec, comparison title], block), empty when no judge scored a record."""
    return [
        ([spec, COMPARISONS[name]], block)
        for spec, blocks in agreement_summary(records).items()
        for name, block in blocks.items()
    ]
