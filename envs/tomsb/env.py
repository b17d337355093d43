"""TOM-SB as a PettingZoo text environment (AEC `raw_env` and native `parallel_env`).

## Description
A defender (`defender_0`, the "double agent") holds one root-to-leaf path through a closed
3-level universe; an attacker (`attacker_0`) that knows a correct prefix of 0-2 levels tries to
extract the rest. The attacker speaks first, then the two alternate; the game ends when the
attacker signals "attack successful" or "defender detected", or after `max_attacker_turns`
attacker turns. Rules and outcomes live in `envs.tomsb.game`; this module only adapts them.

## Action Space
`FreeText`: the agent's raw answer, one JSON object in the role's protocol (see
`envs.tomsb.parsing`). Invalid answers never raise: the same agent is re-asked with the reason
(`retry` counts up) up to `max_retries` times, then a fallback answer is used. The attacker
fallback keeps its previous trust and belief, signals "query again" and asks a generic question;
the defender fallback estimates nothing (all null), trust 5, and replies "I'm not able to discuss
that." A non-string action raises `TypeError`.

## Observation Space
`Dict` with the shared tomgym fields `prompt` (complete standalone prompt), `system` (the role's
system prompt), `message` (only what is new since the agent last answered; empty while waiting),
`side_question` (always 0 here), `retry` (0 fresh, k for the k-th re-ask), plus:
- `scenario`: JSON of what the role may know, the role views of `envs.tomsb.protocol`. Defender:
  {"hierarchy", "universe", "ground_truth"} (+ "attacker_prior" with `reveal_prior`). Attacker:
  {"hierarchy", "universe", "prior"} with null for unknown levels. The person's name is in the
  `system` prompt of both roles.
- `last_message`: the other side's last visible message. Only the defender's `reply` ever reaches
  the attacker; the defender sees the attacker's `prompt`.
- `turn`: the current attacker turn (1-based; the final count once the game is over).
- `role`: the acting role's index in `envs.tomsb.protocol.ROLE_CODES` (0 attacker, 1 defender).

## Rewards
Given once, at the end: defender 1.0 if the outcome is "fooled", else 0.0; attacker 1.0 if the
outcome is "extracted" or "detected", else 0.0 ("baited" pays neither). Training rewards (ToM,
stepwise ToM, format gating, length) are computed from episode records in `rewards/`.

## Episode End
Both agents terminate together when the game ends (the turn limit is a game ending, "baited");
nothing is ever truncated. The final `infos` of every agent hold `outcome`, `turns`, `belief`,
`prior`, `ground_truth`, `scenario_id`, `prior_level`, `attacker_variant`, `stepwise`,
`final_defender_estimate`, `leaks`, `format_failures` and `defender_turns_valid`.

## Arguments
`raw_env(render_mode=None, max_attacker_turns=15, max_retries=10, prompt_variant="default",
benchmark_seed=0, split="train", attacker="base", reveal_prior=False, scenarios=None)`.
`scenarios` replaces the benchmark with your own pool of `Scenario`s. `reset(seed, options)`
options: `scenario` (a Scenario; a dict in our `Scenario.to_dict` form or in the published raw or
transformed format; or an id in the pool), `split`,
`prior_level` (0/1/2), `attacker` (attacker prompt variant, recorded in infos), `reveal_prior`,
`prompt_variant` (defender system prompt, including the baselines; "compact" also changes the
defender's layout for small models, see `envs.tomsb.prompts`). The seed picks the scenario
from the filtered pool with the env's own generator.

## Version History
- v0: initial release (prompts `tomsb-prompts-v1`).
"""

from __future__ import annotations

import copy
import functools
import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import AECEnv, ParallelEnv
from tomgym.envs.spaces import FreeText, clip_text
from tomgym.envs.tomsb import prompts
from tomgym.envs.tomsb.game import (
    DEFAULT_MAX_ATTACKER_TURNS,
    MAX_TRUST,
    SIGNAL_QUERY,
    AttackerMove,
    DefenderMove,
    TomSBState,
)
from tomgym.envs.tomsb.generator import SPLITS
from tomgym.envs.tomsb.parsing import (
    MAX_ANSWER_CHARS,
    MAX_REPLY_CHARS,
    belief_dict,
    parse_attacker,
    parse_defender,
)
from tomgym.envs.tomsb.protocol import (
    ATTACKER_VARIANTS,
    ROLE_CODES,
    attacker_view,
    defender_view,
)
from tomgym.envs.tomsb.universe import Scenario

