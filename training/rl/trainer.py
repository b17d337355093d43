"""Multi-turn Dr. GRPO training of one role in a registered tomgym env (TOM-SB defender,
Decrypto encoder, ...), with evaluation, best-checkpoint selection and an optional SFT warm start.

Data flow per optimisation step (see docs/training.md):

    dataset rows (scenario x attacker variant)  --TRL repeats each row num_generations times-->
    rollout: play the group's episodes through training.runner.play_games
             (trained agent = TrainablePolicy on the model being trained, others = opponents)
    -> prompt_ids / completion_ids / env_mask per episode + the episode record
       (training.rl.episodes)
    -> reward: rewards.RewardComposer(record) (None for dropped episodes)
    -> Dr. GRPO loss (advantage = reward - group mean; sum over sampled tokens / budget)

KV caches (`kv_cache: true`): the trained policy's generate function keeps each game's KV cache
between its turns in the session's one `KVCacheStore`; the weights do not change within a
rollout, so the caches stay valid until it ends, and they are dropped (`invalidate`) when it
ends, before TRL optimises on its batch (and likewise after every evaluation).

Run folder and resume (`train(cfg, resume=...)`), all checked before anything is loaded:
- A fresh run refuses an `output_dir` that already holds a run (`train_config.json`).
- `resume=True` compares the config with the run's `train_config.json` and refuses any
  difference outside `RESUME_MAY_CHANGE` with a one-line diff; only then is the file rewritten.
- Stages are restored exactly: the SFT warm start saves its merged weights and the tokenizer
  (`sft/model/`, loadable as the policy spec `hf:<output_dir>/sft/model`) before its stage
  marker (`sft_warmstart.json`); a resumed run with the marker
  loads those weights instead of the base model (without it, the warm start runs again), then
  continues GRPO from the last `checkpoint-N` (or from step 0 when there is none). The RNG is
  re-seeded at the start of the GRPO stage, so a run interrupted after its warm start and resumed
  computes the same first GRPO step as an uninterrupted one.

Public API: `train(config, resume=False) -> dict` (summary), `TrainingSession` (the pieces, for
tests and scripts), `evaluate(session, model, ...)`, `build_rows(config)`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tomgym.agents.base import BasePolicy, Policy, Turn
from tomgym.agents.llm.constraints import CONSTRAINT_FLAGS
from tomgym.envs.seeding import derive_seed
from tomgym.rewards import RewardComposer
from tomgym.training.eval.validation import ScoredGame, format_table, validation_table
from tomgym.training.rl.anchored import AnchoredPolicy, draw_anchors
from tomgym.training.rl.episodes import (
    Episode,
    EpisodePlayer,
    GameRow,
    group_games,
    group_members,
    trl_batch,
)
from tomgym.training.rl.generation import HFGenerateFn, hf_generate_fn, hf_score_fn
from tomgym.training.rl.opponents import build_opponent, build_opponents
from tomgym.training.rl.tokens import ChatRenderer, EpisodeTokens, episode_from_chat
from tomgym.training.rl.train_config import (
    RESUME_MAY_CHANGE,
    WARMSTART_FIELDS,
    ConfigError,
    TrainConfig,
    config_diff,
)
from tomgym.training.rl.trainable import TrainablePolicy
from tomgym.training.routing import forget_game
from tomgym.training.run_folder import RunFolder

logger = logging.getLogger(__name__)

EVAL_SEED_OFFSET = 1_000_003  # keeps evaluation game seeds apart from training seeds
CONFIG_FILE = "train_config.json"
SFT_REPORT_FILE = "sft_warmstart.json"  # the warm-start stage's marker, written last
SFT_MODEL_DIR = "sft/model"  # the merged warm-start weights


def is_tomsb(env_id: str) -> bool:
    return "tomsb" in env_id


# ------------------------------------------------------------------------------ building blocks
def resolve_model_path(spec: str) -> str:
    """'default' -> the converted bundled SmolLM2 checkpoint; anything else as given."""
    if spec == "default":
        from tomgym.agents.default_model import default_model_path

        return str(default_model_path())
    return spec


def tomsb_scenarios(cfg: TrainConfig, split: str) -> list[Any]:
    from tomgym.envs.tomsb.benchmark import load_benchmark

    bench = load_benchmark(cfg.benchmark_seed)
    scenarios = []
    for level in cfg.prior_levels:
        pool = list(bench.filter(split=split, prior_level=int(level)))
        scenarios.extend(pool[: cfg.max_scenarios] if cfg.max_scenarios else pool)
    if not scenarios:
        raise ConfigError(
            f"no TOM-SB scenario in split {split!r} with prior levels {cfg.prior_levels}"
        )
    return scenarios


def build_rows(cfg: TrainConfig) -> list[GameRow]:
    """Dataset rows: TOM-SB (scenario x attacker variant) of the train split; else game seeds."""
    if is_tomsb(cfg.env_id):
        rows = []
        for scenario in tomsb_scenarios(cfg, cfg.train_split):
            for variant in cfg.attackers:
                options = {"scenario": scenario.scenario_id, "attacker": variant}
                rows.append(GameRow(len(rows), options, derive_seed(cfg.seed, len(rows)), variant))
        return rows
    return [GameRow(i, {}, derive_seed(cfg.seed, "row", i), "") for i in range(cfg.decrypto_rows)]


def eval_rows(cfg: TrainConfig) -> list[GameRow]:
    """Validation games: every eval attacker variant x `eval_games_per_variant` scenarios."""
    rows: list[GameRow] = []
    if is_tomsb(cfg.env_id):
        scenarios = tomsb_scenarios(
            TrainConfig.from_dict({**cfg.to_dict(), "max_scenarios": 0}), cfg.eval_split
        )
        for variant in cfg.eval_attackers:
            for i in range(cfg.eval_games_per_variant):
                sc = scenarios[i % len(scenarios)]
                options = {"scenario": sc.scenario_id, "attacker": variant}
                rows.append(GameRow(len(rows), options, EVAL_SEED_OFFSET + i, variant))
        return rows
    for i in range(cfg.eval_games_per_variant):
        rows.append(GameRow(i, {}, EVAL_SEED_OFFSET + i, ""))
    return rows


def _cannot_load(what: str, source: str, exc: OSError) -> ConfigError:
    """A load failure (missing files, offline Hub id) as the one-line error of a config field."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ConfigError(f"{what}: cannot load {source!r}: {first}")


