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
  written); after either, nothing of the game is kept, and `forget` also drops the game's KV
  cache in a generate function that keeps one (`forget(game_id)` on it).
- Conversation keys: a generate function with `accepts_keys = True` gets `keys=` with each
  context's game id (side questions: `(game_id, "side")`, so they never displace the main
  conversation's cache).
- A turn stopped at the close of its protocol answer (`finish_reason == "answer"`) keeps its
  sampled ids and gets an EOS with mask 0, as a capped turn does; counted in `answer_stops`.
- A turn stopped by the repetition guard (`finish_reason == "repetition"`) is a capped turn
  (EOS with mask 0, counted in `capped_turns`), also counted in `repetition_stops`.
- Answer constraints: a generate function with any of `agents.llm.constraints.CONSTRAINT_FLAGS`
  on gets each context's TOM-SB role and names per level (`answer_options=`, from the turn's
  observation). A sampled id that was the only one its constraint allowed (`Sampled.forced`:
  a key of the answer template, the rest of a name already begun) gets mask 0: the model chose
  nothing there, so the loss leaves it out (counted in `forced_tokens`).
- A turn whose context would outgrow the model's context window (`ContextWindowExceeded`) is
  never fed: it is answered with the fallback text (mask 0) and counted in
  `context_window_turns`, the episode's recorded truncation reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from tomgym.agents.base import BasePolicy, Turn
from tomgym.agents.llm.constraints import answer_options, constrains_answers
from tomgym.agents.llm.kv_cache import ContextWindowExceeded
from tomgym.training.rl.generation import GenerateFn, Sampled
from tomgym.training.rl.tokens import ChatRenderer, EpisodeTokens


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
        forget = getattr(self.generate, "forget", None)
        if forget is not None:
            forget(game_id)

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
            if turn.is_side_question:
                ep.side_questions += 1
                context = ep.context() + self._user_ids(ep, *self._message(turn))
                jobs.append((i, turn, ep, context, self.max_turn_tokens, True))
                continue
            self._open_turn(ep, turn)
            left = self.episode_budget - ep.sampled_tokens
            if left <= 0:
                self._answer_unsampled(i, turn, ep, answers)
                ep.fallback_turns += 1
                continue
            jobs.append((i, turn, ep, ep.context(), min(self.max_turn_tokens, left), False))
        if not jobs:
            return
        outputs = self._generate(jobs)
        eos = self.renderer.eos_id
        for (i, turn, ep, _ctx, cap, side), out in zip(jobs, outputs, strict=True):
            if out is None:  # the context window is full: never fed to the model
                if side:
                    answers[i] = self._fallback_text(turn)
                else:
                    self._answer_unsampled(i, turn, ep, answers)
                ep.context_window_turns += 1
                continue
            ids, logps = list(out.ids[:cap]), list(out.logprobs[:cap])
            if eos in ids:
                cut = ids.index(eos) + 1
                ids, logps, closed = ids[:cut], logps[:cut], True
            else:
                closed = False
            text_ids = ids[:-1] if closed else ids
            text = self.renderer.tokenizer.decode(text_ids, skip_special_tokens=True)
            answers[i] = text
            if side:
                continue
            forced = [bool(f) for f in out.forced[: len(ids)]]
            forced += [False] * (len(ids) - len(forced))
            ep.extend(ids, [0 if f else 1 for f in forced], logps)
            ep.sampled_tokens += len(ids)
            ep.forced_tokens += sum(forced)
            if not closed:
                ep.extend([eos], 0)
                if out.finish_reason == "answer" and len(out.ids) <= cap:
                    ep.answer_stops += 1
                else:
                    ep.capped_turns += 1
                    if out.finish_reason == "repetition":
                        ep.repetition_stops += 1
            ep.messages.append({"role": "assistant", "content": text})

    def record_answer(self, turn: Turn, text: str) -> None:
        """Take into the game's sequence a turn another policy answered (a teacher's prefix,
        `training.rl.anchored`): its message and `text`, rendered with mask 0, since the model
        chose none of it; counted in `given_turns`. Side questions never enter the sequence."""
        if turn.is_side_question:
            return
        ep = self.episode(turn.game_id)
        self._open_turn(ep, turn)
        self._render_unsampled(ep, text)
        ep.given_turns += 1

    @staticmethod
    def _message(turn: Turn) -> tuple[str, str]:
        obs = turn.observation
        message = str(obs.get("message", "") or "") or str(obs.get("prompt", ""))
        return str(obs.get("system", "") or ""), message

    def _user_ids(self, ep: EpisodeTokens, system: str, message: str) -> list[int]:
        """The ids a turn's message adds to the game's sequence (the whole first prompt, or
        the glue after the last answer)."""
        if ep.started:
            return self.renderer.user_suffix_ids(system, message)
        return self.renderer.first_turn_ids(system, message)

    def _open_turn(self, ep: EpisodeTokens, turn: Turn) -> None:
        """Append a main turn's message to the sequence (mask 0) and the chat."""
        system, message = self._message(turn)
        new_ids = self._user_ids(ep, system, message)
        if ep.started:
            ep.extend(new_ids, 0)
        else:
            ep.prompt_ids = new_ids
            if system:
                ep.messages.append({"role": "system", "content": system})
        ep.messages.append({"role": "user", "content": message})
        ep.turns += 1

    def _render_unsampled(self, ep: EpisodeTokens, text: str) -> None:
        ep.extend([*self.renderer.encode(text), self.renderer.eos_id], 0)
        ep.messages.append({"role": "assistant", "content": text})

    def _answer_unsampled(
        self, i: int, turn: Turn, ep: EpisodeTokens, answers: list[str | None]
    ) -> None:
        """Answer a turn with the fallback text, rendered with mask 0 (nothing is sampled)."""
        text = self._fallback_text(turn)
        self._render_unsampled(ep, text)
        answers[i] = text

    def _generate(
        self, jobs: list[tuple[int, Turn, EpisodeTokens, list[int], int, bool]]
    ) -> list[Sampled | None]:
        """One generate call for the wave; None for each context past the context window."""
        if self.generate is None:
            raise RuntimeError("TrainablePolicy has no generate function (call set_generate)")
        keyed = getattr(self.generate, "accepts_keys", False)
        live = list(range(len(jobs)))
        results: list[Sampled | None] = [None] * len(jobs)
        started = time.perf_counter()
        try:
            while live:
                contexts = [jobs[j][3] for j in live]
                budget = max(jobs[j][4] for j in live)
                extra: dict[str, Any] = {}
                if constrains_answers(self.generate):
                    extra["answer_options"] = [answer_options(jobs[j][1].observation) for j in live]
                try:
                    if keyed:
                        keys = [
                            (jobs[j][1].game_id, "side") if jobs[j][5] else jobs[j][1].game_id
                            for j in live
                        ]
                        outputs = self.generate(contexts, budget, keys=keys, **extra)  # type: ignore[call-arg]
                    else:
                        outputs = self.generate(contexts, budget, **extra)  # type: ignore[call-arg]
                except ContextWindowExceeded as exc:
                    over = {live[row] for row, _key, _tokens in exc.rows}
                    live = [j for j in live if j not in over]
                    continue
                if len(outputs) != len(live):
                    raise RuntimeError(
                        f"generate returned {len(outputs)} samples for {len(live)} contexts"
                    )
                for j, out in zip(live, outputs, strict=True):
                    results[j] = out
                break
        finally:
            self.generate_seconds += time.perf_counter() - started
            self.generate_calls += 1
        return results

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
