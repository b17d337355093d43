"""Drive tomgym from a verifiers-style multi-turn loop (dataset rows -> rollouts -> rewards).

verifiers' `MultiTurnEnv` runs each dataset row (`prompt`, `info`, ...) as a rollout: set up a
per-rollout `state`, then repeatedly ask the model for a reply to the prompt messages, let
`env_response(messages, state)` answer it, and stop when `is_completed(messages, state)`; a rubric
scores the finished state. `TomgymMultiTurnEnv` below has exactly that shape over
`envs.wrappers.datasets` rows and `envs.wrappers.text` text envs, without importing verifiers (so it
runs anywhere; subclass `verifiers.MultiTurnEnv` with the same three methods to plug it in).

Two details matter for tomgym and are handled by the text env, not by the loop:
- the prompt messages come from `state["env"].messages`, not from appending replies blindly,
  because theory-of-mind side questions must leave the conversation once answered;
- invalid answers are re-asked by the env (the model sees its error), so the loop never fails.

The "model" here is a stand-in that answers from the env's current observation with a scripted
tomgym policy (the TOM-SB `tom_heuristic` defender, or the Decrypto embedding baseline); replace
`model(messages, state)` with a call to your LLM.

    python examples/verifiers_style.py --task tomsb --rows 4
    python examples/verifiers_style.py --task decrypto --rows 4
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from typing import Any

from tomgym.agents.base import Turn
from tomgym.envs.wrappers.datasets import decrypto_dataset, text_env_for_row, tomsb_dataset

Messages = list[dict[str, str]]
Model = Callable[[Messages, dict[str, Any]], str]


class TomgymMultiTurnEnv:
    """verifiers-style protocol over tomgym text envs (see the module docstring)."""

    def __init__(
        self, dataset: Any, policies: Mapping[str, Any] | None = None, max_turns: int = 200
    ) -> None:
        self.dataset = dataset
        self.policies = dict(policies or {})
        self.max_turns = max_turns

    def setup_state(self, row: Mapping[str, Any]) -> dict[str, Any]:
        env, messages = text_env_for_row(row, policies=self.policies or None)
        return {"env": env, "row": row, "turn": 0, "reward": 0.0, "info": {}, "done": False}

    def get_prompt_messages(self, state: dict[str, Any]) -> Messages:
        return [dict(m) for m in state["env"].messages]

    def env_response(self, messages: Messages, state: dict[str, Any]) -> Messages:
        """The env's reply to the model's last message (an empty list once the game is over)."""
        reply, reward, done, info = state["env"].step(messages[-1]["content"])
        state.update(turn=state["turn"] + 1, done=done, info=info)
        state["reward"] += reward
        return [] if done else [{"role": "user", "content": reply}]

    def is_completed(self, messages: Messages, state: dict[str, Any]) -> bool:
        return state["done"] or state["turn"] >= self.max_turns

    def rollout(self, row: Mapping[str, Any], model: Model) -> dict[str, Any]:
        state = self.setup_state(row)
        messages = self.get_prompt_messages(state)
        while not self.is_completed(messages, state):
            reply = model(self.get_prompt_messages(state), state)
            self.env_response([*messages, {"role": "assistant", "content": reply}], state)
            messages = self.get_prompt_messages(state)
        state["completion"] = messages
        return state


def rubric(state: Mapping[str, Any]) -> float:
    """The episode's env reward (TOM-SB: 1 if the defender fooled the attacker; Decrypto: +-1)."""
    return float(state["reward"])


def observation_model(policy: Any) -> Model:
    """A stand-in for an LLM: a scripted tomgym policy reading the env's current observation."""

    def model(messages: Messages, state: dict[str, Any]) -> str:
        env = state["env"]
        turn = Turn(f"row-{state['row']['info']['seed']}", env.role, env.observation)
        return policy.act_batch([turn])[0]

    return model


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=["tomsb", "decrypto"], default="tomsb")
    parser.add_argument("--rows", type=int, default=4)
    args = parser.parse_args(argv)

    if args.task == "tomsb":
        from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy

        dataset = tomsb_dataset("validation", attackers=("base",), max_scenarios=args.rows)
        env = TomgymMultiTurnEnv(dataset)
        learner = make_scripted_tomsb_policy("tom_heuristic", seed=0)
    else:
        from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy

        team = EmbeddingDecryptoPolicy(seed=0)
        partners = {"encoder_0": team, "interceptor_0": EmbeddingDecryptoPolicy(seed=1)}
        dataset = decrypto_dataset(args.rows, role="decoder_0", policies=partners)
        env = TomgymMultiTurnEnv(dataset, policies=partners)
        learner = team
    results = []
    for row in dataset:
        learner.reset(f"row-{row['info']['seed']}")
        state = env.rollout(row, observation_model(learner))
        results.append(
            {
                "task": row["task"],
                "seed": row["info"]["seed"],
                "turns": state["turn"],
                "reward": rubric(state),
                "messages": len(state["completion"]),
            }
        )
        print(json.dumps(results[-1]))
    mean = sum(r["reward"] for r in results) / len(results)
    print(f"mean reward over {len(results)} rollouts: {mean:.3f}")
    return {"rollouts": results, "mean_reward": mean}


if __name__ == "__main__":
    main()
