"""Serve tomgym through an OpenEnv-style interface (`reset() / step(action) / state`).

OpenEnv environments are typed: an `Action` dataclass goes in, an `Observation` dataclass
(carrying `done`, `reward` and `metadata`) comes out of `reset()` and `step(action)`, and `state`
reports the episode id and step count; a client loops `result = env.step(Action(...))` until
`result.done`. `TomgymTextEnvironment` below has that shape over any `envs.wrappers.text`
text env (TOM-SB defender, or any Decrypto role with the other roles played by policies), without
importing OpenEnv, so the same class can be wrapped by an OpenEnv server (subclass its
`Environment` and keep these three members).

The client here is a scripted stand-in for an LLM (the TOM-SB `tom_heuristic` defender, or the
Decrypto embedding baseline as interceptor) that reads the observation's `metadata`.

    python examples/openenv_style.py --task tomsb --episodes 3
    python examples/openenv_style.py --task decrypto --episodes 3
"""

from __future__ import annotations

import argparse
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tomgym.agents.base import Turn
from tomgym.envs.wrappers.text import DecryptoTextEnv, TextEnv, TomSBDefenderTextEnv


@dataclass
class TextAction:
    text: str


@dataclass
class TextObservation:
    """What the agent sees: the chat so far, the newest env message, and the step outcome."""

    messages: list[dict[str, str]]
    text: str
    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeState:
    episode_id: str = ""
    step_count: int = 0
    task: str = ""


class TomgymTextEnvironment:
    """OpenEnv-style environment over a tomgym `TextEnv` (see the module docstring)."""

    def __init__(self, env: TextEnv) -> None:
        self.env = env
        self._state = EpisodeState(task=env.task)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        messages = self.env.reset(seed=seed, options=options)
        self._state = EpisodeState(episode_id=str(uuid.uuid4()), task=self.env.task)
        return TextObservation(
            messages=messages,
            text=messages[-1]["content"],
            metadata={"observation": self.env.observation, "role": self.env.role},
        )

    def step(self, action: TextAction) -> TextObservation:
        text, reward, done, info = self.env.step(action.text)
        self._state.step_count += 1
        return TextObservation(
            messages=[dict(m) for m in self.env.messages],
            text=text,
            done=done,
            reward=reward,
            metadata={"observation": self.env.observation, "role": self.env.role, "info": info},
        )

    @property
    def state(self) -> EpisodeState:
        return self._state

    def close(self) -> None:
        self.env.close()


def make_environment(task: str) -> tuple[TomgymTextEnvironment, Any]:
    """The environment and a scripted client policy for `task` ("tomsb" or "decrypto")."""
    if task == "tomsb":
        from tomgym.agents.tomsb_policies import make_scripted_tomsb_policy

        env: TextEnv = TomSBDefenderTextEnv(attacker="base", split="validation")
        return TomgymTextEnvironment(env), make_scripted_tomsb_policy("tom_heuristic", seed=0)
    from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy

    team = EmbeddingDecryptoPolicy(seed=0)
    env = DecryptoTextEnv("interceptor_0", {"encoder_0": team, "decoder_0": team})
    return TomgymTextEnvironment(env), EmbeddingDecryptoPolicy(seed=1)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=["tomsb", "decrypto"], default="tomsb")
    parser.add_argument("--episodes", type=int, default=3)
    args = parser.parse_args(argv)

    environment, client = make_environment(args.task)
    episodes = []
    for seed in range(args.episodes):
        observation = environment.reset(seed=seed)
        game_id = environment.state.episode_id
        client.reset(game_id)
        total = 0.0
        while not observation.done:
            meta = observation.metadata
            answer = client.act_batch([Turn(game_id, meta["role"], meta["observation"])])[0]
            observation = environment.step(TextAction(answer))
            total += observation.reward or 0.0
        episodes.append(
            {
                "seed": seed,
                "steps": environment.state.step_count,
                "reward": total,
                "outcome": observation.metadata["info"].get(
                    "outcome", observation.metadata["info"].get("ending")
                ),
            }
        )
        print(json.dumps(episodes[-1]))
    environment.close()
    mean = sum(e["reward"] for e in episodes) / len(episodes)
    print(f"mean reward over {len(episodes)} episodes: {mean:.3f}")
    return {"episodes": episodes, "mean_reward": mean}


if __name__ == "__main__":
    main()