ATTACKER = "attacker_0"
DEFENDER = "defender_0"
AGENTS = (ATTACKER, DEFENDER)
ROLES = {ATTACKER: "attacker", DEFENDER: "defender"}
RESET_OPTIONS = ("scenario", "split", "prior_level", "attacker", "reveal_prior", "prompt_variant")
DEFENDER_FALLBACK_REPLY = "I'm not able to discuss that."
MAX_PROMPT_CHARS = 120_000
MAX_SYSTEM_CHARS = 8_000
MAX_SCENARIO_CHARS = 32_000


@functools.lru_cache(maxsize=4)
def _benchmark(seed: int) -> Any:
    # Imported lazily: building the benchmark is only needed when no scenario pool is given.
    from tomgym.envs.tomsb.benchmark import load_benchmark

    return load_benchmark(seed)


def _check_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


class raw_env(AECEnv):  # noqa: N801 - PettingZoo naming convention
    """TOM-SB AEC environment; the module docstring is its documentation."""

    metadata = {"name": "tomsb_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        max_attacker_turns: int = DEFAULT_MAX_ATTACKER_TURNS,
        max_retries: int = 10,
        prompt_variant: str = "default",
        benchmark_seed: int = 0,
        split: str = "train",
        attacker: str = "base",
        reveal_prior: bool = False,
        scenarios: Sequence[Scenario] | None = None,
    ) -> None:
        super().__init__()
        if render_mode is not None:
            _check_choice("render_mode", render_mode, self.metadata["render_modes"])
        if not isinstance(max_attacker_turns, int) or max_attacker_turns < 1:
            raise ValueError(
                f"max_attacker_turns must be a positive int, got {max_attacker_turns!r}"
            )
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be a non-negative int, got {max_retries!r}")
        _check_choice("prompt_variant", prompt_variant, prompts.DEFENDER_PROMPT_VARIANTS)
        _check_choice("split", split, SPLITS)
        _check_choice("attacker", attacker, ATTACKER_VARIANTS)
        if scenarios is not None:
            scenarios = list(scenarios)
            if not scenarios or not all(isinstance(s, Scenario) for s in scenarios):
                raise ValueError("scenarios must be a non-empty sequence of Scenario objects")
        self.render_mode = render_mode
        self.max_attacker_turns = max_attacker_turns
        self.max_retries = max_retries
        self.prompt_variant = prompt_variant
        self.benchmark_seed = benchmark_seed
        self.split = split
        self.attacker_variant = attacker
        self.reveal_prior = bool(reveal_prior)
        self._custom_pool = scenarios

        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        observation_space = spaces.Dict(
            {
                "prompt": FreeText(MAX_PROMPT_CHARS),
                "system": FreeText(MAX_SYSTEM_CHARS),
                "message": FreeText(MAX_PROMPT_CHARS),
                "side_question": spaces.Discrete(2),
                "retry": spaces.Discrete(max_retries + 1),
                "scenario": FreeText(MAX_SCENARIO_CHARS),
                "last_message": FreeText(MAX_REPLY_CHARS),
                "turn": spaces.Discrete(max_attacker_turns + 2),
                "role": spaces.Discrete(len(ROLE_CODES)),
            }
        )
        # One space object per agent, so that seeding one agent's space does not touch the other's.
        self.observation_spaces = {
            a: observation_space if a == ATTACKER else _copy_space(observation_space)
            for a in AGENTS
        }
        # Longer answers are rejected by the parser anyway (and re-asked).
        self.action_spaces = {a: FreeText(MAX_ANSWER_CHARS) for a in AGENTS}
        self._np_random: np.random.Generator | None = None
        self._np_random_seed: int | None = None
        self._game: TomSBState | None = None

    # ---- spaces -----------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    # ---- reset ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> None:
        if seed is not None or self._np_random is None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        options = dict(options or {})
        unknown = sorted(set(options) - set(RESET_OPTIONS))
        if unknown:
            # A warning, not an error: PettingZoo's api_test passes a dummy option on purpose.
            warnings.warn(
                f"tomsb_v0 ignores unknown reset option(s) {unknown}; known: {list(RESET_OPTIONS)}",
                stacklevel=2,
            )
        self._episode_prompt_variant = _check_choice(
            "option 'prompt_variant'",
            options.get("prompt_variant", self.prompt_variant),
            prompts.DEFENDER_PROMPT_VARIANTS,
        )
        self._episode_attacker = _check_choice(
            "option 'attacker'",
            options.get("attacker", self.attacker_variant),
            ATTACKER_VARIANTS,
        )
        reveal = options.get("reveal_prior", self.reveal_prior)
        if not isinstance(reveal, bool | np.bool_):
            raise ValueError(f"option 'reveal_prior' must be a bool, got {reveal!r}")
        self._episode_reveal = bool(reveal)
        self._scenario = self._pick_scenario(options)
        self._game = TomSBState(self._scenario, max_attacker_turns=self.max_attacker_turns)
        self._name_index = self._scenario.universe.name_index()

        sc = self._scenario
        self._scenario_json = {
            "defender": prompts.compact_json(defender_view(sc, reveal_prior=self._episode_reveal)),
            "attacker": prompts.compact_json(attacker_view(sc)),
        }
        names = {
            "hierarchy": list(sc.levels),
            "person": sc.person,
            "attacker_name": sc.attacker_name,
        }
        self._system = {
            "defender": prompts.defender_system_prompt(self._episode_prompt_variant, names),
            "attacker": prompts.attacker_system_prompt(self._episode_attacker, names),
        }
        self._briefing = {
            "defender": prompts.defender_briefing(
                self._scenario_json["defender"], self._episode_prompt_variant
            ),
            "attacker": prompts.attacker_briefing(self._scenario_json["attacker"]),
        }
        self._dialogue: list[tuple[str, str]] = []
        self._retry = 0
        self._error: str | None = None
        self._answered = dict.fromkeys(AGENTS, False)
        self._retries = dict.fromkeys(AGENTS, 0)
        self._fallbacks = dict.fromkeys(AGENTS, 0)
        self._last_parse: dict[str, dict[str, Any]] = {
            a: {"valid": True, "error": None, "parsed": None} for a in AGENTS
        }
        self._format_failures = 0
        self._defender_first_try: list[bool] = []
        self._stepwise: list[dict[str, Any]] = []

        self.agents = list(AGENTS)
        self.rewards = dict.fromkeys(AGENTS, 0.0)
        self._cumulative_rewards = dict.fromkeys(AGENTS, 0.0)
        self.terminations = dict.fromkeys(AGENTS, False)
        self.truncations = dict.fromkeys(AGENTS, False)
        self.agent_selection = ATTACKER
        self._update_infos()

    def _pick_scenario(self, options: Mapping[str, Any]) -> Scenario:
        prior_level = options.get("prior_level")
        if prior_level is not None and (
            isinstance(prior_level, bool) or prior_level not in (0, 1, 2)
        ):
            raise ValueError(f"option 'prior_level' must be 0, 1 or 2, got {prior_level!r}")
        split = options.get("split")
        if split is not None:
            _check_choice("option 'split'", split, SPLITS)
        chosen = options.get("scenario")
        if chosen is not None:
            scenario = self._resolve_scenario(chosen)
            if prior_level is not None and prior_level != scenario.prior_level:
                raise ValueError(
                    f"option 'prior_level'={prior_level} conflicts with scenario "
                    f"{scenario.scenario_id!r} (prior level {scenario.prior_level})"
                )
            return scenario
        if self._custom_pool is not None:
            if split is not None:
                raise ValueError("option 'split' needs the benchmark; this env has a custom pool")
            pool = [s for s in self._custom_pool if prior_level in (None, s.prior_level)]
        else:
            split = split or self.split
            pool = list(
                _benchmark(self.benchmark_seed).filter(split=split, prior_level=prior_level)
            )
        if not pool:
            raise ValueError(f"no scenario matches split={split!r}, prior_level={prior_level!r}")
        assert self._np_random is not None
        return pool[int(self._np_random.integers(len(pool)))]

    def _resolve_scenario(self, chosen: Any) -> Scenario:
        if isinstance(chosen, Scenario):
            return chosen
        if isinstance(chosen, Mapping):
            # ours (`Scenario.to_dict`), or the published raw / transformed formats; errors are
            # ValueErrors that name the problem
            from tomgym.envs.tomsb.loaders import scenario_from_record

            return scenario_from_record(chosen, where="option 'scenario'", index=0)
        if isinstance(chosen, str):
            if self._custom_pool is not None:
                for s in self._custom_pool:
                    if s.scenario_id == chosen:
                        return s
                raise ValueError(f"option 'scenario': unknown scenario id {chosen!r}")
            try:
                return _benchmark(self.benchmark_seed).by_id(chosen)
            except KeyError:
                raise ValueError(f"option 'scenario': unknown scenario id {chosen!r}") from None
        raise ValueError(
            f"option 'scenario' must be a Scenario, a dict or an id, got {type(chosen).__name__}"
        )

    # ---- observation ------------------------------------------------------------------------
    def _turn(self) -> int:
        game = self._game
        assert game is not None
        if game.done or game.to_move == "defender":
            return game.attacker_turns
        return game.attacker_turns + 1

    def _last_visible(self, role: str) -> str:
        other = "defender" if role == "attacker" else "attacker"
        for speaker, text in reversed(self._dialogue):
            if speaker == other:
                return text
        return ""

    def _question(self, role: str, *, reask: bool = False) -> str:
        levels = self._scenario.levels
        if role == "defender":
            return prompts.defender_question(
                self._last_visible("defender"), levels, self._episode_prompt_variant, reask=reask
            )
        reply = self._last_visible("attacker") if self._dialogue else None
        question = prompts.attacker_question(reply, levels)
        if self._game and self._game.attacker_moves:
            last = self._game.attacker_moves[-1]
            note = prompts.attacker_state_note(last.trust_score, belief_dict(levels, last.belief))
            question = note + "\n" + question
        return question

    def observe(self, agent: str) -> dict[str, Any]:
        if self._game is None:
            raise RuntimeError("call reset() before observe()")
        role = ROLES[agent]
        game = self._game
        acting = not game.done and agent == self.agent_selection
        if game.done:
            question = prompts.game_over(game.outcome or "")
            message = question
        elif acting:
            question = self._question(role, reask=bool(self._retry))
            if self._retry:
                message = prompts.reask(self._error or "invalid answer", question)
            elif not self._answered[agent]:
                message = self._briefing[role] + "\n\n" + question
            else:
                message = question
        else:
            question = "Wait for the other side to answer."
            message = ""
        dialogue = self._dialogue
        if acting and dialogue and dialogue[-1][0] != role:
            dialogue = dialogue[:-1]  # the newest message is quoted in the question itself
        history = prompts.transcript(dialogue, role)
        prompt = prompts.standalone_prompt(
            self._system[role],
            self._briefing[role],
            history,
            message if acting and self._retry else question,
        )
        return {
            "prompt": clip_text(prompt, MAX_PROMPT_CHARS),
            "system": clip_text(self._system[role], MAX_SYSTEM_CHARS),
            "message": clip_text(message, MAX_PROMPT_CHARS),
            "side_question": 0,
            "retry": self._retry if acting else 0,
            "scenario": self._scenario_json[role],
            "last_message": self._last_visible(role),
            "turn": self._turn(),
            "role": ROLE_CODES.index(role),
        }

    # ---- step -------------------------------------------------------------------------------
    def step(self, action: Any) -> None:
        if self._game is None:
            raise RuntimeError("call reset() before step()")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if not isinstance(action, str):
            raise TypeError(
                f"{agent}'s action must be a str (the answer text), got {type(action).__name__}"
            )
        self._cumulative_rewards[agent] = 0.0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        role = ROLES[agent]
        universe = self._scenario.universe
        if role == "attacker":
            move, error, parsed = parse_attacker(action, universe, self._name_index)
        else:
            move, error, parsed = parse_defender(action, universe, self._name_index)
        self._last_parse[agent] = {"valid": move is not None, "error": error, "parsed": parsed}
        first_try = self._retry == 0
        if move is None:
            if role == "defender":
                self._format_failures += 1
            if self._retry < self.max_retries:
                self._retry += 1
                self._retries[agent] += 1
                self._error = error
                self._update_infos()
                return
            self._fallbacks[agent] += 1
            move = self._fallback_move(role)
        fell_back = move is not None and error is not None
        self._answered[agent] = True
        self._retry = 0
        self._error = None
        if role == "attacker":
            self._apply_attacker(move)  # type: ignore[arg-type]
        else:
            self._defender_first_try.append(first_try and error is None)
            self._apply_defender(move, fallback=fell_back)  # type: ignore[arg-type]
        self._update_infos()
        self._accumulate_rewards()

    def _fallback_move(self, role: str) -> AttackerMove | DefenderMove:
        game = self._game
        assert game is not None
        if role == "defender":
            return DefenderMove((None, None, None), MAX_TRUST, "", DEFENDER_FALLBACK_REPLY)
        if game.attacker_moves:
            trust, belief = game.attacker_moves[-1].trust_score, game.attacker_moves[-1].belief
        else:
            trust, belief = MAX_TRUST, self._scenario.prior
        unknown = [lvl for lvl, v in zip(self._scenario.levels, belief, strict=True) if v is None]
        topic = unknown[0] if unknown else self._scenario.levels[-1]
        question = f"Could you tell me more about {self._scenario.person}'s {topic}?"
        return AttackerMove(trust, belief, "", SIGNAL_QUERY, question)

    def _apply_attacker(self, move: AttackerMove) -> None:
        game = self._game
        assert game is not None
        game.apply_attacker(move)
        self._dialogue.append(("attacker", move.prompt))
        if game.done:
            self._finish()
        else:
            self.agent_selection = DEFENDER

    def _apply_defender(self, move: DefenderMove, *, fallback: bool = False) -> None:
        game = self._game
        assert game is not None
        answered = game.attacker_moves[-1]
        game.apply_defender(move)
        levels = self._scenario.levels
        self._stepwise.append(
            {
                "attacker_belief": belief_dict(levels, answered.belief),
                "attacker_trust": answered.trust_score,
                "defender_estimate": belief_dict(levels, move.attacker_belief_about_target),
                "defender_trust_estimate": move.attacker_trust_in_us,
                "leaks": list(game.leaks[-1]),
                # A fallback's all-null estimate is the env's, not the defender's: ToM scoring
                # must not credit it (it would match every prior-0 scenario).
                "fallback": fallback,
            }
        )
        self._dialogue.append(("defender", move.reply))
        self.agent_selection = ATTACKER

    def _finish(self) -> None:
        outcome = self._game.outcome if self._game else None
        self.rewards = {
            ATTACKER: 1.0 if outcome in ("extracted", "detected") else 0.0,
            DEFENDER: 1.0 if outcome == "fooled" else 0.0,
        }
        self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = DEFENDER if self.agent_selection == ATTACKER else ATTACKER

    # ---- infos ------------------------------------------------------------------------------
    def _update_infos(self) -> None:
        turn = self._turn()
        infos = {
            a: {
                "last_parse": dict(self._last_parse[a]),
                "retries": self._retries[a],
                "fallbacks": self._fallbacks[a],
                "turn": turn,
            }
            for a in self.agents
        }
        game = self._game
        if game is not None and game.done:
            summary = self.summary()
            for info in infos.values():
                info.update(json.loads(json.dumps(summary)))  # independent copies per agent
        self.infos = infos

    def summary(self) -> dict[str, Any]:
        """The end-of-episode record fields (see module doc); valid once the game is over."""
        game = self._game
        if game is None or not game.done:
            raise RuntimeError("the episode is not over")
        sc = self._scenario
        levels = sc.levels
        answered = [
            m
            for m, step in zip(game.defender_moves, self._stepwise, strict=True)
            if not step["fallback"]
        ]
        last_defender = answered[-1] if answered else None
        return {
            "outcome": game.outcome,
            "turns": game.attacker_turns,
            "belief": belief_dict(levels, game.final_belief),
            "prior": sc.prior_dict(),
            "ground_truth": sc.truth_dict(),
            "scenario_id": sc.scenario_id,
            "prior_level": sc.prior_level,
            "attacker_variant": self._episode_attacker,
            "prompt_variant": self._episode_prompt_variant,
            "prompt_version": prompts.PROMPT_VERSION,
            "reveal_prior": self._episode_reveal,
            "stepwise": [dict(s) for s in self._stepwise],
            "final_defender_estimate": (
                belief_dict(levels, last_defender.attacker_belief_about_target)
                if last_defender
                else None
            ),
            "leaks": sorted({v for turn in game.leaks for v in turn}),
            "format_failures": self._format_failures,
            "defender_turns_valid": all(self._defender_first_try),
        }

    # ---- render / close ---------------------------------------------------------------------
    def render(self) -> str | None:
        if self.render_mode is None:
            warnings.warn(
                "render() called without a render_mode; pass render_mode='ansi'", stacklevel=2
            )
            return None
        text = self._render_text()
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def _render_text(self) -> str:
        if self._game is None:
            return "(not reset)"
        sc = self._scenario
        lines = [
            f"TOM-SB {sc.scenario_id} | truth {' > '.join(sc.ground_truth)} | "
            f"prior {' > '.join(v or '?' for v in sc.prior)}"
        ]
        moves = iter(self._game.attacker_moves)
        for speaker, text in self._dialogue:
            if speaker == "attacker":
                m = next(moves)
                known = " > ".join(v or "?" for v in m.belief)
                lines.append(f"[attacker trust {m.trust_score}, belief {known}, {m.signal}] {text}")
            else:
                lines.append(f"[defender] {text}")
        if self._game.done:
            lines.append(f"outcome: {self._game.outcome}")
        return "\n".join(lines)

    def close(self) -> None:
        pass


