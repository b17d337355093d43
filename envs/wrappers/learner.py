"""`DecryptoLearnerEnv`: numeric Decrypto with only the learners exposed, for MARL libraries (RLlib,
Tianshou, CleanRL-style PPO).

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
`numeric_action(text)` maps a text guess to the numeric action (for text baselines).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gymnasium import spaces
from pettingzoo import ParallelEnv
from tomgym.envs.decrypto.match import AGENTS as DECRYPTO_AGENTS
from tomgym.envs.decrypto.numeric import NUMERIC_AGENTS, numeric_parallel_env
from tomgym.envs.wrappers.players import PolicyTable, check_policies, episode_game_id

REWARD_MODES = ("outcome", "round")


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
        self._players = PolicyTable(check_policies(policies or {}, others))
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
        self._players.new_game(episode_game_id("decrypto-learner", seed, self._episode))
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


def numeric_action(text_answer: str) -> int:
    """Index into `ALL_CODES` of a text guess (`ANSWER: {"guess": "3-1-4"}`), for evaluation
    code that lets a text baseline act in the numeric env."""
    from tomgym.envs.decrypto.game import ALL_CODES
    from tomgym.envs.decrypto.parsing import parse_guess

    code, error = parse_guess(text_answer, strict=True)
    if error is not None or code is None:
        raise ValueError(f"not a valid guess answer: {error}")
    return ALL_CODES.index(tuple(code))


__all__ = ["REWARD_MODES", "DecryptoLearnerEnv", "numeric_action"]
