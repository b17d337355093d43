"""The only module that imports `trl`: Dr. GRPO config, trainer subclass, rollout/reward glue.

Facts this relies on (TRL 1.16, see shared/design/TRL_MULTITURN.md): `rollout_func(prompts,
trainer)` gets each dataset prompt repeated `num_generations` times in a row and returns
`prompt_ids`, `completion_ids`, `logprobs`, optional `env_mask` (the loss mask) and extra keys
that reach reward functions row by row; Dr. GRPO = `loss_type="dr_grpo"` + `scale_rewards="none"`
+ `beta=0` + `num_iterations=1`, with the loss of a micro-batch

    loss = sum_i sum_t mask_it * (-A_i * ratio_it) / (B * max_completion_length)

(ratio = 1 on the first and only iteration) divided by the accumulation steps. With the config's
`beta` > 0, TRL scores each rollout's batch with the starting model too (a PEFT model with its
adapter disabled; a copy of the starting checkpoint without LoRA) and adds `beta x KL_t` to
every token's term, KL_t = exp(ref - logp) - (ref - logp) - 1. With the config's
`num_iterations` mu > 1, TRL optimises each rollout's batch for mu optimiser steps, scoring it
once more before the first (`old_per_token_logps`) so that the later steps' ratio is clipped to
`1 +- epsilon` (`-min(ratio * A, clip(ratio) * A)`); it calls `rollout_func` every mu steps.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from tomgym.training.rl.tokens import EpisodeTokens
from trl import GRPOConfig, GRPOTrainer
from trl.models import unwrap_model_for_generation

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
# TRL toggles activation checkpointing around generation through transformers' old method names;
# the deprecation notice is about TRL's calls, not ours, and would repeat at every rollout.
warnings.filterwarnings(
    "ignore", message=r".*gradient_checkpointing.*is deprecated", category=FutureWarning
)


def resolve_bf16(cfg: Any, *, cuda: bool) -> bool:
    """Whether a training stage (SFT warm start, Dr. GRPO) runs in bf16 mixed precision: the
    config's `bf16`, or when it is null, on where CUDA supports bf16 and off on CPU (where it is
    opt-in: faster on CPUs with native bf16 products, but every number differs from fp32's)."""
    return cfg.bf16 if cfg.bf16 is not None else bool(cuda and torch.cuda.is_bf16_supported())


def build_grpo_config(cfg: Any, *, output_dir: str, cuda: bool) -> GRPOConfig:
    """A `GRPOConfig` for multi-turn Dr. GRPO with every default that matters set explicitly."""
    bf16 = resolve_bf16(cfg, cuda=cuda)
    report_to = "none" if cfg.report_to == "none" else [cfg.report_to]
    return GRPOConfig(
        output_dir=output_dir,
        run_name=cfg.run_name or None,
        seed=cfg.seed,
        data_seed=cfg.seed,
        # Dr. GRPO
        loss_type="dr_grpo",
        scale_rewards="none",
        beta=cfg.beta,
        num_iterations=cfg.num_iterations,
        epsilon=cfg.epsilon,
        multi_objective_aggregation="sum_then_normalize",
        mask_truncated_completions=False,  # the episode tail ends with our EOS or a spliced turn
        max_completion_length=cfg.max_completion_length,
        num_generations=cfg.num_generations,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=0,
        importance_sampling_level="token",
        top_entropy_quantile=1.0,
        # vLLM rollouts (generation_backend: vllm): TRL builds the engine and pushes the policy's
        # weights into it before every step's rollout; our rollout drives it turn by turn.
        use_vllm=cfg.generation_backend == "vllm",
        vllm_mode=cfg.vllm_mode,
        vllm_gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
        vllm_tensor_parallel_size=cfg.vllm_tensor_parallel_size,
        vllm_max_model_length=cfg.vllm_max_model_length,
        vllm_enable_sleep_mode=cfg.vllm_enable_sleep_mode,
        vllm_server_host=cfg.vllm_server_host,
        vllm_server_port=cfg.vllm_server_port,
        vllm_server_timeout=cfg.vllm_server_timeout,
        vllm_importance_sampling_correction=cfg.vllm_importance_sampling_correction,
        # optimisation
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_steps,
        weight_decay=cfg.weight_decay,
        max_grad_norm=cfg.max_grad_norm,
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.per_device_train_batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        steps_per_generation=cfg.gradient_accumulation_steps,
        gradient_checkpointing=cfg.gradient_checkpointing,
        bf16=bf16,
        fp16=False,
        use_cpu=not cuda,
        # bookkeeping
        logging_steps=cfg.logging_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        report_to=report_to,
        log_completions=False,
        remove_unused_columns=False,
        shuffle_dataset=True,
        dataloader_num_workers=0,
    )