def load_tokenizer(cfg: TrainConfig, model_path: str) -> Any:
    from transformers import AutoTokenizer

    source = cfg.tokenizer or model_path
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
    except OSError as exc:
        raise _cannot_load("tokenizer" if cfg.tokenizer else "model", source, exc) from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(cfg: TrainConfig, model_path: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, cfg.torch_dtype)  # TrainConfig admits only torch's dtype names
    try:
        return AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    except OSError as exc:
        raise _cannot_load("model", model_path, exc) from None


def lora_config(cfg: TrainConfig) -> Any:
    if not cfg.use_lora:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=cfg.lora_target_modules,
        bias="none",
        task_type="CAUSAL_LM",
    )


# ------------------------------------------------------------------------------ session
class TrainingSession:
    """Everything a run needs besides the TRL trainer: rows, policies, rewards, rollout logic."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.model_path = resolve_model_path(cfg.model)
        self.tokenizer = load_tokenizer(cfg, self.model_path)
        self.renderer = ChatRenderer(self.tokenizer, cfg.chat_template_kwargs)
        self.composer = RewardComposer(
            cfg.reward_weights,
            gate=cfg.reward_gate,
            agent=cfg.trained_agent,
            tokenizer=self.tokenizer,
        )
        self.opponents = build_opponents(cfg, self.model_path)
        self.trainable = TrainablePolicy(
            self.renderer,
            None,
            episode_budget=cfg.max_completion_length,
            max_turn_tokens=cfg.max_turn_tokens,
            fallback=cfg.fallback_text,
            name="trainable",
        )
        self.player = EpisodePlayer(
            cfg.env_id,
            cfg.trained_agent,
            self.trainable,
            self.opponents,
            env_config=cfg.env_config,
            concurrency=cfg.concurrency,
        )
        self.kv_store = self._kv_store(cfg)
        self.rows = build_rows(cfg)  # the dataset's rows; fresh groups are drawn from them
        self.trainer: Any = None
        self.last_batch: dict[str, list[Any]] | None = None
        self.last_rewards: list[float | None] = []
        self.rollout_calls = 0

    @staticmethod
    def _kv_store(cfg: TrainConfig) -> Any:
        if not cfg.kv_cache:
            return None
        from tomgym.agents.llm.kv_cache import DEFAULT_MAX_CACHED_TOKENS, KVCacheStore

        return KVCacheStore(
            cfg.kv_cache_max_tokens or DEFAULT_MAX_CACHED_TOKENS,
            share_prefixes=cfg.kv_cache_share_prefixes,
        )

    def make_generate(self, model: Any, temperature: float) -> HFGenerateFn:
        """The trained policy's generate function over `model` (the session's KV-cache store)."""
        return hf_generate_fn(
            model,
            self.tokenizer,
            temperature=temperature,
            top_p=self.cfg.top_p,
            store=self.kv_store,
            stop_at_answer=self.cfg.stop_at_answer,
            repetition_guard=self.cfg.repetition_guard,
            packed_linear=self.cfg.packed_linear,
            **{flag: getattr(self.cfg, flag) for flag in CONSTRAINT_FLAGS},
        )

    def rollout_generate(self, trainer: Any, model: Any) -> Any:
        """The generate function of one rollout: the training model or TRL's vLLM engine."""
        if self.cfg.generation_backend != "vllm":
            return self.make_generate(model, self.cfg.temperature)
        from tomgym.training.rl.trl_adapter import vllm_rollout_engine
        from tomgym.training.rl.vllm_generation import VLLMGenerateFn

        engine, weights_current = vllm_rollout_engine(trainer, self.cfg)
        return VLLMGenerateFn(
            engine,
            temperature=self.cfg.temperature,
            top_p=self.cfg.top_p,
            eos_token_ids=[self.tokenizer.eos_token_id],
            seed=derive_seed(self.cfg.seed, "vllm", trainer.state.global_step, self.rollout_calls),
            weights_current=weights_current,
            repetition_guard=self.cfg.repetition_guard,
        )

    # -- rollout -------------------------------------------------------------------------------
    def run_rollout(self, prompts: Sequence[Any], trainer: Any, model_context: Any) -> dict:
        from tomgym.training.rl.trl_adapter import gather_max

        cfg = self.cfg
        step = trainer.state.global_step
        rank = trainer.accelerator.process_index
        tag = f"s{step}-c{self.rollout_calls}-p{rank}"
        self.rollout_calls += 1
        with model_context(trainer) as model:
            generate = self.rollout_generate(trainer, model)
            before = generate.cache_stats()  # the store's counters are cumulative
            self.trainable.set_generate(generate)
            self.trainable.generate_calls = 0
            self.trainable.generate_seconds = 0.0
            try:
                games = group_games(
                    prompts, tag=tag, base_seed=cfg.seed, shared_seed=cfg.shared_seed_in_group
                )
                episodes = self.play_groups(games)
                resampling = self.replace_flat_groups(episodes, tag)
                # Generation can be a collective call on several GPUs: equalise the call count.
                target = gather_max(trainer, self.trainable.generate_calls)
                self.trainable.pad_generate_calls(target)
                score = (
                    hf_score_fn(model, temperature=cfg.temperature)
                    if cfg.debug_check_tokens
                    else None
                )
                batch, metrics = trl_batch(
                    episodes, self.renderer, debug_score=score, debug=cfg.debug_check_tokens
                )
            finally:
                # TRL optimises on this batch next: no cache may outlive these weights.
                cache = generate.cache_stats()
                generate.invalidate()
                self.trainable.set_generate(None)
        metrics.update(resampling)
        metrics["time/generate_s"] = self.trainable.generate_seconds
        metrics["rollout/generate_calls"] = float(self.trainable.generate_calls)
        for key in ("prefill_tokens", "reused_tokens", "shared_prefix_tokens"):
            if key in cache:  # vLLM reports no shared prefixes (its own prefix cache)
                metrics[f"rollout/{key}"] = float(cache[key] - before[key])
        metrics["rollout/peak_cached_tokens"] = float(cache["peak_cached_tokens"])  # run's peak
        for key, name in (("prefill_seconds", "prefill_s"), ("decode_seconds", "decode_s")):
            if key in cache:  # the transformers engine's split; vLLM does not report one
                metrics[f"time/{name}"] = float(cache[key] - before[key])
        if cfg.debug_check_tokens:
            logger.info(
                "debug_check_tokens: max token mismatches %.0f, max |logprob deviation| %.3g",
                metrics["debug/token_mismatches_max"],
                metrics["debug/logprob_deviation_max"],
            )
        if hasattr(trainer, "add_metrics"):
            trainer.add_metrics(metrics)
        self.last_batch = batch
        return batch

    def play_groups(self, games: Sequence[tuple[str, GameRow, int]]) -> list[Episode]:
        """Play groups of games (each row's members in a row), one Episode per game, in order.

        The model plays every member but the last `teacher_episodes_per_group` of each group,
        which the scripted teacher plays (`teacher_episodes`) on the same row; with
        `teacher_prefix_turns`, the teacher also opens the model's members of each group with
        the group's drawn number of turns (`model_episodes`).
        """
        cfg = self.cfg
        anchors = draw_anchors(
            [game_id for game_id, _row, _seed in games],
            cfg.num_generations,
            cfg.teacher_prefix_turns,
            seed=cfg.seed,
        )
        k = cfg.teacher_episodes_per_group
        if not k:
            return self.model_episodes(games, anchors)
        first_guided = cfg.num_generations - k
        guided = [m >= first_guided for m in group_members([row for _gid, row, _seed in games])]
        own = iter(
            self.model_episodes([g for g, t in zip(games, guided, strict=True) if not t], anchors)
        )
        taught = iter(self.teacher_episodes([g for g, t in zip(games, guided, strict=True) if t]))
        return [next(taught) if t else next(own) for t in guided]

    def model_episodes(
        self, games: Sequence[tuple[str, GameRow, int]], anchors: Mapping[str, int]
    ) -> list[Episode]:
        """The model's episodes of `games`; a game with an anchor k > 0 is opened by the
        scripted teacher's first k turns (`training.rl.anchored`)."""
        if not any(anchors.get(game_id) for game_id, _row, _seed in games):
            return self.player.play(games)
        seat = AnchoredPolicy(self.trainable, self.scripted_teacher(), anchors)
        return self.player.play_as(seat, self.trainable.take_episode, games)

    def scripted_teacher(self) -> Policy:
        """A fresh scripted `sft_teacher` for the trained agent's seat."""
        return build_opponent(f"scripted:{self.cfg.sft_teacher}", seed=self.cfg.seed, model_path="")

    def teacher_episodes(self, games: Sequence[tuple[str, GameRow, int]]) -> list[Episode]:
        """Games played by the scripted `sft_teacher` in the trained agent's seat, as episodes.

        Each becomes the token sequence a rollout of the model would be (`episode_from_chat`:
        mask 1 on the teacher's answers, log-probs 0: the teacher samples from no model). One
        whose opponent gave up, or where the teacher never answered, is returned dropped.
        """
        if not games:
            return []
        teacher = TranscriptRecorder(self.scripted_teacher())

        def tokens_of(game_id: str) -> EpisodeTokens | None:
            chat = teacher.take_chat(game_id)
            if not any(msg["role"] == "assistant" for msg in chat):
                return None
            return episode_from_chat(self.renderer, game_id, chat)

        return self.player.play_as(teacher, tokens_of, games, teacher=True)

    def episode_totals(self, episodes: Sequence[Episode]) -> list[float | None]:
        """Each episode's total reward (None for a dropped one), as the reward function scores it."""
        return [None if ep.dropped else self.composer(ep.record)[0] for ep in episodes]

    def replace_flat_groups(self, episodes: list[Episode], tag: str) -> dict[str, float]:
        """Dynamic sampling: replace, in place, each group whose rewards are all equal.

        Up to `resample_flat_groups` rounds; each round draws one training row per flat group
        (seeded by the rollout's tag, so a resumed run redraws the same) and plays a fresh group
        on it in the flat group's place. Returns the rollout metrics: the flat share as drawn and
        the number of groups replaced.
        """
        cfg = self.cfg
        group = cfg.num_generations
        if cfg.resample_flat_groups == 0 or len(episodes) < group:
            return {}
        drawn_flat = flat_groups(self.episode_totals(episodes), group)
        flat = drawn_flat
        replaced = 0
        for attempt in range(cfg.resample_flat_groups):
            if not flat:
                break
            rows = [
                self.rows[derive_seed(cfg.seed, "resample", tag, attempt, k) % len(self.rows)]
                for k in range(len(flat))
            ]
            fresh = self.play_groups(
                group_games(
                    [row.encode() for row in rows for _ in range(group)],
                    tag=f"{tag}-x{attempt}",
                    base_seed=cfg.seed,
                    shared_seed=cfg.shared_seed_in_group,
                )
            )
            for k, start in enumerate(flat):
                episodes[start : start + group] = fresh[k * group : (k + 1) * group]
            replaced += len(flat)
            flat = flat_groups(self.episode_totals(episodes), group)
        return {
            "rollout/zero_variance_groups_drawn": len(drawn_flat) / (len(episodes) // group),
            "rollout/resampled_groups": float(replaced),
        }

    # -- reward --------------------------------------------------------------------------------
    def make_reward_func(self) -> Callable[..., list[float | None]]:
        cfg = self.cfg

        def episode_reward(
            prompts: list[Any], completions: list[Any], completion_ids: list[Any], **kwargs: Any
        ) -> list[float | None]:
            records = kwargs.get("episode")
            dropped = kwargs.get("dropped")
            if records is None or dropped is None:
                raise RuntimeError(
                    "reward function got no 'episode'/'dropped' rows from the rollout"
                )
            log_metric = kwargs.get("log_metric")
            # The components logged are the model's own episodes'; the teacher's, and those the
            # teacher opened, are logged apart (either would flatter the model's).
            taught = kwargs.get("teacher") or [False] * len(records)
            opened = kwargs.get("anchored") or [False] * len(records)
            totals: list[float | None] = []
            parts: dict[str, list[float]] = {}
            accept: list[float] = []
            for record, why_dropped, teacher, anchored in zip(
                records, dropped, taught, opened, strict=True
            ):
                if why_dropped:
                    totals.append(None)
                    accept.append(0.0)
                    continue
                total, components = self.composer(record)  # raises on NaN/inf, naming the part
                totals.append(total)
                apart = "teacher/" if teacher else "anchored/" if anchored else ""
                for name, value in components.items():
                    parts.setdefault(f"{apart}{name}", []).append(value)
                accepted = components.get(cfg.accept_component)
                if accepted is None:
                    accepted = self.composer.components(record).get(cfg.accept_component, 0.0)
                accept.append(1.0 if accepted == 1.0 else 0.0)
            self.last_rewards = totals
            if cfg.method == "rejection_sft" and self.trainer is not None:
                self.trainer.acceptance = accept
            if log_metric is not None:
                for name, values in parts.items():
                    key = (
                        name
                        if name.startswith(("outcome/", "teacher/", "anchored/"))
                        else f"components/{name}"
                    )
                    log_metric(key, sum(values) / len(values))
                log_metric(
                    "rollout/zero_variance_groups",
                    zero_variance_groups(totals, cfg.num_generations),
                )
                if cfg.method == "rejection_sft":
                    log_metric("rejection_sft/accepted", sum(accept) / max(1, len(accept)))
            return totals

        episode_reward.__name__ = "episode_reward"
        return episode_reward


def flat_groups(totals: Sequence[float | None], group: int) -> list[int]:
    """Start indices of the complete groups whose kept rewards are all equal (they teach
    nothing: every advantage is zero), fewer than two kept rewards included."""
    flat = []
    for start in range(0, len(totals) - group + 1, group):
        kept = [x for x in totals[start : start + group] if x is not None]
        if len(kept) < 2 or max(kept) - min(kept) < 1e-12:
            flat.append(start)
    return flat


def zero_variance_groups(totals: Sequence[float | None], group: int) -> float:
    """Fraction of complete groups whose kept rewards are all equal (they teach nothing)."""
    complete = len(totals) // group
    return len(flat_groups(totals, group)) / complete if complete else math.nan


# ------------------------------------------------------------------------------ evaluation
def evaluate(
    session: TrainingSession,
    model: Any,
    *,
    rows: Sequence[GameRow] | None = None,
    temperature: float | None = None,
    tag: str = "eval",
) -> dict[str, Any]:
    """Play validation games with `model` as the trained agent; per-route table of reward means.

    The games play like rollouts (same runner, router and opponents); the result is
    `training.eval.validation.validation_table`'s (with each game's `sampled_tokens` as a
    metric beside the reward components).
    """
    cfg = session.cfg
    rows = list(rows if rows is not None else eval_rows(cfg))
    temp = cfg.eval_temperature if temperature is None else temperature
    generate = session.make_generate(model, temp)
    policy = TrainablePolicy(
        session.renderer,
        generate,
        episode_budget=cfg.max_completion_length,
        max_turn_tokens=cfg.max_turn_tokens,
        fallback=cfg.fallback_text,
        name="evaluated",
    )
    player = EpisodePlayer(
        cfg.env_id,
        cfg.trained_agent,
        policy,
        session.opponents,
        env_config=cfg.env_config,
        concurrency=cfg.concurrency,
    )
    games = [(f"{tag}-r{r.row}", r, r.seed) for r in rows]
    was_training = getattr(model, "training", False)
    model.eval()
    try:
        episodes = player.play(games)
    finally:
        generate.invalidate()  # training changes the weights next
        if was_training:
            model.train()
    scored = []
    for ep in episodes:
        if ep.dropped:
            scored.append(ScoredGame(ep.row.route, None))
            continue
        total, components = session.composer(ep.record)
        metrics = {**components, "sampled_tokens": float(ep.tokens.sampled_tokens)}
        reason = ep.record.get("truncation_reason")  # counted in the logged validation table
        scored.append(ScoredGame(ep.row.route, total, metrics, truncation_reason=reason))
    return validation_table(scored)


# ------------------------------------------------------------------------------ SFT warm start
class TranscriptRecorder(BasePolicy):
    """Wraps a policy and keeps, per game, the chat it saw and answered (side questions skipped)."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "teacher")
        self.chats: dict[str, list[dict[str, str]]] = {}

    def reset(self, game_id: str) -> None:
        self.chats[game_id] = []
        self.inner.reset(game_id)

    def forget(self, game_id: str) -> None:
        self.chats.pop(game_id, None)
        forget_game(self.inner, game_id)

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        answers = self.inner.act_batch(turns)
        for turn, answer in zip(turns, answers, strict=True):
            if turn.is_side_question:
                continue
            chat = self.chats.setdefault(turn.game_id, [])
            if not chat and turn.observation.get("system"):
                chat.append({"role": "system", "content": str(turn.observation["system"])})
            chat.append({"role": "user", "content": str(turn.observation.get("message", ""))})
            chat.append({"role": "assistant", "content": answer})
        return answers

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def take_chat(self, game_id: str) -> list[dict[str, str]]:
        """The game's chat ([system], user, assistant, ...); keeps nothing of it."""
        return self.chats.pop(game_id, [])


def sft_on_sequences(
    cfg: TrainConfig, model: Any, tokenizer: Any, sequences: list[EpisodeTokens], out_dir: Path
) -> tuple[Any, dict[str, Any]]:
    """The warm start's SFT stage on spliced `sequences`, as `cfg` sets it (`sft_steps`,
    `sft_learning_rate`, `sft_batch_size` sequences a step, LoRA, `bf16`); returns the merged
    model and TRL's train metrics. `sft_warmstart` feeds it the teacher's games;
    `bench.bench_precision` times it."""
    from tomgym.training.rl.trl_adapter import resolve_bf16, run_sft

    return run_sft(
        model,
        tokenizer,
        sequences,
        output_dir=str(out_dir),
        steps=cfg.sft_steps,
        learning_rate=cfg.sft_learning_rate,
        batch_size=cfg.sft_batch_size,
        seed=cfg.seed,
        peft_config=lora_config(cfg),
        bf16=resolve_bf16(cfg, cuda=_cuda()),
        use_cpu=not _cuda(),
    )


def sft_warmstart(
    session: TrainingSession, model: Any, out_dir: Path
) -> tuple[Any, dict[str, Any]]:
    """Imitate `sft_teacher`'s games (TRL SFTTrainer + LoRA, merged); returns model, report.

    Each teacher game becomes one sequence spliced as a GRPO rollout is (`episode_from_chat`):
    the loss covers every defender turn of the game at once, and the dialogue is encoded once
    per game rather than once per turn.
    """
    cfg = session.cfg
    chosen = [
        session.rows[derive_seed(cfg.seed, "sft", i) % len(session.rows)]
        for i in range(cfg.sft_games)
    ]
    games = [(f"sft-{i}", r, derive_seed(cfg.seed, "sft-seed", i)) for i, r in enumerate(chosen)]
    played = session.teacher_episodes(games)
    sequences = [ep.tokens for ep in played if not ep.dropped]  # one per game, in game order
    if not sequences:
        raise RuntimeError(f"the SFT teacher {cfg.sft_teacher!r} produced no transcripts")
    records = [ep.record for ep in played]
    started = time.perf_counter()
    model, metrics = sft_on_sequences(cfg, model, session.tokenizer, sequences, out_dir / "sft")
    seconds = time.perf_counter() - started
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[str(r["outcome"])] = outcomes.get(str(r["outcome"]), 0) + 1
    tokens = [len(ep.prompt_ids) + len(ep.completion_ids) for ep in sequences]
    report = {
        "teacher": cfg.sft_teacher,
        "games": len(games),
        "examples": len(sequences),  # one sequence per teacher game
        "defender_turns": sum(ep.turns for ep in sequences),
        "tokens_per_sequence": sum(tokens) / len(tokens),
        "loss_tokens_per_sequence": sum(ep.sampled_tokens for ep in sequences) / len(sequences),
        "teacher_outcomes": outcomes,
        "seconds": seconds,
        "seconds_per_step": seconds / cfg.sft_steps,
        **{f"train/{k}": v for k, v in metrics.items()},
    }
    return model, report


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# ------------------------------------------------------------------------------ training
def build_trainer(session: TrainingSession, model: Any | None = None) -> Any:
    """The `DrGRPOTrainer` for a session (model loaded from the config unless given)."""
    from datasets import Dataset
    from tomgym.training.rl.trl_adapter import DrGRPOTrainer, build_grpo_config, make_rollout_func

    cfg = session.cfg
    out_dir = Path(cfg.output_dir)
    dataset = Dataset.from_list([{"prompt": r.encode()} for r in session.rows])
    cuda = _cuda()
    args = build_grpo_config(cfg, output_dir=str(out_dir), cuda=cuda)
    trainer = DrGRPOTrainer(
        model=model if model is not None else load_model(cfg, session.model_path),
        reward_funcs=[session.make_reward_func()],
        args=args,
        train_dataset=dataset,
        processing_class=session.tokenizer,
        peft_config=lora_config(cfg),
        rollout_func=make_rollout_func(session.run_rollout),
        method=cfg.method,
        per_episode_forward=cfg.loss_forward == "per_episode"
        or (cfg.loss_forward == "auto" and not cuda),
    )
    session.trainer = trainer
    trainer.add_callback(EvalCallback(session))
    return trainer


class EvalCallback:
    """Validation evaluation every `eval_steps` (and at the end); keeps the best checkpoint."""

    def __new__(cls, session: TrainingSession) -> Any:
        from transformers import TrainerCallback

        class _Callback(TrainerCallback):
            def __init__(self) -> None:
                self.session = session
                self.history: list[dict[str, Any]] = []
                self.best: dict[str, Any] | None = None

            def run(self, step: int) -> None:
                from tomgym.training.rl.trl_adapter import generation_model

                trainer = self.session.trainer
                cfg = self.session.cfg
                with generation_model(trainer) as model:
                    result = evaluate(self.session, model, tag=f"eval-s{step}")
                entry = {"step": step, "table": result["table"], "mean": result["mean"]}
                self.history.append(entry)
                out = Path(cfg.output_dir)
                if trainer.is_world_process_zero():
                    out.mkdir(parents=True, exist_ok=True)
                    with open(out / "eval.jsonl", "a") as fh:
                        fh.write(json.dumps(entry) + "\n")
                    logger.info("validation at step %d:\n%s", step, format_table(result))
                trainer.log({f"eval/{k}": v for k, v in result["mean"].items()})
                metric = result["mean"].get(cfg.best_metric)
                if metric is None:
                    raise ConfigError(
                        f"best_metric {cfg.best_metric!r} is not an evaluation metric; have "
                        f"{sorted(result['mean'])}"
                    )
                if self.best is None or metric > self.best["value"]:
                    self.best = {"step": step, "metric": cfg.best_metric, "value": metric}
                    trainer.save_model(str(out / "best"))
                    if trainer.is_world_process_zero():
                        (out / "best" / "best.json").write_text(json.dumps(self.best, indent=2))

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                every = self.session.cfg.eval_steps
                if every and state.global_step % every == 0 and state.global_step < state.max_steps:
                    self.run(state.global_step)

            def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if self.session.cfg.eval_games_per_variant > 0:
                    self.run(state.global_step)

        return _Callback()


def check_run_folder(
    cfg: TrainConfig, *, resume: bool, fields: frozenset[str] | None = None
) -> None:
    """Refuse a fresh run over an existing one, and a resume whose config differs (one line).

    `fields` limits the comparison to those config fields (a warm-start-only run compares
    `WARMSTART_FIELDS`). Reads only; nothing is written before this passes.
    """
    out_dir = Path(cfg.output_dir)
    saved = out_dir / CONFIG_FILE
    if not resume:
        if saved.exists():
            raise ConfigError(
                f"{out_dir} already holds a training run; pass --resume to continue it or "
                "choose another output_dir"
            )
        return
    if not saved.is_file():
        raise ConfigError(f"cannot resume: {out_dir} holds no training run (no {CONFIG_FILE})")
    try:
        recorded = json.loads(saved.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot resume: {saved} is unreadable ({exc})") from None
    if not isinstance(recorded, dict):
        raise ConfigError(f"cannot resume: {saved} does not hold a config mapping")
    # Fields added since the run was written count as their defaults.
    old = {**TrainConfig().to_dict(), **recorded}
    new = cfg.to_dict()
    if fields is not None:
        old = {k: v for k, v in old.items() if k in fields}
        new = {k: v for k, v in new.items() if k in fields}
    diff = config_diff(old, new, ignore=RESUME_MAY_CHANGE)
    if diff:
        raise ConfigError(f"cannot resume {out_dir}: the config differs from the run's: {diff}")


def _write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (a crash leaves the old file or the new one, never half of one)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)


def finished_warmstart(out_dir: Path) -> dict[str, Any] | None:
    """The report of the SFT warm start finished in `out_dir`, None when none finished there;
    `ConfigError` (one line) when its marker is there without its weights or is unreadable."""
    marker, weights = out_dir / SFT_REPORT_FILE, out_dir / SFT_MODEL_DIR
    if not marker.is_file():
        return None
    if not (weights / "config.json").is_file():
        raise ConfigError(
            f"cannot resume: {out_dir} finished its SFT warm start but holds no weights in "
            f"{weights} (written by an older version?); start a new run"
        )
    try:
        return json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot resume: {marker} is unreadable ({exc})") from None


def warm_started_model(
    session: TrainingSession, out_dir: Path, *, resume: bool
) -> tuple[Any, dict[str, Any]]:
    """The SFT warm-start stage: restored from `out_dir` when resuming a run that finished it,
    else run, with its merged weights saved before its marker (see the module doc)."""
    cfg = session.cfg
    marker, weights = out_dir / SFT_REPORT_FILE, out_dir / SFT_MODEL_DIR
    done = finished_warmstart(out_dir) if resume else None
    if done is not None:
        logger.info("resume: SFT warm start restored from %s", weights)
        return load_model(cfg, str(weights)), done
    model, report = sft_warmstart(session, load_model(cfg, session.model_path), out_dir)
    if is_main_process():
        model.save_pretrained(str(weights))
        # With the tokenizer beside it the folder is a policy spec: `hf:<output_dir>/sft/model`.
        session.tokenizer.save_pretrained(str(weights))
        _write_json(marker, report)
    return model, report


def is_main_process() -> bool:
    """True outside a distributed launch and on its global rank 0 (read before any process group
    exists, from the variables torchrun / accelerate set)."""
    return os.environ.get("RANK", "0") == "0"


def end_distributed() -> None:
    """Close this process's default process group, if it has one: a launched rank's last step.

    A rank that exits with its group still open tears the group's threads down during
    interpreter exit, which can abort the process after the work is done ("terminate called
    without an active exception", seen once on a rank of the 2-process CPU rehearsal,
    tests/multirank). `tomgym train` calls this after `train` returns; code that runs `train` and
    then more distributed work calls it at its own end. The barrier keeps a rank from closing
    the group while another still writes its last files.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def train(
    cfg: TrainConfig, *, resume: bool = False, warmstart_only: bool = False
) -> dict[str, Any]:
    """Run (or resume) one training job; returns a summary (also in output_dir/summary.json).

    `warmstart_only` runs the SFT warm-start stage alone (or finds it finished when resuming)
    and stops before Dr. GRPO: `output_dir/sft/model` is then a cached starting point that
    later runs load as `model=<output_dir>/sft/model sft_warmstart=false`.

    Raises `ConfigError` (one line) for a run folder that does not fit (see the module doc).
    """
    from transformers import set_seed

    if warmstart_only and not cfg.sft_warmstart:
        raise ConfigError("warm-start only: the config has sft_warmstart: false")

    out_dir = Path(cfg.output_dir)
    # In a distributed launch every rank runs this function; the main process alone checks and
    # writes the folder (a refusal there ends the launch: torchrun stops the other ranks).
    main_process = is_main_process()
    folder_lock = RunFolder(out_dir)
    if main_process:
        check_run_folder(cfg, resume=resume, fields=WARMSTART_FIELDS if warmstart_only else None)
        # One writer per folder: a second train (or --resume) is refused while this one runs.
        folder_lock.acquire()
        out_dir.mkdir(parents=True, exist_ok=True)
        _write_json(out_dir / CONFIG_FILE, cfg.to_dict())
    session = TrainingSession(cfg)
    summary: dict[str, Any] = {"config": cfg.to_dict()}
    if cfg.sft_warmstart:
        model, summary["sft_warmstart"] = warm_started_model(session, out_dir, resume=resume)
        if warmstart_only:
            summary["sft_model"] = str(out_dir / SFT_MODEL_DIR)
            folder_lock.close()
            return summary
    else:
        model = load_model(cfg, session.model_path)
    # The GRPO stage starts from the same RNG state whether the warm start ran in this process,
    # in an interrupted one, or not at all (the new LoRA adapter's init draws from it).
    set_seed(cfg.seed)
    trainer = build_trainer(session, model)
    started = time.perf_counter()
    checkpoint = resume and any(out_dir.glob("checkpoint-*"))
    result = trainer.train(resume_from_checkpoint=True if checkpoint else None)
    summary["grpo"] = {**result.metrics, "seconds": time.perf_counter() - started}
    trainer.save_model(str(out_dir / "final"))
    callback = next(c for c in trainer.callback_handler.callbacks if hasattr(c, "history"))
    summary["eval"] = callback.history
    summary["best"] = callback.best
    # Per-step train metrics (reward, its spread, zero-variance groups, rollout vs optimisation
    # seconds), for benchmarks and plots without parsing logs.
    summary["log_history"] = list(trainer.state.log_history)
    if trainer.is_world_process_zero():
        _write_json(out_dir / "summary.json", summary)
    folder_lock.close()
    return summary
