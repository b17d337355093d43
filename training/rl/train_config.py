"""Training configuration: one flat dataclass, loaded from YAML with `key=value` overrides.

Every field has a help text (`TrainConfig.help()`); unknown keys are errors, values are checked
in `validate()`. `tomgym train CONFIG.yaml lr=1e-5 max_steps=10` parses each override's value as
YAML (so `reward_weights={fooling: 1, format: 0.5}` and `use_lora=false` work).

Methods (`method`):
- `grpo`: Dr. GRPO over full episodes (advantage = reward - group mean, no std scaling, token
  losses summed and divided by `max_completion_length`).
- `rejection_sft`: online rejection-sampling SFT: the same rollouts, but each episode's weight is
  1 if it passes `accept_component` (e.g. fooled) and 0 otherwise, with no baseline: the
  gradient is the summed NLL of the accepted episodes' sampled tokens, same normaliser.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

METHODS = ("grpo", "rejection_sft")
REPORT_TO = ("none", "tensorboard", "trackio", "wandb")


class ConfigError(ValueError):
    """A bad training configuration; the message names the key."""


def _f(default: Any, help: str, **kw: Any) -> Any:  # noqa: A002 - mirrors dataclass metadata
    if isinstance(default, dict | list):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


@dataclass
class TrainConfig:
    # --- what is trained, against whom
    env_id: str = _f("tomgym/tomsb-v0", "Registered PettingZoo env id.")
    trained_agent: str = _f("defender_0", "Agent id whose turns the model samples and learns.")
    opponents: dict = _f(
        {"attacker_0": "scripted:{route}"},
        "agent -> policy spec for every other agent. Specs: 'scripted:<name>' (TOM-SB scripted "
        "attacker/defender), 'decrypto:embedding[:k=K,vectors=V]', 'decrypto:random', 'llm:<make_llm_policy "
        "spec>', 'frozen' (a frozen copy of the base model). '{route}' is replaced by the row's "
        "route (the TOM-SB attacker variant).",
    )
    env_config: dict = _f(
        {}, "Keyword arguments for the env constructor (e.g. max_attacker_turns)."
    )
    train_split: str = _f("train", "TOM-SB split the dataset rows come from (by universe).")
    prior_levels: list = _f([0, 1, 2], "TOM-SB prior levels included in the dataset rows.")
    attackers: list = _f(
        ["base", "cross_examiner", "deception_aware", "bluffing"],
        "TOM-SB attacker variants; every (scenario, variant) pair is one dataset row.",
    )
    max_scenarios: int = _f(0, "Cap on scenarios per prior level (0 = all).")
    decrypto_rows: int = _f(256, "Number of dataset rows (game seeds) for non-TOM-SB envs.")
    shared_seed_in_group: bool = _f(
        False,
        "Play every episode of a group with the row's env seed (Decrypto: same keywords/codes); "
        "TOM-SB pins the scenario by options, so group members differ by opponent seed only.",
    )
    # --- model
    model: str = _f("default", "'default' (bundled SmolLM2-135M-Instruct) or a HF path/id.")
    tokenizer: str = _f("", "Tokenizer path if different from the model's.")
    chat_template_kwargs: dict = _f({}, "Extra chat-template kwargs (Qwen3: enable_thinking).")
    use_lora: bool = _f(True, "Train a LoRA adapter (False: full fine-tuning).")
    lora_r: int = _f(32, "LoRA rank.")
    lora_alpha: int = _f(32, "LoRA alpha.")
    lora_dropout: float = _f(0.0, "LoRA dropout; keep 0: the model samples in train mode.")
    lora_target_modules: str = _f("all-linear", "PEFT target modules.")
    torch_dtype: str = _f("float32", "Model dtype: float32, bfloat16 or float16.")
    # --- Dr. GRPO
    method: str = _f("grpo", f"One of {METHODS}.")
    reward_weights: dict = _f({"fooling": 1.0}, "Reward component -> weight (rewards.COMPONENTS).")
    reward_gate: Any = _f("format", "Gate component (multiplies the sum) or null for none.")
    accept_component: str = _f(
        "fooling", "rejection_sft: episodes with this component == 1 are kept."
    )
    num_generations: int = _f(8, "Episodes per group (same scenario and attacker variant).")
    max_completion_length: int = _f(
        512, "Per-episode token budget of the trained agent; Dr. GRPO's normaliser."
    )
    max_turn_tokens: int = _f(256, "Token cap of one trained-agent turn.")
    fallback_text: Any = _f(
        None, "Answer used once the episode budget is spent (null: a protocol-valid refusal)."
    )
    temperature: float = _f(1.0, "Sampling temperature of training rollouts.")
    top_p: float = _f(1.0, "Nucleus sampling; keep 1.0 so sampling log-probs match the trainer's.")
    learning_rate: float = _f(1e-5, "Learning rate.")
    lr_scheduler_type: str = _f("constant", "LR schedule.")
    warmup_steps: int = _f(0, "LR warm-up steps.")
    weight_decay: float = _f(0.0, "AdamW weight decay.")
    max_grad_norm: float = _f(1.0, "Gradient clipping.")
    epsilon: float = _f(0.2, "PPO clip range (inactive with num_iterations=1 but set explicitly).")
    max_steps: int = _f(100, "Optimisation steps.")
    per_device_train_batch_size: int = _f(
        8, "Episodes per device per micro-batch (generation batch = this x grad accumulation)."
    )
    gradient_accumulation_steps: int = _f(1, "Gradient accumulation steps.")
    gradient_checkpointing: bool = _f(False, "Activation checkpointing (on for big models).")
    bf16: Any = _f(None, "bf16 mixed precision; null = on when CUDA supports it, off on CPU.")
    seed: int = _f(0, "Seed for trainer, data order and episode seeds.")
    debug_check_tokens: bool = _f(
        False, "Check spliced ids against a fresh render and log-probs against a re-score."
    )
    opponent_retries: int = _f(2, "Retries of a failing opponent backend before dropping games.")
    concurrency: int = _f(64, "Games played at once by the runner.")
    # --- evaluation / checkpoints / logging
    output_dir: str = _f("runs/train", "Where checkpoints, logs and eval tables go.")
    eval_steps: int = _f(0, "Validation evaluation every N steps (0 = only at the end).")
    eval_split: str = _f("validation", "Split used for evaluation and best-checkpoint selection.")
    eval_attackers: list = _f(
        ["base", "cross_examiner", "deception_aware", "bluffing"], "Attacker variants evaluated."
    )
    eval_games_per_variant: int = _f(16, "Validation games per attacker variant.")
    eval_temperature: float = _f(0.0, "Sampling temperature at evaluation (0 = greedy).")
    best_metric: str = _f(
        "fooling", "Validation metric (mean over variants) for the best checkpoint."
    )
    save_steps: int = _f(50, "Checkpoint every N steps.")
    save_total_limit: int = _f(3, "Checkpoints kept.")
    logging_steps: int = _f(1, "Log every N steps.")
    report_to: str = _f("none", f"One of {REPORT_TO}.")
    run_name: str = _f("", "Run name for the trackers.")
    # --- optional SFT warm start
    sft_warmstart: bool = _f(False, "Supervised warm start on scripted-defender transcripts.")
    sft_teacher: str = _f("tom_heuristic", "Scripted policy whose transcripts are imitated.")
    sft_games: int = _f(64, "Transcript games for the warm start.")
    sft_steps: int = _f(30, "Warm-start optimisation steps.")
    sft_learning_rate: float = _f(2e-4, "Warm-start learning rate.")
    sft_batch_size: int = _f(8, "Warm-start batch size.")

    # ------------------------------------------------------------------ loading
    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config key(s) {unknown}; see `tomgym train --help-config`")
        config = cls(**data)
        config.validate()
        return config

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
        data: dict[str, Any] = {}
        if path is not None:
            path = Path(path)
            if not path.is_file():
                raise ConfigError(f"config file {str(path)!r} does not exist")
            loaded = yaml.safe_load(path.read_text()) or {}
            if not isinstance(loaded, dict):
                raise ConfigError(f"config file {str(path)!r} must hold a mapping")
            data.update(loaded)
        data.update(parse_overrides(overrides or []))
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.report_to not in REPORT_TO:
            raise ConfigError(f"report_to must be one of {REPORT_TO}, got {self.report_to!r}")
        for key in ("num_generations", "max_completion_length", "max_turn_tokens", "max_steps"):
            if int(getattr(self, key)) < 1:
                raise ConfigError(f"{key} must be >= 1, got {getattr(self, key)!r}")
        if self.num_generations < 2:
            raise ConfigError("num_generations must be >= 2 (a group needs a baseline)")
        global_batch = self.per_device_train_batch_size * self.gradient_accumulation_steps
        if global_batch % self.num_generations:
            raise ConfigError(
                f"per_device_train_batch_size x gradient_accumulation_steps ({global_batch}) must be "
                f"a multiple of num_generations ({self.num_generations})"
            )
        if not self.reward_weights:
            raise ConfigError("reward_weights must name at least one component")
        for name, weight in self.reward_weights.items():
            if not isinstance(weight, int | float) or not math.isfinite(weight):
                raise ConfigError(
                    f"reward_weights[{name!r}] must be a finite number, got {weight!r}"
                )
        if not isinstance(self.opponents, dict):
            raise ConfigError("opponents must map agent ids to policy specs")
        if self.trained_agent in self.opponents:
            raise ConfigError(f"trained_agent {self.trained_agent!r} also appears in opponents")
        if self.temperature <= 0:
            raise ConfigError("temperature must be > 0 for training rollouts")
        if self.lora_dropout != 0.0:
            raise ConfigError(
                "lora_dropout must be 0: the model samples rollouts in train mode, dropout would "
                "perturb them"
            )


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`["a=1", "b={x: 2}"]` -> `{"a": 1, "b": {"x": 2}}` (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key=value")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"override {item!r} has an empty key")
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise ConfigError(f"override {key!r}: value {value!r} is not valid YAML") from exc
    return out