@contextlib.contextmanager
def generation_model(trainer: GRPOTrainer) -> Iterator[Any]:
    """The trainer's model ready for `generate` (unwrapped, ZeRO-3 params gathered, no ckpting;
    on CPU without the mixed-precision autocast: `cpu_generation_without_autocast`)."""
    with (
        unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as model,
        cpu_generation_without_autocast(model),
        torch.no_grad(),
    ):
        yield model


@contextlib.contextmanager
def cpu_generation_without_autocast(model: Any) -> Iterator[None]:
    """Within the block, a CPU model prepared for bf16 mixed precision runs its forward in the
    weights' own dtype, as the policy backends do.

    accelerate wraps a prepared model's `forward` in autocast (and keeps the wrapper when
    unwrapped for generation), and autocast re-casts the frozen fp32 weights to bf16 on every
    call (it caches only casts of weights that require grad): on CPU a one-token decode step
    then costs a conversion of the whole model, and the first `bf16=true` learning run took
    184-277 s a Dr. GRPO step against fp32's ~136 s (docs/training.md, "Precision on a CPU").
    So rollouts sample from the fp32 weights while the loss forward keeps its autocast. On GPU,
    and for a model without the wrapper, nothing changes."""
    unwrapped = model.__dict__.get("_original_forward")
    wrapped = model.__dict__.get("forward")
    if unwrapped is None or wrapped is None or model.device.type != "cpu":
        yield
        return
    model.forward = unwrapped
    try:
        yield
    finally:
        model.forward = wrapped