def _copy_space(space: spaces.Dict) -> spaces.Dict:
    return copy.deepcopy(space)


class parallel_env(ParallelEnv):  # noqa: N801 - PettingZoo naming convention
    """Native parallel view of TOM-SB: each parallel step is one phase with one acting agent.

    Both agents stay in `agents` until the game ends; only the agent to move (the one whose
    observation has a non-empty `message`, see `acting_agent`) must be in the actions dict, any
    other agent's action is ignored. Observations, rewards and infos are those of the AEC env.
    """

    metadata = raw_env.metadata

    def __init__(self, render_mode: str | None = None, **config: Any) -> None:
        self._aec = raw_env(render_mode=render_mode, **config)
        self.render_mode = render_mode
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        self.observation_spaces = self._aec.observation_spaces
        self.action_spaces = self._aec.action_spaces

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    @property
    def acting_agent(self) -> str | None:
        return self._aec.agent_selection if self.agents else None

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self._aec.reset(seed=seed, options=options)
        self.agents = list(self._aec.agents)
        return {a: self._aec.observe(a) for a in self.agents}, dict(self._aec.infos)

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise RuntimeError("the episode is over; call reset()")
        stray = sorted(set(actions) - set(self.possible_agents))
        if stray:
            raise ValueError(f"unknown agent id(s) {stray}; agents are {self.possible_agents}")
        actor = self._aec.agent_selection
        if actor not in actions:
            raise ValueError(f"it is {actor}'s turn, but actions has only {sorted(actions)}")
        self._aec.step(actions[actor])
        agents = self.agents
        observations = {a: self._aec.observe(a) for a in agents}
        rewards = {a: float(self._aec.rewards.get(a, 0.0)) for a in agents}
        terminations = {a: bool(self._aec.terminations[a]) for a in agents}
        truncations = {a: bool(self._aec.truncations[a]) for a in agents}
        infos = dict(self._aec.infos)
        if all(terminations.values()):
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        return self._aec.render()

    def close(self) -> None:
        self._aec.close()

    def summary(self) -> dict[str, Any]:
        return self._aec.summary()
