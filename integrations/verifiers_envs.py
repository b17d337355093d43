"""TOM-SB and Decrypto as verifiers (>= 0.4, `verifiers.v1`) multi-agent environments.

## Description
One verifiers `Env` per game. `Env.run(task, agents)` steps the tomgym PettingZoo AEC env
(`tomgym/tomsb-v0`, `tomgym/decrypto-v0`): the env's own rules pick who moves, parse and
re-ask answers and end the game; this module only routes each observation to the seat that
must answer and its answer back. Every seat is either
- a model seat: a verifiers agent (its own `model`/`client`/`sampling`, e.g. a frozen opponent on
  another endpoint), held open as one `agent.interaction(...)` for the whole episode, so its
  trace is one multi-turn conversation; or
- a policy seat: a tomgym policy named by a policy-spec string in the env config's `policies`
  (`"scripted:base"`, `"embedding"`, `"random"`, `"openai:<model>,base_url=..."`, ...), built
  afresh for every episode with the episode's seed. It leaves no trace.
At least one seat must be a model seat (verifiers requires every episode to run an agent).

## Seats (roles)
TOM-SB: `attacker`, `defender` (tomgym agents `attacker_0`, `defender_0`); by default the
attacker is the scripted base attacker and the defender is the model.
Decrypto: `encoder`, `decoder`, `interceptor`; by default the encoder is the model and the
decoder and interceptor are the word-embedding baseline (`embedding`, needs the GloVe wheel of
the `embeddings` extra).

## Observations
A model seat's conversation is the tomgym observation protocol: the system message is the
role's `system` text, each user turn is the observation's `message` (only what is new since the
seat last answered; on a re-ask it states the parse error), the seat's reply is the action.

## Actions
The reply text, parsed by the env. Invalid answers are re-asked up to the env's `max_retries`,
then replaced by the env's fallback answer. A model seat whose run ends early (a verifiers
turn/token limit, a `@stop`) answers "" from then on, which the env turns into fallbacks.

## Rewards
After the game, each model seat's trace gets one reward, `tomgym`, computed by
`tomgym.rewards.RewardComposer` on the episode record (the same record and functions as
`tomgym eval` and the trainer): the env config's `rewards[seat]` (weights and gate), by default
ADA-Fooling for the TOM-SB defender (`fooling`, format-gated) and the trainer's Decrypto encoder
weights; a seat without weights gets the env's own game reward. The components are recorded as
metrics, and the full episode record is in `trace.info["tomgym_record"]`.

## Episode end
When the tomgym env terminates every agent (TOM-SB: attack successful, defender detected, or the
attacker turn limit; Decrypto: two miscommunications, two interceptions, or the last round).

## Tasks, seeding and splits
Each task carries `seed`, `options` (reset options) and `env_config`; `reset(seed, options)`
fixes everything random (scenario, keywords, codes) and policy seats are built with the same
seed and play under the task's name as game id (scripted policies key their per-game draws on
both), so a task reproduces its episode given the same model answers. TOM-SB tasks are the
scenarios of one universe-level benchmark split (`tomgym.envs.tomsb.benchmark`; `split` =
train | validation | test, optional `prior_level`), one task per scenario, seeds counting up
from `first_seed`. Decrypto tasks are infinite: seeds `first_seed`, `first_seed + 1`, ...

## Finding the environments
The plugin packages `tomgym_tomsb` and `tomgym_decrypto` (installed with tomgym) export these
classes, so verifiers' loader finds them by id: `vf-eval tomgym-tomsb`,
`EnvConfig(taskset={"id": "tomgym-decrypto"})`. They run their seats in-process
(`runtime.type = subprocess`, harness `TomgymChatHarness`: one chat completion per turn through
verifiers' interception server, no sandbox and no program to install).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

import httpx
import pettingzoo
import verifiers.v1 as vf
from pydantic import Field, model_validator
from pydantic_config import BaseConfig
from tomgym.agents.base import Policy, Turn
from tomgym.integrations.games import (
    DECRYPTO,
    DEFAULT_REWARDS,
    TOMSB,
    EpisodeLog,
    Game,
    SeatReward,
    make_seat_policy,
    seat_reward,
)
from tomgym.training.runner import GameSpec
from verifiers.v1.dialects.chat import message_to_wire
from verifiers.v1.runtimes import ProgramResult, SubprocessConfig

REWARD_NAME = "tomgym"
RECORD_KEY = "tomgym_record"


# ---- harness: one chat completion per turn, in-process --------------------------------------


class TomgymChatHarnessConfig(vf.HarnessConfig):
    """The tomgym seat harness has no knobs: sampling comes from the seat's config."""


