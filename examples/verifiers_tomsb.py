"""TOM-SB through verifiers' own runtime: the defender seat is a model on any OpenAI-compatible
endpoint, the attacker is tomgym's scripted base attacker (a policy seat).

The environment is found by its verifiers id (`tomgym-tomsb` -> the `tomgym_tomsb` plugin package
installed with tomgym), and each episode is `Env.run_episode` -> `Env.run(task, agents)`; the
defender's trace carries the `tomgym` reward (ADA-Fooling: fooling, format-gated, from
`tomgym.rewards`) and the full tomgym episode record. Serve the bundled SmolLM2 with llama.cpp
(`make test-integration` builds `.venv-llamacpp`):

    .venv-llamacpp/bin/python -m llama_cpp.server --port 8080 --n_ctx 4096 \
        --model "$(.venv/bin/python -c 'from tomgym.agents.default_model import gguf_path; print(gguf_path())')"
    python examples/verifiers_tomsb.py --base-url http://127.0.0.1:8080/v1 --model smollm2 --episodes 3

Any seat can change sides: `--policy defender=scripted:tom_heuristic --model-seat attacker`
plays a model attacker against the scripted ToM-heuristic defender.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import verifiers.v1 as vf
from verifiers.v1.utils.loaders import load_environment, resolve_env_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint (.../v1)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--api-key-var", default="OPENAI_API_KEY", help="env var with the key")
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--max-attacker-turns", type=int, default=4)
    parser.add_argument("--model-seat", default="defender", choices=["attacker", "defender"])
    parser.add_argument(
        "--policy", action="append", default=None, help="SEAT=SPEC for a tomgym policy seat"
    )
    args = parser.parse_args()

    client = {"type": "eval", "base_url": args.base_url, "api_key_var": args.api_key_var}
    policies = dict(item.split("=", 1) for item in args.policy) if args.policy else None
    config = {
        "taskset": {
            "id": "tomgym-tomsb",
            "split": args.split,
            "max_attacker_turns": args.max_attacker_turns,
        },
        args.model_seat: {"model": args.model, "client": client, "sampling": {"max_tokens": 256}},
    }
    if policies is not None:
        config["policies"] = policies
    env = load_environment(resolve_env_config(config))
    tasks = list(env.taskset.take(args.episodes))

    async def run() -> list[vf.Episode]:
        ctx = vf.ModelContext(model=args.model, client=vf.EvalClientConfig(**client))
        async with env.serving():
            return [await env.run_episode(task, ctx) for task in tasks]

    for task, episode in zip(tasks, asyncio.run(run()), strict=True):
        for trace in episode.traces:
            record = trace.info.get("tomgym_record", {})
            print(
                json.dumps(
                    {
                        "scenario": task.data.id,
                        "seat": trace.agent.name,
                        "outcome": record.get("outcome"),
                        "reward": trace.rewards["tomgym"].score
                        if "tomgym" in trace.rewards
                        else None,
                        "model_turns": trace.num_turns,
                        "errors": [e.message for e in episode.errors],
                    }
                )
            )


if __name__ == "__main__":
    main()
