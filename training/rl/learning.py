"""Staged learning runs: warm start -> Dr. GRPO -> the same held-out games scored after each stage.

The question a learning run answers is whether Dr. GRPO itself makes the defender better at the
game, so every stage goes through the project's own commands and is scored on identical games:

- `warm_start(cfg, folder)`: `tomgym train CONFIG --warmstart-only` into `folder`, cached (a
  finished one is reused by any config that agrees on `WARMSTART_FIELDS`).
- `grpo_stage(cfg, model, reward, steps, folder)`: `tomgym train CONFIG model=<warm start>
  sft_warmstart=false` with the reward weights of the paper's method `reward` (read from the
  shipped `ada_<reward>.yaml`, so the presets have one owner) plus the config's shaping terms
  (`run_weights`: format, stepwise ToM, leak ...); a finished run in `folder` is reused.
- `score_stage(spec, cfg, games, folder, episodes=...)`: `tomgym eval tomsb --defender SPEC` on
  the config's evaluation split (or `split=`, of the benchmark of `benchmark_seed=`: a pool never
  trained on, `bench/bench_heldout.py`), attackers, prior levels and env settings, `episodes`
  greedy games per scenario (each with its own attacker seed); per game (keyed by game id, so
  stages pair): fooling, ToM (`tom_prior`) and format, under `SCENARIO` each game's scenario and
  under `LOSS_REASON` how it ended (`training.eval.loss_reasons`: fooled, or the mistake it was
  lost on).
- `stage_spec(model, cfg, adapter, temperature)`: the policy spec of a stage's model, with the
  trainer's turn budget and greedy decoding (or sampling at `temperature`), so anyone can
  evaluate it elsewhere.
- `stage_folder(stage, cfg, episodes, temperature)`: the folder name of a stage's evaluation,
  one per episode count, temperature and (for the model stages) set of answer constraints
  (`EVAL_FOLDER_SUFFIXES`).
- `paired_difference(after, before, clusters)`: mean per-game difference, the games that went
  up and down, and a 95% paired bootstrap CI that resamples clusters of correlated games; the
  benchmark's cluster is the scenario's universe (`universes`: all its prior levels and attacker
  seeds together).
- `pooled_minus(replicates, before, label)`: the same over several Dr. GRPO replicates (one per
  training seed, from one warm start), each paired with the warm start's same games and
  resampled by universe with all its replicates' games (`bench/bench_replicates.py`);
  `read_scores(folder)` reads a finished evaluation's per-game scores back for it.
- `step_metrics(log_history)`: the per-step train numbers of a GRPO run.

`run_learning(...)` chains them (the stages before GRPO first, so their numbers show while it
trains) and returns the report `bench/bench_learning.py` prints and `tomgym demo` tabulates.

Greedy games are the benchmark's measure, but one greedy game per scenario says little about a
policy that Dr. GRPO changed only in probability: a scenario moves only when its greedy argmax
flips. With `sampled_episodes > 0` the warm start and the GRPO policy are also scored by sampling
(at the rollout temperature, the policy Dr. GRPO optimises) on `sampled_episodes` games per
scenario, paired by game and resampled by scenario (`report["sampled"]`): a supplementary
measure of the expected fooling rate with more games behind each scenario.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tomgym.agents.llm.constraints import CONSTRAINT_FLAGS
from tomgym.training.rl.train_config import TrainConfig

logger = logging.getLogger(__name__)

METHODS = ("fooling_tom", "fooling", "tom")
"""The paper's reward methods (ADA-Fooling+ToM, ADA-Fooling, ADA-ToM), by config name."""
DEFAULT_METHOD = "fooling_tom"
"""The demo's and the benchmark's reward: with one scripted-teacher episode per group
(`cpu_demo.yaml`) the best measured on 40 held-out games (README)."""
STAGES = ("base", "warmstart", "grpo", "naive_liar")
METRICS = ("fooling", "tom", "format")
"""The per-game scores of a stage (`score_stage`)."""
SCENARIO = "scenario"
LOSS_REASON = "loss_reason"
"""Beside the metrics, per game: its scenario and why it was not won
(`training.eval.loss_reasons`)."""
NAIVE_LIAR = "scripted:naive"
DEFENDER = "defender_0"


