"""The benchmark and maintainer scripts stay importable and runnable as documented.

They are not installed with the package and no other test imports most of them, so a library
move that breaks one would otherwise go unnoticed until someone reruns a benchmark.
"""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest

SCRIPTS = [
    "bench.bench_envs",
    "bench.bench_heldout",
    "bench.bench_decode_step",
    "bench.bench_learning",
    "bench.bench_precision",
    "bench.bench_replicates",
    "bench.bench_rollout",
    "bench.gpu_check",
    "bench.k_sweep",
    "bench.machine",
    "bench.prompt_tokens",
    "bench.tomsb_matrix",
    "tools.build_hint_vocab",
    "tools.convert_default_model",
]


@pytest.mark.parametrize("module", SCRIPTS)
def test_script_imports_and_has_an_entry_point(module: str) -> None:
    loaded = importlib.import_module(module)
    assert callable(getattr(loaded, "main", None)), f"{module} has no main()"


def test_machine_is_measured_without_changing_torchs_threads() -> None:
    torch = pytest.importorskip("torch")
    from bench.machine import describe_machine

    before = torch.get_num_threads()
    info = describe_machine()
    assert torch.get_num_threads() == before
    assert info["logical_cpus"] >= 1 and info["cpu_capability"] and info["cpu"]
    for key in ("fp32_gemm_gflops_1_thread", "fp32_gemm_gflops_all_threads"):
        assert info[key] > 0, key
    assert info["memory_copy_gb_per_s"] > 0
    assert "fp32_gemm_gflops_1_thread" not in describe_machine(measure=False)