class DrGRPOTrainer(GRPOTrainer):
    """GRPOTrainer plus: rejection-sampling SFT advantages, timing and rollout metrics.

    `method="rejection_sft"` replaces the group-relative advantage of every episode by its
    acceptance weight (1 accepted, 0 rejected, no baseline), stored by the reward function in
    `self.acceptance` for this process's rows.
    """

    def __init__(
        self, *args: Any, method: str = "grpo", per_episode_forward: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.method = method
        self.per_episode_forward = per_episode_forward
        self.acceptance: list[float] | None = None
        self.last_rollout_seconds = 0.0
        # This optimiser step's seconds so far: (rollout, whole), over its micro-batches.
        self._step_seconds = (0.0, 0.0)
        self.last_advantages: torch.Tensor | None = None

    def add_metrics(self, metrics: Mapping[str, float], mode: str = "train") -> None:
        for key, value in metrics.items():
            self._metrics[mode][key].append(float(value))

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **forward_kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """TRL's scoring, or with `per_episode_forward` each row alone without its padding.

        TRL pads a generation batch to its longest prompt (left) and episode (right), so every
        row of a micro-batch pays for the longest one, and the padding mask keeps CPU attention
        off the fused causal kernel. Scoring each row's own span and padding the per-token
        results back to `logits_to_keep` (zeros where the row had padding; the loss masks
        them) gives the same log-probs (RoPE depends only on relative positions) at less than
        half the CPU time (`loss_forward` in the config). Rows whose mask has holes, MoE
        auxiliary losses and multimodal inputs keep TRL's path.
        """
        spans = episode_spans(attention_mask) if self.per_episode_forward else None
        multimodal = any(value is not None for value in forward_kwargs.values())
        if spans is None or compute_aux_loss or multimodal:
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **forward_kwargs,
            )
        completion_start = input_ids.size(1) - logits_to_keep
        logps: list[torch.Tensor | None] = []
        entropies: list[torch.Tensor | None] = []
        for row, (start, end) in enumerate(spans):
            kept = end - completion_start
            if kept <= 0:  # no completion token to score (and TRL's `[:, -0:]` would keep all)
                logps.append(None)
                entropies.append(None)
                continue
            ids = input_ids[row : row + 1, start:end]
            row_logps, row_entropies, _ = super()._get_per_token_logps_and_entropies(
                model, ids, torch.ones_like(ids), kept, compute_entropy=compute_entropy
            )
            padding = (0, logits_to_keep - kept)
            logps.append(torch.nn.functional.pad(row_logps, padding))
            if compute_entropy:
                entropies.append(torch.nn.functional.pad(row_entropies, padding))
        return (
            stack_rows(logps, logits_to_keep, input_ids.device),
            (stack_rows(entropies, logits_to_keep, input_ids.device) if compute_entropy else None),
            None,
        )

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self.method == "rejection_sft":
            if self.acceptance is None or len(self.acceptance) != len(output["advantages"]):
                raise RuntimeError("rejection_sft: the reward function did not record acceptance")
            output["advantages"] = torch.tensor(
                self.acceptance,
                dtype=output["advantages"].dtype,
                device=output["advantages"].device,
            )
            self.acceptance = None
        self.last_advantages = output["advantages"].detach().cpu()
        return output

    def training_step(
        self, model: Any, inputs: Any, num_items_in_batch: Any = None
    ) -> torch.Tensor:
        started = time.perf_counter()
        self.last_rollout_seconds = 0.0
        steps_timed = len(self._metrics["train"]["step_time"])
        loss = super().training_step(model, inputs, num_items_in_batch)
        rollout, whole = self._step_seconds
        rollout += self.last_rollout_seconds
        whole += time.perf_counter() - started
        self._step_seconds = (rollout, whole)
        # Called once per micro-batch: the optimiser step's totals are logged when TRL closes
        # the step, i.e. when it logs that step's `step_time`.
        if len(self._metrics["train"]["step_time"]) > steps_timed:
            self.add_metrics(
                {"time/rollout_s": rollout, "time/optimisation_s": max(0.0, whole - rollout)}
            )
            self._step_seconds = (0.0, 0.0)
        return loss


def episode_spans(attention_mask: torch.Tensor) -> list[tuple[int, int]] | None:
    """Each row's `[start, end)` columns of real tokens, or None if some row has a hole.

    TRL left-pads prompts and right-pads completions, so a row's tokens are one run of ones.
    """
    spans = []
    for row in attention_mask:
        real = row.nonzero().flatten()
        if real.numel() == 0:
            return None
        start, end = int(real[0]), int(real[-1]) + 1
        if end - start != real.numel():
            return None
        spans.append((start, end))
    return spans


def stack_rows(
    rows: Sequence[torch.Tensor | None], width: int, device: torch.device
) -> torch.Tensor:
    """Rows of shape (1, width) stacked; a None row (nothing scored) becomes zeros."""
    template = next((row for row in rows if row is not None), None)
    if template is None:
        return torch.zeros((len(rows), width), device=device)
    zeros = template.new_zeros((1, width))
    return torch.cat([zeros if row is None else row for row in rows], dim=0)


RolloutHook = Callable[[Sequence[Any], Any, Callable[..., Any]], dict[str, list[Any]]]


def make_rollout_func(run_rollout: RolloutHook) -> Callable[[list[Any], GRPOTrainer], dict]:
    """Wrap `run_rollout(prompts, trainer, model_context)` as TRL's `rollout_func`."""

    def rollout_func(prompts: list[Any], trainer: GRPOTrainer) -> dict[str, list[Any]]:
        started = time.perf_counter()
        result = run_rollout(prompts, trainer, generation_model)
        if isinstance(trainer, DrGRPOTrainer):
            trainer.last_rollout_seconds += time.perf_counter() - started
        return result

    return rollout_func