def method_weights(method: str) -> dict[str, float]:
    """The reward weights of the paper's method `method`, from `training/configs/ada_<m>.yaml`."""
    if method not in METHODS:
        raise ValueError(f"unknown reward method {method!r}; expected one of {list(METHODS)}")
    path = resources.files("tomgym.training") / "configs" / f"ada_{method}.yaml"
    return dict(yaml.safe_load(path.read_text(encoding="utf-8"))["reward_weights"])


def shaping_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """The terms of `weights` that no paper method owns (format, `stepwise_tom`, `leak_penalty`,
    length ...): a learning run adds them to its method's outcome terms, so a shaping term can be
    measured against every method without a preset per combination."""
    owned = {term for method in METHODS for term in method_weights(method)}
    return {term: weight for term, weight in weights.items() if term not in owned}


def run_weights(method: str, config_weights: Mapping[str, float]) -> dict[str, float]:
    """The reward weights a learning run trains with: `method`'s outcome terms plus the shaping
    terms of the config (`shaping_weights`)."""
    return {**method_weights(method), **shaping_weights(config_weights)}


def paired_difference(
    after: Mapping[str, float],
    before: Mapping[str, float],
    clusters: Mapping[str, str] | None = None,
    seed: int = 0,
    draws: int = 10_000,
) -> dict[str, Any]:
    """Mean of after - before over the games scored in both, how many went up and down, with a
    95% paired-bootstrap CI (`ci95`, present from two resampling units on).

    `clusters` maps a game id to its cluster: games of one scenario (several attacker seeds) or
    of one universe (several prior levels) are correlated, so the bootstrap then resamples
    clusters, not games (`clusters` in the result counts them)."""
    keys = sorted(set(after) & set(before))
    diffs = np.array([after[k] - before[k] for k in keys], dtype=float)
    out: dict[str, Any] = {
        "mean": float(diffs.mean()) if len(diffs) else math.nan,
        "n": len(keys),
        "up": int((diffs > 0).sum()),
        "down": int((diffs < 0).sum()),
    }
    if clusters is None:
        units = [[float(d)] for d in diffs]
    else:
        grouped: dict[str, list[float]] = {}
        for key, diff in zip(keys, diffs, strict=True):
            grouped.setdefault(clusters[key], []).append(float(diff))
        units = list(grouped.values())
        out["clusters"] = len(units)
    if len(units) >= 2:
        rng = np.random.default_rng(seed)
        sums = np.array([sum(unit) for unit in units])
        sizes = np.array([len(unit) for unit in units])
        picks = rng.integers(0, len(units), size=(draws, len(units)))
        boots = sums[picks].sum(axis=1) / sizes[picks].sum(axis=1)
        out["ci95"] = [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))]
    return out


def warm_start(cfg: TrainConfig, folder: Path) -> tuple[str, dict[str, Any]]:
    """The cached warm start's model folder and report, running the stage if it is not done.

    A finished warm start is only read (its config checked against `cfg` on `WARMSTART_FIELDS`,
    nothing written, no folder lock), so several runs, e.g. one per reward method, can start
    from one cached warm start at the same time."""
    from tomgym.training.rl.train_config import WARMSTART_FIELDS
    from tomgym.training.rl.trainer import (
        CONFIG_FILE,
        SFT_MODEL_DIR,
        check_run_folder,
        finished_warmstart,
        train,
    )

    ws_cfg = cfg.model_copy(update={"output_dir": str(folder), "sft_warmstart": True})
    started = time.perf_counter()
    done = finished_warmstart(folder)
    cached = done is not None
    if cached:
        check_run_folder(ws_cfg, resume=True, fields=WARMSTART_FIELDS)
    else:
        summary = train(ws_cfg, resume=(folder / CONFIG_FILE).is_file(), warmstart_only=True)
        done = summary["sft_warmstart"]
    report = {**done, "cached": cached, "wall_seconds_this_run": time.perf_counter() - started}
    return str(folder / SFT_MODEL_DIR), report


