"""Multi-turn episodes as token sequences for Dr. GRPO: token-in/token-out, no re-tokenising.

The trained agent plays through the batched runner (`training.runner.play_games`) as a
`TrainablePolicy`; the other agents are ordinary policies (scripted, a frozen LLM on any backend).
For every game the policy keeps the exact ids the model sampled and splices everything else in
between, so the sequence the loss sees is the sequence the model saw:

    prompt_ids      = chat template of [system, first message] + generation prompt
    completion_ids  = turn_1 | user-suffix(message_2) | turn_2 | user-suffix(message_3) | ...
    env_mask        = 1 on sampled ids (through the first EOS), 0 on everything else

- A turn that hits its token cap gets an EOS appended with mask 0 (so the template stays valid
  and the policy is never taught to emit that EOS).
- `user-suffix(m)` is the chat template's rendering of a user turn after an assistant turn, cut
  right after the assistant's EOS (the template glue, e.g. "\\n", the user block and the next
  generation prompt), found with a marker conversation so it works for templates that re-render
  earlier turns (Qwen3 strips old reasoning).
- Per-episode token budget: at most `episode_budget` sampled tokens per episode (this is Dr. GRPO's
  normalising constant `max_completion_length`). Once it is spent, remaining turns are answered
  with a fixed fallback text rendered with mask 0 and counted in `fallback_turns`.
- Side questions (Decrypto ToM probes) are answered from the current context but never enter the
  sequence (the env promises they are not part of the conversation).

This module never imports `trl`: the generation callable is handed in (`GenerateFn`), built by
`training.trl_adapter` from `trl.models.unwrap_model_for_generation`, or by `hf_generate_fn` for
a plain model.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tomgym.agents.base import BasePolicy, Policy, Turn

logger = logging.getLogger(__name__)

_MARKER = "tomgym-suffix-marker-7f3a"


@dataclass(frozen=True)
class Sampled:
    """One sampled continuation: ids (through the first EOS if any) and their log-probs."""

    ids: list[int]
    logprobs: list[float]


GenerateFn = Callable[[Sequence[Sequence[int]], int], list[Sampled]]
"""`generate(contexts, max_new_tokens)` -> one `Sampled` per context (same order)."""

ScoreFn = Callable[[Sequence[int], Sequence[int]], list[float]]
"""`score(prompt_ids, completion_ids)` -> log-prob of every completion token under the model."""


class ChatRenderer:
    """Chat-template rendering in token ids (`tokenizer` is a Hugging Face tokenizer)."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None):
        self.tokenizer = tokenizer
        self.kwargs = dict(chat_template_kwargs or {})
        eos = tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the tokenizer has no eos_token_id; multi-turn splicing needs one")
        self.eos_id = int(eos)
        self.eos_text = str(tokenizer.eos_token)
        self._suffix_cache: dict[tuple[str, str], list[int]] = {}

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def render(self, messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            list(messages),
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            **self.kwargs,
        )

    @staticmethod
    def head(system: str, message: str) -> list[dict[str, str]]:
        msgs = [{"role": "system", "content": system}] if system else []
        return [*msgs, {"role": "user", "content": message}]

    def first_turn_ids(self, system: str, message: str) -> list[int]:
        return self.encode(self.render(self.head(system, message), add_generation_prompt=True))

    def user_suffix_ids(self, system: str, message: str) -> list[int]:
        """Tokens between an assistant's EOS and the next assistant's first sampled token."""
        marked = [
            *self.head(system, "start"),
            {"role": "assistant", "content": _MARKER},
            {"role": "user", "content": message},
        ]
        text = self.render(marked, add_generation_prompt=True)
        anchor = _MARKER + self.eos_text
        at = text.find(anchor)
        if at < 0:
            raise ValueError(
                "the chat template does not end assistant turns with the EOS token "
                f"{self.eos_text!r}; token splicing needs it"
            )
        return self.encode(text[at + len(anchor) :])

    def fresh_ids(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """A full re-render of the conversation, cut after the last EOS (for the debug check)."""
        ids = self.encode(self.render(messages, add_generation_prompt=False))
        last = max((i for i, t in enumerate(ids) if t == self.eos_id), default=len(ids) - 1)
        return ids[: last + 1]


@dataclass
class EpisodeTokens:
    """The trained agent's side of one game, as TRL wants it (see module doc)."""

    game_id: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    sampled_tokens: int = 0
    turns: int = 0
    capped_turns: int = 0
    fallback_turns: int = 0
    side_questions: int = 0

    @property
    def started(self) -> bool:
        return bool(self.prompt_ids)

    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def extend(
        self, ids: Sequence[int], mask: int, logprobs: Sequence[float] | None = None
    ) -> None:
        self.completion_ids.extend(ids)
        self.env_mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


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
        return self.episodes.setdefault(game_id, EpisodeTokens(game_id))

    def forget(self, game_ids: Iterable[str]) -> None:
        for gid in game_ids:
            self.episodes.pop(gid, None)

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


# ---------------------------------------------------------------------------- opponents
class GameFailure(RuntimeError):
    """An opponent backend failed for a game after its retries; the game is dropped."""


class ResilientPolicy(BasePolicy):
    """Wraps an opponent: retries failed `act_batch` calls, then gives up on those games only.

    A game whose opponent failed `max_retries + 1` times is recorded in `failed_games` and answered
    with `fallback` from then on (the env re-asks and eventually applies its own default), so the
    other games of the batch and the training run go on. The trainer drops failed games from
    their groups (reward None -> TRL excludes them from the group mean, advantage 0).
    """

    def __init__(self, inner: Policy, *, max_retries: int = 2, backoff_s: float = 0.5) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "policy")
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.failed_games: dict[str, str] = {}
        self.errors = 0

    def reset(self, game_id: str) -> None:
        self.failed_games.pop(game_id, None)
        self.inner.reset(game_id)

    def close(self) -> None:
        self.inner.close()

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        live = [i for i, t in enumerate(turns) if t.game_id not in self.failed_games]
        answers = ["I cannot continue." for _ in turns]
        if not live:
            return answers
        last_error: BaseException | None = None
        for attempt in range(self.max_retries + 1):
            try:
                out = self.inner.act_batch([turns[i] for i in live])
                if len(out) != len(live):
                    raise RuntimeError(f"returned {len(out)} answers for {len(live)} turns")
                for i, answer in zip(live, out, strict=True):
                    answers[i] = answer
                return answers
            except Exception as exc:  # noqa: BLE001 - any backend failure is retried, then contained
                last_error = exc
                self.errors += 1
                logger.warning("opponent %s failed (attempt %d): %s", self.name, attempt + 1, exc)
                if attempt < self.max_retries and self.backoff_s:
                    time.sleep(self.backoff_s * (attempt + 1))
        # Isolate the culprit(s): one failing game must not take the rest of the batch with it.
        for i in live:
            try:
                (answers[i],) = self.inner.act_batch([turns[i]])
            except Exception as exc:  # noqa: BLE001
                self.errors += 1
                error = exc if len(live) > 1 else last_error
                self.failed_games[turns[i].game_id] = f"{type(error).__name__}: {error}"
        return answers


