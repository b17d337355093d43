"""Groups of training episodes: dataset rows, the episode player, and TRL's rollout batch.

The trained agent plays through the batched runner (`training.runner.play_games`) as a
`TrainablePolicy`; the other agents are ordinary policies (scripted, a frozen LLM on any backend)
behind one `RoutedPolicy`, chosen per game by its row's route. When a game ends, the player takes
the trained agent's token sequence and the opponents' failure (if any) in the runner's
`on_record` hook, before the runner makes every policy forget the game; so an episode never
depends on what a policy keeps after `forget`.

- `GameRow`: one dataset row (the game to play and its opponent route), encoded as TRL's prompt.
- `group_games`: TRL's prompts (each row repeated `num_generations` times) -> games to play.
- `EpisodePlayer.play`: play games, one `Episode` (record + tokens + why dropped) per game.
- `trl_batch`: episodes -> the rollout function's return value and rollout metrics.

This module never imports `trl`: the generation callable reaches the policy through
`TrainablePolicy.set_generate`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tomgym.agents.base import Policy
from tomgym.envs.seeding import derive_seed
from tomgym.rewards.episode import EpisodeRecord
from tomgym.training.rl.generation import ScoreFn
from tomgym.training.rl.opponents import Opponent, game_failure, opponent_for
from tomgym.training.rl.tokens import ChatRenderer, EpisodeTokens, debug_check_episode
from tomgym.training.rl.trainable import TrainablePolicy
from tomgym.training.routing import RoutedPolicy
from tomgym.training.runner import GameSpec, play_games


@dataclass(frozen=True)
class GameRow:
    """One dataset row: the game to play (options pin scenario/variant) and its opponent route.

    It travels through TRL as the row's `prompt` string (`encode()`), because TRL hands the
    rollout function nothing but the prompts.
    """

    row: int
    options: Mapping[str, Any]
    seed: int = 0
    route: str = ""

    def encode(self) -> str:
        return json.dumps(
            {
                "row": self.row,
                "options": dict(self.options),
                "seed": self.seed,
                "route": self.route,
            },
            sort_keys=True,
        )

    @classmethod
    def decode(cls, prompt: Any) -> GameRow:
        if isinstance(prompt, GameRow):
            return prompt
        try:
            data = json.loads(prompt)
            return cls(
                int(data["row"]), dict(data["options"]), int(data["seed"]), str(data["route"])
            )
        except (TypeError, ValueError, KeyError) as exc:
            raise ValueError(
                f"dataset prompt is not an encoded GameRow: {str(prompt)[:80]!r}"
            ) from exc


@dataclass
class Episode:
    """A finished game from the trained agent's point of view."""

    game_id: str
    row: GameRow
    record: EpisodeRecord
    tokens: EpisodeTokens
    dropped: str | None = None  # why the episode was dropped from its group (None = kept)
    teacher: bool = False  # played by the scripted teacher (off-policy guidance), not the model


class EpisodePlayer:
    """Plays groups of episodes through the batched runner with a `TrainablePolicy`.

    `opponents` maps every other agent to a policy or a `PolicyPerRoute` (resolved with each
    game's route). Episodes whose opponent gave up (`ResilientPolicy.failure`) are returned with
    `dropped` set.
    """

    def __init__(
        self,
        env_id: str,
        trained_agent: str,
        trainable: TrainablePolicy,
        opponents: Mapping[str, Opponent],
        *,
        env_config: Mapping[str, Any] | None = None,
        concurrency: int = 8,
    ) -> None:
        self.env_id = env_id
        self.trained_agent = trained_agent
        self.trainable = trainable
        self.opponents = dict(opponents)
        self.env_config = dict(env_config or {})
        self.concurrency = concurrency

    def play(self, games: Sequence[tuple[str, GameRow, int]]) -> list[Episode]:
        """Play `(game_id, row, env_seed)` games concurrently; one Episode per game, in order."""
        return self.play_as(self.trainable, self.trainable.take_episode, games)

    def play_as(
        self,
        policy: Policy,
        take_tokens: Callable[[str], EpisodeTokens | None],
        games: Sequence[tuple[str, GameRow, int]],
        *,
        teacher: bool = False,
    ) -> list[Episode]:
        """`play` with another policy in the trained agent's seat (the scripted teacher);
        `take_tokens(game_id)` gives a finished game's sequence (None: it never answered, the
        episode is dropped) before the runner makes the policies forget the game."""
        router = RoutedPolicy(name="opponents")
        for game_id, row, _seed in games:
            router.assign(
                game_id,
                {agent: opponent_for(o, row.route) for agent, o in self.opponents.items()},
            )
        taken: dict[str, tuple[EpisodeTokens | None, str | None]] = {}

        def take(record: EpisodeRecord) -> None:
            # Runs before the runner makes the policies forget the game.
            game_id = record["game_id"]
            failure = game_failure(router.policies_of(game_id), game_id)
            taken[game_id] = (take_tokens(game_id), failure)

        policies: dict[str, Policy] = {self.trained_agent: policy}
        policies.update(dict.fromkeys(self.opponents, router))
        specs = [GameSpec(g, s, dict(r.options)) for g, r, s in games]
        records = play_games(
            self.env_id,
            specs,
            policies,
            concurrency=max(1, min(self.concurrency, len(specs))),
            env_config=self.env_config or None,
            on_record=take,
        )
        by_id = {r["game_id"]: r for r in records}
        episodes = []
        for game_id, row, _seed in games:
            tokens, failure = taken[game_id]
            dropped = f"opponent failed: {failure}" if failure is not None else None
            if tokens is None:
                tokens, dropped = EpisodeTokens(game_id), dropped or "the policy never answered"
            episodes.append(Episode(game_id, row, by_id[game_id], tokens, dropped, teacher))
        return episodes


