"""Evaluation runs: TOM-SB defenders vs attacker variants, Decrypto cross-play.

Every evaluation plays through the batched runner (`training.runner.play_games`) into a run
folder (`training.run_folder.RunFolder`): `config.yaml`, `games.jsonl` (one episode record per
line, appended and fsynced as each game ends), `summary.json` and `tables/` (Markdown + CSV, made
from `games.jsonl` alone by `training.eval.tables`). Game ids and game seeds are deterministic
functions of the evaluation's coordinates, so `resume=True` skips finished games and the
resumed run's records equal an uninterrupted run's. `play_into_folder` (or `play_and_close`,
which then closes the run's policies and the folder) and `finish_run` are the steps every job
shares (the Decrypto replay job, `training.eval.replay`, uses them too).

Each game's `GameSpec.eval` block (what the runner cannot know: the evaluation seed, the
attacker label / Decrypto matchup, the episode index and the specs played) is written into its
record, so `training.eval.metrics` can group by them.

- `evaluate_tomsb`: one game per (seed, attacker, scenario of the split or of a scenario file,
  episode). Attackers are entries of `tomgym.agents.specs.parse_attacker`: scripted variant
  names (`ATTACKER_VARIANTS`), any policy spec (played with the base attacker prompt), or
  `VARIANT=SPEC` (a policy spec given the variant's attacker prompt). The variant is also the
  env's `attacker` reset option. Env seeds are `envs.seeding.derive_seed(game id)`.
- `evaluate_decrypto`: every (encoder, decoder, interceptor) combination of `models` ("all"),
  one model as encoder+decoder against another as interceptor ("competition"), or two models as
  encoder and decoder against a fixed interceptor ("adhoc"); `games` games per seed, the same
  keyword/code draws for every matchup (paired comparison); mean +- std over seeds.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tomgym.agents.base import Policy
from tomgym.agents.policies import make_policy
from tomgym.agents.specs import SpecError, check_role, parse_attacker
from tomgym.agents.weights import weights_fingerprints
from tomgym.envs.seeding import derive_seed
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS
from tomgym.rewards.episode import EpisodeRecord
from tomgym.training.eval import metrics, tables
from tomgym.training.routing import RoutedPolicy, distinct
from tomgym.training.run_folder import WEIGHTS_KEY, RunFolder
from tomgym.training.runner import GameSpec, RunStats, play_games

TOMSB_ENV = "tomgym/tomsb-v0"
DECRYPTO_ENV = "tomgym/decrypto-v0"
DECRYPTO_MODES = ("all", "competition", "adhoc")
DECRYPTO_AGENTS = ("encoder_0", "decoder_0", "interceptor_0")
TOMSB_GROUPS = ["attacker", "prior_level", "seed", "attacker+prior_level"]
DECRYPTO_GROUPS = ["matchup", "matchup+seed", "encoder", "decoder", "interceptor"]
DECRYPTO_HEADLINE = (
    "avg_rounds",
    "avg_miscommunications",
    "avg_interceptions",
    "team_win_rate",
)


def spec_policy(spec: str, seed: int) -> Policy:
    """The default policy factory: build the policy a spec names."""
    return make_policy(spec, seed=seed)


class EvaluationError(ValueError):
    """Bad evaluation input (unknown attacker, empty split, unreadable games file ...)."""


def play_into_folder(
    folder: RunFolder | None,
    env_id: str,
    games: Sequence[GameSpec],
    assignments: Mapping[str, Mapping[str, Policy]],
    *,
    agents: Sequence[str],
    env_config: Mapping[str, Any] | None,
    concurrency: int,
    progress: bool,
    stats: RunStats | None,
    record_prompts: bool = True,
    on_record: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """Play the games not yet in the folder; every record is appended the moment it ends.

    `assignments` gives, per game id, the policy of every agent in `agents`. Without a folder
    every game is played and nothing is written. `on_record` sees each record once it is
    appended. Returns the records played now.
    """
    done = folder.completed_ids() if folder is not None else set()
    todo = [g for g in games if g.game_id not in done]
    if not todo:
        return []
    router = RoutedPolicy({g.game_id: assignments[g.game_id] for g in todo})

    def append(record: EpisodeRecord) -> None:
        if folder is not None:
            folder.append(record)
        if on_record is not None:
            on_record(record)

    return play_games(
        env_id,
        todo,
        dict.fromkeys(agents, router),
        concurrency=concurrency,
        env_config=env_config,
        on_record=append,
        progress=progress,
        stats=stats,
        record_prompts=record_prompts,
    )


def play_and_close(
    folder: RunFolder,
    env_id: str,
    games: Sequence[GameSpec],
    assignments: Mapping[str, Mapping[str, Policy]],
    policies: Iterable[Policy],
    **play: Any,
) -> None:
    """`play_into_folder(folder, env_id, games, assignments, **play)`, then, whether it finished
    or raised, close each distinct policy in `policies` once and release the folder's lock."""
    try:
        play_into_folder(folder, env_id, games, assignments, **play)
    finally:
        for policy in distinct(policies):
            policy.close()
        folder.close()  # the run-folder lock: its games are all written


