"""The trained agent as a `Policy`: samples its turns with the model being trained.

`TrainablePolicy` answers turns through a `GenerateFn` (`training.rl.generation`) and keeps, per
game, the exact token sequence the model saw and sampled (`training.rl.tokens.EpisodeTokens`):

- Per-episode token budget: at most `episode_budget` sampled tokens per episode (Dr. GRPO's
  normalising constant `max_completion_length`). Once it is spent, remaining turns are answered
  with a fixed fallback text rendered with mask 0 and counted in `fallback_turns`.
- Side questions (Decrypto ToM probes) are answered from the current context but never enter the
  sequence (the env promises they are not part of the conversation).
- Per-game state lives from `reset(game_id)` to `take_episode(game_id)` (the episode player
  collects the finished sequence) or `forget(game_id)` (the runner, once the game's record is
  written); after either, nothing of the game is kept.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from tomgym.agents.base import BasePolicy, Turn
from tomgym.training.rl.generation import GenerateFn
from tomgym.training.rl.tokens import ChatRenderer, EpisodeTokens


def _is_side(turn: Turn) -> bool:
    return bool(turn.side_question) or int(turn.observation.get("side_question", 0) or 0) == 1


class TrainablePolicy(BasePolicy):
    """Samples the trained agent's turns with the model being trained (see module doc).

    `generate` may be swapped between rollouts (`set_generate`), so the same policy object can be
    reused while the weights change. `fallback` is the text (or `turn -> text`) used once the
    episode budget is spent.
    """

    def __init__(
        self,
        renderer: ChatRenderer,
        generate: GenerateFn | None,
        *,
        episode_budget: int,
        max_turn_tokens: int,
        fallback: str | Callable[[Turn], str] | None = None,
        name: str = "trainable",
    ) -> None:
        if episode_budget < 1 or max_turn_tokens < 1:
            raise ValueError("episode_budget and max_turn_tokens must be positive")
        self.renderer = renderer
        self.generate = generate
        self.episode_budget = int(episode_budget)
        self.max_turn_tokens = int(max_turn_tokens)
        self.fallback = fallback
        self.name = name
        self.episodes: dict[str, EpisodeTokens] = {}
        self.generate_calls = 0
        self.generate_seconds = 0.0

    def set_generate(self, generate: GenerateFn | None) -> None:
        self.generate = generate

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": "trainable",
            "episode_budget": self.episode_budget,
            "max_turn_tokens": self.max_turn_tokens,
        }

    def reset(self, game_id: str) -> None:
        self.episodes[game_id] = EpisodeTokens(game_id)

    def episode(self, game_id: str) -> EpisodeTokens:
        """The game's sequence so far (a fresh one for a game not seen yet)."""
        return self.episodes.setdefault(game_id, EpisodeTokens(game_id))

    def take_episode(self, game_id: str) -> EpisodeTokens:
        """Hand out a finished game's sequence and keep nothing of it (empty if never played)."""
        return self.episodes.pop(game_id, None) or EpisodeTokens(game_id)

    def forget(self, game_id: str) -> None:
        """Drop everything kept about one game (the `Policy` protocol's `forget`)."""
        self.episodes.pop(game_id, None)

    def _fallback_text(self, turn: Turn) -> str:
        if callable(self.fallback):
            return self.fallback(turn)
        if self.fallback is not None:
            return self.fallback
        return default_fallback_answer(turn)

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        answers: list[str | None] = [None] * len(turns)
        # One generate call per wave; a wave holds at most one turn per game (its context grows).
        pending = list(range(len(turns)))
        while pending:
            seen: set[str] = set()
            wave: list[int] = []
            rest: list[int] = []
            for i in pending:
                (rest if turns[i].game_id in seen else wave).append(i)
                seen.add(turns[i].game_id)
            self._act_wave([(i, turns[i]) for i in wave], answers)
            pending = rest
        return [a if a is not None else "" for a in answers]

    def _act_wave(self, wave: list[tuple[int, Turn]], answers: list[str | None]) -> None:
        jobs: list[tuple[int, Turn, EpisodeTokens, list[int], int, bool]] = []
        for i, turn in wave:
            ep = self.episode(turn.game_id)
            obs = turn.observation
            system, message = str(obs.get("system", "") or ""), str(obs.get("message", "") or "")
            if not message:
                message = str(obs.get("prompt", ""))
            side = _is_side(turn)
            if ep.started:
                glue = self.renderer.user_suffix_ids(system, message)
                context_prefix, new_ids = ep.context(), glue
            else:
                context_prefix, new_ids = [], self.renderer.first_turn_ids(system, message)
            if side:
                ep.side_questions += 1
                jobs.append((i, turn, ep, context_prefix + new_ids, self.max_turn_tokens, True))
                continue
            if ep.started:
                ep.extend(new_ids, 0)
            else:
                ep.prompt_ids = new_ids
                if system:
                    ep.messages.append({"role": "system", "content": system})
            ep.messages.append({"role": "user", "content": message})
            ep.turns += 1
            left = self.episode_budget - ep.sampled_tokens
            if left <= 0:
                text = self._fallback_text(turn)
                ep.extend([*self.renderer.encode(text), self.renderer.eos_id], 0)
                ep.messages.append({"role": "assistant", "content": text})
                ep.fallback_turns += 1
                answers[i] = text
                continue
            jobs.append((i, turn, ep, ep.context(), min(self.max_turn_tokens, left), False))
        if not jobs:
            return
        if self.generate is None:
            raise RuntimeError("TrainablePolicy has no generate function (call set_generate)")
        started = time.perf_counter()
        outputs = self.generate([j[3] for j in jobs], max(j[4] for j in jobs))
        self.generate_seconds += time.perf_counter() - started
        self.generate_calls += 1
        if len(outputs) != len(jobs):
            raise RuntimeError(f"generate returned {len(outputs)} samples for {len(jobs)} contexts")
        eos = self.renderer.eos_id
        for (i, _turn, ep, _ctx, cap, side), out in zip(jobs, outputs, strict=True):
            ids, logps = list(out.ids[:cap]), list(out.logprobs[:cap])
            if eos in ids:
                cut = ids.index(eos) + 1
                ids, logps, hit_cap = ids[:cut], logps[:cut], False
            else:
                hit_cap = True
            text_ids = ids[:-1] if not hit_cap else ids
            text = self.renderer.tokenizer.decode(text_ids, skip_special_tokens=True)
            answers[i] = text
            if side:
                continue
            ep.extend(ids, 1, logps)
            ep.sampled_tokens += len(ids)
            if hit_cap:
                ep.extend([eos], 0)
                ep.capped_turns += 1
            ep.messages.append({"role": "assistant", "content": text})

    def pad_generate_calls(self, target: int) -> None:
        """Make dummy 1-token generate calls until `generate_calls == target` (multi-GPU sync)."""
        while self.generate_calls < target:
            assert self.generate is not None
            self.generate([[self.renderer.eos_id]], 1)
            self.generate_calls += 1


def default_fallback_answer(turn: Turn) -> str:
    """A protocol-valid answer that reveals nothing, for TOM-SB defenders; else a plain refusal.

    For a TOM-SB defender the levels come from the observation's scenario JSON, so the fallback
    parses (estimates all null, trust 5, a refusal reply); the env would otherwise re-ask.
    """
    scenario = turn.observation.get("scenario")
    if turn.agent.startswith("defender") and scenario:
        try:
            levels = json.loads(scenario)["hierarchy"]
            return json.dumps(
                {
                    "attacker_belief_about_target": dict.fromkeys(levels),
                    "attacker_trust_in_us": 5,
                    "reflection": "",
                    "reply": "I'm not able to discuss that.",
                }
            )
        except (ValueError, KeyError, TypeError):
            pass
    return "I'm not able to answer that."
