"""`generation_backend: vllm` through the real trainer, on a stand-in engine (no vLLM on CPU).

The stand-in replaces what TRL 1.16 does around a custom `rollout_func` when `use_vllm` is on:
it builds `trainer.vllm_generation.llm` and, whenever the global step moved, pushes the policy's
weights into it (`sync_weights`) and records the step in `_last_loaded_step`. The tests check
that every wave of a multi-turn rollout goes to the engine as token ids with its own seeds, that
each step samples with the weights of that step, and that a step whose push did not happen is
refused instead of training on stale samples.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.training.rl.test_trainer import make_config
from tests.training.rl.test_vllm_generation import FakeSamplingParams, StandInLLM

pytestmark = pytest.mark.slow


def _vllm_trainer(tmp_path: Path, tiny_model_dir: Path, *, sync: bool | list[bool]):
    from tomgym.training.rl import vllm_generation
    from tomgym.training.rl.trainer import TrainingSession, build_trainer

    cfg = make_config(tmp_path, tiny_model_dir, max_steps=2)
    session = TrainingSession(cfg)
    trainer = build_trainer(session)  # built on the transformers path: TRL would need vLLM
    session.cfg.generation_backend = "vllm"
    llm = StandInLLM()
    trainer.vllm_generation = SimpleNamespace(llm=llm)
    trainer._last_loaded_step = -1
    pushes = iter(sync if isinstance(sync, list) else [sync] * 10)
    rollout = trainer.rollout_func

    def rollout_with_sync(prompts: list[Any], tr: Any) -> dict:
        step = tr.state.global_step
        if step != tr._last_loaded_step and next(pushes):  # what GRPOTrainer does before us
            llm.load_weights(step)
            tr._last_loaded_step = step
        return rollout(prompts, tr)

    trainer.rollout_func = rollout_with_sync
    original = vllm_generation.ColocatedEngine.__init__

    def engine_init(self: Any, llm_arg: Any, sampling_params_cls: Any = None) -> None:
        original(self, llm_arg, FakeSamplingParams)

    return trainer, llm, engine_init


def test_vllm_rollouts_use_the_engine_with_each_steps_weights(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tomgym.training.rl import vllm_generation

    trainer, llm, engine_init = _vllm_trainer(tmp_path, tiny_model_dir, sync=True)
    monkeypatch.setattr(vllm_generation.ColocatedEngine, "__init__", engine_init)
    trainer.train()
    assert llm.calls, "the rollouts never reached the engine"
    versions = [call["version"] for call in llm.calls]
    assert sorted(set(versions)) == [0, 1], "each step samples with that step's weights"
    assert versions == sorted(versions)
    for call in llm.calls:
        assert all(set(p) == {"prompt_token_ids"} for p in call["prompts"])
        seeds = [p.seed for p in call["params"]]
        assert len(set(seeds)) == len(seeds)
    first_wave = llm.calls[0]
    assert len(first_wave["prompts"]) == 4, "one engine call carries the whole wave"
    logs = [h for h in trainer.state.log_history if "rollout/generate_calls" in h]
    assert len(logs) == 2


def test_a_step_without_a_weight_push_is_refused(
    tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tomgym.training.rl import vllm_generation
    from tomgym.training.rl.vllm_generation import StaleWeightsError

    trainer, llm, engine_init = _vllm_trainer(tmp_path, tiny_model_dir, sync=[True, False])
    monkeypatch.setattr(vllm_generation.ColocatedEngine, "__init__", engine_init)
    with pytest.raises(Exception, match="StaleWeightsError") as caught:
        trainer.train()
    assert isinstance(caught.value.__cause__, StaleWeightsError)
    assert {call["version"] for call in llm.calls} == {0}, "no wave sampled stale weights"
