"""`train(..., resume=True)`: the config is compared before anything is written or loaded, and
a warm-started run interrupted after its SFT stage resumes to the uninterrupted run's GRPO step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tomgym.training.rl.train_config import ConfigError

from tests.training.rl.test_trainer import make_config

pytestmark = pytest.mark.slow

WARM = {
    "sft_warmstart": True,
    "sft_games": 2,
    "sft_steps": 2,
    "sft_batch_size": 2,
    "sft_learning_rate": 1e-2,
    "max_steps": 1,
    "save_steps": 1,
}


class Interrupted(Exception):
    """Stands in for a crash (or Ctrl-C) right after the warm-start stage was saved."""


def _adapter(run: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(run / "final" / "adapter_model.safetensors"))


def test_resume_refuses_a_different_config_before_writing_anything(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    from tomgym.training.rl.trainer import train

    cfg = make_config(tmp_path, tiny_model_dir)
    with pytest.raises(ConfigError, match="holds no training run"):
        train(cfg, resume=True)
    run = Path(cfg.output_dir)
    run.mkdir(parents=True)
    saved = run / "train_config.json"
    saved.write_text(json.dumps(cfg.to_dict()))
    before = saved.read_bytes()
    other = make_config(tmp_path, tiny_model_dir, learning_rate=2e-3, attackers=["bluffing"])
    with pytest.raises(ConfigError) as info:
        train(other, resume=True)
    message = str(info.value)
    assert "learning_rate: 0.001 -> 0.002" in message
    assert "attackers: ['base'] -> ['bluffing']" in message
    assert "\n" not in message
    assert saved.read_bytes() == before, "train_config.json was overwritten before comparing"
    with pytest.raises(ConfigError, match="already holds a training run"):
        train(cfg)
    assert saved.read_bytes() == before


def test_warm_started_run_resumed_after_sft_equals_uninterrupted(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomgym.rewards.composer as composer
    import tomgym.training.rl.trainer as trainer_mod
    import torch

    from tests.training.rl.test_trainer import varied_reward

    # Rewards that differ inside a group, so the GRPO step really moves the adapter.
    monkeypatch.setitem(composer.COMPONENTS, "stepwise_tom", varied_reward)
    uninterrupted = make_config(tmp_path / "a", tiny_model_dir, **WARM)
    summary_a = trainer_mod.train(uninterrupted)
    run_a = Path(uninterrupted.output_dir)

    interrupted = make_config(tmp_path / "b", tiny_model_dir, **WARM)
    run_b = Path(interrupted.output_dir)
    real_build = trainer_mod.build_trainer

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise Interrupted

    monkeypatch.setattr(trainer_mod, "build_trainer", crash)
    with pytest.raises(Interrupted):
        trainer_mod.train(interrupted)
    assert (run_b / "sft_warmstart.json").is_file() and not list(run_b.glob("checkpoint-*"))
    # The warm-start folder is a policy spec of its own (weights and tokenizer).
    assert (run_b / "sft" / "model" / "tokenizer_config.json").is_file()

    def no_second_warm_start(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the resumed run repeated its SFT warm start")

    monkeypatch.setattr(trainer_mod, "build_trainer", real_build)
    monkeypatch.setattr(trainer_mod, "sft_warmstart", no_second_warm_start)
    summary_b = trainer_mod.train(interrupted, resume=True)

    # The warm start changed the weights (so losing them would show), and was restored.
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    warm = AutoModelForCausalLM.from_pretrained(run_b / "sft" / "model").state_dict()
    assert any(not torch.equal(base[k], warm[k]) for k in base)
    # The first GRPO step is the uninterrupted run's: same loss, same trained adapter.
    assert summary_b["grpo"]["train_loss"] == pytest.approx(
        summary_a["grpo"]["train_loss"], abs=1e-6
    )
    adapter_a, adapter_b = _adapter(run_a), _adapter(run_b)
    # LoRA's B matrices start at zero: nonzero ones show the step really moved the adapter.
    assert any(v.abs().sum() > 0 for k, v in adapter_a.items() if "lora_B" in k)
    assert adapter_a.keys() == adapter_b.keys()
    for key in adapter_a:
        assert torch.allclose(adapter_a[key], adapter_b[key], atol=1e-6), key
    assert summary_b["sft_warmstart"]["examples"] == summary_a["sft_warmstart"]["examples"]
