"""Env-agnostic shaping rewards over episode records: format and length.

- `format_ok(record, agent)`: 1.0 if every (non side-question) turn `agent` played parsed and
  validated on the first try and the env counted no format failure, else 0.0. The paper uses it as
  a *gate* (any bad turn zeroes the trajectory reward); with a small model it works better as an
  additive term (see docs/training.md).
- `length_reward(record, tokenizer, agent)`: the paper's length shaping on the *private* fields of
  each TOM-SB defender turn (estimates, trust estimate and reflection), measured in tokens of the
  trained model's tokenizer: 1.0 up to 100 tokens, falling linearly to 0.0 at 200, averaged over
  the agent's turns. A turn that did not parse is measured on its whole raw text.

`tokenizer` may be a Hugging Face tokenizer (anything with `encode`), or any callable mapping a
string to a token count or to a sequence of tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tomgym.rewards.episode import RecordError

LENGTH_FULL_CREDIT = 100
LENGTH_ZERO_CREDIT = 200
PRIVATE_FIELDS = ("attacker_belief_about_target", "attacker_trust_in_us", "reflection")

TokenCounter = Callable[[str], int]


def agent_turns(record: Mapping[str, Any], agent: str) -> list[Mapping[str, Any]]:
    """The agent's turns in order, side questions excluded (they are not part of the game)."""
    turns = record.get("turns")
    if not isinstance(turns, list):
        raise RecordError(f"episode record {record.get('game_id')!r} has no 'turns' list")
    return [t for t in turns if t.get("agent") == agent and not t.get("side_question")]


def format_ok(record: Mapping[str, Any], agent: str) -> float:
    """1.0 if every turn of `agent` was valid (first try, no fallback), else 0.0."""
    turns = agent_turns(record, agent)
    if any(not t.get("valid", False) for t in turns):
        return 0.0
    info = (record.get("infos") or {}).get(agent) or {}
    if agent.startswith("defender") and info.get("format_failures", 0):
        return 0.0
    if info.get("fallbacks", 0):
        return 0.0
    return 1.0


def token_counter(tokenizer: Any) -> TokenCounter:
    """Normalise a tokenizer (HF tokenizer, `encode`-able, or callable) into `str -> int`."""
    if tokenizer is None:
        raise ValueError("length_reward needs a tokenizer (or a callable counting tokens)")
    encode = getattr(tokenizer, "encode", None)
    if callable(encode):

        def count(text: str) -> int:
            try:
                return len(encode(text, add_special_tokens=False))
            except TypeError:  # encoders without the keyword (e.g. tiktoken)
                return len(encode(text))

        return count
    if callable(tokenizer):

        def count_callable(text: str) -> int:
            out = tokenizer(text)
            if isinstance(out, Mapping) and "input_ids" in out:
                out = out["input_ids"]
            return int(out) if isinstance(out, int) else len(out)

        return count_callable
    raise ValueError(f"tokenizer must be callable or have .encode, got {type(tokenizer).__name__}")


def private_text(turn: Mapping[str, Any]) -> str:
    """The private part of a defender turn as text (the whole raw answer if it did not parse)."""
    parsed = turn.get("parsed")
    if isinstance(parsed, Mapping) and any(f in parsed for f in PRIVATE_FIELDS):
        return " ".join(
            v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
            for v in (parsed.get(f) for f in PRIVATE_FIELDS)
            if v is not None
        )
    return str(turn.get("raw") or "")


def length_score(tokens: int) -> float:
    """1 at or under 100 tokens, linear to 0 at 200 and beyond."""
    if tokens <= LENGTH_FULL_CREDIT:
        return 1.0
    if tokens >= LENGTH_ZERO_CREDIT:
        return 0.0
    return (LENGTH_ZERO_CREDIT - tokens) / (LENGTH_ZERO_CREDIT - LENGTH_FULL_CREDIT)


def length_reward(record: Mapping[str, Any], tokenizer: Any, agent: str = "defender_0") -> float:
    """Mean length score of `agent`'s private fields over its turns (1.0 when it had none)."""
    count = token_counter(tokenizer)
    turns = agent_turns(record, agent)
    if not turns:
        return 1.0
    return sum(length_score(count(private_text(t))) for t in turns) / len(turns)