def group_members(rows: Sequence[GameRow]) -> list[int]:
    """Each row's member index in its group: its position in its run of identical rows (TRL
    repeats each dataset row `num_generations` times in a row)."""
    members: list[int] = []
    for i, row in enumerate(rows):
        members.append(members[-1] + 1 if i and row.encode() == rows[i - 1].encode() else 0)
    return members


def group_games(
    prompts: Sequence[Any], *, tag: str, base_seed: int, shared_seed: bool
) -> list[tuple[str, GameRow, int]]:
    """Turn TRL's prompts (each row repeated num_generations times in a row) into games.

    Member k of a run of identical rows gets game id `{tag}-r{row}-g{k}` (the scripted
    opponents derive their per-game seed from it, so group members differ); the env seed is the
    row's seed for every member when `shared_seed` (same keywords/codes), else a derived one.
    """
    rows = [GameRow.decode(prompt) for prompt in prompts]
    games: list[tuple[str, GameRow, int]] = []
    for row, member in zip(rows, group_members(rows), strict=True):
        seed = row.seed if shared_seed else derive_seed(base_seed, tag, row.row, member)
        games.append((f"{tag}-r{row.row}-g{member}", row, seed))
    return games


def trl_batch(
    episodes: Sequence[Episode],
    renderer: ChatRenderer,
    *,
    debug_score: ScoreFn | None = None,
    debug: bool = False,
) -> tuple[dict[str, list[Any]], dict[str, float]]:
    """The rollout function's return value and rollout metrics.

    Besides TRL's keys (`prompt_ids`, `completion_ids`, `logprobs`, `env_mask`) every row carries
    `episode` (the game's record, as the runner wrote it), `dropped` (why the episode is dropped,
    None when kept: the reward function returns None for it), `teacher` (played by the scripted
    teacher, not the model), `anchored` (the model played on after the teacher's first turns,
    `training.rl.anchored`) and `rollout` (the trained agent's token counts); TRL hands these
    extra keys to the reward function row by row. Dropped episodes keep a valid token sequence
    with an all-zero mask.
    """
    out: dict[str, list[Any]] = {
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "episode": [],
        "dropped": [],
        "teacher": [],
        "anchored": [],
        "rollout": [],
    }
    eos = renderer.eos_id
    mismatches: list[float] = []
    deviations: list[float] = []
    for ep in episodes:
        t = ep.tokens
        prompt = t.prompt_ids or [eos]
        completion, mask, logps = t.completion_ids, t.env_mask, t.logprobs
        if not completion:  # the trained agent never acted: keep one masked token
            completion, mask, logps = [eos], [0], [0.0]
        if ep.dropped:
            mask = [0] * len(completion)
        out["prompt_ids"].append(list(prompt))
        out["completion_ids"].append(list(completion))
        out["env_mask"].append(list(mask))
        out["logprobs"].append(list(logps))
        out["episode"].append(ep.record)
        out["dropped"].append(ep.dropped)
        out["teacher"].append(ep.teacher)
        out["anchored"].append(t.given_turns > 0)
        out["rollout"].append(
            {
                "sampled_tokens": t.sampled_tokens,
                "forced_tokens": t.forced_tokens,
                "turns": t.turns,
                "capped_turns": t.capped_turns,
                "answer_stops": t.answer_stops,
                "repetition_stops": t.repetition_stops,
                "fallback_turns": t.fallback_turns,
                "context_window_turns": t.context_window_turns,
                "given_turns": t.given_turns,
                "completion_tokens": len(completion),
            }
        )
        if debug and t.started and not ep.dropped and not ep.teacher:  # teacher: no log-probs
            check = debug_check_episode(t, renderer, debug_score)
            mismatches.append(check["token_mismatches"])
            if not math.isnan(check["max_logprob_deviation"]):
                deviations.append(check["max_logprob_deviation"])
    n = max(1, len(episodes))
    metrics = {
        "rollout/episodes": float(len(episodes)),
        "rollout/dropped_episodes": float(sum(ep.dropped is not None for ep in episodes)),
        "rollout/teacher_episodes": float(sum(ep.teacher for ep in episodes)),
        "rollout/anchored_episodes": float(sum(e.tokens.given_turns > 0 for e in episodes)),
        "rollout/given_turns": float(sum(e.tokens.given_turns for e in episodes)),
        "rollout/sampled_tokens_per_episode": sum(e.tokens.sampled_tokens for e in episodes) / n,
        "rollout/forced_tokens_per_episode": sum(e.tokens.forced_tokens for e in episodes) / n,
        "rollout/completion_tokens_per_episode": sum(len(c) for c in out["completion_ids"]) / n,
        "rollout/turns_per_episode": sum(e.tokens.turns for e in episodes) / n,
        "rollout/capped_turns": float(sum(e.tokens.capped_turns for e in episodes)),
        "rollout/answer_stops": float(sum(e.tokens.answer_stops for e in episodes)),
        "rollout/repetition_stops": float(sum(e.tokens.repetition_stops for e in episodes)),
        "rollout/fallback_turns": float(sum(e.tokens.fallback_turns for e in episodes)),
        "rollout/context_window_turns": float(sum(e.tokens.context_window_turns for e in episodes)),
    }
    if debug:
        metrics["debug/token_mismatches_max"] = max(mismatches, default=0.0)
        metrics["debug/logprob_deviation_max"] = max(deviations, default=math.nan)
    return out, metrics
