from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from tomgym.training.rl.train_config import ConfigError, TrainConfig, parse_overrides

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
    with pytest.raises(ConfigError, match=r"unknown config key\(s\) \['max_stepz'\]"):
        TrainConfig.from_dict({"max_stepz": 3})
    with pytest.raises(ConfigError, match="multiple of num_generations"):
        TrainConfig.from_dict({"num_generations": 3, "per_device_train_batch_size": 4})
    with pytest.raises(ConfigError, match="lora_dropout must be 0"):
        TrainConfig.from_dict({"lora_dropout": 0.1})
    with pytest.raises(ConfigError, match="reward_weights\\['fooling'\\] must be a finite"):
        TrainConfig.from_dict({"reward_weights": {"fooling": float("nan")}})


def test_train_subcommand_wiring(capsys: pytest.CaptureFixture[str]) -> None:
    from tomgym.scripts import train_cmd

    parser = argparse.ArgumentParser(prog="tomgym")
    train_cmd.add_subparser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "x.yaml", "max_steps=2", "--resume"])
    assert args.config == "x.yaml" and args.overrides == ["max_steps=2"] and args.resume
    assert args.func(args) == 2
    assert "does not exist" in capsys.readouterr().err