def test_bench_envs_prints_its_result_with_the_machine_on_one_last_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.bench_envs import main

    main(["--games", "10", "--repeats", "1"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["tomsb_scripted_episodes_per_s"] > 0
    assert result["machine"]["fp32_gemm_gflops_1_thread"] > 0


def _decode_step_report(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    """`bench.bench_decode_step` on a tiny cache; its JSON (torch's thread count restored)."""
    torch = pytest.importorskip("torch")
    from tomgym.agents.default_model import DefaultModelError

    from bench.bench_decode_step import main

    threads = torch.get_num_threads()
    try:
        main([*argv, "--cached-tokens", "40", "--steps", "2"])
    except DefaultModelError as exc:
        pytest.skip(str(exc))
    finally:
        torch.set_num_threads(threads)
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_decode_step_benchmark_pairs_the_kernel_with_torchs_products(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("torch")
    from tomgym.agents.llm import decode_kernel

    if not decode_kernel.enabled():
        pytest.skip(f"{decode_kernel.ENV_SWITCH}=0 turns the kernel off")
    switch = os.environ.get(decode_kernel.ENV_SWITCH)
    result = _decode_step_report(capsys, ["--games", "1,3", "--pairs", "2"])
    assert [level["games"] for level in result["levels"]] == [1, 3]
    for level in result["levels"]:
        assert level["median_ms"]["kernel"] > 0 and level["median_ms"]["torch"] > 0
        assert len(level["pair_ratios"]) == 2 and level["kernel_vs_torch"] > 0
        assert level["same_greedy_tokens"] and level["max_abs_logit_diff"] < 1e-3
    assert os.environ.get(decode_kernel.ENV_SWITCH) == switch  # the benchmark restores it


def test_decode_step_benchmark_pairs_packed_linear_weights_with_f_linear(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("torch")
    from tomgym.agents.llm import packed_linear

    if not packed_linear.available():
        pytest.skip("this torch has no oneDNN packed linear products")
    result = _decode_step_report(capsys, ["--compare", "linear", "--games", "2"])
    assert result["config"]["compare"] == "linear"
    (level,) = result["levels"]
    assert set(level["median_ms"]) == {"packed", "f_linear"} and level["packed_vs_f_linear"] > 0
    assert len(level["pair_ratios"]) == 3
    assert level["same_greedy_tokens"] and level["max_abs_logit_diff"] < 1e-3


def test_tomsb_matrix_runs_through_the_env(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.tomsb_matrix import main

    argv = ["--split", "validation", "--defenders", "truthful", "refusal"]
    assert main([*argv, "--attackers", "base", "--json"]) == 0
    rates = json.loads(capsys.readouterr().out)["rates"]
    assert rates["truthful"]["base"]["all"]["extracted"] == 1.0
    assert rates["refusal"]["base"]["all"]["detected"] == 1.0
    assert rates["truthful"]["base"]["all"]["n"] == 60


@pytest.mark.parametrize("backend", ["transformers", "vllm"])
def test_gpu_check_configs_are_valid_training_configs(tmp_path, backend: str) -> None:
    """The GPU check runs the same games on both backends; its configs must validate on CPU.

    Only the transformers run mixes in a scripted group member (non-zero gradient from a random
    model); vLLM's importance-sampling correction, which that run measures, takes none."""
    pytest.importorskip("pydantic")
    from tomgym.training.rl.train_config import TrainConfig

    from bench.gpu_check import check_config

    config = check_config(str(tmp_path), tmp_path / "run", steps=2, backend=backend)
    cfg = TrainConfig.from_dict(config)
    assert cfg.generation_backend == backend
    same = {
        k: v
        for k, v in config.items()
        if k not in ("generation_backend", "debug_check_tokens", "teacher_episodes_per_group")
    }
    assert cfg.teacher_episodes_per_group == (1 if backend == "transformers" else 0)
    other = check_config(
        str(tmp_path), tmp_path / "run", 2, "vllm" if backend != "vllm" else "transformers"
    )
    assert {k: other[k] for k in same if k in other and not k.startswith("vllm_")} == {
        k: v for k, v in same.items() if not k.startswith("vllm_")
    }


def test_rollout_comparisons_interleave_their_pairs(monkeypatch) -> None:
    """AB BA AB: a machine that slows down during the run must not favour the path played last."""
    import argparse

    import bench.bench_rollout as bench

    played: list[str] = []
    batches: set[tuple[int, int, int]] = set()
    speed = iter([10.0, 7.0, 6.0, 9.0, 8.0, 5.0])  # the machine drifts; paths alternate first

    def fake_play(policy, concurrency, games, turns, args, tag, group_size=1):
        played.append(policy)
        batches.add((concurrency, games, group_size))
        answers = [["same"]] if policy != "odd" else [["other"]]
        rate = next(speed)
        return {"episodes_per_min": rate, "prefill_tokens_per_episode": 100 * rate}, answers

    monkeypatch.setattr(bench, "play", fake_play)
    args = argparse.Namespace(turns=2, min_games=6)
    result = bench.compare_paths({"packed": "a", "f_linear": "b"}, 4, 3, args, [["same"]])
    assert played == ["a", "b", "b", "a", "a", "b"]
    assert batches == {(4, 6, 1)}  # 4 at once, at least --min-games episodes
    assert result["episodes_per_min"] == {
        "packed": [10.0, 9.0, 8.0],
        "f_linear": [7.0, 6.0, 5.0],
    }
    assert result["prefill_tokens_per_episode"]["packed"] == [1000.0, 900.0, 800.0]
    assert result["packed_vs_f_linear"] == round(9.0 / 6.0, 3)
    assert result["pair_ratios"] == [round(10 / 7, 3), 1.5, 1.6]
    assert result["identical_greedy"] is True

    speed = iter([1.0, 1.0])
    played.clear()
    batches.clear()
    odd = bench.compare_paths({"x": "a", "y": "odd"}, 8, 1, args, None, group_size=4)
    assert odd["identical_greedy"] is False and batches == {(8, 8, 4)}


def test_rollout_group_games_share_a_scenario_per_group() -> None:
    """`--group-size` games in a row play one scenario, against different attacker variants."""
    pytest.importorskip("numpy")
    from bench.bench_rollout import ATTACKERS, _games

    games = _games(8, "test", "t", group_size=4)
    scenarios = [g.options["scenario"] for g in games]
    assert len(set(scenarios[:4])) == 1 and len(set(scenarios[4:])) == 1
    assert scenarios[0] != scenarios[4]
    assert [g.options["attacker"] for g in games[:4]] == list(ATTACKERS)
    assert all("scenario" not in g.options for g in _games(4, "test", "t"))


def test_rollout_benchmark_refuses_counts_below_one(capsys) -> None:
    from bench.bench_rollout import main

    assert main(["--linear-pairs", "0"]) == 1
    assert "--linear-pairs must be at least 1" in capsys.readouterr().err
    assert main(["--group-size", "0"]) == 1
    assert "--group-size must be at least 1" in capsys.readouterr().err
    assert main(["--min-games", "0"]) == 1
    assert "--min-games must be at least 1" in capsys.readouterr().err


def test_rollout_levels_play_at_least_min_games_episodes() -> None:
    """Level 1 is one game at a time over several games, not one episode's reading."""
    import argparse

    from bench.bench_rollout import games_at

    args = argparse.Namespace(min_games=4)
    assert [games_at(level, args) for level in (1, 3, 4, 8, 32)] == [4, 4, 4, 8, 32]


def test_heldout_pool_pairs_two_policies_over_every_split_of_an_untrained_seed(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scripted defenders stand in for the two models: the ToM heuristic fools the base attacker
    at prior level 2 where the naive liar is detected, so the paired gain must leave zero; a
    second call reads the finished evaluations instead of replaying them."""
    from bench.bench_heldout import main

    out = tmp_path / "heldout"
    argv = [
        "--warmstart-spec", "scripted:naive", "--grpo-spec", "scripted:tom_heuristic",
        "--splits", "validation", "test", "--out", str(out), "--concurrency", "8",
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    pool = report["pool"]
    assert pool["benchmark_seed"] == 1 and pool["trained_on"]["benchmark_seed"] == 0
    assert pool["scenarios_in_pool"] == report["scenarios"] == report["games"] == 40
    assert pool["overlap"] == {"universes": 0, "true_paths": 0}
    assert set(report["by_split"]) == {"validation", "test"}
    assert sum(part["games"] for part in report["by_split"].values()) == 40
    gain = report["grpo_minus_warmstart_fooled"]
    assert gain["n"] == 40 and gain["ci95"][0] > 0 and gain["up"] > gain["down"]
    assert report["fooled_rate"]["grpo"] > report["fooled_rate"]["naive_liar"]
    assert sum(report["loss_reasons"]["grpo"].values()) == 40
    assert json.loads((out / "bench_heldout.json").read_text())["games"] == 40

    games = out / "test" / "eval_grpo_constrained" / "games.jsonl"
    stamp = games.stat().st_mtime_ns
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["games"] == 40
    assert games.stat().st_mtime_ns == stamp
    # The same folder asked for another policy holds another evaluation: refused, not mixed.
    with pytest.raises(ValueError, match="other settings"):
        main([*argv, "--grpo-spec", "scripted:naive"])
    with pytest.raises(SystemExit, match="training pool"):
        main([*argv, "--benchmark-seed", "0"])


def test_a_config_trained_on_another_benchmark_seed_is_scored_on_that_benchmark(tmp_path) -> None:
    """`score_stage` defaults to the benchmark the config trains on, and the env looks its
    scenarios up there too (an `env_config.benchmark_seed` must not pick the games of one
    benchmark and play them from another)."""
    from tomgym.envs.tomsb.benchmark import load_benchmark
    from tomgym.training.rl.learning import score_stage
    from tomgym.training.run_folder import RunFolder

    from bench.bench_learning import build_parser, load_config

    overrides = ["env_config={max_attacker_turns: 2, max_retries: 1, benchmark_seed: 2}"]
    cfg = load_config(build_parser(None).parse_args(overrides))
    assert cfg.benchmark_seed == 2
    score_stage("scripted:naive", cfg, 6, tmp_path / "eval")
    records = list(RunFolder(tmp_path / "eval").records())
    assert len(records) == 6
    seed_two = load_benchmark(2)
    for record in records:
        assert record["env_config"]["benchmark_seed"] == 2
        assert seed_two.by_id(record["options"]["scenario"]).extra["split"] == "validation"


def test_heldout_pools_of_several_seeds_are_read_back_and_paired_as_one(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two seeds' outputs pool into one reading whose games and scenarios do not collide (both
    benchmarks number their scenarios alike); nothing is replayed; one seed twice, or outputs
    of other policies, are refused."""
    from bench.bench_heldout import POOLED_REPORT, main

    def scored(seed: int, warmstart: str) -> Path:
        out = tmp_path / f"seed{seed}-{warmstart.split(':')[1]}"
        argv = ["--warmstart-spec", warmstart, "--grpo-spec", "scripted:tom_heuristic",
                "--benchmark-seed", str(seed), "--splits", "validation", "--out", str(out),
                "--concurrency", "8"]  # fmt: skip
        assert main(argv) == 0
        capsys.readouterr()
        return out

    one, two = scored(1, "scripted:naive"), scored(2, "scripted:naive")
    games = one / "validation" / "eval_grpo_constrained" / "games.jsonl"
    stamp = games.stat().st_mtime_ns
    pooled_out = tmp_path / "pooled"
    assert main(["--pool", str(one), str(two), "--out", str(pooled_out)]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["pool"]["benchmark_seeds"] == [1, 2]
    assert report["games"] == report["scenarios"] == report["pool"]["scenarios_in_pool"] == 40
    assert set(report["by_seed"]) == {"1", "2"}
    assert [report["by_seed"][s]["games"] for s in ("1", "2")] == [20, 20]
    gain = report["grpo_minus_warmstart_fooled"]
    assert gain["n"] == gain["clusters"] == 40 and gain["ci95"][0] > 0
    assert sum(report["loss_reasons"]["warmstart"].values()) == 40
    assert json.loads((pooled_out / POOLED_REPORT).read_text())["games"] == 40
    assert games.stat().st_mtime_ns == stamp
    with pytest.raises(SystemExit, match="seed twice"):
        main(["--pool", str(one), str(one)])
    with pytest.raises(SystemExit, match="other policies"):
        main(["--pool", str(one), str(scored(3, "scripted:tom_heuristic"))])
    with pytest.raises(SystemExit, match="--pool reads finished outputs"):
        main(["--pool", str(one), "--grpo-spec", "scripted:naive"])
    with pytest.raises(SystemExit, match="no finished held-out report"):
        main(["--pool", str(one), str(tmp_path / "missing")])


def test_paired_settings_alternate_their_order_and_report_medians_and_pair_ratios() -> None:
    from bench import paired

    assert list(paired.interleaved(["a", "b"], 3)) == [
        (0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b"),
    ]  # fmt: skip
    assert paired.summary({"a": [2.0, 4.0, 3.0], "b": [1.0, 2.0, 2.0]}, "a", "b") == {
        "median": {"a": 3.0, "b": 2.0},
        "a_vs_b": 1.5,
        "pair_ratios": [2.0, 2.0, 1.5],
    }
    assert paired.ratio(1.0, 0.0) is None