class TomgymChatHarness(vf.Harness[TomgymChatHarnessConfig]):
    """A tool-less chat loop run in-process: each segment is one completion of the conversation.

    verifiers allows a harness to run its loop in-process as long as every model call goes
    through the interception endpoint (that is what records the turn on the trace and applies
    the seat's model, client and sampling).
    """

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
        tool_interception_url: str | None = None,
    ) -> ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt:
            messages.extend(message_to_wire(message) for message in prompt)
        # Plain HTTP (httpx comes with verifiers; only agents/ backends import `openai`). No
        # retries and no timeout here: failures belong on the trace, deadlines to the seat config.
        async with httpx.AsyncClient(timeout=None) as client:
            response = await client.post(
                f"{endpoint.rstrip('/')}/chat/completions",
                json={"model": ctx.model, "messages": messages},
                headers={"Authorization": f"Bearer {secret}"},
            )
            response.raise_for_status()
        reply = response.json()["choices"][0]["message"].get("content") or ""
        return ProgramResult(exit_code=0, stdout=reply, stderr="")


# ---- tasks ------------------------------------------------------------------------------------


class TomgymTaskData(vf.TaskData):
    """One episode: the env constructor arguments, the reset seed and the reset options."""

    seed: int
    options: dict[str, Any] = Field(default_factory=dict)
    env_config: dict[str, Any] = Field(default_factory=dict)


class TomgymTask(vf.Task[TomgymTaskData, vf.State, vf.TaskConfig]):
    pass


class TomSBTasksetConfig(vf.TasksetConfig):
    split: Literal["train", "validation", "test"] = "test"
    """Universe-level benchmark split whose scenarios are the tasks."""
    prior_level: int | None = Field(None, ge=0, le=2)
    """Keep only scenarios whose attacker knows this many levels (None: all)."""
    benchmark_seed: int = 0
    """Seed of the generated benchmark (`tomgym.envs.tomsb.benchmark.load_benchmark`)."""
    first_seed: int = 0
    """Seed of the first task; task i is reset with `first_seed + i`."""
    max_attacker_turns: int = Field(15, ge=1)


class TomSBTaskset(vf.Taskset[TomgymTask, TomSBTasksetConfig]):
    def load(self) -> Iterator[TomgymTask]:
        from tomgym.envs.tomsb.benchmark import load_benchmark

        config = self.config
        scenarios = load_benchmark(config.benchmark_seed).filter(
            split=config.split, prior_level=config.prior_level
        )
        env_config = {
            "benchmark_seed": config.benchmark_seed,
            "split": config.split,
            "max_attacker_turns": config.max_attacker_turns,
        }
        for index, scenario in enumerate(scenarios):
            yield TomgymTask(
                TomgymTaskData(
                    id=scenario.scenario_id,
                    name=f"tomsb/{scenario.scenario_id}",
                    seed=config.first_seed + index,
                    options={"scenario": scenario.scenario_id},
                    env_config=env_config,
                ),
                config.task,
            )


class DecryptoTasksetConfig(vf.TasksetConfig):
    first_seed: int = 0
    """Seed of the first task; task i is reset with `first_seed + i` (keywords and codes)."""
    max_rounds: int = Field(8, ge=1)