def check_resume(folder: RunFolder, config: Mapping[str, Any], resume: bool) -> None:
    """On resume, the run kind and every setting must match the folder's config (checked here,
    before any policy is built, and again under the folder's lock by `RunFolder.start`)."""
    if resume and folder.config_path.exists():
        folder.check_resume(config)


def finish_run(folder: RunFolder, group_by: list[str]) -> dict[str, Any]:
    """summary.json and tables/ from the folder's games.jsonl alone."""
    records = folder.records()
    summary = metrics.summarize(records, group_by)
    summary["config"] = folder.config()
    folder.write_summary(summary)
    tables.write_tables(folder.path, records)
    return summary


# ---- TOM-SB --------------------------------------------------------------------------------------


def _tomsb_scenarios(
    split: str,
    benchmark_seed: int,
    max_scenarios: int | None,
    scenarios_file: str | Path | None,
    prior_levels: Sequence[int] | None = None,
) -> list[Any]:
    from tomgym.envs.tomsb.benchmark import load_benchmark
    from tomgym.envs.tomsb.loaders import load_scenarios

    try:
        if scenarios_file is not None:
            scenarios = load_scenarios(scenarios_file)
        else:
            scenarios = load_benchmark(benchmark_seed).split(split)
    except (ValueError, OSError) as exc:
        raise EvaluationError(str(exc)) from None
    repeated = sorted(i for i, n in Counter(s.scenario_id for s in scenarios).items() if n > 1)
    if repeated:
        raise EvaluationError(f"{scenarios_file}: scenario ids repeat: {', '.join(repeated)}")
    if prior_levels is not None:
        wanted = set(prior_levels)
        if not wanted or not wanted <= {0, 1, 2}:
            raise EvaluationError(f"prior_levels must be among 0, 1, 2, got {list(prior_levels)}")
        scenarios = [s for s in scenarios if s.prior_level in wanted]
        if not scenarios:
            raise EvaluationError(f"no scenario at prior levels {sorted(wanted)}")
    if max_scenarios is not None:
        if max_scenarios < 1:
            raise EvaluationError(f"max_scenarios must be >= 1, got {max_scenarios}")
        # Stratify by prior level (the benchmark lists universes x levels) so a small subset
        # still covers easy and hard scenarios: take scenarios round-robin over levels.
        by_level: dict[int, list[Any]] = {}
        for scenario in scenarios:
            by_level.setdefault(scenario.prior_level, []).append(scenario)
        interleaved = [
            s
            for group in itertools.zip_longest(*(by_level[k] for k in sorted(by_level)))
            for s in group
            if s is not None
        ]
        scenarios = interleaved[:max_scenarios]
    if not scenarios:
        raise EvaluationError(f"{scenarios_file or f'split {split!r}'} holds no scenarios")
    return scenarios


def tomsb_eval_config(
    defender_spec: str,
    attackers: Sequence[str],
    split: str,
    episodes_per_scenario: int,
    seeds: int,
    *,
    max_scenarios: int | None,
    env_config: Mapping[str, Any] | None,
    prior_levels: Sequence[int] | None,
    benchmark_seed: int = 0,
    scenarios_file: str | Path | None = None,
) -> dict[str, Any]:
    """The config `evaluate_tomsb` with these settings (its arguments, defaults there) stores in
    its folder's config.yaml: what a resume is checked against, and what a reader reusing a
    finished evaluation compares with `RunFolder.differences` (the settings that decide which
    games are played, and how, and under `WEIGHTS_KEY` the fingerprints of the local weights
    the defender, and any attacker entry, load)."""
    config: dict[str, Any] = {
        "kind": "eval_tomsb",
        "env_id": TOMSB_ENV,
        "defender": defender_spec,
        "attackers": list(attackers),
        "split": split,
        "episodes_per_scenario": episodes_per_scenario,
        "seeds": seeds,
        "max_scenarios": max_scenarios,
        "benchmark_seed": benchmark_seed,
        "env_config": dict(env_config or {}),
    }
    if scenarios_file is not None:
        config["scenarios_file"] = str(scenarios_file)
    if prior_levels is not None:
        config["prior_levels"] = sorted(set(prior_levels))
    slots = [("defender", defender_spec)]
    slots += [(entry.label, entry.spec) for entry in map(parse_attacker, attackers)]
    weights = weights_fingerprints(slots)
    if weights:
        config[WEIGHTS_KEY] = weights
    return config