class RoutingPolicy(BasePolicy):
    """Dispatches each game to a sub-policy chosen by its route (e.g. the attacker variant).

    `routes` maps game_id -> route key; `factory(route)` builds the policy for a key once. One
    `act_batch` call per sub-policy per tick.
    """

    def __init__(self, factory: Callable[[str], Policy], name: str = "routed") -> None:
        self.factory = factory
        self.name = name
        self.policies: dict[str, Policy] = {}
        self.routes: dict[str, str] = {}

    def policy_for(self, route: str) -> Policy:
        if route not in self.policies:
            self.policies[route] = self.factory(route)
        return self.policies[route]

    def assign(self, game_id: str, route: str) -> None:
        self.routes[game_id] = route
        self.policy_for(route)

    def reset(self, game_id: str) -> None:
        self.policy_for(self._route(game_id)).reset(game_id)

    def _route(self, game_id: str) -> str:
        if game_id not in self.routes:
            raise KeyError(f"game {game_id!r} has no route assigned")
        return self.routes[game_id]

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        answers: list[str] = [""] * len(turns)
        by_route: dict[str, list[int]] = {}
        for i, t in enumerate(turns):
            by_route.setdefault(self._route(t.game_id), []).append(i)
        for route, idx in by_route.items():
            out = self.policies[route].act_batch([turns[i] for i in idx])
            for i, a in zip(idx, out, strict=True):
                answers[i] = a
        return answers

    @property
    def failed_games(self) -> dict[str, str]:
        failed: dict[str, str] = {}
        for p in self.policies.values():
            failed.update(getattr(p, "failed_games", {}))
        return failed

    def close(self) -> None:
        for p in self.policies.values():
            p.close()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "routes": {k: p.describe() for k, p in self.policies.items()}}


