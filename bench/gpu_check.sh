#!/usr/bin/env bash
# GPU smoke benchmark of the multi-turn Dr. GRPO trainer: transformers, then vLLM generation
# (when installed). No network; see bench/gpu_check.py for what it measures.
#
# Usage: bench/gpu_check.sh [STEPS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
export TRL_EXPERIMENTAL_SILENCE=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
# GPU images often ship only `python3`.
PYTHON="$(command -v python || command -v python3)"
exec "$PYTHON" -m bench.gpu_check --steps "${1:-3}"
