"""One learner, the other roles played by given policies: views for external trainers.

Two families, both built on the registered environments (nothing here changes a rule):

## `DecryptoLearnerEnv` -- numeric, for MARL libraries (RLlib, Tianshou, CleanRL-style PPO)
A PettingZoo `ParallelEnv` over `envs.decrypto.numeric.numeric_parallel_env` whose agents are only
the `learners` (any of `decoder_0`, `interceptor_0`); every other role is answered inside `step`
by the `policies` given for it (objects with `act_batch(turns) -> list[str]`, `agents.base.Policy`,
e.g. `EmbeddingDecryptoPolicy`), which see their full text observations.
- Action Space: `Discrete(24)` per learner, an index into `envs.decrypto.game.ALL_CODES`.
- Observation Space: the numeric env's `Dict(features=Box(105), action_mask=Box(24))`, or with
  `flatten=True` the `features` `Box(float32, (105,))` alone (what an MLP policy takes as is).
- Rewards: `reward_mode="outcome"` (default): the env's terminal +1 win / -1 loss.
  `reward_mode="round"`: dense per-round tokens instead: interceptor +1 per interception, decoder
  -1 per miscommunication (same sign as the outcome they cause; nothing at the end).
- Episode End: all learners terminate when the game ends; no truncation. The final infos hold
  `ending`, `team_won`, `interceptions`, `miscommunications` and `rounds`.
- `step` takes an action for every learner asked in the current phase (each guess phase asks
  both guessers; a learner not asked is ignored); observations come back only when a learner
  must act again (or at the end), after the policies played everything in between.

## `TextEnv` -- text, one conversation, for LLM-RL loops
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

from collections.abc import Mapping, Sequence
from typing import Any

from gymnasium import spaces
from pettingzoo import ParallelEnv
from tomgym.agents.base import Turn
from tomgym.envs.decrypto.env import raw_env as decrypto_raw_env
from tomgym.envs.decrypto.match import AGENTS as DECRYPTO_AGENTS
from tomgym.envs.decrypto.numeric import NUMERIC_AGENTS, numeric_parallel_env

REWARD_MODES = ("outcome", "round")
Message = dict[str, str]


def _check_policies(policies: Mapping[str, Any], needed: Sequence[str]) -> dict[str, Any]:
    missing = [a for a in needed if a not in policies]
    if missing:
        raise ValueError(f"no policy given for {missing}; pass policies={{agent: policy}}")
    extra = sorted(set(policies) - set(needed))
    if extra:
        raise ValueError(f"policies given for {extra}, which are learners or not Decrypto agents")
    for agent in needed:
        if not hasattr(policies[agent], "act_batch"):
            raise TypeError(
                f"policy for {agent} must have act_batch(turns) (agents.base.Policy), got "
                f"{type(policies[agent]).__name__}"
            )
    return {a: policies[a] for a in needed}


def _game_id(prefix: str, seed: int | None, episode: int) -> str:
    # Seeded games get an id of the seed alone, so the policies' per-game random streams (and
    # hence the whole game) replay identically; unseeded ones count episodes.
    return f"{prefix}-seed{seed}" if seed is not None else f"{prefix}-episode{episode}"


class _PolicyTable:
    """The scripted/LLM players of one env: per-game reset and forget, batched answers."""

    def __init__(self, policies: Mapping[str, Any]) -> None:
        self.policies = dict(policies)
        self.game_id = ""

    def _distinct(self) -> list[Any]:
        seen: dict[int, Any] = {}
        for policy in self.policies.values():
            seen.setdefault(id(policy), policy)
        return list(seen.values())

    def new_game(self, game_id: str) -> None:
        for policy in self._distinct():
            if self.game_id and hasattr(policy, "forget"):
                policy.forget(self.game_id)  # keeps memory flat over millions of episodes
            if hasattr(policy, "reset"):
                policy.reset(game_id)
        self.game_id = game_id

    def answer(self, agent: str, observation: Mapping[str, Any]) -> str:
        turn = Turn(
            self.game_id,
            agent,
            observation,
            side_question=bool(int(observation.get("side_question", 0) or 0)),
        )
        answers = self.policies[agent].act_batch([turn])
        if len(answers) != 1:
            raise RuntimeError(f"policy for {agent} returned {len(answers)} answers for 1 turn")
        return answers[0]


# ---------------------------------------------------------------------------------------------
# Numeric learners (MARL libraries)
# ---------------------------------------------------------------------------------------------


class DecryptoLearnerEnv(ParallelEnv):
    """Decrypto with only the `learners` exposed (see the module docstring)."""

    metadata = {"name": "decrypto_learner_v0", "render_modes": ["ansi"], "is_parallelizable": True}

    def __init__(
        self,
        learners: Sequence[str] = ("interceptor_0",),
        policies: Mapping[str, Any] | None = None,
        reward_mode: str = "outcome",
        flatten: bool = False,
        render_mode: str | None = None,
        **env_config: Any,
    ) -> None:
        learners = tuple(learners)
        if not learners or any(a not in NUMERIC_AGENTS for a in learners):
            raise ValueError(f"learners must be a non-empty subset of {NUMERIC_AGENTS}")
        if len(set(learners)) != len(learners):
            raise ValueError(f"learners repeat an agent: {list(learners)}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(f"reward_mode must be one of {REWARD_MODES}, got {reward_mode!r}")
        others = [a for a in DECRYPTO_AGENTS if a not in learners]
        self._players = _PolicyTable(_check_policies(policies or {}, others))
        self.env = numeric_parallel_env(render_mode=render_mode, **env_config)
        self.render_mode = render_mode
        self.learners = learners
        self.reward_mode = reward_mode
        self.flatten = bool(flatten)
        self.possible_agents = list(learners)
        self.agents: list[str] = []
        self._episode = 0

    def observation_space(self, agent: str) -> spaces.Space:
        space = self.env.observation_space(agent)
        return space["features"] if self.flatten else space

    def action_space(self, agent: str) -> spaces.Space:
        return self.env.action_space(agent)

    def text_observation(self, agent: str) -> dict[str, Any]:
        """Any agent's full text observation (e.g. to let a text baseline act for a learner)."""
        return self.env.text_observation(agent)

    def _obs(self, agent: str) -> Any:
        observation = self.env.numeric_observation(agent)
        return observation["features"] if self.flatten else observation

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.env.reset(seed=seed, options=options)
        self._episode += 1
        self._players.new_game(_game_id("decrypto-learner", seed, self._episode))
        self.agents = list(self.learners)
        self._advance()
        return {a: self._obs(a) for a in self.agents}, {a: self._info(a) for a in self.agents}

    def _info(self, agent: str) -> dict[str, Any]:
        match = self.env.match
        assert match is not None
        game = match.game
        info: dict[str, Any] = {
            "round": game.round,
            "asked": match.request_for(agent) is not None,
            "last_parse": dict(match.logs[agent].last_parse),
        }
        if game.finished:
            info.update(
                ending=game.ending,
                team_won=bool(game.team_won),
                interceptions=game.interceptions,
                miscommunications=game.miscommunications,
                rounds=len(game.history),
            )
        return info

    def _other_actions(self, acting: Sequence[str]) -> dict[str, str]:
        return {
            a: self._players.answer(a, self.env.text_observation(a))
            for a in acting
            if a not in self.learners
        }

    def _inner_step(self, actions: dict[str, Any]) -> dict[str, float]:
        """One phase of the inner env; returns this phase's reward per learner."""
        history_before = len(self.env.match.game.history)
        _, rewards, *_ = self.env.step(actions)
        game = self.env.match.game
        if self.reward_mode == "outcome":
            return {a: float(rewards.get(a, 0.0)) for a in self.learners}
        gained = dict.fromkeys(self.learners, 0.0)
        for result in game.history[history_before:]:
            if "interceptor_0" in gained:
                gained["interceptor_0"] += float(result.interception)
            if "decoder_0" in gained:
                gained["decoder_0"] -= float(result.miscommunication)
        return gained

    def _advance(self) -> dict[str, float]:
        """Let the policies play until a learner is asked or the game ends."""
        total = dict.fromkeys(self.learners, 0.0)
        while not self.env.match.finished:
            acting = self.env.acting_agents()
            if any(a in self.learners for a in acting):
                break
            for agent, reward in self._inner_step(self._other_actions(acting)).items():
                total[agent] += reward
        return total

    def step(
        self, actions: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool], dict]:
        if not self.agents:
            raise RuntimeError("the episode is over; call reset()")
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions given for agent(s) not learning here: {sorted(unknown)}")
        acting = self.env.acting_agents()
        missing = [a for a in acting if a in self.learners and a not in actions]
        if missing:
            raise ValueError(f"this phase needs actions from {missing}")
        full = {a: actions[a] for a in acting if a in self.learners}
        full.update(self._other_actions(acting))
        rewards = self._inner_step(full)
        for agent, reward in self._advance().items():
            rewards[agent] += reward
        done = self.env.match.finished
        observations = {a: self._obs(a) for a in self.agents}
        infos = {a: self._info(a) for a in self.agents}
        terminations = dict.fromkeys(self.agents, done)
        truncations = dict.fromkeys(self.agents, False)
        rewards = {a: rewards[a] for a in self.agents}
        if done:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        return self.env._render_text() if self.env.match is not None else None

    def close(self) -> None:
        self.env.close()


# ---------------------------------------------------------------------------------------------
# Text, one conversation (LLM-RL loops)
# ---------------------------------------------------------------------------------------------


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
        self._players = _PolicyTable(
            _check_policies(policies, [a for a in DECRYPTO_AGENTS if a != role])
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
        self._players.new_game(_game_id("decrypto-text", seed, self._episode))
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


def numeric_action(text_answer: str) -> int:
    """Index into `ALL_CODES` of a text guess (`ANSWER: {"guess": "3-1-4"}`), for evaluation
    code that lets a text baseline act in the numeric env."""
    from tomgym.envs.decrypto.game import ALL_CODES
    from tomgym.envs.decrypto.parsing import parse_guess

    code, error = parse_guess(text_answer, strict=True)
    if error is not None or code is None:
        raise ValueError(f"not a valid guess answer: {error}")
    return ALL_CODES.index(tuple(code))


__all__ = [
    "DecryptoLearnerEnv",
    "DecryptoTextEnv",
    "REWARD_MODES",
    "TextEnv",
    "TomSBDefenderTextEnv",
    "numeric_action",
]
