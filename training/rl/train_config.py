"""Training configuration: one flat, typed pydantic model, loaded from YAML with `key=value`
overrides, every value checked before anything is loaded or trained.

Contract:
- Every field has a type, a help text (`TrainConfig.help()`, listed by `tomgym train --help`)
  and, where it matters, a range (`learning_rate > 0`, `max_steps >= 1`, ...) or a closed set
  (`method`, `report_to`, `torch_dtype`, TOM-SB `attackers` from
  `envs.tomsb.protocol.ATTACKER_VARIANTS`, reward components from `rewards.COMPONENTS`).
- Every problem raises `ConfigError` with one line naming each bad field and value
  (`max_steps: expected an integer, got 'ten'`); unknown fields are named with the closest known
  one. Malformed YAML names the file, line and column.
- `key=value` overrides are parsed by the field's type (`parse_overrides`): a string field takes
  the text verbatim, any other field parses it as YAML and then validates (`learning_rate=1e-4`,
  `use_lora=false`, `attackers=[base,bluffing]`, `reward_weights={fooling: 1, format: 0.5}`).
- A list field given one string (`attackers: base`, `attackers=base,bluffing`) is read as the
  comma-separated list of its items, never iterated as characters.
- `RESUME_MAY_CHANGE` names the fields a `--resume` may change (bookkeeping, and `max_steps` to
  train further); any other difference refuses the resume (`config_diff`).
- `WARMSTART_FIELDS` names the fields the SFT warm start reads; resuming a `--warmstart-only`
  folder compares only those.

Methods (`method`):
- `grpo`: Dr. GRPO over full episodes (advantage = reward - group mean, no std scaling, token
  losses summed and divided by `max_completion_length`).
- `rejection_sft`: online rejection-sampling SFT: the same rollouts, but each episode's weight is
  1 if it passes `accept_component` (e.g. fooled) and 0 otherwise, with no baseline: the
  gradient is the summed NLL of the accepted episodes' sampled tokens, same normaliser.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from tomgym.agents.llm.constraints import CONSTRAINT_FLAGS
from tomgym.envs.tomsb.game import MAX_TRUST
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS
from tomgym.rewards.composer import COMPONENTS

Method = Literal["grpo", "rejection_sft"]
ReportTo = Literal["none", "tensorboard", "trackio", "wandb"]
TorchDtype = Literal["float32", "bfloat16", "float16"]
GenerationBackend = Literal["transformers", "vllm"]
VLLMMode = Literal["colocate", "server"]
LossForward = Literal["auto", "per_episode", "batched"]
AttackerVariant = Literal[ATTACKER_VARIANTS]  # type: ignore[valid-type]  # the protocol's tuple

METHODS: tuple[str, ...] = typing.get_args(Method)
REPORT_TO: tuple[str, ...] = typing.get_args(ReportTo)

RESUME_MAY_CHANGE = frozenset(
    {
        "max_steps",
        "output_dir",
        "logging_steps",
        "save_steps",
        "save_total_limit",
        "report_to",
        "run_name",
    }
)
"""Fields a resumed run may change: none of them changes what the run computes."""

WARMSTART_FIELDS = frozenset(
    {
        "env_id", "trained_agent", "opponents", "env_config", "train_split", "prior_levels",
        "attackers", "max_scenarios", "decrypto_rows", "model", "tokenizer",
        "chat_template_kwargs", "use_lora", "lora_r", "lora_alpha", "lora_dropout",
        "lora_target_modules", "torch_dtype", "bf16", "seed", "opponent_retries", "sft_warmstart",
        "sft_teacher", "sft_games", "sft_steps", "sft_learning_rate", "sft_batch_size",
    }
)  # fmt: skip
"""Fields the SFT warm-start stage reads: a `--warmstart-only` folder is reused (resumed) by any
config that agrees on these, whatever its Dr. GRPO settings."""


class ConfigError(ValueError):
    """A bad training configuration; the message is one line naming the field(s)."""


# ------------------------------------------------------------------------------ field types
def _not_bool(value: Any) -> Any:
    # pydantic reads True as 1; a boolean where a number is due is a mistake, not a number.
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    return value


def _as_list(value: Any) -> Any:
    """One string is the comma-separated list of its items (never iterated as characters); one
    number is a one-item list."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [value]
    return value