def vllm_rollout_engine(trainer: GRPOTrainer, cfg: Any) -> tuple[Any, Callable[[], bool]]:
    """The engine TRL built for `use_vllm`, and a check that it holds this step's weights.

    TRL 1.16 calls `vllm_generation.sync_weights()` before `rollout_func` whenever the global
    step moved, recording the step in `_last_loaded_step`; a wave is current while that equals
    `state.global_step` (private TRL state: this module is the one place coupled to it).
    """
    from tomgym.training.rl.vllm_generation import ColocatedEngine, ServerEngine

    generation = getattr(trainer, "vllm_generation", None)
    if generation is None:
        raise RuntimeError("generation_backend 'vllm' but the trainer built no vLLM engine")
    if cfg.vllm_mode == "colocate":
        engine: Any = ColocatedEngine(generation.llm)
    else:
        # Only the main process pushes weights to the server; the others must not generate
        # before the push is complete.
        trainer.accelerator.wait_for_everyone()
        engine = ServerEngine(f"http://{cfg.vllm_server_host}:{cfg.vllm_server_port}")

    def weights_current() -> bool:
        return getattr(trainer, "_last_loaded_step", None) == trainer.state.global_step

    return engine, weights_current


def gather_max(trainer: GRPOTrainer, value: int) -> int:
    """Max of an int over all processes (every rank must make the same number of gen calls)."""
    if trainer.accelerator.num_processes == 1:
        return value
    tensor = torch.tensor([value], device=trainer.accelerator.device)
    return int(trainer.accelerator.gather(tensor).max().item())


def sft_rows(episodes: Sequence[EpisodeTokens]) -> list[dict[str, list[int]]]:
    """Pre-tokenised SFT rows: the whole spliced sequence, labels -100 wherever the mask is 0."""
    rows = []
    for ep in episodes:
        ids = ep.prompt_ids + ep.completion_ids
        mask = [0] * len(ep.prompt_ids) + ep.env_mask
        rows.append(
            {"input_ids": ids, "labels": [t if m else -100 for t, m in zip(ids, mask, strict=True)]}
        )
    return rows


def run_sft(
    model: Any,
    tokenizer: Any,
    episodes: Sequence[EpisodeTokens],
    *,
    output_dir: str,
    steps: int,
    learning_rate: float,
    batch_size: int,
    seed: int,
    peft_config: Any = None,
    bf16: bool = False,
    use_cpu: bool = True,
) -> tuple[Any, dict[str, Any]]:
    """Supervised warm start on spliced episodes (loss where `env_mask` is 1, `sft_rows`).

    `batch_size` episodes per optimisation step. Returns the trained model (PEFT adapters
    merged, so GRPO starts a fresh adapter on top) and the train metrics.
    """
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        output_dir=output_dir,
        max_steps=steps,
        learning_rate=learning_rate,
        # One sequence at a time, accumulated: whole episodes are long and the logits of a
        # 49k-token vocabulary dominate memory (batch 8 needed over 20 GB on CPU).
        per_device_train_batch_size=1,
        gradient_accumulation_steps=batch_size,
        lr_scheduler_type="constant",
        warmup_steps=0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
        bf16=bf16,
        use_cpu=use_cpu,
        gradient_checkpointing=False,
        max_length=None,  # an episode is never cut: its last turns would lose their loss
        packing=False,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(sft_rows(episodes)),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    result = trainer.train()
    trained = trainer.model
    if hasattr(trained, "merge_and_unload"):
        trained = trained.merge_and_unload()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    metrics = dict(result.metrics)
    if losses:
        metrics["first_loss"], metrics["last_loss"] = losses[0], losses[-1]
    return trained, metrics
