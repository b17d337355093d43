"""One rank of the 2-process CPU rehearsal (started by `accelerate launch`, see test_multirank.py).

Runs `tomgym.training.rl.trainer.train` unchanged and records, per rank, what the rehearsal
checks: the world size, the trained policy's generate calls in every rollout (after the
trainer's padding to the slowest rank, and the rank's own count before it), its episode count, and a digest of the
trainable (LoRA) weights after every optimisation step. Writes `rank<N>.json` into the folder
given as the second argument.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any


def main(config_path: str, report_dir: str) -> None:
    import torch
    from tomgym.training.rl import trainer as trainer_module
    from tomgym.training.rl.train_config import TrainConfig
    from transformers import TrainerCallback

    report: dict[str, Any] = {"rollouts": [], "weights": [], "grad_norms": []}
    run_rollout = trainer_module.TrainingSession.run_rollout

    pad = trainer_module.TrainablePolicy.pad_generate_calls
    native: list[int] = []

    def recorded_pad(self: Any, target: int) -> None:
        native.append(self.generate_calls)  # this rank's own calls, before the padding
        pad(self, target)

    def recorded_rollout(self: Any, prompts: Any, trainer: Any, model_context: Any) -> dict:
        batch = run_rollout(self, prompts, trainer, model_context)
        report["world_size"] = trainer.accelerator.num_processes
        report["rank"] = trainer.accelerator.process_index
        report["distributed_type"] = trainer.accelerator.distributed_type.value
        report["backend"] = torch.distributed.get_backend()
        report["rollouts"].append(
            {
                "step": trainer.state.global_step,
                "generate_calls": self.trainable.generate_calls,
                "own_generate_calls": native[-1],
                "episodes": len(batch["prompt_ids"]),
            }
        )
        return batch

    class WeightDigest(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            digest = hashlib.sha256()
            for name, param in sorted(kw["model"].named_parameters()):
                if param.requires_grad:
                    digest.update(name.encode())
                    digest.update(param.detach().cpu().float().numpy().tobytes())
            report["weights"].append({"step": state.global_step, "digest": digest.hexdigest()})

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "grad_norm" in logs:
                report["grad_norms"].append(float(logs["grad_norm"]))

    build_trainer = trainer_module.build_trainer

    def build_with_digest(session: Any, model: Any = None) -> Any:
        trainer = build_trainer(session, model)
        trainer.add_callback(WeightDigest())
        return trainer

    trainer_module.TrainablePolicy.pad_generate_calls = recorded_pad
    trainer_module.TrainingSession.run_rollout = recorded_rollout
    trainer_module.build_trainer = build_with_digest
    trainer_module.train(TrainConfig.load(config_path))
    trainer_module.end_distributed()  # as `tomgym train` does after `train`
    report["process_group_closed"] = not torch.distributed.is_initialized()
    out = Path(report_dir) / f"rank{report.get('rank', 0)}.json"
    out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
