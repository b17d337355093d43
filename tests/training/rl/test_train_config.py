from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from tomgym.agents.llm.constraints import CONSTRAINT_FLAGS
from tomgym.training.rl.train_config import (
    RESUME_MAY_CHANGE,
    ConfigError,
    TrainConfig,
    config_diff,
    parse_overrides,
)

CONFIGS = sorted((Path(__file__).parents[3] / "training" / "configs").glob("*.yaml"))
TRAIN_CONFIGS = [p for p in CONFIGS if p.stem not in ("ddp", "zero3")]


def test_every_shipped_config_loads_and_is_dr_grpo_ready() -> None:
    names = {p.stem for p in TRAIN_CONFIGS}
    assert {
        "ada_fooling",
        "ada_tom",
        "ada_fooling_tom",
        "rejection_sft",
        "cpu_demo",
        "decrypto_encoder",
        "qwen3_14b_colocate",
    } <= names
    for path in TRAIN_CONFIGS:
        cfg = TrainConfig.load(path)
        assert cfg.lora_dropout == 0.0 and cfg.num_generations >= 2, path


def test_paper_methods_have_the_paper_rewards() -> None:
    load = {p.stem: TrainConfig.load(p) for p in TRAIN_CONFIGS}
    assert load["ada_fooling"].reward_weights == {"fooling": 1.0}
    assert load["ada_tom"].reward_weights == {"tom_prior": 1.0}
    assert load["ada_fooling_tom"].reward_weights == {"fooling": 1.0, "tom_prior": 1.0}
    assert all(
        load[k].reward_gate == "format" for k in ("ada_fooling", "ada_tom", "ada_fooling_tom")
    )
    assert load["rejection_sft"].method == "rejection_sft"


def test_overrides_are_yaml_and_bad_input_is_named() -> None:
    assert parse_overrides(["max_steps=5", "reward_weights={fooling: 1, format: 0.5}"]) == {
        "max_steps": 5,
        "reward_weights": {"fooling": 1, "format": 0.5},
    }
    with pytest.raises(ConfigError, match="key=value"):
        parse_overrides(["max_steps"])
    with pytest.raises(ConfigError, match=r"unknown config field 'max_stepz' \(did you mean"):
        TrainConfig.from_dict({"max_stepz": 3})
    with pytest.raises(ConfigError, match="multiple of num_generations"):
        TrainConfig.from_dict({"num_generations": 3, "per_device_train_batch_size": 4})
    with pytest.raises(ConfigError, match="lora_dropout: must be 0"):
        TrainConfig.from_dict({"lora_dropout": 0.1})
    with pytest.raises(ConfigError, match=r"reward_weights\['fooling'\]: must be a finite"):
        TrainConfig.from_dict({"reward_weights": {"fooling": float("nan")}})
    for key in CONSTRAINT_FLAGS:
        with pytest.raises(ConfigError, match=f"{key} need generation_backend"):
            TrainConfig.from_dict({key: True, "generation_backend": "vllm"})