class DecryptoTaskset(vf.Taskset[TomgymTask, DecryptoTasksetConfig]):
    INFINITE = True

    def load(self) -> Iterator[TomgymTask]:
        config = self.config
        for index in itertools.count():
            seed = config.first_seed + index
            yield TomgymTask(
                TomgymTaskData(
                    name=f"decrypto/{seed}",
                    seed=seed,
                    env_config={"max_rounds": config.max_rounds},
                ),
                config.task,
            )


# ---- envs -------------------------------------------------------------------------------------


class SeatRewardConfig(BaseConfig):
    weights: dict[str, float] = Field(default_factory=dict)
    """tomgym reward components and their weights (empty: the env's own game reward)."""
    gate: str | None = None
    """Component that multiplies the weighted sum (e.g. "format"), or None."""


def _seat_agent() -> vf.AgentConfig:
    # In-process seats: the tomgym harness needs no sandbox, so the local runtime is the default.
    return vf.AgentConfig(runtime=SubprocessConfig())


def _default_rewards(game: Game) -> dict[str, SeatRewardConfig]:
    return {
        seat: SeatRewardConfig(weights=dict(spec.weights), gate=spec.gate)
        for seat, spec in DEFAULT_REWARDS.get(game.name, {}).items()
    }


class _SeatsConfig:
    """Validation shared by both games' env configs (the game is the class's `GAME`)."""

    GAME: ClassVar[Game]

    @model_validator(mode="after")
    def _check_seats(self) -> Any:
        seats = self.GAME.seats
        for field_name in ("policies", "rewards"):
            unknown = sorted(set(getattr(self, field_name)) - set(seats))
            if unknown:
                raise ValueError(
                    f"{field_name}: unknown seat(s) {unknown}; seats are {list(seats)}"
                )
        if set(self.policies) == set(seats):
            raise ValueError(
                "every seat is a tomgym policy; leave at least one seat to a model "
                "(verifiers episodes must run an agent)"
            )
        return self


class TomSBEnvConfig(_SeatsConfig, vf.EnvConfig):
    GAME: ClassVar[Game] = TOMSB
    attacker: vf.AgentConfig = _seat_agent()
    defender: vf.AgentConfig = _seat_agent()
    policies: dict[str, str] = Field(default_factory=lambda: {"attacker": "scripted:base"})
    """Seats played by tomgym policies: seat -> policy spec. The other seats are models."""
    rewards: dict[str, SeatRewardConfig] = Field(default_factory=lambda: _default_rewards(TOMSB))


class DecryptoEnvConfig(_SeatsConfig, vf.EnvConfig):
    GAME: ClassVar[Game] = DECRYPTO
    encoder: vf.AgentConfig = _seat_agent()
    decoder: vf.AgentConfig = _seat_agent()
    interceptor: vf.AgentConfig = _seat_agent()
    policies: dict[str, str] = Field(
        default_factory=lambda: {"decoder": "embedding", "interceptor": "embedding"}
    )
    """Seats played by tomgym policies: seat -> policy spec. The other seats are models."""
    rewards: dict[str, SeatRewardConfig] = Field(default_factory=lambda: _default_rewards(DECRYPTO))


class _ModelSeat:
    """One model seat's open interaction for the episode."""

    def __init__(self, interaction: Any) -> None:
        self.interaction = interaction
        self.finished = False

    async def answer(self, observation: Mapping[str, Any]) -> str:
        if self.finished:
            return ""
        text = str(observation.get("message") or observation.get("prompt") or "")
        segment = await self.interaction.turn(text)
        if segment.terminated:
            self.finished = True
            return ""
        return segment.last_reply


