"""The SFT warm start at the episode level: one spliced sequence per teacher game, the loss on
exactly the defender's tokens, and a few steps that lower that loss on a tiny model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.training.rl.test_trainer import make_config

pytestmark = pytest.mark.slow


def _masked_nll(model: Any, episodes: list[Any]) -> float:
    """Mean negative log-likelihood of the mask-1 tokens (what the warm start trains on)."""
    import torch
    from tomgym.training.rl.trl_adapter import sft_rows

    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for row in sft_rows(episodes):
            ids = torch.tensor([row["input_ids"]])
            labels = torch.tensor(row["labels"][1:])
            logps = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
            keep = labels != -100
            total -= float(logps[keep].gather(-1, labels[keep].unsqueeze(-1)).sum())
            count += int(keep.sum())
    return total / count


def test_teacher_games_become_one_masked_sequence_each_and_sft_lowers_their_loss(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomgym.training.rl.trl_adapter as adapter
    from tomgym.training.rl.tokens import debug_check_episode
    from tomgym.training.rl.trainer import TrainingSession, load_model, sft_warmstart

    cfg = make_config(
        tmp_path,
        tiny_model_dir,
        sft_warmstart=True,
        sft_games=3,
        sft_steps=4,
        sft_batch_size=3,
        sft_learning_rate=3e-3,
        use_lora=False,
    )
    session = TrainingSession(cfg)
    seen: dict[str, Any] = {}
    real_run_sft = adapter.run_sft

    def spy(model: Any, tokenizer: Any, episodes: Any, **kw: Any) -> Any:
        seen["episodes"] = list(episodes)
        seen["before"] = _masked_nll(model, seen["episodes"])
        return real_run_sft(model, tokenizer, episodes, **kw)

    monkeypatch.setattr(adapter, "run_sft", spy)
    model, report = sft_warmstart(session, load_model(cfg, session.model_path), tmp_path)
    episodes = seen["episodes"]
    assert len(episodes) == report["examples"] == report["games"] == 3
    renderer = session.renderer
    for ep in episodes:
        # The splice is the chat template's own rendering of the whole game.
        assert debug_check_episode(ep, renderer, None)["token_mismatches"] == 0
        answers = [m["content"] for m in ep.messages if m["role"] == "assistant"]
        assert len(answers) == ep.turns >= 1
        # Mask 1 exactly on the defender's answers (each closed by its EOS), nothing else.
        expected = [t for a in answers for t in [*renderer.encode(a), renderer.eos_id]]
        assert [t for t, m in zip(ep.completion_ids, ep.env_mask, strict=True) if m] == expected
        assert ep.sampled_tokens == sum(ep.env_mask) == len(expected)
        assert not any(m for t, m in zip(ep.completion_ids, ep.env_mask, strict=True) if m == 0)
    rows = adapter.sft_rows(episodes)
    for ep, row in zip(episodes, rows, strict=True):
        assert row["labels"][: len(ep.prompt_ids)] == [-100] * len(ep.prompt_ids)
        assert sum(label != -100 for label in row["labels"]) == sum(ep.env_mask)
    assert report["defender_turns"] == sum(ep.turns for ep in episodes)
    assert _masked_nll(model, episodes) < seen["before"]
    assert report["train/last_loss"] < report["train/first_loss"]


def test_episode_from_chat_refuses_a_chat_that_does_not_alternate(tiny_model_dir: Path) -> None:
    from tomgym.training.rl.tokens import ChatRenderer, episode_from_chat
    from transformers import AutoTokenizer

    renderer = ChatRenderer(AutoTokenizer.from_pretrained(tiny_model_dir))
    with pytest.raises(ValueError, match="does not alternate"):
        episode_from_chat(renderer, "g", [{"role": "assistant", "content": "hi"}])
    with pytest.raises(ValueError, match="no assistant turn"):
        episode_from_chat(renderer, "g", [{"role": "user", "content": "hi"}])


def test_warmstart_only_is_a_cached_stage_reused_across_grpo_settings(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomgym.training.rl.trl_adapter as adapter
    from tomgym.training.rl.train_config import ConfigError
    from tomgym.training.rl.trainer import SFT_MODEL_DIR, SFT_REPORT_FILE, train

    sft = {"sft_warmstart": True, "sft_games": 2, "sft_steps": 1, "sft_batch_size": 2}
    cfg = make_config(tmp_path, tiny_model_dir, **sft)
    calls: list[int] = []
    real_run_sft = adapter.run_sft

    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return real_run_sft(*args, **kw)

    monkeypatch.setattr(adapter, "run_sft", counting)
    summary = train(cfg, warmstart_only=True)
    out = Path(cfg.output_dir)
    assert summary["sft_model"] == str(out / SFT_MODEL_DIR)
    assert (out / SFT_MODEL_DIR / "config.json").is_file() and (out / SFT_REPORT_FILE).is_file()
    assert (out / SFT_MODEL_DIR / "tokenizer_config.json").is_file()
    assert not list(out.glob("checkpoint-*")) and not (out / "final").exists()
    assert calls == [1]

    # Other Dr. GRPO settings reuse it without training again ...
    other = make_config(tmp_path, tiny_model_dir, **sft, learning_rate=5e-4, num_generations=4)
    again = train(other, resume=True, warmstart_only=True)
    assert calls == [1] and again["sft_warmstart"]["games"] == 2
    # ... a different warm start is refused, and so is a config without one.
    with pytest.raises(ConfigError, match="sft_steps"):
        train(make_config(tmp_path, tiny_model_dir, **{**sft, "sft_steps": 2}), resume=True,
              warmstart_only=True)  # fmt: skip
    with pytest.raises(ConfigError, match="sft_warmstart"):
        train(make_config(tmp_path, tiny_model_dir), warmstart_only=True)


def test_bf16_reaches_the_warm_start_and_keys_its_cache(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bf16` (mixed precision) applies to the SFT warm start as to Dr. GRPO, and a warm start
    trained with one setting is not reused by a config with the other."""
    import tomgym.training.rl.trl_adapter as adapter
    from tomgym.training.rl.train_config import ConfigError
    from tomgym.training.rl.trainer import train

    sft = {"sft_warmstart": True, "sft_games": 2, "sft_steps": 1, "sft_batch_size": 2}
    precisions: list[bool] = []
    real_run_sft = adapter.run_sft

    def spy(*args: Any, **kw: Any) -> Any:
        precisions.append(kw["bf16"])
        return real_run_sft(*args, **kw)

    monkeypatch.setattr(adapter, "run_sft", spy)
    summary = train(make_config(tmp_path, tiny_model_dir, **sft, bf16=True), warmstart_only=True)
    assert precisions == [True]  # CPU autocast: the stage trains and finishes
    assert summary["sft_warmstart"]["games"] == 2
    with pytest.raises(ConfigError, match="bf16"):
        train(make_config(tmp_path, tiny_model_dir, **sft), resume=True, warmstart_only=True)
    assert adapter.resolve_bf16(make_config(tmp_path, tiny_model_dir), cuda=False) is False