def evaluate_tomsb(
    defender_spec: str,
    attackers: Sequence[str] = ATTACKER_VARIANTS,
    split: str = "test",
    episodes_per_scenario: int = 2,
    seeds: int = 3,
    out_dir: str | Path = "runs/eval-tomsb",
    concurrency: int = 8,
    resume: bool = False,
    *,
    max_scenarios: int | None = None,
    benchmark_seed: int = 0,
    env_config: Mapping[str, Any] | None = None,
    progress: bool = False,
    stats: RunStats | None = None,
    policy_factory: Callable[[str, int], Policy] | None = None,
    scenarios_file: str | Path | None = None,
    prior_levels: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Evaluate a defender against attacker variants on a benchmark split; returns the summary.

    `prior_levels` keeps only scenarios at those attacker prior levels (e.g. `(1, 2)`: the
    paper's "hard" scenarios); `max_scenarios` then takes its stratified subset of those.

    `scenarios_file` (any format `envs.tomsb.loaders.load_scenarios` reads) replaces the
    benchmark split with a user's own scenarios; each game gets its scenario as a reset option.

    Games: for each evaluation seed s < `seeds`, attacker, scenario and episode e, game id
    `s{s}/{attacker}/{scenario_id}/e{e}` with env seed `derive_seed(game id)`. The defender is
    built once (seed 0) and plays every game; the game id decides its sampling stream.
    """
    if episodes_per_scenario < 1 or seeds < 1:
        raise EvaluationError("episodes_per_scenario and seeds must be >= 1")
    if not attackers:
        raise EvaluationError("no attackers given")
    factory = policy_factory or spec_policy
    try:
        parsed = [parse_attacker(a) for a in attackers]
    except SpecError as exc:
        raise EvaluationError(str(exc)) from None
    labels = [entry.label for entry in parsed]
    if policy_factory is None:
        try:
            check_role(defender_spec, "defender_0", "tomsb")
            for entry in parsed:
                check_role(entry.spec, "attacker_0", "tomsb")
        except SpecError as exc:
            raise EvaluationError(str(exc)) from None
    if len(set(labels)) != len(labels):
        raise EvaluationError(f"attackers repeat: {labels}")
    scenarios = _tomsb_scenarios(split, benchmark_seed, max_scenarios, scenarios_file, prior_levels)
    config = tomsb_eval_config(
        defender_spec,
        attackers,
        split,
        episodes_per_scenario,
        seeds,
        max_scenarios=max_scenarios,
        benchmark_seed=benchmark_seed,
        env_config=env_config,
        scenarios_file=scenarios_file,
        prior_levels=prior_levels,
    )
    folder = RunFolder(out_dir)
    check_resume(folder, config, resume)
    # Build every policy before touching the folder: a bad spec fails with nothing written.
    defender = factory(defender_spec, 0)
    attacker_policies = {e.label: factory(e.spec.to_string(), 0) for e in parsed}
    folder.start(config, resume=resume)

    games: list[GameSpec] = []
    assignments: dict[str, dict[str, Policy]] = {}
    for seed in range(seeds):
        for entry in parsed:
            label, variant, spec = entry.label, entry.variant, entry.spec.to_string()
            for scenario in scenarios:
                for episode in range(episodes_per_scenario):
                    game_id = f"s{seed}/{label}/{scenario.scenario_id}/e{episode}"
                    options: dict[str, Any] = {
                        "scenario": scenario.scenario_id,
                        "split": split,
                        "attacker": variant,
                    }
                    if scenarios_file is not None:
                        options = {"scenario": scenario.to_dict(), "attacker": variant}
                    block = {
                        "seed": seed,
                        "attacker": label,
                        "attacker_spec": spec,
                        "defender_spec": defender_spec,
                        "scenario": scenario.scenario_id,
                        "episode": episode,
                    }
                    games.append(GameSpec(game_id, derive_seed(game_id), options, block))
                    assignments[game_id] = {
                        "defender_0": defender,
                        "attacker_0": attacker_policies[label],
                    }
    run_config = {"benchmark_seed": benchmark_seed, "split": split, **dict(env_config or {})}
    play_and_close(
        folder,
        TOMSB_ENV,
        games,
        assignments,
        [defender, *attacker_policies.values()],
        agents=("attacker_0", "defender_0"),
        env_config=run_config,
        concurrency=concurrency,
        progress=progress,
        stats=stats,
    )
    return finish_run(folder, TOMSB_GROUPS)


# ---- Decrypto cross-play ---------------------------------------------------------------------------


def decrypto_matchups(
    models: Sequence[str], mode: str = "all", interceptor: str | None = None
) -> list[tuple[str, str, str]]:
    """(encoder, decoder, interceptor) specs for a mode (see the module docstring)."""
    if not models:
        raise EvaluationError("no models given")
    if mode == "all":
        return list(itertools.product(models, repeat=3))
    if mode == "competition":
        return [(team, team, eve) for team in models for eve in models]
    if mode == "adhoc":
        eve = interceptor or models[0]
        return [(enc, dec, eve) for enc in models for dec in models]
    raise EvaluationError(f"unknown mode {mode!r}; valid modes: {', '.join(DECRYPTO_MODES)}")


def evaluate_decrypto(
    models: Sequence[str],
    mode: str = "all",
    seeds: int = 3,
    games: int = 32,
    out_dir: str | Path = "runs/eval-decrypto",
    concurrency: int = 8,
    resume: bool = False,
    *,
    interceptor: str | None = None,
    env_config: Mapping[str, Any] | None = None,
    progress: bool = False,
    stats: RunStats | None = None,
    policy_factory: Callable[[str, int], Policy] | None = None,
) -> dict[str, Any]:
    """Decrypto cross-play: `games` games per seed for each matchup; returns the summary.

    Game `g` of seed `s` has env seed `derive_seed("decrypto", s, g)` in every matchup, so all
    matchups face the same keywords and codes. The summary's `matchups` list holds, per
    matchup, the headline metrics' mean and std over seeds.
    """
    if seeds < 1 or games < 1:
        raise EvaluationError("seeds and games must be >= 1")
    factory = policy_factory or spec_policy
    matchups = decrypto_matchups(list(models), mode, interceptor)
    if policy_factory is None:
        try:
            for matchup in matchups:
                for agent, spec in zip(DECRYPTO_AGENTS, matchup, strict=True):
                    check_role(spec, agent, "decrypto")
        except SpecError as exc:
            raise EvaluationError(str(exc)) from None
    config = {
        "kind": "eval_decrypto",
        "env_id": DECRYPTO_ENV,
        "models": list(models),
        "mode": mode,
        "interceptor": interceptor,
        "seeds": seeds,
        "games": games,
        "env_config": dict(env_config or {}),
    }
    weights = weights_fingerprints((str(index), spec) for index, spec in enumerate(models))
    if weights:
        config[WEIGHTS_KEY] = weights  # keyed by position in `models`: specs hold dots
    folder = RunFolder(out_dir)
    check_resume(folder, config, resume)
    specs = sorted({spec for matchup in matchups for spec in matchup})
    built = {spec: factory(spec, 0) for spec in specs}
    folder.start(config, resume=resume)

    game_specs: list[GameSpec] = []
    assignments: dict[str, dict[str, Policy]] = {}
    for index, matchup in enumerate(matchups):
        for seed in range(seeds):
            for game in range(games):
                game_id = f"m{index}/s{seed}/g{game}"
                block = {
                    "seed": seed,
                    "game": game,
                    "matchup": index,
                    "encoder_spec": matchup[0],
                    "decoder_spec": matchup[1],
                    "interceptor_spec": matchup[2],
                }
                game_specs.append(
                    GameSpec(game_id, derive_seed("decrypto", seed, game), eval=block)
                )
                assignments[game_id] = {
                    a: built[s] for a, s in zip(DECRYPTO_AGENTS, matchup, strict=True)
                }
    play_and_close(
        folder,
        DECRYPTO_ENV,
        game_specs,
        assignments,
        built.values(),
        agents=DECRYPTO_AGENTS,
        env_config=env_config,
        concurrency=concurrency,
        progress=progress,
        stats=stats,
    )
    summary = finish_run(folder, DECRYPTO_GROUPS)
    summary["matchups"] = [
        {k: v for k, v in row.items() if k != "pooled"}
        for row in tables.decrypto_matchup_rows(folder.records())
    ]
    folder.write_summary(summary)
    return summary
