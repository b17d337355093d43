"""Decrypto as a PettingZoo text environment (AEC and native Parallel).

# Description
Three agents, `encoder_0`, `decoder_0` and `interceptor_0`, play the Decrypto rules of
`envs/decrypto/game.py`: the encoder hints at a secret 3-digit code over 4 shared keywords; the
decoder and the interceptor guess it. Two miscommunications or two interceptions lose the game
for the team; surviving `max_rounds` (8) rounds wins it.

# Turn order
Each round: the encoder gives hints; then (optional ToM side questions) the decoder and the
interceptor guess. In the AEC env every answer is one `step`; the decoder's pending guess is never
shown to the interceptor. In the Parallel env one `step` is one *phase*: the encoder's hints, a
side question, or both guesses at once (actions of agents not asked in a phase are ignored).

# Action Space
Text (`FreeText`): answers in the format `ANSWER: {"hints": [...]}`, `ANSWER: {"guess": "3-1-4"}`
or `ANSWER: {"keywords": [...]}` (tolerant parsing, strict validation). An invalid answer is
re-asked with the reason (the observation's `retry` counts up and `message` explains), at most
`max_retries` (10) times, then a default answer is used (hints "no_hint", a guess that never
matches, keywords "no_keyword"). With `action_mode="structured"` the decoder and interceptor act
with `Discrete(24)` (an index into `game.ALL_CODES`); the encoder keeps text.

# Observation Space
`Dict` with: `prompt` (standalone prompt: system text, everything the role may know, the question),
`system` (role system prompt, `prompt_variant` selects one of 3 wordings), `message` (only what is
new since the agent's last kept answer, plus the question), `side_question` (1 for ToM probes that
must not be kept in a conversation), `retry`, `role` (0 encoder, 1 decoder, 2 interceptor),
`question` (index into `match.QUESTION_KINDS`, 0 when not asked), `round`, `miscommunications`,
`interceptions`, `keywords` (4 strings; empty for the interceptor), `code` (3 ints; zeros unless
the encoder is asked for hints), `hints` (this round's 3 hints once given; empty before; the
encoder, decoder and interceptor all see them), `history` (JSON list of public past rounds).

# Rewards
Only at the end: team win -> encoder and decoder +1, interceptor -1; interceptor win -> the
reverse. `infos[agent]["reward_components"]` names them.

# Episode End
All agents terminate when the game ends (see endings in `game.py`); there is no truncation.
Final `infos[agent]` hold `ending`, `team_won`, `miscommunications`, `interceptions`, `rounds`,
`rounds_detail`, `tom` (ToM experiment scores) and the per-agent `retries`/`fallbacks`.

# Arguments / reset options
`raw_env(render_mode=None, max_rounds=8, max_retries=10, prompt_variant=0, play_on=False,
tom=(), action_mode="text", strict_guesses=True, keyword_list=None)`; `reset(seed, options)` with
options `keywords` (4 strings), `codes` (one [d, d, d] per round), `play_on`, `max_rounds`,
`prompt_variant`, `tom` (list of "perspective_taking", "false_belief"). The seed fixes keywords and
codes (codes from a generator of their own, so they depend only on the seed).

# Version History
* v0: initial release (prompt version `decrypto-prompts-1`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv, ParallelEnv
from tomgym.envs.decrypto import game as rules
from tomgym.envs.decrypto.match import AGENTS, QUESTION_KINDS, ROLE_OF, DecryptoMatch
from tomgym.envs.decrypto.prompts import PROMPT_VERSION
from tomgym.envs.spaces import FreeText, clip_text

MAX_PROMPT_CHARS = 32_768
MAX_ACTION_CHARS = 1_000_000
ROLE_INDEX = {"encoder": 0, "decoder": 1, "interceptor": 2}
ENV_ID = "tomgym/decrypto-v0"
ACTION_MODES = ("text", "structured")
_OPTION_KEYS = {"keywords", "codes", "play_on", "max_rounds", "prompt_variant", "tom"}


class DecryptoCore:
    """Shared by both APIs: configuration, seeding, spaces and observation building."""

    metadata = {"name": "decrypto_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}

    def _configure(
        self,
        render_mode: str | None = None,
        max_rounds: int = rules.DEFAULT_MAX_ROUNDS,
        max_retries: int = 10,
        prompt_variant: int = 0,
        play_on: bool = False,
        tom: tuple[str, ...] | list[str] = (),
        action_mode: str = "text",
        strict_guesses: bool = True,
        keyword_list: str | None = None,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        if action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
        if action_mode == "structured" and "false_belief" in tom:
            raise ValueError("the false_belief experiment needs text answers (action_mode='text')")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.render_mode = render_mode
        self.config = {
            "max_rounds": max_rounds,
            "max_retries": max_retries,
            "prompt_variant": prompt_variant,
            "play_on": play_on,
            "tom": tuple(tom),
            "action_mode": action_mode,
            "strict_guesses": strict_guesses,
        }
        self.word_list = rules.load_keyword_list(keyword_list)
        self.possible_agents = list(AGENTS)
        limit = rules.DEFAULT_MAX_ROUNDS if max_rounds is None else max_rounds
        self._max_round_space = max(limit, len(rules.ALL_CODES))
        self.observation_spaces = {a: self._observation_space() for a in AGENTS}
        guess_space = spaces.Discrete(len(rules.ALL_CODES))
        self.action_spaces = {
            a: guess_space
            if action_mode == "structured" and a != "encoder_0"
            else FreeText(MAX_ACTION_CHARS)
            for a in AGENTS
        }
        self._np_random: np.random.Generator | None = None
        self.match: DecryptoMatch | None = None
        self.reset_options: dict[str, Any] = {}

    def _observation_space(self) -> spaces.Dict:
        text = FreeText(MAX_PROMPT_CHARS)
        count = spaces.Discrete(self._max_round_space + 1)
        return spaces.Dict(
            {
                "prompt": text,
                "system": text,
                "message": text,
                "side_question": spaces.Discrete(2),
                "retry": spaces.Discrete(self.config["max_retries"] + 1),
                "role": spaces.Discrete(3),
                "question": spaces.Discrete(len(QUESTION_KINDS)),
                "round": count,
                "miscommunications": count,
                "interceptions": count,
                "keywords": spaces.Tuple([FreeText(rules.NUM_KEYWORDS * 64)] * rules.NUM_KEYWORDS),
                "code": spaces.Box(
                    0, rules.NUM_KEYWORDS, shape=(rules.CODE_LENGTH,), dtype=np.int64
                ),
                "hints": spaces.Tuple([FreeText(256)] * rules.CODE_LENGTH),
                "history": text,
            }
        )

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ reset
    def _new_match(self, seed: int | None, options: Mapping[str, Any] | None) -> None:
        options = dict(options or {})
        unknown = set(options) - _OPTION_KEYS
        if unknown:
            # Ignored rather than fatal: generic harnesses (PettingZoo's api_test) pass extra keys.
            warnings.warn(
                f"ignoring unknown reset option(s) {sorted(unknown)}; valid: {sorted(_OPTION_KEYS)}",
                stacklevel=3,
            )
        if seed is not None or self._np_random is None:
            self._np_random, _ = seeding.np_random(seed)
        # Two child streams: codes depend only on the seed, never on the word list or options.
        keyword_seed, code_seed = self._np_random.integers(0, 2**63 - 1, size=2)
        cfg = {
            **self.config,
            **{k: options[k] for k in ("play_on", "max_rounds", "prompt_variant") if k in options},
        }
        tom = tuple(options.get("tom", cfg["tom"]))
        if cfg["action_mode"] == "structured" and "false_belief" in tom:
            raise ValueError("the false_belief experiment needs text answers (action_mode='text')")
        max_rounds = int(cfg["max_rounds"])
        if not 1 <= max_rounds <= self._max_round_space:
            raise ValueError(f"max_rounds must be in 1..{self._max_round_space}, got {max_rounds}")
        keywords = options.get("keywords") or rules.sample_keywords(
            np.random.default_rng(keyword_seed), self.word_list
        )
        if "codes" in options:
            codes = rules.validate_codes(options["codes"], min(max_rounds, len(options["codes"])))
            if len(codes) < max_rounds:
                # A recorded game may have stopped early; the rest of the codes come from the seed.
                extra = [
                    c
                    for c in rules.sample_codes(np.random.default_rng(code_seed), 24)
                    if c not in codes
                ]
                codes = codes + extra[: max_rounds - len(codes)]
        else:
            codes = rules.sample_codes(np.random.default_rng(code_seed), max_rounds)
        game = rules.DecryptoGame(
            keywords=tuple(keywords),
            codes=codes,
            max_rounds=max_rounds,
            play_on=bool(cfg["play_on"]),
        )
        self.match = DecryptoMatch(
            game,
            tom=tom,
            max_retries=self.config["max_retries"],
            strict_guesses=self.config["strict_guesses"],
            prompt_variant=int(cfg["prompt_variant"]),
            structured_guesses=self.config["action_mode"] == "structured",
        )
        self.reset_options = {"seed": seed, **options}

    # ------------------------------------------------------------------ observations
    def _observation(self, agent: str) -> dict[str, Any]:
        match = self.match
        assert match is not None, "call reset() first"
        game = match.game
        role = ROLE_OF[agent]
        request = match.request_for(agent)
        sees_keywords = role != "interceptor" or (
            request is not None and request.kind in ("fb_rc", "fb_fb")
        )
        sees_code = request is not None and request.kind == "hints"
        hints = game.hints or ("", "", "")
        return {
            "prompt": clip_text(match.prompt(agent), MAX_PROMPT_CHARS),
            "system": clip_text(match.system(agent), MAX_PROMPT_CHARS),
            "message": clip_text(match.message(agent), MAX_PROMPT_CHARS),
            "side_question": int(request is not None and request.side_question),
            "retry": 0 if request is None else request.retries,
            "role": ROLE_INDEX[role],
            "question": QUESTION_KINDS.index(request.kind) if request else 0,
            "round": min(game.round, self._max_round_space),
            "miscommunications": min(game.miscommunications, self._max_round_space),
            "interceptions": min(game.interceptions, self._max_round_space),
            "keywords": tuple(game.keywords) if sees_keywords else ("",) * rules.NUM_KEYWORDS,
            "code": np.array(game.code if sees_code else (0, 0, 0), dtype=np.int64),
            "hints": tuple(hints),
            "history": clip_text(match.history_json(), MAX_PROMPT_CHARS),
        }

    def _step_info(self, agent: str) -> dict[str, Any]:
        assert self.match is not None
        log = self.match.logs[agent]
        request = self.match.request_for(agent)
        info: dict[str, Any] = {
            "last_parse": dict(log.last_parse),
            "retries": log.retries,
            "fallbacks": log.fallbacks,
            "round": self.match.game.round,
            "question": request.kind if request else None,
            "last_round": self.match.last_result,
        }
        return info

    def _final_info(self, agent: str) -> dict[str, Any]:
        assert self.match is not None
        game = self.match.game
        team_won = bool(game.team_won)
        reward = self._final_reward(agent)
        return {
            **self._step_info(agent),
            "ending": game.ending,
            "team_won": team_won,
            "winner": "team" if team_won else "interceptor",
            "miscommunications": game.miscommunications,
            "interceptions": game.interceptions,
            "rounds": len(game.history),
            "ending_round": game.ending_round,
            "keywords": list(game.keywords),
            "rounds_detail": [r.to_dict() for r in game.history],
            "tom": self.match.tom_summary(),
            "reward_components": {"outcome": reward},
            "prompt_version": PROMPT_VERSION,
        }

    def _final_reward(self, agent: str) -> float:
        assert self.match is not None
        team_won = bool(self.match.game.team_won)
        on_team = agent != "interceptor_0"
        return 1.0 if team_won == on_team else -1.0

    def render(self) -> str | None:
        if self.render_mode is None or self.match is None:
            return None
        text = self._render_text()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def _render_text(self) -> str:
        assert self.match is not None
        game = self.match.game
        lines = [
            f"Decrypto — keywords: {', '.join(f'{i + 1}.{w}' for i, w in enumerate(game.keywords))}"
        ]
        for r in game.history:
            lines.append(
                f"R{r.round}: code {'-'.join(map(str, r.code))} hints {list(r.hints)} | decoder "
                f"{r.decoder_guess} interceptor {r.interceptor_guess} | M={r.miscommunications} "
                f"I={r.interceptions}{' (play on)' if r.after_end else ''}"
            )
        if game.finished:
            lines.append(f"Ending: {game.ending} (round {game.ending_round})")
        else:
            lines.append(f"Round {game.round}: waiting for {[r.agent for r in self.match.pending]}")
        return "\n".join(lines)

    def close(self) -> None:
        pass


class raw_env(DecryptoCore, AECEnv):  # noqa: N801 - PettingZoo naming convention
    """Decrypto AEC environment; see the module docstring for the full contract."""

    def __init__(self, render_mode: str | None = None, **config: Any) -> None:
        AECEnv.__init__(self)
        self._configure(render_mode, **config)

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._new_match(seed, options)
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: self._step_info(a) for a in self.agents}
        self.agent_selection = self._next_agent()

    def _next_agent(self) -> str:
        assert self.match is not None
        return self.match.pending[0].agent

    def observe(self, agent: str) -> dict[str, Any]:
        return self._observation(agent)

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if isinstance(action, str) and len(action) > MAX_ACTION_CHARS:
            action = action[:MAX_ACTION_CHARS]
        if isinstance(action, np.integer):
            action = int(action)
        assert self.match is not None
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: 0.0 for a in self.agents}
        self.match.answer(agent, action)
        if self.match.finished:
            for a in self.agents:
                self.rewards[a] = self._final_reward(a)
                self.terminations[a] = True
                self.infos[a] = self._final_info(a)
            self.agent_selection = self.agents[0]
        else:
            for a in self.agents:
                self.infos[a] = self._step_info(a)
            self.agent_selection = self._next_agent()
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()


class parallel_env(DecryptoCore, ParallelEnv):  # noqa: N801 - PettingZoo naming convention
    """Decrypto Parallel environment: one step is one phase (see module docstring)."""

    def __init__(self, render_mode: str | None = None, **config: Any) -> None:
        self._configure(render_mode, **config)
        self.agents: list[str] = []

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        self._new_match(seed, options)
        self.agents = list(self.possible_agents)
        return {a: self._observation(a) for a in self.agents}, {
            a: self._step_info(a) for a in self.agents
        }

    def acting_agents(self) -> list[str]:
        """Agents whose actions this step uses."""
        assert self.match is not None
        return [r.agent for r in self.match.pending]

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        assert self.match is not None, "call reset() first"
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions given for agent(s) not in the game: {sorted(unknown)}")
        acting = self.acting_agents()
        missing = [a for a in acting if a not in actions]
        if missing:
            raise ValueError(f"this phase needs actions from {missing}")
        for agent in acting:
            action = actions[agent]
            if isinstance(action, np.integer):
                action = int(action)
            if isinstance(action, str) and len(action) > MAX_ACTION_CHARS:
                action = action[:MAX_ACTION_CHARS]
            self.match.answer(agent, action)
        done = self.match.finished
        rewards = {a: (self._final_reward(a) if done else 0.0) for a in self.agents}
        terminations = {a: done for a in self.agents}
        truncations = {a: False for a in self.agents}
        infos = {a: (self._final_info(a) if done else self._step_info(a)) for a in self.agents}
        observations = {a: self._observation(a) for a in self.agents}
        if done:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos
