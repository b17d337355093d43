"""Multi-turn episodes as token sequences for Dr. GRPO: token-in/token-out, no re-tokenising.

For every game the trained policy keeps the exact ids the model sampled and splices everything
else in between, so the sequence the loss sees is the sequence the model saw:

    prompt_ids      = chat template of [system, first message] + generation prompt
    completion_ids  = turn_1 | user-suffix(message_2) | turn_2 | user-suffix(message_3) | ...
    env_mask        = 1 on sampled ids (through the first EOS), 0 on everything else

- A turn that hits its token cap gets an EOS appended with mask 0 (so the template stays valid
  and the policy is never taught to emit that EOS).
- `user-suffix(m)` is the chat template's rendering of a user turn after an assistant turn, cut
  right after the assistant's EOS (the template glue, e.g. "\\n", the user block and the next
  generation prompt), found with a marker conversation so it works for templates that re-render
  earlier turns (Qwen3 strips old reasoning).

`ChatRenderer` renders chat templates in token ids, `EpisodeTokens` holds one game's sequence,
`debug_check_episode` compares a spliced sequence with a fresh render and a re-score. The policy
that fills `EpisodeTokens` while sampling is `training.rl.trainable.TrainablePolicy`;
`episode_from_chat` splices a finished chat (a scripted teacher's, for the SFT warm start) the
same way, with its written answers in place of sampled ids.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tomgym.training.rl.generation import ScoreFn

_MARKER = "tomgym-suffix-marker-7f3a"


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
    forced_tokens: int = 0  # sampled ids a decoding constraint forced (mask 0: no choice made)
    turns: int = 0
    capped_turns: int = 0
    answer_stops: int = 0  # turns stopped at the close of their protocol answer (EOS mask 0)
    repetition_stops: int = 0  # capped turns the repetition guard stopped in a runaway loop
    fallback_turns: int = 0
    context_window_turns: int = 0  # turns never fed: the context window was full (truncated)
    side_questions: int = 0
    given_turns: int = 0  # turns another policy answered (a teacher's prefix; mask 0)

    @property
    def started(self) -> bool:
        return bool(self.prompt_ids)

    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def extend(
        self, ids: Sequence[int], mask: int | Sequence[int], logprobs: Sequence[float] | None = None
    ) -> None:
        """Append `ids` with one mask for all (an int) or one per id."""
        masks = [mask] * len(ids) if isinstance(mask, int) else list(mask)
        if len(masks) != len(ids):
            raise ValueError(f"{len(masks)} masks for {len(ids)} ids")
        self.completion_ids.extend(ids)
        self.env_mask.extend(masks)
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))


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


def episode_from_chat(
    renderer: ChatRenderer, game_id: str, chat: Sequence[Mapping[str, str]]
) -> EpisodeTokens:
    """A finished chat ([system], user, assistant, user, assistant, ...) as a rollout's sequence.

    Spliced exactly as `TrainablePolicy` splices a sampled game (see the module doc): each
    assistant answer is its encoded text plus EOS with mask 1 (`sampled_tokens` counts them),
    the prompt and every user suffix mask 0. Raises `ValueError` for a chat that does not
    alternate user/assistant or has no assistant turn.
    """
    messages = [dict(m) for m in chat]
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    turns = messages[1:] if system else messages
    roles = [m["role"] for m in turns]
    if (
        not roles
        or roles[0] != "user"
        or any(role != ("user" if i % 2 == 0 else "assistant") for i, role in enumerate(roles))
    ):
        raise ValueError(f"chat of {game_id!r} does not alternate user/assistant: {roles}")
    ep = EpisodeTokens(game_id, messages=messages)
    for msg in turns:
        if msg["role"] == "user":
            if ep.started:
                ep.extend(renderer.user_suffix_ids(system, msg["content"]), 0)
            else:
                ep.prompt_ids = renderer.first_turn_ids(system, msg["content"])
            ep.turns += 1
        else:
            ids = [*renderer.encode(msg["content"]), renderer.eos_id]
            ep.extend(ids, 1)
            ep.sampled_tokens += len(ids)
    if not any(ep.env_mask):
        raise ValueError(f"chat of {game_id!r} has no assistant turn")
    return ep