def test_overrides_are_parsed_by_field_type() -> None:
    cfg = TrainConfig.load(
        None,
        [
            "learning_rate=1e-4",  # YAML 1.1 reads this as text; the float field parses it
            "use_lora=false",
            "attackers=[base,bluffing]",
            "eval_attackers=base,cross_examiner",
            "run_name=123",  # a text field keeps the text
            "reward_gate=null",
            "prior_levels=1",
            "kv_cache=false",
            "kv_cache_max_tokens=4096",
        ],
    )
    assert cfg.learning_rate == pytest.approx(1e-4) and isinstance(cfg.learning_rate, float)
    assert cfg.use_lora is False and cfg.kv_cache is False and cfg.kv_cache_max_tokens == 4096
    assert cfg.attackers == ["base", "bluffing"]
    assert cfg.eval_attackers == ["base", "cross_examiner"]
    assert cfg.run_name == "123" and cfg.reward_gate is None and cfg.prior_levels == [1]
    # The defaults: the cache on, the engine's own cap, stop at the close of the answer.
    default = TrainConfig()
    assert default.kv_cache and default.kv_cache_max_tokens is None and default.stop_at_answer


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"max_steps": "ten"}, "max_steps: expected an integer, got 'ten'"),
        ({"max_steps": 1.5}, "max_steps: expected an integer, got 1.5"),
        ({"max_steps": 0}, "max_steps: must be >= 1, got 0"),
        ({"temperature": "hot"}, "temperature: expected a number, got 'hot'"),
        ({"temperature": 0}, "temperature: must be > 0"),
        ({"learning_rate": -1e-4}, "learning_rate: must be > 0"),
        ({"use_lora": "maybe"}, "use_lora: expected true or false, got 'maybe'"),
        ({"attackers": ["base", "nope"]}, "attackers[1]: expected one of 'base'"),
        ({"method": "ppo"}, "method: expected one of 'grpo' or 'rejection_sft', got 'ppo'"),
        ({"reward_gate": "formt"}, "reward_gate: unknown reward component 'formt'"),
        ({"reward_weights": {"foolin": 1}}, "reward_weights['foolin']: unknown reward component"),
        ({"seed": -1}, "seed: must be >= 0, got -1"),
        ({"max_steps": True}, "max_steps: expected a number, got True"),
        ({"model": "/nonexistent/model"}, "model: model checkpoint not found: /nonexistent"),
        (
            {"num_generations": 4, "teacher_episodes_per_group": 4},
            "teacher_episodes_per_group (4) must be below num_generations (4)",
        ),
        (
            {"teacher_episodes_per_group": 1, "method": "rejection_sft"},
            "teacher_episodes_per_group guides Dr. GRPO groups",
        ),
        (
            {"teacher_episodes_per_group": 1, "generation_backend": "vllm"},
            "the teacher's turns have no sampling log-probs",
        ),
        ({"teacher_prefix_turns": [0, -1]}, "teacher_prefix_turns must be >= 0, got [0, -1]"),
        (
            {"teacher_prefix_turns": [1], "method": "rejection_sft"},
            "teacher_prefix_turns anchors Dr. GRPO groups",
        ),
        ({"num_iterations": 0}, "num_iterations: must be >= 1, got 0"),
        ({"beta": -0.1}, "beta: must be >= 0.0, got -0.1"),
        (
            {"num_iterations": 2, "save_steps": 3},
            "save_steps (3) must be a multiple of num_iterations (2)",
        ),
    ],
)
def test_mistyped_fields_are_named_in_one_line(data: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_dict(data)
    text = str(info.value)
    assert message in text and "\n" not in text


def test_a_string_for_a_list_field_is_a_list_not_characters(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("attackers: base\nprior_levels: 1\n")
    cfg = TrainConfig.load(path)
    assert cfg.attackers == ["base"] and cfg.prior_levels == [1]
    with pytest.raises(ConfigError, match="attackers: must not be empty"):
        TrainConfig.from_dict({"attackers": []})


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("max_steps: 3\nreward_weights: {fooling: 1\n")
    with pytest.raises(ConfigError, match=r"is not valid YAML at line \d+, column \d+"):
        TrainConfig.load(path)
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        TrainConfig.load(path)


def test_config_diff_names_each_changed_field() -> None:
    old = TrainConfig().to_dict()
    new = TrainConfig(learning_rate=2e-5, max_steps=7).to_dict()
    assert config_diff(old, new, ignore=RESUME_MAY_CHANGE) == "learning_rate: 1e-05 -> 2e-05"
    assert "max_steps" in RESUME_MAY_CHANGE and not config_diff(old, old, ignore=frozenset())
    assert config_diff({"a": 1}, {}, ignore=frozenset()) == "a: 1 -> unset"


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from tomgym.scripts import train_cmd

    code = train_cmd.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("text", "overrides", "expected"),
    [
        ("max_steps: [1\n", [], "is not valid YAML"),
        ("max_steps: 3\n", ["temperature=hot"], "temperature: expected a number, got 'hot'"),
        ("max_steps: 3\n", ["model=/nonexistent"], "model checkpoint not found: /nonexistent"),
        ("max_steps: ten\n", [], "max_steps: expected an integer, got 'ten'"),
        ("attackers: [bse]\n", [], "attackers[0]: expected one of"),
    ],
)
def test_cli_user_errors_are_one_line_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, overrides: list, expected: str
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    code, _out, err = _run_cli(["train", str(path), *overrides], capsys)
    assert code == 2 and expected in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_train_help_lists_fields_without_developer_notes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        _run_cli(["train", "--help"], capsys)
    out = capsys.readouterr().out
    for name in ("learning_rate (number", "attackers (list[", "kv_cache (true/false"):
        assert name in out
    assert "scripts.cli" not in out and "add_subparser" not in out


def test_train_subcommand_wiring(capsys: pytest.CaptureFixture[str]) -> None:
    from tomgym.scripts import train_cmd

    parser = argparse.ArgumentParser(prog="tomgym")
    train_cmd.add_subparser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "x.yaml", "max_steps=2", "--resume"])
    assert args.config == "x.yaml" and args.overrides == ["max_steps=2"] and args.resume
    assert args.func(args) == 2
    assert "does not exist" in capsys.readouterr().err
