"""`bench.bench_learning` end to end on a tiny model: the stages run through `tomgym train` and
`tomgym eval`, the warm start is cached, and the JSON report has the documented keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tomgym.training.rl.trainer import ConfigError
from tomgym.training.run_folder import RunFolder

from tests.training.rl.test_trainer import make_config

pytestmark = pytest.mark.slow


def test_paired_difference_pairs_by_game_and_brackets_the_mean() -> None:
    from tomgym.training.rl.learning import paired_difference

    after = {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0, "only-after": 1.0}
    before = {"a": 0.0, "b": 1.0, "c": 0.0, "d": 0.0, "only-before": 0.0}
    diff = paired_difference(after, before)
    assert diff["n"] == 4 and diff["mean"] == pytest.approx(0.5)
    assert diff["ci95"][0] <= 0.5 <= diff["ci95"][1] and diff["ci95"][1] <= 1.0
    assert (diff["up"], diff["down"]) == (2, 0)
    assert paired_difference({"a": 1.0}, {"a": 0.0}) == {"mean": 1.0, "n": 1, "up": 1, "down": 0}
    mixed = paired_difference({"a": 1.0, "b": 0.0, "c": 0.5}, {"a": 0.0, "b": 1.0, "c": 0.5})
    assert (mixed["up"], mixed["down"], mixed["mean"]) == (1, 1, 0.0)


def test_paired_difference_resamples_scenarios_when_games_share_one() -> None:
    """Two seeds of one scenario are one resampling unit: the CI is never narrower than the
    game-level one when the games of a scenario agree."""
    from tomgym.training.rl.learning import paired_difference

    after = {f"{s}/e{e}": float(s < 3) for s in range(6) for e in range(2)}
    before = dict.fromkeys(after, 0.0)
    clusters = {key: key.split("/")[0] for key in after}
    by_game = paired_difference(after, before)
    by_scenario = paired_difference(after, before, clusters=clusters)
    assert by_scenario["mean"] == by_game["mean"] == pytest.approx(0.5)
    assert by_scenario["n"] == 12 and by_scenario["clusters"] == 6
    width = lambda d: d["ci95"][1] - d["ci95"][0]  # noqa: E731
    assert width(by_scenario) > width(by_game)
    one = paired_difference({"a/e0": 1.0}, {"a/e0": 0.0}, clusters={"a/e0": "a"})
    assert "ci95" not in one and one["clusters"] == 1


def test_pooled_minus_pairs_every_replicate_with_the_one_warm_start_by_scenario() -> None:
    from tomgym.training.rl.learning import SCENARIO, pooled_minus

    def scores(fooled: dict[str, float]) -> dict[str, dict[str, object]]:
        return {"fooling": fooled, SCENARIO: {game: game[0] for game in fooled}}

    # Games "a1", "a2" belong to scenario "a", and so on; "z9" was not scored by the warm start.
    before = scores({"a1": 0.0, "a2": 1.0, "b1": 0.0, "c1": 1.0})
    replicates = {
        0: scores({"a1": 1.0, "a2": 1.0, "b1": 0.0, "c1": 1.0, "z9": 1.0}),
        1: scores({"a1": 1.0, "a2": 0.0, "b1": 1.0, "c1": 1.0}),
    }
    pooled = pooled_minus(replicates, before, "fooled")
    # Four pairs a replicate (z9 unpaired); up: a1 twice and b1 once, down: a2 once.
    assert (pooled["n"], pooled["up"], pooled["down"]) == (8, 3, 1)
    assert pooled["mean"] == pytest.approx(2 / 8)
    assert pooled["clusters"] == 3  # scenarios, each resampled with both replicates' games
    assert pooled["ci95"][0] <= pooled["mean"] <= pooled["ci95"][1]
    # One replicate is that replicate's own paired difference.
    alone = pooled_minus({0: replicates[0]}, before, "fooled")
    assert (alone["n"], alone["up"], alone["down"], alone["mean"]) == (4, 1, 0, 0.25)


def test_games_of_one_universe_at_two_prior_levels_are_resampled_together() -> None:
    from tomgym.training.rl.learning import SCENARIO, grpo_minus, pooled_minus

    games = {
        "g1": "tomsb-banking-000-p1",
        "g2": "tomsb-banking-000-p2",
        "g3": "tomsb-sports-001-p2",
    }
    stage = lambda fooled: {"fooling": fooled, SCENARIO: games}  # noqa: E731
    before = stage({"g1": 0.0, "g2": 0.0, "g3": 0.0})
    after = stage({"g1": 1.0, "g2": 1.0, "g3": 0.0})
    one = grpo_minus({"grpo": after, "warmstart": before}, "warmstart", "fooled")
    assert (one["n"], one["up"], one["clusters"]) == (3, 2, 2)
    # Two universes: the bootstrap draws {+1, +1} or {0} as units, never g1 without g2.
    assert one["ci95"] == [0.0, 1.0]
    pooled = pooled_minus({0: after, 1: after}, before, "fooled")
    assert (pooled["n"], pooled["clusters"]) == (6, 2)


def test_a_belief_constraint_reaches_every_model_stage_and_its_own_folders() -> None:
    from tomgym.agents.llm.constraints import CONSTRAINT_FLAGS
    from tomgym.training.rl.learning import (
        EVAL_FOLDER_SUFFIXES,
        eval_folder,
        stage_folder,
        stage_spec,
    )
    from tomgym.training.rl.train_config import TrainConfig

    plain = TrainConfig.from_dict({})
    constrained = TrainConfig.from_dict({"constrain_beliefs": True})
    assert "constrain_beliefs" not in stage_spec("runs/m", plain)
    assert stage_spec("runs/m", constrained, adapter="a").endswith(",constrain_beliefs=true")
    # Constrained games never mix with (or reuse) the unconstrained ones of a cached warm start.
    assert eval_folder("warmstart", 1) == "eval_warmstart"
    assert (
        eval_folder("warmstart", 1, constraints=["constrain_beliefs"])
        == "eval_warmstart_constrained"
    )
    assert (
        eval_folder("grpo", 2, 0.7, constraints=["constrain_beliefs"])
        == "eval_grpo_t0.7_2ep_constrained"
    )
    assert stage_folder("warmstart", constrained, 1) == "eval_warmstart_constrained"
    assert stage_folder("warmstart", plain, 1) == "eval_warmstart"
    # The scripted naive liar writes its own answers: its games are shared by both settings.
    assert stage_folder("naive_liar", constrained, 1) == "eval_naive_liar"
    both = TrainConfig.from_dict({"constrain_beliefs": True, "constrain_replies": True})
    assert stage_spec("runs/m", both).endswith(",constrain_beliefs=true,constrain_replies=true")
    assert stage_folder("grpo", both, 1) == "eval_grpo_constrained_names"
    assert eval_folder("grpo", 1, constraints=["constrain_replies"]) == "eval_grpo_names"
    assert stage_folder("naive_liar", both, 1) == "eval_naive_liar"
    # Every constraint has its own suffix, written in one order whatever order it is named in.
    assert EVAL_FOLDER_SUFFIXES.keys() == set(CONSTRAINT_FLAGS)
    every = TrainConfig.from_dict({flag: True for flag in CONSTRAINT_FLAGS})
    assert (
        stage_folder("grpo", every, 1)
        == "eval_grpo_constrained_names_format_branches_story_plan_asked"
    )
    assert eval_folder("grpo", 1, constraints=reversed(CONSTRAINT_FLAGS)) == stage_folder(
        "grpo", every, 1
    )
    with pytest.raises(ValueError, match="constrain_colour"):
        eval_folder("grpo", 1, constraints=["constrain_colour"])


def test_a_learning_run_keeps_the_configs_shaping_terms_beside_its_method() -> None:
    """The method owns the outcome terms (fooling, ToM); format, stepwise ToM and leak terms of
    the config ride along with any method, and an outcome term of the config never does."""
    from tomgym.training.rl.learning import run_weights, shaping_weights

    config = {"fooling": 2.0, "tom_prior": 1.0, "format": 0.5, "stepwise_tom": 1.0}
    assert shaping_weights(config) == {"format": 0.5, "stepwise_tom": 1.0}
    assert run_weights("tom", config) == {
        "tom_prior": 1.0,
        "format": 0.5,
        "stepwise_tom": 1.0,
    }


def test_bench_learning_runs_every_stage_and_reuses_the_warm_start(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tomgym.training.rl.learning import NAIVE_LIAR, read_scores, score_stage, stage_folder

    from bench.bench_learning import main

    cfg = make_config(
        tmp_path,
        tiny_model_dir,
        sft_warmstart=True,
        sft_games=2,
        sft_steps=1,
        sft_batch_size=2,
        eval_attackers=["base"],
    )
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(cfg.to_dict()), encoding="utf-8")
    argv = ["--config", str(config), "--steps", "1", "--eval-games", "2", "--eval-episodes", "2"]
    argv += ["--warmstart", str(tmp_path / "ws"), "--out", str(tmp_path / "fooling")]
    sampled = ["--sampled-episodes", "3"]
    assert main([*argv, *sampled, "--reward", "fooling"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    stages = {"base", "warmstart", "grpo", "naive_liar"}
    assert report["machine"]["fp32_gemm_gflops_1_thread"] > 0  # the conditions it ran under
    assert set(report["fooled_rate"]) == set(report["tom_accuracy"]) == stages
    assert all(0.0 <= v <= 1.0 for v in report["fooled_rate"].values())
    # Every scored game of every stage has one loss reason ("fooled" for the won ones).
    for stage, counts in report["loss_reasons"].items():
        assert sum(counts.values()) == report["eval_games"], stage
        assert counts["fooled"] == round(report["fooled_rate"][stage] * report["eval_games"])
    # Two scenarios (one prior level: a universe each), two attacker seeds each, resampled by
    # universe.
    diff = report["grpo_minus_warmstart_fooled"]
    assert diff["n"] == report["eval_games"] == 4
    assert diff["clusters"] == report["eval_scenarios"] == report["eval_universes"] == 2
    # The config's shaping terms ride along with the method's outcome term.
    assert report["reward_weights"] == {"fooling": 1.0, "format": 0.5, "stepwise_tom": 0.25}
    assert len(report["train_reward_by_step"]) == len(report["frac_zero_variance_groups"]) == 1
    assert report["resampled_groups_by_step"] == [None]  # dynamic sampling off: not logged
    assert report["rollout_s_by_step"][0] > 0 and report["warmstart"]["cached"] is False
    specs = report["policy_specs"]
    assert specs["grpo"].startswith(f"hf:{tmp_path / 'ws' / 'sft' / 'model'},")
    assert f"adapter={tmp_path / 'fooling' / 'grpo' / 'final'}" in specs["grpo"]
    assert (tmp_path / "fooling" / "bench_learning.json").is_file()
    # The sampled evaluation: warm start and GRPO policy at the rollout temperature, three games
    # per scenario, paired by game; its folders apart from the greedy ones.
    sample = report["sampled"]
    assert sample["temperature"] == cfg.temperature > 0
    assert sample["episodes_per_scenario"] == 3
    assert set(sample["fooled_rate"]) == set(sample["tom_accuracy"]) == {"warmstart", "grpo"}
    assert sample["grpo_minus_warmstart_fooled"]["n"] == sample["eval_games"] == 6
    assert sample["grpo_minus_warmstart_tom"]["clusters"] == sample["eval_scenarios"] == 2
    assert f"temperature={cfg.temperature}," in sample["policy_specs"]["grpo"]
    assert (
        specs["grpo"].replace("temperature=0,", f"temperature={cfg.temperature},")
        == (sample["policy_specs"]["grpo"])
    )
    sampled_ws = tmp_path / "ws" / f"eval_warmstart_t{cfg.temperature:g}_3ep"
    assert (sampled_ws / "summary.json").is_file()
    played_at = (sampled_ws / "games.jsonl").stat().st_mtime_ns
    assert (tmp_path / "fooling" / f"eval_grpo_t{cfg.temperature:g}_3ep" / "summary.json").is_file()
    with pytest.raises(ValueError, match="temperature > 0"):
        main([*argv, *sampled, "--sampled-temperature", "0", "--reward", "fooling"])

    assert report["grpo_seed"] == 0  # --seed (default 0) seeds every stage unless --grpo-seed
    assert report["constrain_beliefs"] is False  # the config's default

    # Another reward reuses the warm start and the reward-independent evaluations, even while
    # a concurrent run holds the warm-start folder (a finished warm start is only read), and
    # with its own Dr. GRPO seed (the warm start's seed is part of its cache key) ...
    argv[-1] = str(tmp_path / "tom")
    with RunFolder(tmp_path / "ws") as held:
        held.acquire()
        assert main([*argv, *sampled, "--reward", "tom", "--grpo-seed", "5"]) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert second["warmstart"]["cached"] is True
    assert second["grpo_seed"] == 5
    assert json.loads((tmp_path / "tom" / "grpo" / "train_config.json").read_text())["seed"] == 5
    # The warm start's sampled games are reward-independent too: read back, not replayed.
    assert second["sampled"]["fooled_rate"]["warmstart"] == sample["fooled_rate"]["warmstart"]
    assert (sampled_ws / "games.jsonl").stat().st_mtime_ns == played_at
    assert second["reward_weights"] == {"tom_prior": 1.0, "format": 0.5, "stepwise_tom": 0.25}
    # A ToM-only run still reports how often its sampled episodes fooled the attacker.
    assert second["train_fooling_by_step"] == [None]
    assert 0.0 <= second["train_fooled_by_step"][0] <= 1.0
    assert second["fooled_rate"]["base"] == report["fooled_rate"]["base"]
    # ... but not with a config that would have trained another warm start.
    with pytest.raises(ConfigError, match="sft_steps"):
        main([*argv[:-1], str(tmp_path / "other"), "--reward", "tom", "sft_steps=2"])
    with pytest.raises(ConfigError, match="seed"):
        main([*argv[:-1], str(tmp_path / "other"), "--reward", "tom", "--seed", "5"])
    # A cached evaluation of another size is refused, not passed off as the one asked for.
    with pytest.raises(ValueError, match="max_scenarios 2 -> 1"):
        main([*argv[:-1], str(tmp_path / "other"), "--reward", "tom", "--eval-games", "1"])
    with pytest.raises(ValueError, match='split "validation" -> "test"'):
        main([*argv[:-1], str(tmp_path / "other"), "--reward", "tom", "eval_split=test"])
    # So is one played under other game rules or against other attackers, which the stage's
    # folder name does not show; the same settings read the games back without replaying them.
    naive = tmp_path / "ws" / stage_folder("naive_liar", cfg, 2)
    played_at = (naive / "games.jsonl").stat().st_mtime_ns
    longer = {**cfg.env_config, "max_attacker_turns": 3}
    for other, shown in (
        (cfg.model_copy(update={"env_config": longer}), "env_config.max_attacker_turns"),
        (cfg.model_copy(update={"eval_attackers": ["bluffing"]}), "attackers"),
    ):
        with pytest.raises(ValueError, match=f"{shown} .* -> "):
            score_stage(NAIVE_LIAR, other, 2, naive, episodes=2)
    again = score_stage(NAIVE_LIAR, cfg, 2, naive, episodes=2)
    assert again == read_scores(naive) and (naive / "games.jsonl").stat().st_mtime_ns == played_at
    # A model trained again at the same path does not pass for the one that was scored.
    grpo_eval = tmp_path / "fooling" / stage_folder("grpo", cfg, 2)
    assert score_stage(specs["grpo"], cfg, 2, grpo_eval, episodes=2) == read_scores(grpo_eval)
    with (tmp_path / "fooling" / "grpo" / "final" / "adapter_model.safetensors").open("ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError, match="weights.defender"):
        score_stage(specs["grpo"], cfg, 2, grpo_eval, episodes=2)


def test_bench_replicates_pools_each_seeds_grpo_run_from_one_warm_start(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tomgym.training.rl.learning import stage_folder

    from bench.bench_replicates import main

    cfg = make_config(
        tmp_path, tiny_model_dir, sft_warmstart=True, sft_games=2, sft_steps=1, sft_batch_size=2
    )
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(cfg.to_dict()), encoding="utf-8")
    out = tmp_path / "replicates"
    argv = ["--config", str(config), "--steps", "1", "--eval-games", "2", "--reward", "fooling"]
    argv += ["--warmstart", str(tmp_path / "ws"), "--out", str(out), "--grpo-seeds", "3", "4"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["grpo_seeds"] == [3, 4]
    for seed in (3, 4):
        run = json.loads((out / f"seed_{seed}" / "bench_learning.json").read_text())
        assert run["grpo_seed"] == seed
        assert report["fooled_rate"]["grpo_by_seed"][str(seed)] == run["fooled_rate"]["grpo"]
        assert report["fooled_rate"]["warmstart"] == run["fooled_rate"]["warmstart"]
        own = report["by_seed"][str(seed)]["grpo_minus_warmstart_fooled"]
        assert own == run["grpo_minus_warmstart_fooled"]
        assert str(out / f"seed_{seed}" / "grpo" / "final") in report["policy_specs"][str(seed)]
    rates = report["fooled_rate"]["grpo_by_seed"].values()
    assert report["fooled_rate"]["grpo"] == pytest.approx(sum(rates) / 2)
    pooled = report["grpo_minus_warmstart_fooled"]
    assert pooled["n"] == 2 * report["eval_games"]
    assert pooled["clusters"] == report["eval_universes"] == 2
    each = [report["by_seed"][s]["grpo_minus_warmstart_fooled"]["mean"] for s in ("3", "4")]
    assert pooled["mean"] == pytest.approx(sum(each) / 2)
    assert (out / "bench_replicates.json").is_file()
    first = json.loads((out / "seed_3" / "bench_learning.json").read_text())
    assert report["machine"] == first["machine"]  # measured once, before any stage ran
    assert "soup" not in report
    assert "splits" not in report
    # A rerun trains nothing again: every replicate's stages are read back; with --soup the
    # replicates' adapters are averaged into one model, scored on the same games, and with
    # --also-splits the warm start and each replicate are scored on the test split too.
    trained = (out / "seed_3" / "grpo" / "train_config.json").stat().st_mtime_ns
    assert main([*argv, "--soup", "--also-splits", "test"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    test = again["splits"]["test"]
    ws_folder, grpo_folder = (stage_folder(stage, cfg, 1) for stage in ("warmstart", "grpo"))
    ws_test = tmp_path / "ws" / "test" / ws_folder
    for folder in (ws_test, *(out / f"seed_{seed}" / "test" / grpo_folder for seed in (3, 4))):
        assert yaml.safe_load((folder / "config.yaml").read_text())["split"] == "test"
    assert test["grpo_minus_warmstart_fooled"]["n"] == 2 * report["eval_games"]
    assert set(test["by_seed"]) == {"3", "4"}
    for seed in ("3", "4"):
        own = test["by_seed"][seed]["grpo_minus_warmstart_fooled"]
        assert own["mean"] == pytest.approx(
            test["fooled_rate"]["grpo_by_seed"][seed] - test["fooled_rate"]["warmstart"]
        )
    scenarios = lambda folder: {  # noqa: E731
        json.loads(line)["options"]["scenario"]
        for line in (folder / "games.jsonl").read_text().splitlines()
    }
    assert scenarios(ws_test).isdisjoint(scenarios(tmp_path / "ws" / ws_folder))
    # The split the benchmark scores already, or none of the benchmark's: refused at once.
    for split in ("validation", "tset"):
        with pytest.raises(SystemExit):
            main([*argv, "--also-splits", split])
        assert "--also-splits" in capsys.readouterr().err
    assert again["by_seed"] == json.loads(json.dumps(report["by_seed"]))
    assert (out / "seed_3" / "grpo" / "train_config.json").stat().st_mtime_ns == trained
    soup = again["soup"]
    averaged = json.loads((out / "soup" / "soup.json").read_text())
    assert averaged["adapters"] == [
        str((out / f"seed_{seed}" / "grpo" / "final").resolve()) for seed in (3, 4)
    ]
    assert averaged["weights"] == [0.5, 0.5]
    assert f"adapter={out / 'soup'}" in soup["policy_spec"]
    assert soup["soup_minus_warmstart_fooled"]["n"] == report["eval_games"]
    assert sum(soup["loss_reasons"].values()) == report["eval_games"]
    assert soup["loss_reasons"]["fooled"] == round(soup["fooled_rate"] * report["eval_games"])
    assert soup["soup_minus_warmstart_fooled"]["mean"] == pytest.approx(
        soup["fooled_rate"] - report["fooled_rate"]["warmstart"]
    )
