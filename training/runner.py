"""The batched runner: many games at once, one `act_batch` call per policy per tick.

Each tick collects the pending turn of every running game, groups the turns by policy and makes
one `act_batch` call per policy; games finish at different times and their slots are refilled
from the work queue (no lockstep). Every finished game becomes one episode record
(`tomgym.rewards.episode.EpisodeRecord`, built once by `episode_record`), handed to `on_record`
as soon as it ends, so a crash later in the run never loses a finished game. Evaluation and
training both play through this module, so its speed is the training speed.

Per-game lifecycle: every distinct policy of a game gets `reset(game_id)` before its first turn;
when the game ends its record is built, `on_record(record)` runs, and only then does every
policy get `forget(game_id)` (see `training.routing.forget_game`). So `on_record` is the place to
collect per-game state a policy holds (the trained agent's sampled tokens, an opponent's
failure), and nothing survives the game after it.

A `RoutedPolicy` may stand for several agents; the record then names, per agent, the policy the
router assigned to that game, not the router.

Context window: a policy whose conversation would outgrow its model's window raises an exception
with `reason == "context_window"` (`agents.llm.kv_cache.ContextWindowExceeded`; matched by that
attribute so this module needs no torch), naming the offending conversations in `rows` as
`(index, (game_id, agent), tokens)`. The runner never feeds such a turn: it ends each named game
as truncated (its record gets `truncation_reason: "context_window"` and no env outcome) and asks
the batch's other turns again on the next tick (a policy commits nothing from a failed call). When
the exception names no game of the batch, each turn is retried alone to find the offenders.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pettingzoo
import tomgym.envs  # noqa: F401 - registers the environment ids
from tomgym.agents.base import Policy, Turn
from tomgym.rewards.episode import CONTEXT_WINDOW, EpisodeRecord, new_record
from tomgym.training.routing import RoutedPolicy, distinct, forget_game


class RunnerError(RuntimeError):
    """A policy failed mid-run; finished games were already handed to `on_record`."""


@dataclass(frozen=True)
class GameSpec:
    """One game to play: its id (unique in a run), seed and env reset options.

    `eval` holds what the job asking for the game knows and the runner cannot (evaluation seed,
    attacker label, matchup ...); it becomes the record's `eval` block.
    """

    game_id: str
    seed: int
    options: Mapping[str, Any] = field(default_factory=dict)
    eval: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class RunStats:
    """Where the time went (filled in by `play_games` when passed)."""

    games: int = 0
    ticks: int = 0
    turns: int = 0
    policy_calls: dict[str, int] = field(default_factory=dict)
    policy_seconds: dict[str, float] = field(default_factory=dict)
    wall_seconds: float = 0.0

    @property
    def outside_policy_fraction(self) -> float:
        inside = sum(self.policy_seconds.values())
        return max(0.0, 1.0 - inside / self.wall_seconds) if self.wall_seconds else 0.0


def to_jsonable(value: Any) -> Any:
    """Plain-JSON copy of env infos/observations (numpy scalars/arrays, tuples, NaN-free)."""
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if value is None or isinstance(value, str | int | bool):
        return value
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict())
    return str(value)


class EpisodeLog:
    """Turn entries and returns of one game played in an AEC env, in the episode record's form.

    It drives nothing: whoever steps the env (this runner, or another library hosting a tomgym
    game, see `tomgym.integrations`) calls `answered(agent, observation, answer)` right after
    each `env.step(answer)`, so the env's own rules decide turns and outcomes, and `record(...)`
    then gives the same record whoever stepped. `spec` is the game the env was reset for (its
    id, seed, options and eval block go into the record, as do `env_id` and `env_config`);
    `record_prompts` keeps each turn's prompt text.
    """

    def __init__(
        self,
        env: Any,
        spec: GameSpec,
        *,
        env_id: str,
        env_config: Mapping[str, Any],
        record_prompts: bool = False,
    ) -> None:
        self.env = env
        self.spec = spec
        self.env_id = env_id
        self.env_config = dict(env_config)
        self.record_prompts = record_prompts
        self.turns: list[dict[str, Any]] = []
        self.returns = {agent: 0.0 for agent in env.possible_agents}

    @property
    def done(self) -> bool:
        """Every live agent is terminated or truncated (or none is left)."""
        return all(
            self.env.terminations.get(a, False) or self.env.truncations.get(a, False)
            for a in self.env.agents
        )

    def answered(self, agent: str, observation: Mapping[str, Any], answer: str) -> None:
        """Log the answer `agent` gave to `observation`; call right after `env.step(answer)`."""
        for rewarded, reward in self.env.rewards.items():
            self.returns[rewarded] = self.returns.get(rewarded, 0.0) + float(reward)
        parse = self.env.infos.get(agent, {}).get("last_parse", {}) or {}
        entry: dict[str, Any] = {
            "agent": agent,
            "message": observation.get("message", ""),
            "raw": answer,
            "parsed": to_jsonable(parse.get("parsed")),
            "valid": bool(parse.get("valid", True)),
            "error": parse.get("error"),
            "retry": int(observation.get("retry", 0)),
            "side_question": bool(observation.get("side_question", 0)),
        }
        if self.record_prompts:
            entry["prompt"] = observation.get("prompt", "")
        self.turns.append(entry)

    def record(
        self, policies: Mapping[str, Mapping[str, Any]], truncation_reason: str | None = None
    ) -> EpisodeRecord:
        """The game's record; `policies` maps every agent id to its policy's description."""
        agents = self.env.possible_agents
        return new_record(
            game_id=self.spec.game_id,
            env_id=self.env_id,
            env_config=to_jsonable(self.env_config),
            seed=self.spec.seed,
            options=to_jsonable(self.spec.options),
            policies=policies,
            turns=self.turns,
            infos={agent: to_jsonable(self.env.infos.get(agent, {})) for agent in agents},
            rewards=self.returns,
            eval_block=to_jsonable(self.spec.eval),
            truncation_reason=truncation_reason,
        )


class _Game(EpisodeLog):
    def __init__(
        self, env_id: str, env_config: Mapping[str, Any], spec: GameSpec, record_prompts: bool
    ):
        env = pettingzoo.make("aec", env_id, **dict(env_config))
        env.reset(seed=spec.seed, options=dict(spec.options) or None)
        super().__init__(
            env, spec, env_id=env_id, env_config=env_config, record_prompts=record_prompts
        )
        self.truncation_reason: str | None = None

    @property
    def over(self) -> bool:
        """The env ended the game, or the runner cut it short (`truncation_reason`)."""
        return self.truncation_reason is not None or self.done

    def pending_turn(self) -> Turn:
        agent = self.env.agent_selection
        observation = self.env.observe(agent)
        return Turn(
            game_id=self.spec.game_id,
            agent=agent,
            observation=observation,
            side_question=bool(observation.get("side_question", 0)),
        )

    def apply(self, turn: Turn, answer: str) -> None:
        self.env.step(answer)
        self.answered(turn.agent, turn.observation, answer)


def _description(policy: Policy, game_id: str, agent: str) -> dict[str, Any]:
    if isinstance(policy, RoutedPolicy):
        policy = policy.policy_for(game_id, agent)
    return to_jsonable(policy.describe())


def episode_record(game: _Game, policies: Mapping[str, Policy]) -> EpisodeRecord:
    """The record of a finished game (the contract rewards/ and reports read)."""
    game_id = game.spec.game_id
    described = {
        agent: _description(policies[agent], game_id, agent) for agent in game.env.possible_agents
    }
    return game.record(described, game.truncation_reason)


def _is_context_window(exc: BaseException) -> bool:
    return getattr(exc, "reason", None) == CONTEXT_WINDOW


def _policy_failed(name: str, turns: int, exc: BaseException) -> RunnerError:
    return RunnerError(
        f"policy {name!r} failed while playing {turns} turn(s): {type(exc).__name__}: {exc}"
    )


def _named_games(exc: BaseException, game_ids: set[str]) -> set[str]:
    """Game ids of the batch that a context-window exception names in its `rows`."""
    named = set()
    for row in getattr(exc, "rows", None) or []:
        key = row[1] if isinstance(row, tuple | list) and len(row) > 1 else None
        if isinstance(key, tuple | list) and key and key[0] in game_ids:
            named.add(key[0])
    return named


def _act_around_context_window(
    policy: Policy, pairs: list[tuple[_Game, Turn]], exc: BaseException, name: str
) -> list[tuple[_Game, Turn, str]]:
    """After `exc` (a context-window refusal of the whole batch): mark the offending games
    truncated; returns the answers obtained for the others (none when the exception named its
    offenders: those games are simply asked again next tick)."""
    named = _named_games(exc, {game.spec.game_id for game, _ in pairs})
    if named or len(pairs) == 1:
        for game, _ in pairs:
            if not named or game.spec.game_id in named:
                game.truncation_reason = CONTEXT_WINDOW
        return []
    answered = []
    for game, turn in pairs:
        try:
            answers = policy.act_batch([turn])
        except Exception as single:  # noqa: BLE001 - reported with context, records kept
            if not _is_context_window(single):
                raise _policy_failed(name, 1, single) from single
            game.truncation_reason = CONTEXT_WINDOW
            continue
        if len(answers) != 1:
            raise RunnerError(f"policy {name!r} returned {len(answers)} answers for 1 turn")
        answered.append((game, turn, answers[0]))
    return answered


def play_games(
    env_id: str,
    games: Iterable[GameSpec],
    policies: Mapping[str, Policy],
    *,
    concurrency: int = 8,
    env_config: Mapping[str, Any] | None = None,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    progress: bool | Callable[[EpisodeRecord], None] = False,
    record_prompts: bool = True,
    stats: RunStats | None = None,
    max_turns_per_game: int = 10_000,
) -> list[EpisodeRecord]:
    """Play every game in `games` with `policies` (agent id -> policy) and return their records.

    `policies` must name a policy for every agent of the env. At most `concurrency` games run at
    once. `progress=True` shows a rich progress bar; a callable is called with each record.
    `on_record` runs before the game's policies forget it (see the module docstring).
    A policy that raises stops the run with `RunnerError` after every finished game has been
    handed to `on_record`, except for a context-window refusal, which ends the games it names as
    truncated (see the module docstring).
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    env_config = dict(env_config or {})
    if env_id not in pettingzoo.aec_registry:
        known = sorted(e for e in pettingzoo.aec_registry if e.startswith("tomgym/"))
        raise ValueError(f"unknown env id {env_id!r}; tomgym envs: {known}")
    queue = list(games)
    ids = [g.game_id for g in queue]
    if len(set(ids)) != len(ids):
        raise ValueError("game ids must be unique within a run")
    stats = stats if stats is not None else RunStats()
    records: list[EpisodeRecord] = []
    active: list[_Game] = []
    start = time.perf_counter()
    bar = _Progress(len(queue)) if progress is True else None
    queue.reverse()  # pop() from the end keeps the given order

    def finish(game: _Game) -> None:
        record = episode_record(game, policies)
        records.append(record)
        stats.games += 1
        if on_record is not None:
            on_record(record)
        for policy in distinct(policies[a] for a in game.env.possible_agents):
            forget_game(policy, game.spec.game_id)
        if bar is not None:
            bar.update(record)
        elif callable(progress):
            progress(record)

    try:
        while queue or active:
            while queue and len(active) < concurrency:
                game = _Game(env_id, env_config, queue.pop(), record_prompts)
                missing = [a for a in game.env.possible_agents if a not in policies]
                if missing:
                    raise ValueError(f"no policy given for agent(s) {missing} of {env_id}")
                for policy in distinct(policies[a] for a in game.env.possible_agents):
                    policy.reset(game.spec.game_id)
                if game.done:
                    finish(game)
                else:
                    active.append(game)
            if not active:
                continue
            stats.ticks += 1
            by_policy: dict[int, list[tuple[_Game, Turn]]] = {}
            for game in active:
                turn = game.pending_turn()
                by_policy.setdefault(id(policies[turn.agent]), []).append((game, turn))
            for pairs in by_policy.values():
                policy = policies[pairs[0][1].agent]
                name = getattr(policy, "name", type(policy).__name__)
                t0 = time.perf_counter()
                try:
                    answers = policy.act_batch([turn for _, turn in pairs])
                    if len(answers) != len(pairs):
                        raise RunnerError(
                            f"policy {name!r} returned {len(answers)} answers for {len(pairs)} turns"
                        )
                    answered = [(g, t, a) for (g, t), a in zip(pairs, answers, strict=True)]
                except RunnerError:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported with context, records kept
                    if not _is_context_window(exc):
                        raise _policy_failed(name, len(pairs), exc) from exc
                    answered = _act_around_context_window(policy, pairs, exc, name)
                stats.policy_seconds[name] = (
                    stats.policy_seconds.get(name, 0.0) + time.perf_counter() - t0
                )
                stats.policy_calls[name] = stats.policy_calls.get(name, 0) + 1
                for game, turn, answer in answered:
                    game.apply(turn, answer if isinstance(answer, str) else str(answer))
                    stats.turns += 1
                    if len(game.turns) > max_turns_per_game:
                        raise RunnerError(
                            f"game {game.spec.game_id} exceeded {max_turns_per_game} turns"
                        )
            still_running = []
            for game in active:
                if game.over:
                    finish(game)
                else:
                    still_running.append(game)
            active = still_running
    finally:
        stats.wall_seconds += time.perf_counter() - start
        if bar is not None:
            bar.close()
    return records


class _Progress:
    """Rich progress bar with outcome counts so far and ETA (silently absent without rich)."""

    def __init__(self, total: int) -> None:
        self.counts: dict[str, int] = {}
        try:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
        except ImportError:
            self.progress = None
            return
        self.progress = Progress(
            TextColumn("[bold]games"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[outcomes]}"),
            transient=False,
        )
        self.task = self.progress.add_task("games", total=total, outcomes="")
        self.progress.start()

    def update(self, record: EpisodeRecord) -> None:
        outcome = "truncated" if record.get("truncation_reason") else str(record["outcome"])
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        if self.progress is not None:
            text = " ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
            self.progress.update(self.task, advance=1, outcomes=text)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
