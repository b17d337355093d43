"""Constrained decoding of TOM-SB names: belief values of the right level and names in the
reply, spelled exactly.

A small model loses many TOM-SB games on the protocol, not on the game: its belief estimate
names a value of the wrong level ("a conference named as the league") or a misspelled one, the
env rejects the answer twice and sends its fallback refusal, and the attacker's trust drops
(issue 13: 6 of the 11 held-out games the warm-started 135M defender lost). A belief object
`{"<level>": "<name>" | null, ...}` has a closed set of valid values, so decoding can keep each
value inside it, the way grammar-constrained decoders (vLLM guided decoding, outlines) keep an
answer inside a schema. The reply is free text, yet the same small model loses games there on
spelling: it means a decoy and writes "Hillscrest" for "Hillcrest Restaurant", which the
attacker cannot read as any value (`no_universe_value`, the commonest loss reason left after the
belief constraint).

Contract:
- `TokenConstraint.allowed(completion_ids)` -> the token ids the next token may be, an
  `Excluded` of the ids it may not be, or None (unconstrained). The engine
  (`agents.llm.kv_cache.CachedGenerator.generate(constraints=)`) asks it before every sampled
  token and masks every other (every excluded) token's logit; greedy decoding takes
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
- `ReplyNameConstraint` constrains only the inside of the open `"reply"` string, and only
  around names: a word that starts with a capital or a digit, is not a sentence word
  (`SENTENCE_WORDS`: "That ..." is never forced into "Thatcher Row") and has become the first
  `MIN_NAME_PREFIX` (4) or more characters of some names must continue into one of them (a whole
  name may end there or go on into a longer one: "Tokyo", "Tokyo to Boise"); and a token that
  would carry a word past its first 4 characters, shared with a name, and then off every name
  is banned (an `Excluded` answer: " Hills" when "Hillcrest Restaurant" is a name; "ider"
  after "Ins" when "Inside Sales" is). Which name to say, and whether to say one, stays the
  model's; a name only partly matched by what it writes ("Reykjavik" for "Madrid to
  Reykjavik") or a word that leaves the name within its first 3 characters is not caught.
- `FirstOf(rules)`: several constraints over disjoint parts of an answer (the belief object,
  the reply); `name_constraints(tokenizer, options, beliefs=, replies=)` builds one per row.
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
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
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


class Excluded(tuple[int, ...]):
    """Token ids that may NOT come next (every other token may): what `allowed` returns when the
    rule is a short ban rather than a short list."""

    __slots__ = ()


class TokenConstraint(Protocol):
    """Which tokens may come next, given the completion so far: a list of the allowed ids, an
    `Excluded` of the banned ones, or None (any)."""

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

    def continuing(
        self, remainders: Sequence[str], after: Callable[[str], bool] | None = None
    ) -> list[int]:
        """Tokens that keep the text on one of `remainders`: a token inside a remainder, or one
        that completes it and then holds only what `after` accepts (default: `_AFTER_VALUE`,
        the punctuation that closes a belief pair or object, for remainders that end with the
        value's closing quote)."""
        tail_ok = after or (lambda tail: _AFTER_VALUE.fullmatch(tail) is not None)
        allowed: set[int] = set()
        for first in {r[0] for r in remainders}:
            for token_id, text in self.by_first.get(first, ()):
                for rest in remainders:
                    if rest.startswith(text) or (
                        text.startswith(rest) and tail_ok(text[len(rest) :])
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


REPLY_FIELD = DEFENDER_FIELDS[3]
_OPEN_REPLY = re.compile(r'["\']' + re.escape(REPLY_FIELD) + r'["\']\s*:\s*"')
_CLOSING_QUOTE = re.compile(r'(?<!\\)"')
# A name is taken to be under way once this many of its characters are written (fewer would
# capture ordinary words: "The" begins "Theatre District").
MIN_NAME_PREFIX = 4
# Words that open sentences and phrases: a reply word that is (or is still becoming) one of these
# is never read as the start of a name, so "That would be ..." is not forced into "Thatcher Row".
SENTENCE_WORDS = frozenset(
    """
    a about actually after all also am an and any are as at be because been before being but
    by can certainly could did do does don't for from good great had has have he her here
    hers him his honestly how i i'm if in indeed is it it's its just let me might my no
    nobody none not nothing now of oh ok okay on one only or our perhaps please really right
    she should so some sorry still sure thank thanks that that's the their them then there
    these they this those to true understood unfortunately us very was we well were what
    when where which while who why will with would yes yet you your
    """.split()  # noqa: SIM905 - a word list reads better as text
)
# Every beginning of a sentence word, so a word still being written is checked in one lookup.
_SENTENCE_PREFIXES = frozenset(w[:end] for w in SENTENCE_WORDS for end in range(1, len(w) + 1))


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char in "'-"


def _word_head(fragment: str) -> tuple[str, bool]:
    """The first word of `fragment` and whether it is complete (something follows it)."""
    end = 0
    while end < len(fragment) and _is_word_char(fragment[end]):
        end += 1
    return fragment[:end], end < len(fragment)


def _opens_sentence(fragment: str) -> bool:
    head, complete = _word_head(fragment)
    head = head.lower()
    return head in (SENTENCE_WORDS if complete else _SENTENCE_PREFIXES)


def _ends_word(tail: str) -> bool:
    return not tail or not tail[0].isalnum()


class ReplyNameConstraint:
    """Names in a TOM-SB reply spelled exactly (see module doc).

    Inside the open `"reply"` string: once a word that may start a name (capitalised or a digit,
    not a sentence word) has become the first `MIN_NAME_PREFIX` or more characters of one or
    more of the universe's names, the text must continue into one of them and finish it; and a
    token that would carry a word past its first `MIN_NAME_PREFIX` characters, shared with a
    name, and then off every name ("Hills" for "Hillcrest Restaurant", "Ins" + "ider" for
    "Inside Sales") is banned. Everything else in the reply, and everything outside it, is left
    to the model.
    """

    def __init__(self, table: TokenTable, names: Sequence[str]) -> None:
        self.table = table
        self.names = tuple(sorted({n for n in names if n and (n[0].isupper() or n[0].isdigit())}))

    def _name_under_way(self, reply: str) -> str | None:
        """The longest end of `reply` that starts a word and is the beginning of a name."""
        for start in range(len(reply) - MIN_NAME_PREFIX + 1):
            if _starts_word(reply, start):
                fragment = reply[start:]
                if not _opens_sentence(fragment) and any(
                    n.startswith(fragment) for n in self.names
                ):
                    return fragment
        return None

    def allowed(self, completion_ids: list[int]) -> Sequence[int] | None:
        if not completion_ids or not self.names:
            return None
        text = self.table.decode(completion_ids)
        opened = [match.end() for match in _OPEN_REPLY.finditer(text)]
        if not opened:
            return None
        reply = text[opened[-1] :]
        if _CLOSING_QUOTE.search(reply):
            return None
        fragment = self._name_under_way(reply)
        if fragment is not None:
            remainders = [n[len(fragment) :] for n in self.names if n.startswith(fragment)]
            if "" in remainders:  # a whole name is written; it may end or go on into a longer one
                return None
            return self.table.continuing(remainders, _ends_word) or None
        spaced, bare = _near_misses(self.table, self.names, "")
        banned = set(spaced)  # a space-led token starts a new word anywhere
        if not reply or not reply[-1].isalnum():
            banned.update(bare)  # and so does a bare one after a space or punctuation
        else:  # a bare one continues the word under way
            word = _last_word(reply)
            if word and _starts_word(reply, len(reply) - len(word)):
                banned.update(_near_misses(self.table, self.names, word)[1])
        return Excluded(sorted(banned)) if banned else None


def _starts_word(text: str, start: int) -> bool:
    """Whether a name may begin at `text[start]`: a capital or a digit after a non-word char."""
    char = text[start]
    if not (char.isupper() or char.isdigit()):
        return False
    return start == 0 or not _is_word_char(text[start - 1])


def _last_word(text: str) -> str:
    start = len(text)
    while start and _is_word_char(text[start - 1]):
        start -= 1
    return text[start:]


def _misses(fragment: str, names: Sequence[str]) -> bool:
    """A word that is no sentence word, no beginning of a name and no whole name."""
    if _opens_sentence(fragment):
        return False
    return not any(
        n.startswith(fragment) or (fragment.startswith(n) and _ends_word(fragment[len(n) :]))
        for n in names
    )


@lru_cache(maxsize=1024)
def _near_misses(
    table: TokenTable, names: tuple[str, ...], head: str
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Tokens that, written after `head` (the part of a word already written; "" at a word
    start), complete the first `MIN_NAME_PREFIX` characters of a name and then leave every name.

    Returns (the space-led ones, the bare ones); a non-empty `head` is continued by bare tokens
    only, so its space-led set is empty."""
    stems = {n[:MIN_NAME_PREFIX] for n in names if len(n) >= MIN_NAME_PREFIX and n.startswith(head)}
    spaced: set[int] = set()
    bare: set[int] = set()
    for stem in stems:
        need = stem[len(head) :]
        if not need:
            continue
        leads = [(" " + need, spaced), (need, bare)] if not head else [(need, bare)]
        for lead, found in leads:
            for token_id, text in table.by_first.get(lead[0], ()):
                if not text.startswith(lead):
                    continue
                word = head + (text[1:] if text.startswith(" ") and not head else text)
                if _misses(word, names):
                    found.add(token_id)
    return tuple(sorted(spaced)), tuple(sorted(bare))


class FirstOf:
    """Several constraints over disjoint parts of an answer: the first that applies decides."""

    def __init__(self, rules: Sequence[TokenConstraint]) -> None:
        self.rules = list(rules)

    def allowed(self, completion_ids: list[int]) -> Sequence[int] | None:
        for rule in self.rules:
            answer = rule.allowed(completion_ids)
            if answer is not None:
                return answer
        return None


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


def name_constraints(
    tokenizer: Any,
    options: Sequence[Mapping[str, Sequence[str]] | None],
    *,
    beliefs: bool = True,
    replies: bool = False,
) -> list[TokenConstraint | None]:
    """One constraint per row (None where a row has no options): belief values
    (`BeliefNameConstraint`) and/or names in the reply (`ReplyNameConstraint`, over every
    level's names), each deciding in its own part of the answer."""
    table = token_table(tokenizer)
    rows: list[TokenConstraint | None] = []
    for names in options:
        rules: list[TokenConstraint] = []
        if names and beliefs:
            rules.append(BeliefNameConstraint(table, names))
        if names and replies:
            rules.append(ReplyNameConstraint(table, [n for level in names.values() for n in level]))
        rows.append(None if not rules else rules[0] if len(rules) == 1 else FirstOf(rules))
    return rows


def wants_names(generator: Any) -> bool:
    """Whether a backend or generate function constrains names (`constrain_beliefs` or
    `constrain_replies` on), so its caller passes each turn's names (`belief_options`)."""
    return bool(
        getattr(generator, "constrain_beliefs", False)
        or getattr(generator, "constrain_replies", False)
    )