def grpo_stage(
    cfg: TrainConfig, model_dir: str, method: str, steps: int, folder: Path
) -> dict[str, Any]:
    """Dr. GRPO from `model_dir` with `method`'s reward plus the config's shaping terms
    (`run_weights`); the summary of a finished run in `folder` is returned as it is."""
    from tomgym.training.rl.trainer import CONFIG_FILE, train

    done = folder / "summary.json"
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    run_cfg = cfg.model_copy(
        update={
            "model": model_dir,
            "sft_warmstart": False,
            "reward_weights": run_weights(method, cfg.reward_weights),
            "max_steps": steps,
            "save_steps": max(1, steps // 2),
            # Scored afterwards by `score_stage`, on the same games as the other stages.
            "eval_steps": 0,
            "eval_games_per_variant": 0,
            "output_dir": str(folder),
        }
    )
    TrainConfig.from_dict(run_cfg.to_dict())  # validate the combination before anything runs
    return train(run_cfg, resume=(folder / CONFIG_FILE).is_file())


def stage_spec(
    model: str, cfg: TrainConfig, adapter: str | None = None, temperature: float = 0
) -> str:
    """The policy spec that loads a stage's model with the trainer's turn budget, greedily
    (`temperature` 0) or sampling at `temperature`, with the config's answer constraints."""
    head = "default" if model == "default" else f"hf:{model}"
    options: dict[str, Any] = {"temperature": temperature, "max_new_tokens": cfg.max_turn_tokens}
    if adapter is not None:
        options["adapter"] = adapter
    options.update(dict.fromkeys(cfg.answer_constraints, "true"))
    return head + "".join(f",{key}={value}" for key, value in options.items())


def score_stage(
    spec: str,
    cfg: TrainConfig,
    games: int | None,
    folder: Path,
    *,
    episodes: int = 1,
    concurrency: int = 16,
    progress: bool = False,
    split: str | None = None,
    benchmark_seed: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate `spec` on `games` held-out scenarios (None: all of them), `episodes` games each
    (resuming a run in `folder`), of `split` (default: the config's `eval_split`) of the
    benchmark generated with `benchmark_seed` (default: the one the config trains on,
    `TrainConfig.benchmark_seed`), at the config's prior levels, against its
    `eval_attackers`, in its `env_config`; per metric ("fooling", "tom", "format"), per game id,
    the score, and under `SCENARIO` and `LOSS_REASON` the scenario and the loss reason of every
    game id.

    A finished evaluation in `folder` is read, not replayed, when its stored config is the one
    this call would have written (`tomsb_eval_config`; model paths compared resolved); one of
    another policy, split, scenario count, attackers, prior levels or env settings raises
    `ValueError` naming the differences (the folder's name does not tell them apart, and its
    games must not pass for the ones asked for)."""
    from tomgym.training.eval.jobs import evaluate_tomsb, tomsb_eval_config
    from tomgym.training.run_folder import SUMMARY_FILE, RunFolder

    settings: dict[str, Any] = {
        "attackers": list(cfg.eval_attackers),
        "split": split or cfg.eval_split,
        "episodes_per_scenario": episodes,
        "seeds": 1,
        "max_scenarios": games,
        "benchmark_seed": cfg.benchmark_seed if benchmark_seed is None else benchmark_seed,
        # The env would look the scenarios up in its config's benchmark (it overrides the
        # evaluation's), so the seed is passed once, above.
        "env_config": {k: v for k, v in cfg.env_config.items() if k != "benchmark_seed"},
        "prior_levels": cfg.prior_levels,
    }
    if (folder / SUMMARY_FILE).is_file():
        run = RunFolder(folder)
        wanted = tomsb_eval_config(spec, **settings)
        stored_spec = run.config().get("defender")
        if _same_policy(stored_spec, spec):  # the same model, its paths written another way
            wanted["defender"] = stored_spec
        diffs = run.differences(wanted)
        if diffs:
            raise ValueError(
                f"{folder} holds a finished evaluation with other settings ({'; '.join(diffs)}): "
                "choose another output folder (--out, or --warmstart for the stages scored "
                "beside the warm start)"
            )
    else:
        evaluate_tomsb(
            spec,
            out_dir=folder,
            concurrency=concurrency,
            resume=(folder / "games.jsonl").is_file(),
            progress=progress,
            **settings,
        )
    return read_scores(folder)


def read_scores(folder: Path) -> dict[str, dict[str, Any]]:
    """`score_stage`'s per-game scores of the evaluation in `folder`, read from its records."""
    from tomgym.rewards import shaping, tomsb
    from tomgym.training.eval.loss_reasons import benchmark_scenario, loss_reason
    from tomgym.training.run_folder import RunFolder

    scores: dict[str, dict[str, Any]] = {metric: {} for metric in (*METRICS, SCENARIO, LOSS_REASON)}
    for record in RunFolder(folder).records():
        key = record["game_id"]
        scores["fooling"][key] = tomsb.fooling(record)
        scores["tom"][key] = tomsb.tom_prior(record)
        scores["format"][key] = shaping.format_ok(record, DEFENDER)
        scores[SCENARIO][key] = record["eval"]["scenario"]
        scores[LOSS_REASON][key] = loss_reason(record, benchmark_scenario(record), DEFENDER)
    return scores


def _same_policy(stored: Any, wanted: str) -> bool:
    """`stored` and `wanted` name one policy: equal specs but for how their model and adapter
    paths are written (relative or absolute)."""
    from tomgym.agents.specs import parse_spec

    def canonical(spec: str) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        parsed = parse_spec(spec)
        options = tuple(
            (key, str(Path(value).resolve()) if key == "adapter" else value)
            for key, value in parsed.options
        )
        target = str(Path(parsed.target).resolve()) if parsed.is_llm else parsed.target
        return parsed.kind, target, options

    try:
        return isinstance(stored, str) and canonical(stored) == canonical(wanted)
    except ValueError:
        return False


EVAL_FOLDER_SUFFIXES = {
    "constrain_beliefs": "_constrained",
    "constrain_replies": "_names",
    "constrain_format": "_format",
    "constrain_branches": "_branches",
    "constrain_story": "_story",
    "constrain_plan": "_plan",
    "constrain_asked": "_asked",
}
"""Per answer constraint (`CONSTRAINT_FLAGS`), the suffix it adds to the folder name of an
evaluation run with it on; written in this order (the names cached evaluations already carry)."""


def eval_folder(
    stage: str, episodes: int, temperature: float = 0, *, constraints: Iterable[str] = ()
) -> str:
    """The folder name of a stage's evaluation: one per episode count, temperature and set of
    answer `constraints` (flags of `EVAL_FOLDER_SUFFIXES`), so none is mixed."""
    wanted = set(constraints)
    if unknown := wanted - EVAL_FOLDER_SUFFIXES.keys():
        raise ValueError(f"no evaluation folder suffix for {sorted(unknown)}")
    tail = "".join(suffix for flag, suffix in EVAL_FOLDER_SUFFIXES.items() if flag in wanted)
    if temperature:
        return f"eval_{stage}_t{temperature:g}_{episodes}ep{tail}"
    return (f"eval_{stage}" if episodes == 1 else f"eval_{stage}_{episodes}ep") + tail


def stage_folder(stage: str, cfg: TrainConfig, episodes: int, temperature: float = 0) -> str:
    """`eval_folder` of `stage` under `cfg`: the model stages carry the config's answer
    constraints; the scripted naive liar writes its answers itself, so none applies to it."""
    constraints = [] if stage == "naive_liar" else cfg.answer_constraints
    return eval_folder(stage, episodes, temperature, constraints=constraints)


STEP_METRICS = {
    "train_reward_by_step": "reward",
    "train_reward_std_by_step": "reward_std",
    "frac_zero_variance_groups": "rollout/zero_variance_groups",
    # With dynamic sampling (`resample_flat_groups`): the flat share as drawn, groups replaced.
    "frac_zero_variance_groups_drawn": "rollout/zero_variance_groups_drawn",
    "resampled_groups_by_step": "rollout/resampled_groups",
    "train_fooling_by_step": "components/fooling",
    # The sampled episodes' fooled share, logged whatever the reward (ToM-only runs included).
    "train_fooled_by_step": "outcome/fooled",
    "train_tom_by_step": "components/tom_prior",
    "train_format_by_step": "components/format",
    # With off-policy guidance (`teacher_episodes_per_group`): the teacher's episodes apart.
    "teacher_fooled_by_step": "teacher/outcome/fooled",
    # With teacher-anchored rollouts (`teacher_prefix_turns`): the model's episodes the teacher
    # opened, apart from the model's own.
    "anchored_fooled_by_step": "anchored/outcome/fooled",
    "rollout_s_by_step": "time/rollout_s",
    "optimisation_s_by_step": "time/optimisation_s",
}


def step_metrics(log_history: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Per GRPO optimiser step (TRL's log history), the numbers of `STEP_METRICS`.

    A step that optimised an earlier step's rollout again (`num_iterations` > 1) logs no
    rollout: its rollout numbers are None and its `rollout_s_by_step` is 0.
    """
    steps = [h for h in log_history if "time/rollout_s" in h]
    return {name: [h.get(key) for h in steps] for name, key in STEP_METRICS.items()}


def _mean(values: Mapping[str, float]) -> float:
    return float(np.mean(list(values.values()))) if values else math.nan


RATES = {"fooled_rate": "fooling", "tom_accuracy": "tom", "format_ok_rate": "format"}
"""The report's per-stage rates, each the mean of one `score_stage` metric over the games."""
PAIRED = {"fooled": "fooling", "tom": "tom"}
"""The metrics the report pairs by game between stages (`grpo_minus_<before>_<label>`)."""


def stage_rates(scores: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Per rate of `RATES`, per stage of `scores` (stage -> `score_stage` result), the mean."""
    return {
        rate: {name: _mean(stage[metric]) for name, stage in scores.items()}
        for rate, metric in RATES.items()
    }


def grpo_minus(
    scores: Mapping[str, Mapping[str, Mapping[str, Any]]], before: str, label: str
) -> dict[str, Any]:
    """`paired_difference` of the "grpo" stage over `before` on `PAIRED[label]`, resampled by
    universe (`universes`)."""
    metric = PAIRED[label]
    return paired_difference(
        scores["grpo"][metric], scores[before][metric], clusters=universes(scores["grpo"])
    )


def universes(scores: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each game of a `score_stage` result mapped to its scenario's universe: the bootstrap's
    resampling unit. A universe's scenarios at several prior levels share its tree and true path,
    so their games are not independent draws (at one prior level it is the scenario)."""
    from tomgym.envs.tomsb.generator import universe_id_of

    return {game: universe_id_of(scenario) for game, scenario in scores[SCENARIO].items()}


def eval_counts(stage: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """How many games, scenarios and universes (the bootstrap's units) a stage was scored on."""
    return {
        "eval_games": len(stage["fooling"]),
        "eval_scenarios": len(set(stage[SCENARIO].values())),
        "eval_universes": len(set(universes(stage).values())),
    }


def pooled_minus(
    replicates: Mapping[Any, Mapping[str, Mapping[str, Any]]],
    before: Mapping[str, Mapping[str, Any]],
    label: str,
) -> dict[str, Any]:
    """`paired_difference` of several Dr. GRPO replicates (`replicates`: per training seed, its
    GRPO stage's `score_stage` scores) over one `before` stage on `PAIRED[label]`.

    Every replicate's game is paired with the same game of `before` (one warm start, one set of
    held-out games), and the bootstrap resamples universes, each drawn with all its replicates'
    games: the interval covers the training seed and the held-out game together, i.e. the gain
    of the method from this warm start rather than of one trained model. `n`, `up` and `down`
    count (replicate, game) pairs."""
    metric = PAIRED[label]
    after: dict[str, float] = {}
    paired_before: dict[str, float] = {}
    clusters: dict[str, str] = {}
    for replicate, scores in replicates.items():
        universe_of = universes(scores)
        for game, value in scores[metric].items():
            if game in before[metric]:
                key = f"{replicate}/{game}"
                after[key] = value
                paired_before[key] = before[metric][game]
                clusters[key] = universe_of[game]
    return paired_difference(after, paired_before, clusters=clusters)


def stage_means(scores: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Per metric of `score_stage`'s result, the mean over games."""
    return {metric: _mean(scores[metric]) for metric in METRICS}


def run_learning(
    cfg: TrainConfig,
    *,
    method: str,
    steps: int,
    eval_games: int,
    warmstart_dir: Path,
    out: Path,
    eval_episodes: int = 1,
    sampled_episodes: int = 0,
    sampled_temperature: float | None = None,
    grpo_seed: int | None = None,
    progress: bool = False,
    on_stage: Callable[[str, dict[str, float]], None] | None = None,
) -> dict[str, Any]:
    """Warm start (cached in `warmstart_dir`, with the reward-independent evaluations), Dr. GRPO
    and its evaluation (in `out`), every stage on `eval_games` scenarios x `eval_episodes`
    attacker seeds, greedily; with `sampled_episodes`, the warm start and the GRPO policy also
    sampling at `sampled_temperature` (default: the config's rollout temperature) on
    `eval_games` scenarios x `sampled_episodes` games (`report["sampled"]`). `grpo_seed` (default
    `cfg.seed`) seeds the Dr. GRPO stage alone, so replicates of it start from one cached warm
    start (whose seed is part of its cache key). Returns the report (see the module doc)."""
    from tomgym.training.eval.loss_reasons import count_reasons

    method_weights(method)  # a bad method or sampled setting fails before anything runs
    temperature = cfg.temperature if sampled_temperature is None else sampled_temperature
    if sampled_episodes < 0 or (sampled_episodes and temperature <= 0):
        raise ValueError(
            "a sampled evaluation needs sampled_episodes >= 0 and a temperature > 0, got "
            f"{sampled_episodes} and {temperature}"
        )
    started = time.perf_counter()
    ws_model, ws_report = warm_start(cfg, warmstart_dir)
    specs = {
        "base": stage_spec(cfg.model, cfg),
        "warmstart": stage_spec(ws_model, cfg),
        "grpo": stage_spec(ws_model, cfg, adapter=str(out / "grpo" / "final")),
        "naive_liar": NAIVE_LIAR,
    }
    scores: dict[str, dict[str, dict[str, Any]]] = {}
    eval_seconds: dict[str, float] = {}

    def score(name: str) -> None:
        t0 = time.perf_counter()
        # The stages before GRPO do not depend on the method: scored once, beside the warm start.
        where = out if name == "grpo" else warmstart_dir
        scores[name] = score_stage(
            specs[name],
            cfg,
            eval_games,
            where / stage_folder(name, cfg, eval_episodes),
            episodes=eval_episodes,
            progress=progress,
        )
        eval_seconds[name] = time.perf_counter() - t0
        means = stage_means(scores[name])
        logger.info("stage %s (%s): %s", name, specs[name], means)
        if on_stage is not None:
            on_stage(name, means)

    for name in ("naive_liar", "warmstart", "base"):
        score(name)
    grpo_cfg = cfg if grpo_seed is None else cfg.model_copy(update={"seed": grpo_seed})
    run = grpo_stage(grpo_cfg, ws_model, method, steps, out / "grpo")
    score("grpo")

    report: dict[str, Any] = {
        "reward": method,
        "reward_weights": run["config"]["reward_weights"],
        "grpo_seed": run["config"].get("seed"),
        **{flag: getattr(cfg, flag) for flag in CONSTRAINT_FLAGS},
        **eval_counts(scores["grpo"]),
        **stage_rates({name: scores[name] for name in STAGES}),
        "loss_reasons": {
            name: count_reasons(scores[name][LOSS_REASON].values()) for name in STAGES
        },
    }
    for label in PAIRED:
        for before in ("warmstart", "base"):
            report[f"grpo_minus_{before}_{label}"] = grpo_minus(scores, before, label)
    report.update(step_metrics(run.get("log_history", [])))
    report["grpo_seconds"] = run.get("grpo", {}).get("seconds")
    report["warmstart"] = {
        key: ws_report.get(key)
        for key in ("cached", "seconds", "games", "teacher_outcomes", "train/last_loss")
        if key in ws_report
    }
    report["warmstart"]["steps"] = cfg.sft_steps
    report["eval_seconds"] = eval_seconds
    report["policy_specs"] = specs
    if sampled_episodes:
        report["sampled"] = sampled_comparison(
            cfg,
            {"warmstart": (ws_model, None), "grpo": (ws_model, str(out / "grpo" / "final"))},
            {"warmstart": warmstart_dir, "grpo": out},
            games=eval_games,
            episodes=sampled_episodes,
            temperature=temperature,
            progress=progress,
        )
    report["wall_seconds"] = time.perf_counter() - started
    return report


SAMPLED_CONCURRENCY = 64
"""Games played at once in a sampled evaluation (several per scenario, so more than greedy's 16:
the cached KV path gains most from batching, README "Benchmarks")."""


def sampled_comparison(
    cfg: TrainConfig,
    models: Mapping[str, tuple[str, str | None]],
    folders: Mapping[str, Path],
    *,
    games: int,
    episodes: int,
    temperature: float,
    progress: bool = False,
) -> dict[str, Any]:
    """Score `models` ("warmstart", "grpo": model folder and adapter) by sampling at
    `temperature`, `episodes` games per scenario on `games` held-out scenarios (each stage's
    evaluation under its folder in `folders`, resumed or reused), and pair GRPO with the warm
    start by game, resampling scenarios."""
    if temperature <= 0:
        raise ValueError(f"a sampled evaluation needs a temperature > 0, got {temperature}")
    scores: dict[str, dict[str, dict[str, Any]]] = {}
    specs: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name, (model, adapter) in models.items():
        t0 = time.perf_counter()
        specs[name] = stage_spec(model, cfg, adapter, temperature=temperature)
        scores[name] = score_stage(
            specs[name],
            cfg,
            games,
            folders[name] / stage_folder(name, cfg, episodes, temperature),
            episodes=episodes,
            concurrency=SAMPLED_CONCURRENCY,
            progress=progress,
        )
        seconds[name] = time.perf_counter() - t0
        logger.info("sampled stage %s (%s): %s", name, specs[name], stage_means(scores[name]))
    report: dict[str, Any] = {
        "temperature": temperature,
        "episodes_per_scenario": episodes,
        **eval_counts(scores["grpo"]),
        **stage_rates(scores),
    }
    for label in PAIRED:
        report[f"grpo_minus_warmstart_{label}"] = grpo_minus(scores, "warmstart", label)
    report["eval_seconds"] = seconds
    report["policy_specs"] = specs
    return report