class _TomgymEnv:
    """`Env.run` for any tomgym game; the concrete classes bind the game and its config."""

    GAME: ClassVar[Game]
    config: Any

    async def run(self, task: TomgymTask, agents: vf.Agents) -> None:
        game = self.GAME
        data = task.data
        game_id = data.name or f"{game.name}/{data.seed}"
        env = pettingzoo.make("aec", game.env_id, **data.env_config)
        env.reset(seed=data.seed, options=dict(data.options) or None)
        policies: dict[str, Policy] = {
            seat: make_seat_policy(spec, seed=data.seed)
            for seat, spec in self.config.policies.items()
        }
        for policy in policies.values():
            policy.reset(game_id)
        log = EpisodeLog(
            env,
            GameSpec(game_id, data.seed, data.options),
            env_id=game.env_id,
            env_config=data.env_config,
        )
        seats: dict[str, _ModelSeat] = {}
        try:
            async with contextlib.AsyncExitStack() as stack:
                while not log.done:
                    agent = env.agent_selection
                    seat = game.seat_of(agent)
                    observation = env.observe(agent)
                    side_question = bool(observation.get("side_question", 0))
                    if seat in policies:
                        turn = Turn(game_id, agent, observation, side_question=side_question)
                        answer = policies[seat].act_batch([turn])[0]
                    else:
                        if side_question:
                            raise ValueError(
                                "side questions (Decrypto `tom` probes) are not supported for "
                                f"model seats; seat {seat!r} was asked one"
                            )
                        if seat not in seats:
                            seats[seat] = await self._open_seat(
                                stack, agents, seat, task, observation
                            )
                        answer = await seats[seat].answer(observation)
                    env.step(answer)
                    log.answered(agent, observation, answer)
        finally:
            for policy in policies.values():
                policy.forget(game_id)
                policy.close()
        record = log.record(self._describe_seats(agents, policies))
        for seat, model_seat in seats.items():
            trace = model_seat.interaction.trace
            spec = self.config.rewards.get(seat)
            total, components = seat_reward(
                record,
                game,
                seat,
                SeatReward(spec.weights, spec.gate) if spec is not None else None,
            )
            trace.record_reward(REWARD_NAME, total, 1.0)
            trace.record_metrics(components)
            trace.info[RECORD_KEY] = record
            trace.info["outcome"] = record["outcome"]

    async def _open_seat(
        self,
        stack: contextlib.AsyncExitStack,
        agents: vf.Agents,
        seat: str,
        task: TomgymTask,
        observation: Mapping[str, Any],
    ) -> _ModelSeat:
        # A prompt-less task: the env (the run's user) opens the conversation with the first
        # observation; the role's system text is the seat's system prompt.
        seat_task = vf.Task(
            vf.TaskData(
                name=f"{task.data.name}/{seat}",
                system_prompt=str(observation.get("system") or "") or None,
            )
        )
        interaction = await stack.enter_async_context(getattr(agents, seat).interaction(seat_task))
        return _ModelSeat(interaction)

    def _describe_seats(
        self, agents: vf.Agents, policies: Mapping[str, Policy]
    ) -> dict[str, dict[str, Any]]:
        described: dict[str, dict[str, Any]] = {}
        for seat in self.GAME.seats:
            agent_id = self.GAME.agent_of_seat[seat]
            if seat in policies:
                described[agent_id] = dict(policies[seat].describe())
                described[agent_id]["spec"] = self.config.policies[seat]
            else:
                model = getattr(getattr(agents, seat).config, "model", None)
                described[agent_id] = {"name": f"verifiers:{model}", "model": model}
        return described


class TomSBEnv(_TomgymEnv, vf.Env[TomSBEnvConfig]):
    GAME: ClassVar[Game] = TOMSB


class DecryptoEnv(_TomgymEnv, vf.Env[DecryptoEnvConfig]):
    GAME: ClassVar[Game] = DECRYPTO


__all__ = [
    "DecryptoEnv",
    "DecryptoEnvConfig",
    "DecryptoTaskset",
    "DecryptoTasksetConfig",
    "SeatRewardConfig",
    "TomSBEnv",
    "TomSBEnvConfig",
    "TomSBTaskset",
    "TomSBTasksetConfig",
    "TomgymChatHarness",
    "TomgymChatHarnessConfig",
    "TomgymTask",
    "TomgymTaskData",
]
