"""`TextEnv`: one learner's conversation with an env, for LLM-RL loops.

`reset(seed, options) -> messages` (chat list: the role's system prompt and first user turn) and
`step(text) -> (observation_text, reward, done, info)`, with `messages` always holding the
conversation the model should see next: assistant answers and env replies appended, re-asks
kept (the model should see its error), and every theory-of-mind side question removed once it is
answered (the tomgym convention: side Q/A never stays in the history). Drive it from a
verifiers-style `env_response(messages, state)` or an OpenEnv-style `reset()/step(action)` loop
(see `examples/verifiers_style.py`, `examples/openenv_style.py` and `docs/interop.md`).
- `TomSBDefenderTextEnv(attacker="base", **config)`: the TOM-SB defender against a scripted
  attacker variant or an attacker policy (`envs.tomsb.single_agent.TomSBDefenderEnv`); reward
  1.0 if the defender fooled the attacker, else 0.0, at the end.
- `DecryptoTextEnv(role, policies, **config)`: any Decrypto agent (`encoder_0`, `decoder_0`,
  `interceptor_0`) in the text env, the others answered by `policies`; reward +1/-1 at the end.
`info` is the underlying env's info for the learner (`last_parse`, `retries`, `fallbacks`, and the
end-of-game fields once `done`), plus `side_question` and `retry` of the answered question.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tomgym.envs.decrypto.env import raw_env as decrypto_raw_env
from tomgym.envs.decrypto.match import AGENTS as DECRYPTO_AGENTS
from tomgym.envs.wrappers.players import PolicyTable, check_policies, episode_game_id

Message = dict[str, str]


class TextEnv:
    """A single learner's conversation with an environment (contract in the module docstring).

    Subclasses implement `_reset_inner(seed, options) -> (observation, info)` and
    `_step_inner(text) -> (observation, reward, done, info)` over the learner's observation
    dicts (the tomgym fields `system`, `message`, `prompt`, `side_question`, `retry`).
    """

    role: str = ""
    task: str = ""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.observation: dict[str, Any] = {}
        self.done = True
        self._side_start: int | None = None

    # -- subclass hooks
    def _reset_inner(
        self, seed: int | None, options: Mapping[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        raise NotImplementedError

    def _step_inner(self, text: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        raise NotImplementedError

    # -- public API
    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> list[Message]:
        """Start an episode; returns the first chat messages (system, then user)."""
        observation, _ = self._reset_inner(seed, options)
        self.observation = dict(observation)
        self.done = False
        self.messages = [
            {"role": "system", "content": str(observation["system"])},
            {"role": "user", "content": str(observation["message"])},
        ]
        self._side_start = 1 if _is_side(observation) else None
        return [dict(m) for m in self.messages]

    def step(self, text: str) -> tuple[str, float, bool, dict[str, Any]]:
        """Answer the pending question with `text`; returns the env's next user message."""
        if self.done:
            raise RuntimeError("the episode is over; call reset()")
        if not isinstance(text, str):
            raise TypeError(f"answers are text, got {type(text).__name__}")
        answered = self.observation
        self.messages.append({"role": "assistant", "content": text})
        observation, reward, done, info = self._step_inner(text)
        info = {
            **info,
            "side_question": _is_side(answered),
            "retry": int(answered.get("retry", 0) or 0),
        }
        self.observation = dict(observation)
        self.done = bool(done)
        reask = not done and int(observation.get("retry", 0) or 0) > 0
        if not reask and self._side_start is not None:
            # The side question is settled: its question, answers and re-asks leave the history.
            del self.messages[self._side_start :]
            self._side_start = None
        reply = "" if done else str(observation["message"])
        if not done:
            if not reask and _is_side(observation):
                self._side_start = len(self.messages)
            self.messages.append({"role": "user", "content": reply})
        return reply, float(reward), self.done, info

    @property
    def prompt(self) -> str:
        """The pending question as one standalone prompt (for stateless policies)."""
        return str(self.observation.get("prompt", ""))

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


def _is_side(observation: Mapping[str, Any]) -> bool:
    return bool(int(observation.get("side_question", 0) or 0))


class TomSBDefenderTextEnv(TextEnv):
    """The TOM-SB defender as a conversation (attacker: variant name or policy; see module doc)."""

    role = "defender_0"
    task = "tomsb-defender"

    def __init__(self, attacker: str | Any = "base", **config: Any) -> None:
        super().__init__()
        from tomgym.envs.tomsb.single_agent import TomSBDefenderEnv

        self.env = TomSBDefenderEnv(attacker=attacker, **config)

    def _reset_inner(
        self, seed: int | None, options: Mapping[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.env.reset(seed=seed, options=dict(options) if options else None)

    def _step_inner(self, text: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(text)
        return observation, reward, terminated or truncated, info

    def summary(self) -> dict[str, Any]:
        """End-of-episode fields of the TOM-SB env (outcome, stepwise ToM data, ...)."""
        return self.env.summary()

    def close(self) -> None:
        self.env.close()


class DecryptoTextEnv(TextEnv):
    """One Decrypto agent as a conversation; `policies` play the two other agents."""

    task = "decrypto"

    def __init__(self, role: str, policies: Mapping[str, Any], **config: Any) -> None:
        super().__init__()
        if role not in DECRYPTO_AGENTS:
            raise ValueError(f"role must be one of {DECRYPTO_AGENTS}, got {role!r}")
        self.role = role
        self.task = f"decrypto-{role.split('_')[0]}"
        self._players = PolicyTable(
            check_policies(policies, [a for a in DECRYPTO_AGENTS if a != role])
        )
        self.env = decrypto_raw_env(**config)
        self._episode = 0
        self._reward = 0.0

    def _run_others(self) -> None:
        env = self.env
        while not env.terminations[self.role] and env.agent_selection != self.role:
            agent = env.agent_selection
            env.step(self._players.answer(agent, env.observe(agent)))
            self._reward += float(env.rewards.get(self.role, 0.0))

    def _reset_inner(
        self, seed: int | None, options: Mapping[str, Any] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.env.reset(seed=seed, options=dict(options) if options else None)
        self._episode += 1
        self._players.new_game(episode_game_id("decrypto-text", seed, self._episode))
        self._reward = 0.0
        self._run_others()
        if self.env.terminations[self.role]:
            raise RuntimeError(f"the game ended before {self.role} was asked anything")
        return self.env.observe(self.role), dict(self.env.infos[self.role])

    def _step_inner(self, text: str) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        env = self.env
        self._reward = 0.0
        env.step(text)
        self._reward += float(env.rewards.get(self.role, 0.0))
        self._run_others()
        done = bool(env.terminations[self.role])
        return env.observe(self.role), self._reward, done, dict(env.infos[self.role])

    def close(self) -> None:
        self.env.close()


__all__ = ["DecryptoTextEnv", "Message", "TextEnv", "TomSBDefenderTextEnv"]