def _component(value: str) -> str:
    if value not in COMPONENTS:
        raise ValueError(f"unknown reward component {value!r}; known: {sorted(COMPONENTS)}")
    return value


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value!r}")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]
Float = Annotated[float, BeforeValidator(_not_bool), AfterValidator(_finite)]
Component = Annotated[str, AfterValidator(_component)]
AttackerList = Annotated[list[AttackerVariant], BeforeValidator(_as_list)]
IntList = Annotated[list[Int], BeforeValidator(_as_list)]


def _f(default: Any, help: str, **constraints: Any) -> Any:  # noqa: A002 - the field's help
    return Field(default, description=help, **constraints)


class TrainConfig(BaseModel):
    """Every setting of a training run (see the module doc for the loading contract)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # --- what is trained, against whom
    env_id: str = _f("tomgym/tomsb-v0", "Registered PettingZoo env id.")
    trained_agent: str = _f("defender_0", "Agent id whose turns the model samples and learns.")
    opponents: dict[str, str] = _f(
        {"attacker_0": "scripted:{route}"},
        "agent -> policy spec for every other agent. Specs: 'scripted:<name>' (TOM-SB scripted "
        "attacker/defender), 'decrypto:embedding[:k=K,vectors=V]', 'decrypto:random', "
        "'llm:<make_llm_policy spec>', 'frozen' (a frozen copy of the base model). '{route}' is "
        "replaced by the row's route (the TOM-SB attacker variant).",
    )
    env_config: dict[str, Any] = _f(
        {}, "Keyword arguments for the env constructor (e.g. max_attacker_turns)."
    )
    train_split: str = _f("train", "TOM-SB split the dataset rows come from (by universe).")
    prior_levels: IntList = _f([0, 1, 2], "TOM-SB prior levels included in the dataset rows.")
    attackers: AttackerList = _f(
        list(ATTACKER_VARIANTS),
        f"TOM-SB attacker variants {ATTACKER_VARIANTS}; every (scenario, variant) pair is one "
        "dataset row.",
        min_length=1,
    )
    max_scenarios: Int = _f(0, "Cap on scenarios per prior level (0 = all).", ge=0)
    decrypto_rows: Int = _f(256, "Number of dataset rows (game seeds) for non-TOM-SB envs.", ge=1)
    shared_seed_in_group: bool = _f(
        False,
        "Play every episode of a group with the row's env seed (Decrypto: same keywords/codes); "
        "TOM-SB pins the scenario by options, so group members differ by opponent seed only.",
    )
    resample_flat_groups: Int = _f(
        0,
        "Dynamic sampling (DAPO): up to this many rounds, before a step optimises, of replacing "
        "every group whose kept rewards are all equal (zero advantage, no gradient) by a fresh "
        "group on a training row drawn anew; groups still flat after the last round stay. "
        "0 = off (every group as drawn, the paper's setting).",
        ge=0,
    )
    teacher_episodes_per_group: Int = _f(
        0,
        "Off-policy guidance (as in LUFFY): the last N members of every group are played by the "
        "scripted `sft_teacher` instead of the model, scored like the others, and their turns "
        "trained with the group's advantage (importance ratio 1), so a group the model only loses "
        "still holds a winning episode to move towards. 0 = on-policy Dr. GRPO (the paper's).",
        ge=0,
    )
    teacher_prefix_turns: IntList = _f(
        [],
        "Teacher-anchored rollouts (as in R^3 and BREAD; `training.rl.anchored`): each group's "
        "model episodes start after the scripted `sft_teacher` has played the trained agent's "
        "first k turns, k drawn per group from this list (seeded; 0 = an ordinary group). The "
        "teacher's turns enter the sequence with mask 0, so only the model's own later turns "
        "are trained; evaluation never anchors. [] = off (every episode the model's from the "
        "first turn, the paper's setting).",
    )
    # --- model
    model: str = _f("default", "'default' (bundled SmolLM2-135M-Instruct) or a HF path/id.")
    tokenizer: str = _f("", "Tokenizer path if different from the model's.")
    chat_template_kwargs: dict[str, Any] = _f(
        {}, "Extra chat-template kwargs (Qwen3: enable_thinking)."
    )
    use_lora: bool = _f(True, "Train a LoRA adapter (False: full fine-tuning).")
    lora_r: Int = _f(32, "LoRA rank.", ge=1)
    lora_alpha: Int = _f(32, "LoRA alpha.", ge=1)
    lora_dropout: Float = _f(0.0, "LoRA dropout; keep 0: the model samples in train mode.")
    lora_target_modules: str = _f("all-linear", "PEFT target modules.")
    torch_dtype: TorchDtype = _f("float32", "Model dtype: float32, bfloat16 or float16.")
    # --- Dr. GRPO
    method: Method = _f("grpo", f"One of {METHODS}.")
    reward_weights: dict[Component, Float] = _f(
        {"fooling": 1.0}, "Reward component -> weight (rewards.COMPONENTS).", min_length=1
    )
    reward_gate: Component | None = _f(
        "format", "Gate component (multiplies the sum) or null for none."
    )
    accept_component: Component = _f(
        "fooling", "rejection_sft: episodes with this component == 1 are kept."
    )
    num_generations: Int = _f(
        8, "Episodes per group (same scenario and attacker variant); >= 2.", ge=2
    )
    max_completion_length: Int = _f(
        512, "Per-episode token budget of the trained agent; Dr. GRPO's normaliser.", ge=1
    )
    max_turn_tokens: Int = _f(256, "Token cap of one trained-agent turn.", ge=1)
    fallback_text: str | None = _f(
        None, "Answer used once the episode budget is spent (null: a protocol-valid refusal)."
    )
    temperature: Float = _f(1.0, "Sampling temperature of training rollouts (> 0).", gt=0)
    top_p: Float = _f(
        1.0, "Nucleus sampling; keep 1.0 so sampling log-probs match the trainer's.", gt=0, le=1
    )
    learning_rate: Float = _f(1e-5, "Learning rate (> 0).", gt=0)
    lr_scheduler_type: str = _f("constant", "LR schedule (a transformers SchedulerType).")
    warmup_steps: Int = _f(0, "LR warm-up steps.", ge=0)
    weight_decay: Float = _f(0.0, "AdamW weight decay.", ge=0)
    max_grad_norm: Float = _f(1.0, "Gradient clipping.", gt=0)
    beta: Float = _f(
        0.0,
        "KL penalty towards the model training starts from (the SFT warm start when there is "
        "one; with LoRA, the adapter disabled), TRL's per-token k3 estimator added to the loss "
        "(0 = Dr. GRPO as published: no reference forward).",
        ge=0,
    )
    num_iterations: Int = _f(
        1,
        "Optimiser steps per rollout (GRPO's mu): each rollout's episodes are optimised this "
        "many times, with the clipped importance ratio against the log-probs the model gave "
        "them before its first step (1 = Dr. GRPO as published: ratio 1, no clipping).",
        ge=1,
    )
    epsilon: Float = _f(
        0.2, "PPO clip range of the importance ratio (active with num_iterations > 1).", gt=0
    )
    max_steps: Int = _f(100, "Optimisation steps.", ge=1)
    per_device_train_batch_size: Int = _f(
        8,
        "Episodes per device per micro-batch (generation batch = this x grad accumulation).",
        ge=1,
    )
    gradient_accumulation_steps: Int = _f(1, "Gradient accumulation steps.", ge=1)
    gradient_checkpointing: bool = _f(False, "Activation checkpointing (on for big models).")
    loss_forward: LossForward = _f(
        "auto",
        "How the loss forward scores a micro-batch: 'batched' (TRL's padded batch), "
        "'per_episode' (each episode alone, without its padding: no compute on pad tokens and "
        "the causal attention kernel), 'auto' = per_episode on CPU, batched on GPU.",
    )
    bf16: bool | None = _f(
        None,
        "bf16 mixed precision of both training stages (SFT warm start, Dr. GRPO); null = on "
        "when CUDA supports it, off on CPU.",
    )
    seed: Int = _f(0, "Seed for trainer, data order and episode seeds.", ge=0, lt=2**32)
    debug_check_tokens: bool = _f(
        False, "Check spliced ids against a fresh render and log-probs against a re-score."
    )
    opponent_retries: Int = _f(
        2, "Retries of a failing opponent backend before dropping games.", ge=0
    )
    concurrency: Int = _f(64, "Games played at once by the runner.", ge=1)
    # --- rollout generation (agents.llm.kv_cache)
    kv_cache: bool = _f(
        True,
        "Keep each game's KV cache between its turns within a rollout (prefill only new tokens); "
        "false re-encodes every turn. Caches are dropped before every optimisation step.",
    )
    kv_cache_max_tokens: Int | None = _f(
        None,
        "Cap on cached tokens over all games (least recently used evicted, then re-encoded); "
        "null = the engine's default (agents.llm.kv_cache.DEFAULT_MAX_CACHED_TOKENS).",
        ge=1,
    )
    kv_cache_share_prefixes: bool = _f(
        True,
        "Prefill once a prompt prefix that several new games share (a group's scenario), each "
        "game's cache starting from it; false prefills every game's first prompt in full.",
    )
    packed_linear: bool = _f(
        True,
        "Multiply by linear weights packed once for oneDNN on CPU during rollouts "
        "(agents.llm.packed_linear: the same values up to float rounding, faster; the packed "
        "copies take about the linear weights' memory again); false keeps F.linear.",
    )
    stop_at_answer: bool = _f(
        True,
        "Stop a turn once its protocol answer is complete (JSON object / ANSWER: line); the "
        "sampled ids are kept and an EOS is appended with mask 0, as for capped turns.",
    )
    repetition_guard: bool = _f(
        True,
        "Stop a turn caught in a runaway loop (its last tokens repeat one 1-4-token pattern 8 "
        "times, agents.llm.kv_cache.repeating_tail) instead of decoding to the token cap; it "
        "counts as a capped turn (EOS appended with mask 0).",
    )
    constrain_format: bool = _f(
        False,
        "Constrained decoding of the whole TOM-SB answer: one JSON object in the protocol's "
        "template (the encoder's keys in order, belief values null or a name of their level, "
        f"the trust a digit 0-{MAX_TRUST}, free text only inside the reflection and reply strings; "
        "agents.llm.constraints.AnswerFormatConstraint), in rollouts and in the learning "
        "benchmark's evaluations (policy option constrain_format=true). It subsumes "
        "constrain_beliefs. Transformers rollouts only.",
    )
    constrain_beliefs: bool = _f(
        False,
        "Constrained decoding of TOM-SB belief values: once a value's quote is open it must "
        "spell one of the universe's names of that level (agents.llm.constraints), in rollouts "
        "and in the learning benchmark's evaluations (policy option constrain_beliefs=true). "
        "Transformers rollouts only.",
    )
    constrain_replies: bool = _f(
        False,
        "Constrained decoding of the names in a TOM-SB reply: a reply word that has become the "
        "first 4+ characters of a universe name (capitalised, not a sentence word) must finish "
        "as that name, and word starts that would share 4 characters with a name and then miss "
        "it are banned, and a name opened after '<level> is' is one of that level's names "
        "(agents.llm.constraints.ReplyNameConstraint), in rollouts and in the "
        "learning benchmark's evaluations (policy option constrain_replies=true). Transformers "
        "rollouts only.",
    )
    constrain_branches: bool = _f(
        False,
        "Constrained decoding of a TOM-SB defender's reflection and reply on the branch its own "
        "answer states the attacker knows: no word there may open a universe name that its "
        "attacker_belief_about_target rules out (another value of a level it fills, or a name "
        "under one), so the lie follows the stated belief and only the belief is left to learn "
        "(agents.llm.constraints.ReplyBranchConstraint), in rollouts and in the learning "
        "benchmark's evaluations (policy option constrain_branches=true). Transformers "
        "rollouts only.",
    )
    constrain_story: bool = _f(
        False,
        "Constrained decoding of the story a TOM-SB defender's reflection and reply tell: the "
        "first decoy written whole there (a universe name off the true path) fixes its path, "
        "and no word after it may open a name off that path (a house on another street than "
        "the decoy street just named), so the lie stays one consistent path "
        "(agents.llm.constraints.ReplyBranchConstraint), in rollouts and in the learning "
        "benchmark's evaluations (policy option constrain_story=true). Transformers rollouts "
        "only.",
    )
    constrain_plan: bool = _f(
        False,
        "Constrained decoding of a TOM-SB defender's plan: after 'I will say' (or '... and "
        "say') in its reflection, the i-th value listed ('<name> for the <level>') must be a "
        "name of the i-th level its stated attacker_belief_about_target leaves null, written "
        "with its own level, so the plan names a real value of each level the attacker does "
        "not know (agents.llm.constraints.PlanConstraint), in rollouts and in the learning "
        "benchmark's evaluations (policy option constrain_plan=true). Transformers rollouts "
        "only.",
    )
    constrain_asked: bool = _f(
        False,
        "Constrained decoding of a TOM-SB defender's reply to the level the attacker's last "
        "message asks for ('which department ...', read as the scripted defenders read it): "
        "until the reply has written a name of that level or below, it may not name a level "
        "above it (the college again when the department is asked), in rollouts and in the "
        "learning benchmark's evaluations (policy option constrain_asked=true; "
        "agents.llm.constraints.ReplyLevelConstraint). Transformers rollouts only.",
    )
    generation_backend: GenerationBackend = _f(
        "transformers",
        "Engine of the trained policy's rollouts: 'transformers' (the training model itself, "
        "with the KV cache above) or 'vllm' (TRL's vLLM integration: weights pushed to the engine "
        "before every step's rollout; needs a GPU and `pip install tomgym[vllm]`).",
    )
    vllm_mode: VLLMMode = _f(
        "colocate",
        "'colocate': one vLLM engine per training rank sharing its GPU; 'server': a separate "
        "`vllm serve` process (vllm_server_host / vllm_server_port).",
    )
    vllm_gpu_memory_utilization: Float = _f(
        0.3, "colocate: share of each GPU's memory the engine may take.", gt=0, le=1
    )
    vllm_tensor_parallel_size: Int = _f(
        1, "colocate: GPUs one engine spans (must divide the number of ranks).", ge=1
    )
    vllm_max_model_length: Int | None = _f(
        None, "Engine context length (prompt + all turns); null = the model's own.", ge=1
    )
    vllm_enable_sleep_mode: bool = _f(
        False, "colocate: offload the engine's weights and cache during optimisation."
    )
    vllm_server_host: str = _f("127.0.0.1", "server: host of the `vllm serve` process.")
    vllm_server_port: Int = _f(8000, "server: port of the `vllm serve` process.", ge=1, le=65535)
    vllm_server_timeout: Float = _f(
        240.0, "server: seconds to wait for the server to come up.", gt=0
    )
    vllm_importance_sampling_correction: bool = _f(
        True,
        "Correct for the engine's sampling distribution differing from the training model's "
        "(TRL's truncated importance sampling; logged as sampling/*).",
    )
    # --- evaluation / checkpoints / logging
    output_dir: str = _f("runs/train", "Where checkpoints, logs and eval tables go.")
    eval_steps: Int = _f(0, "Validation evaluation every N steps (0 = only at the end).", ge=0)
    eval_split: str = _f("validation", "Split used for evaluation and best-checkpoint selection.")
    eval_attackers: AttackerList = _f(list(ATTACKER_VARIANTS), "Attacker variants evaluated.")
    eval_games_per_variant: Int = _f(16, "Validation games per attacker variant.", ge=0)
    eval_temperature: Float = _f(0.0, "Sampling temperature at evaluation (0 = greedy).", ge=0)
    best_metric: str = _f(
        "fooling", "Validation metric (mean over variants) for the best checkpoint."
    )
    save_steps: Int = _f(50, "Checkpoint every N steps.", ge=1)
    save_total_limit: Int = _f(3, "Checkpoints kept.", ge=1)
    logging_steps: Int = _f(1, "Log every N steps.", ge=1)
    report_to: ReportTo = _f("none", f"One of {REPORT_TO}.")
    run_name: str = _f("", "Run name for the trackers.")
    # --- optional SFT warm start
    sft_warmstart: bool = _f(False, "Supervised warm start on scripted-defender transcripts.")
    sft_teacher: str = _f("tom_heuristic", "Scripted policy whose transcripts are imitated.")
    sft_games: Int = _f(64, "Transcript games for the warm start.", ge=1)
    sft_steps: Int = _f(30, "Warm-start optimisation steps.", ge=1)
    sft_learning_rate: Float = _f(2e-4, "Warm-start learning rate (> 0).", gt=0)
    sft_batch_size: Int = _f(8, "Warm-start batch size.", ge=1)

    # ------------------------------------------------------------------ checks
    @field_validator("lora_dropout")
    @classmethod
    def _no_dropout(cls, value: float) -> float:
        if value != 0.0:
            raise ValueError(
                "must be 0: the model samples rollouts in train mode, dropout would perturb them"
            )
        return value

    @field_validator("model")
    @classmethod
    def _model_exists(cls, value: str) -> str:
        if value == "default" or Path(value).expanduser().is_dir():
            return value
        from tomgym.agents.llm.backends.hf import resolve_model  # the one rule for model paths

        try:
            resolve_model(value)
        except FileNotFoundError as exc:
            raise ValueError(str(exc)) from None
        return value

    @property
    def episodes_per_step(self) -> int:
        """Episodes one device plays and optimises per optimiser step (TRL's generation batch:
        one rollout, scored in `gradient_accumulation_steps` micro-batches)."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps

    @model_validator(mode="after")
    def _consistent(self) -> TrainConfig:
        global_batch = self.episodes_per_step
        if global_batch % self.num_generations:
            raise ValueError(
                f"per_device_train_batch_size x gradient_accumulation_steps ({global_batch}) must "
                f"be a multiple of num_generations ({self.num_generations})"
            )
        if self.trained_agent in self.opponents:
            raise ValueError(f"trained_agent {self.trained_agent!r} also appears in opponents")
        if self.generation_backend == "vllm" and self.method != "grpo":
            raise ValueError("generation_backend 'vllm' drives GRPO rollouts; use method 'grpo'")
        if self.teacher_episodes_per_group >= self.num_generations:
            raise ValueError(
                f"teacher_episodes_per_group ({self.teacher_episodes_per_group}) must be below "
                f"num_generations ({self.num_generations}): a group needs the model's own episodes"
            )
        if any(k < 0 for k in self.teacher_prefix_turns):
            raise ValueError(f"teacher_prefix_turns must be >= 0, got {self.teacher_prefix_turns}")
        if any(self.teacher_prefix_turns) and self.method != "grpo":
            raise ValueError("teacher_prefix_turns anchors Dr. GRPO groups; use method 'grpo'")
        if self.teacher_episodes_per_group and self.method != "grpo":
            raise ValueError("teacher_episodes_per_group guides Dr. GRPO groups; use method 'grpo'")
        if (
            self.teacher_episodes_per_group
            and self.generation_backend == "vllm"
            and self.vllm_importance_sampling_correction
        ):
            raise ValueError(
                "teacher_episodes_per_group with vllm_importance_sampling_correction: the teacher's "
                "turns have no sampling log-probs to correct with; set the correction false"
            )
        if self.save_steps % self.num_iterations:
            raise ValueError(
                f"save_steps ({self.save_steps}) must be a multiple of num_iterations "
                f"({self.num_iterations}): a checkpoint between the steps that reuse one rollout "
                "would resume on a new rollout, not the one the run was optimising"
            )
        if self.generation_backend == "vllm" and self.answer_constraints:
            raise ValueError(
                f"{' and '.join(self.answer_constraints)} need generation_backend 'transformers' "
                "(the vLLM rollouts take no per-token constraint)"
            )
        return self

    @property
    def answer_constraints(self) -> list[str]:
        """The answer constraints switched on, in `CONSTRAINT_FLAGS` order."""
        return [flag for flag in CONSTRAINT_FLAGS if getattr(self, flag)]

    @property
    def benchmark_seed(self) -> int:
        """The seed of the generated TOM-SB benchmark the trainer draws its games from (and the
        learning benchmark scores its held-out split of): `env_config`'s, else 0."""
        return int(self.env_config.get("benchmark_seed", 0))

    # ------------------------------------------------------------------ loading
    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name -> help text, in declaration order."""
        return {name: f.description or "" for name, f in cls.model_fields.items()}

    @classmethod
    def describe_fields(cls) -> list[str]:
        """One line per field: `name (type, default): help` (for `tomgym train --help`)."""
        lines = []
        for name, info in cls.model_fields.items():
            default = info.get_default(call_default_factory=True)
            lines.append(
                f"{name} ({_type_name(info.annotation)}, default {default!r}): {info.description}"
            )
        return lines

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Validate a mapping of field -> value; raises `ConfigError` (one line) on any problem."""
        if not isinstance(data, dict):
            raise ConfigError(f"a training config must be a mapping, got {type(data).__name__}")
        unknown = [key for key in data if key not in cls.model_fields]
        if unknown:
            raise ConfigError("; ".join(_unknown_message(str(key)) for key in unknown))
        try:
            return cls(**data)
        except ValidationError as exc:
            raise ConfigError(format_validation_error(exc)) from None

    @classmethod
    def load(cls, path: str | Path | None, overrides: list[str] | None = None) -> TrainConfig:
        """The config of a YAML file (or the defaults) with `key=value` overrides applied."""
        data: dict[str, Any] = {}
        if path is not None:
            data.update(read_yaml_mapping(Path(path)))
        data.update(parse_overrides(overrides or []))
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able field -> value (what `train_config.json` holds; `from_dict` reads it back)."""
        return self.model_dump(mode="json")


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin is Literal:
        return "|".join(map(str, typing.get_args(annotation)))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(
            "null" if a is type(None) else _type_name(a) for a in typing.get_args(annotation)
        )
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    names = {"int": "integer", "float": "number", "bool": "true/false", "str": "text"}
    if annotation is Any:
        return "any"
    return names.get(getattr(annotation, "__name__", ""), str(annotation))


def _unknown_message(key: str) -> str:
    close = difflib.get_close_matches(key, list(TrainConfig.model_fields), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown config field {key!r}{hint}; see `tomgym train --help`"


_EXPECTED = {
    "int_parsing": "expected an integer",
    "int_type": "expected an integer",
    "int_from_float": "expected an integer",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected text",
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
}


def _location(loc: tuple[Any, ...]) -> str:
    """`("reward_weights", "foolin", "[key]")` -> `reward_weights['foolin']`."""
    text = str(loc[0]) if loc else ""
    for part in loc[1:]:
        if part != "[key]":
            text += f"[{part!r}]"
    return text


def format_validation_error(exc: ValidationError) -> str:
    """pydantic's errors as one line: `field: what was expected, got VALUE` for each."""
    parts = []
    for err in exc.errors():
        loc = _location(err["loc"])
        kind = err["type"]
        got = err.get("input")
        if kind in _EXPECTED:
            what = f"{_EXPECTED[kind]}, got {got!r}"
        elif kind == "literal_error":
            what = f"expected one of {err['ctx']['expected']}, got {got!r}"
        elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
            ops = {
                "greater_than": ">",
                "greater_than_equal": ">=",
                "less_than": "<",
                "less_than_equal": "<=",
            }
            bound = next(iter(err["ctx"].values()))
            what = f"must be {ops[kind]} {bound}, got {got!r}"
        elif kind == "too_short":
            what = f"must not be empty, got {got!r}"
        else:
            what = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {what}" if loc else what)
    return "; ".join(parts)


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """A YAML file's top-level mapping; `ConfigError` (file, line, column) when it is not one."""
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(
            f"config file {str(path)!r} is not valid YAML{where}: {problem}"
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping of field: value")
    return loaded


def _takes_text_verbatim(name: str) -> bool:
    """True for fields typed plain `str` (an optional text field parses `null` as YAML)."""
    info = TrainConfig.model_fields.get(name)
    return info is not None and info.annotation is str


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`["max_steps=5", "run_name=1e3"]` -> `{"max_steps": 5, "run_name": "1e3"}`.

    A text field takes the value verbatim; any other field (and an unknown one, which
    `from_dict` then names) parses it as YAML, then the field's type validates it.
    """
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key=value")
        key, value = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"override {item!r} has an empty key")
        if _takes_text_verbatim(key):
            out[key] = value
            continue
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ConfigError(f"override {key}: value {value!r} is not valid YAML") from None
    return out


def config_diff(old: dict[str, Any], new: dict[str, Any], *, ignore: frozenset[str]) -> str:
    """`field: old -> new` for every differing field not in `ignore` ("" when none differ)."""

    def shown(config: dict[str, Any], key: str) -> str:
        return repr(config[key]) if key in config else "unset"

    keys = [k for k in dict.fromkeys([*old, *new]) if k not in ignore]
    return "; ".join(
        f"{k}: {shown(old, k)} -> {shown(new, k)}"
        for k in keys
        if (k in old, old.get(k)) != (k in new, new.get(k))
    )