# ---------------------------------------------------------------------------- HF helpers
def hf_generate_fn(
    model: Any,
    tokenizer: Any,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    eos_token_ids: Sequence[int] | None = None,
) -> GenerateFn:
    """A `GenerateFn` over a transformers model (left-padded batch, one `generate` call).

    Log-probs are those of the distribution the tokens were drawn from when `top_p == 1` and
    `top_k == 0`: `log_softmax(logits / temperature)` (greedy: temperature 1), which is what the
    GRPO trainer re-scores.
    """
    import torch

    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    eos_ids = list(eos_token_ids or [tokenizer.eos_token_id])

    def generate(contexts: Sequence[Sequence[int]], max_new_tokens: int) -> list[Sampled]:
        device = next(model.parameters()).device
        width = max(len(c) for c in contexts)
        input_ids = torch.full((len(contexts), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, ctx in enumerate(contexts):
            input_ids[row, width - len(ctx) :] = torch.tensor(list(ctx), dtype=torch.long)
            attention[row, width - len(ctx) :] = 1
        sample = temperature > 0
        kwargs: dict[str, Any] = {
            "do_sample": sample,
            "max_new_tokens": int(max_new_tokens),
            "pad_token_id": pad_id,
            "eos_token_id": eos_ids,
            "output_logits": True,
            "return_dict_in_generate": True,
        }
        if sample:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=top_k)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with torch.no_grad():
            out = model.generate(
                input_ids=input_ids.to(device), attention_mask=attention.to(device), **kwargs
            )
        new = out.sequences[:, width:].cpu()
        logits = torch.stack(out.logits, dim=1).float().cpu()  # (B, T, V)
        scale = temperature if sample else 1.0
        logps = torch.log_softmax(logits / scale, dim=-1)
        chosen = logps.gather(-1, new.unsqueeze(-1)).squeeze(-1)
        results: list[Sampled] = []
        for row in range(len(contexts)):
            ids = new[row].tolist()
            end = len(ids)
            for j, tok in enumerate(ids):
                if tok in eos_ids:
                    end = j + 1
                    break
            results.append(Sampled(ids=ids[:end], logprobs=chosen[row, :end].tolist()))
        return results

    return generate


def hf_score_fn(model: Any, *, temperature: float = 1.0) -> ScoreFn:
    """Re-score a sequence: log-prob of every completion token (same scaling as the trainer)."""
    import torch

    def score(prompt_ids: Sequence[int], completion_ids: Sequence[int]) -> list[float]:
        device = next(model.parameters()).device
        ids = torch.tensor([list(prompt_ids) + list(completion_ids)], device=device)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
        logps = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
        target = torch.tensor(list(completion_ids), device=device)
        return logps.gather(-1, target.unsqueeze(-1)).squeeze(-1).cpu().tolist()

    return score


def debug_check_episode(
    ep: EpisodeTokens, renderer: ChatRenderer, score: ScoreFn | None
) -> dict[str, float]:
    """Compare the spliced ids with a fresh render, and sampling log-probs with a re-score.

    Returns `token_mismatches` (tokens that differ, by sequence alignment) and
    `max_logprob_deviation` over sampled tokens (NaN when no scorer or no sampled token).
    """
    ours = ep.prompt_ids + ep.completion_ids
    fresh = renderer.fresh_ids(ep.messages) if ep.messages else []
    matcher = difflib.SequenceMatcher(a=ours, b=fresh, autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    result = {"token_mismatches": float(max(len(ours), len(fresh)) - matched)}
    deviation = math.nan
    if score is not None and any(ep.env_mask):
        rescored = score(ep.prompt_ids, ep.completion_ids)
        diffs = [
            abs(a - b) for a, b, m in zip(ep.logprobs, rescored, ep.env_mask, strict=True) if m == 1
        ]
        deviation = max(diffs) if diffs else math.nan
    result["max_logprob_deviation"] = deviation
    return result


def stable_seed(*parts: Any) -> int:
    """A 31-bit seed from any parts (stable across processes, unlike `hash`)."""
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


# ---------------------------------------------------------------------------- episodes
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
    record: dict[str, Any]
    tokens: EpisodeTokens
    dropped: str | None = None  # why the episode was dropped from its group (None = kept)


PlayGames = Callable[..., list[dict[str, Any]]]


class EpisodePlayer:
    """Plays groups of episodes through the batched runner with a `TrainablePolicy`.

    `opponents` maps every other agent to a policy; a `RoutingPolicy` gets each game's route
    assigned before the games start. Episodes whose opponent failed (`failed_games` of a
    `ResilientPolicy`/`RoutingPolicy`) or whose game raised are returned with `dropped` set.
    """

    def __init__(
        self,
        env_id: str,
        trained_agent: str,
        trainable: TrainablePolicy,
        opponents: Mapping[str, Policy],
        *,
        env_config: Mapping[str, Any] | None = None,
        concurrency: int = 8,
        play_games: PlayGames | None = None,
    ) -> None:
        self.env_id = env_id
        self.trained_agent = trained_agent
        self.trainable = trainable
        self.opponents = dict(opponents)
        self.env_config = dict(env_config or {})
        self.concurrency = concurrency
        self._play_games = play_games

    def _runner(self) -> tuple[Any, PlayGames]:
        return runner_api(self._play_games)

    def play(self, games: Sequence[tuple[str, GameRow, int]]) -> list[Episode]:
        """Play `(game_id, row, env_seed)` games concurrently; one Episode per game, in order."""
        game_spec, play_games = self._runner()
        for game_id, row, _seed in games:
            self.trainable.reset(game_id)
            for policy in self.opponents.values():
                if isinstance(policy, RoutingPolicy):
                    policy.assign(game_id, row.route)
        specs = [game_spec(game_id=g, seed=s, options=dict(r.options)) for g, r, s in games]
        policies: dict[str, Policy] = {self.trained_agent: self.trainable, **self.opponents}
        records = play_games(
            self.env_id,
            specs,
            policies,
            concurrency=max(1, min(self.concurrency, len(specs))),
            env_config=self.env_config or None,
        )
        by_id = {r["game_id"]: r for r in records}
        failed: dict[str, str] = {}
        for policy in self.opponents.values():
            failed.update(getattr(policy, "failed_games", {}) or {})
        episodes = []
        for game_id, row, _seed in games:
            record = by_id.get(game_id)
            dropped = None
            if record is None:
                dropped, record = "no record returned", {"game_id": game_id, "error": "missing"}
            elif record.get("error"):
                dropped = f"game error: {record['error']}"
            elif game_id in failed:
                dropped = f"opponent failed: {failed[game_id]}"
            episodes.append(Episode(game_id, row, record, self.trainable.episode(game_id), dropped))
        self.trainable.forget(g for g, _, _ in games)
        return episodes


@dataclass(frozen=True)
class _GameSpec:
    """Same fields as `training.runner.GameSpec`, for injected `play_games` callables."""

    game_id: str
    seed: int
    options: dict


def runner_api(play_games: PlayGames | None = None) -> tuple[Any, PlayGames]:
    """`(GameSpec, play_games)`: the batched runner's, or an injected `play_games` callable."""
    try:
        from tomgym.training.runner import GameSpec
        from tomgym.training.runner import play_games as runner_play
    except ImportError:
        if play_games is None:
            raise
        return _GameSpec, play_games
    return GameSpec, play_games or runner_play


def group_games(
    prompts: Sequence[Any], *, tag: str, base_seed: int, shared_seed: bool
) -> list[tuple[str, GameRow, int]]:
    """Turn TRL's prompts (each row repeated num_generations times in a row) into games.

    Member k of a run of identical rows gets game id `{tag}-r{row}-g{k}` (the scripted
    opponents derive their per-game seed from it, so group members differ); the env seed is the
    row's seed for every member when `shared_seed` (same keywords/codes), else a derived one.
    """
    games: list[tuple[str, GameRow, int]] = []
    previous: str | None = None
    member = 0
    for prompt in prompts:
        row = GameRow.decode(prompt)
        key = row.encode()
        member = member + 1 if key == previous else 0
        previous = key
        seed = row.seed if shared_seed else stable_seed(base_seed, tag, row.row, member)
        games.append((f"{tag}-r{row.row}-g{member}", row, seed))
    return games


def trl_batch(
    episodes: Sequence[Episode],
    renderer: ChatRenderer,
    *,
    debug_score: ScoreFn | None = None,
    debug: bool = False,
) -> tuple[dict[str, list[Any]], dict[str, float]]:
    """The rollout function's return value (TRL keys + `episode` records) and rollout metrics.

    Dropped episodes keep a valid token sequence with an all-zero mask, and their record carries
    `dropped` so the reward function returns None for them.
    """
    out: dict[str, list[Any]] = {
        "prompt_ids": [],
        "completion_ids": [],
        "logprobs": [],
        "env_mask": [],
        "episode": [],
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
        record = dict(ep.record)
        record["dropped"] = ep.dropped
        record["rollout"] = {
            "sampled_tokens": t.sampled_tokens,
            "turns": t.turns,
            "capped_turns": t.capped_turns,
            "fallback_turns": t.fallback_turns,
            "completion_tokens": len(completion),
        }
        out["prompt_ids"].append(list(prompt))
        out["completion_ids"].append(list(completion))
        out["env_mask"].append(list(mask))
        out["logprobs"].append(list(logps))
        out["episode"].append(record)
        if debug and t.started and not ep.dropped:
            check = debug_check_episode(t, renderer, debug_score)
            mismatches.append(check["token_mismatches"])
            if not math.isnan(check["max_logprob_deviation"]):
                deviations.append(check["max_logprob_deviation"])
    n = max(1, len(episodes))
    metrics = {
        "rollout/episodes": float(len(episodes)),
        "rollout/dropped_episodes": float(sum(ep.dropped is not None for ep in episodes)),
        "rollout/sampled_tokens_per_episode": sum(e.tokens.sampled_tokens for e in episodes) / n,
        "rollout/completion_tokens_per_episode": sum(len(c) for c in out["completion_ids"]) / n,
        "rollout/turns_per_episode": sum(e.tokens.turns for e in episodes) / n,
        "rollout/capped_turns": float(sum(e.tokens.capped_turns for e in episodes)),
        "rollout/fallback_turns": float(sum(e.tokens.fallback_turns for e in episodes)),
    }
    if debug:
        metrics["debug/token_mismatches_max"] = max(mismatches, default=0.0)
        metrics["debug/logprob_deviation_max"] = max(deviations, default=math.nan)
    return out, metrics
