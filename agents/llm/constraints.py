"""Constrained decoding of TOM-SB belief values: a name of the right level, spelled exactly.

A small model loses many TOM-SB games on the protocol, not on the game: its belief estimate
names a value of the wrong level ("a conference named as the league") or a misspelled one, the
env rejects the answer twice and sends its fallback refusal, and the attacker's trust drops
(issue 13: 6 of the 11 held-out games the warm-started 135M defender lost). A belief object
`{"<level>": "<name>" | null, ...}` has a closed set of valid values, so decoding can keep each
value inside it, the way grammar-constrained decoders (vLLM guided decoding, outlines) keep an
answer inside a schema.

Contract:
- `TokenConstraint.allowed(completion_ids)` -> the token ids the next token may be, or None
  (unconstrained). The engine (`agents.llm.kv_cache.CachedGenerator.generate(constraints=)`)
  asks it before every sampled token and masks every other token's logit; greedy decoding takes
  the argmax of what is left, sampling draws from the renormalised rest, and the log-probs
  reported are those of that masked distribution.
- `BeliefNameConstraint` constrains only the inside of a JSON string that is the value of a level
  key in a belief object (`"attacker_belief_about_target": {...}` for a defender, `"belief":
  {...}` for an attacker; `BELIEF_FIELDS`): once the model has opened the value's quote, the
  value must continue into one of that level's names in the universe, or be empty (the parser
  reads `""` as null), and close its quote. Everything else (keys, `null`, the reflection, the
  reply) is left to the model, and a value it has already begun off every name (an open quote
  before the constraint applied, an unknown level key, non-ASCII names split inside a UTF-8
  byte sequence) is left unconstrained rather than forced into a wrong name.
- `belief_options(observation)` reads the names per level from a TOM-SB observation's role view
  (`envs.tomsb.protocol.view_from_observation`); None for any other observation, so a policy
  with constraints on plays every other game unconstrained.
- `TokenTable(tokenizer)` is the decoded vocabulary, built once per tokenizer (cached).

The trainer re-scores sampled tokens with the unmasked model (TRL's log-probs); with Dr. GRPO's
single iteration the ratio is 1 either way, so the masked log-probs only matter to the
token/log-prob debug check, which then differs on constrained tokens.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from tomgym.envs.tomsb.parsing import ATTACKER_FIELDS, DEFENDER_FIELDS
from tomgym.envs.tomsb.protocol import view_from_observation
from tomgym.envs.tomsb.universe import Universe, UniverseError, normalise_name

BELIEF_FIELDS = (DEFENDER_FIELDS[0], ATTACKER_FIELDS[1])
"""The protocol fields that hold a `{level: name | null}` object (defender's, attacker's)."""

# What may follow a value's closing quote inside the same token: the object's punctuation and
# the next key's opening quote (tokenizers merge `",` `"}` `", "`), never a second string.
_AFTER_VALUE = re.compile(r'\s*(?:,\s*"?|\}\s*,?\s*"?)?')

_OPEN_BELIEF = re.compile(
    r'["\'](?:' + "|".join(re.escape(f) for f in BELIEF_FIELDS) + r')["\']\s*:\s*\{'
)
# Inside a belief object: complete `"key": value,` pairs, then a key and an open value string.
_OPEN_VALUE = re.compile(
    r'^(?:\s*"[^"\\]*"\s*:\s*(?:"[^"\\]*"|null|None)\s*,)*\s*"([^"\\]*)"\s*:\s*"([^"\\]*)$'
)


class TokenConstraint(Protocol):
    """Which tokens may come next, given the completion so far (None: any)."""

    def allowed(self, completion_ids: list[int]) -> Sequence[int] | None: ...


class TokenTable:
    """A tokenizer's vocabulary decoded token by token, indexed by first character."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self.by_first: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for token_id in range(len(tokenizer)):
            if token_id in special:
                continue
            text = tokenizer.decode([token_id])
            if text and "\ufffd" not in text:
                self.by_first[text[0]].append((token_id, text))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def continuing(self, remainders: Sequence[str]) -> list[int]:
        """Tokens that keep the text on one of `remainders` (each ends with the closing quote):
        a token inside a remainder, or one that completes it and then holds only `_AFTER_VALUE`
        (punctuation that closes the pair or the object)."""
        allowed: set[int] = set()
        for first in {r[0] for r in remainders}:
            for token_id, text in self.by_first.get(first, ()):
                for rest in remainders:
                    if rest.startswith(text) or (
                        text.startswith(rest) and _AFTER_VALUE.fullmatch(text[len(rest) :])
                    ):
                        allowed.add(token_id)
                        break
        return sorted(allowed)


_TABLES: WeakKeyDictionary[Any, TokenTable] = WeakKeyDictionary()


def token_table(tokenizer: Any) -> TokenTable:
    """The tokenizer's `TokenTable`, built on first use (about a second for a 49k vocabulary)."""
    table = _TABLES.get(tokenizer)
    if table is None:
        table = _TABLES[tokenizer] = TokenTable(tokenizer)
    return table


class BeliefNameConstraint:
    """Belief values drawn from the universe's names of their level (see module doc)."""

    def __init__(self, table: TokenTable, names_by_level: Mapping[str, Sequence[str]]) -> None:
        self.table = table
        self.names = {normalise_name(level): list(names) for level, names in names_by_level.items()}

    def allowed(self, completion_ids: list[int]) -> list[int] | None:
        if not completion_ids:
            return None
        text = self.table.decode(completion_ids)
        opened = [match.end() for match in _OPEN_BELIEF.finditer(text)]
        if not opened:
            return None
        inside = _OPEN_VALUE.match(text[opened[-1] :])
        if inside is None:
            return None
        names = self.names.get(normalise_name(inside.group(1)))
        if names is None:
            return None
        partial = inside.group(2)
        remainders = [
            name[len(partial) :] + '"' for name in ("", *names) if name.startswith(partial)
        ]
        if not remainders:
            return None
        return self.table.continuing(remainders) or None


def belief_options(observation: Mapping[str, Any]) -> dict[str, list[str]] | None:
    """`{level: [every name of that level]}` from a TOM-SB observation's role view; None for an
    observation of another game (no view, or a view without a valid universe)."""
    if "scenario" not in observation:
        return None
    try:
        view = view_from_observation(observation)
        universe = Universe.from_dict(view["universe"], view.get("hierarchy"))
    except (ValueError, KeyError, TypeError, UniverseError):
        return None
    return {level: list(universe.nodes(depth)) for depth, level in enumerate(universe.levels)}


def belief_constraints(
    tokenizer: Any, options: Sequence[Mapping[str, Sequence[str]] | None]
) -> list[BeliefNameConstraint | None]:
    """One constraint per row (None where a row has no options)."""
    table = token_table(tokenizer)
    return [BeliefNameConstraint(table, names) if names else None for names in options]
