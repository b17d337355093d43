"""Constrained decoding of TOM-SB answers: the answer's JSON shape, belief values of the right
level and names in the reply, spelled exactly.

A small model loses many TOM-SB games on the protocol, not on the game: its belief estimate
names a value of the wrong level ("a conference named as the league") or a misspelled one, the
env rejects the answer twice and sends its fallback refusal, and the attacker's trust drops
(issue 13: 6 of the 11 held-out games the warm-started 135M defender lost). A belief object
`{"<level>": "<name>" | null, ...}` has a closed set of valid values, so decoding can keep each
value inside it, the way grammar-constrained decoders (vLLM guided decoding, outlines) keep an
answer inside a schema. The reply is free text, yet the same small model loses games there on
spelling: it means a decoy and writes "Hillscrest" for "Hillcrest Restaurant", which the
attacker cannot read as any value (`no_universe_value`, the commonest loss reason left after the
belief constraint). Sampled (as in training rollouts), it also breaks the JSON itself: 47 of 281
defender turns of the warm-started model at temperature 0.7 were invalid (a reflection closed
early and concatenated, `"...: " + Keystone Airlines.`; an unquoted value; a wrong key; a missing
level), each a fallback refusal; the whole answer has a fixed shape, so decoding can keep it.

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
  after "Ins" when "Inside Sales" is). Given the names per level, a reply that names a level
  ("The team is ...", any level of the universe, case and underscores aside) must fill it with
  a name of that level, from the name's first character: a capitalised word opened right after
  "<level> is" must begin one of the level's names (the small model's commonest slip after
  spelling: "The battalion is 23rd Armored Brigade", a brigade, which the attacker reads as a
  lie about what it already knows); a lower-case word there ("is probably ...") stays free.
  Which name to say, and whether to say one, stays the model's; a name only partly matched by
  what it writes ("Reykjavik" for "Madrid to Reykjavik") or a word that leaves the name within
  its first 3 characters is not caught, nor a wrong-level name in a reply that does not name
  the level ("Sydney, as far as I know.").
- `ReplyBranchConstraint` ties a defender's plan and reply to the belief its answer states
  first: inside the open `"reflection"` and `"reply"` strings, no word may open, or carry on
  into, a universe name that `attacker_belief_about_target` rules out (another value of a level
  it fills, or a name under one), unless the word also begins a name the belief allows or is a
  sentence word on its own. A belief not yet written, unreadable or all null rules nothing out.
  Inside a level slot ("The battalion is ...") only that level's names count, allowed or ruled
  out. Names in lower case ("staging-ingest-37") are left alone, as by the spelling rule. With
  the story rule on (`constrain_story`; the defender's true path from its view), the plan and
  reply are held to one path too: the first decoy they write whole (a name off the true path)
  fixes its own path, and a name off it is ruled out from then on, so "say Magnolia Court for
  the street and 161 Hawthorn Crescent for the house" (a house on the true street) cannot be
  finished (8-9 of 29 lost games of the levels-1-2 warm start told such a story); true values
  fix nothing, so the truth stays sayable and the first decoy stays the model's choice. Only
  the answer being written is read: a decoy named in an earlier turn does not bind.
- `PlanConstraint` (`constrain_plan`) holds a defender's plan to the levels its stated belief
  leaves unknown: after the plan's opener in the reflection (`PLAN_OPENER`: "I will say", "...
  and say"), its i-th item ("<name> for the <level>", `plan_item`, joined by `PLAN_JOINERS`, the
  scripted teacher's own phrase) must name a value of the i-th level the belief leaves null and
  name its own level. The levels-1-2 warm start lost 10 of 29 games on a plan that named no
  value ("say Accounting for the desk") and 8 on one that named a value of another level ("9th
  Artillery Brigade for the battalion"), and its reply then said what the plan said.
  Lower-case words stay free ("before I say anything"; the cloud universes' names).
- `ReplyLevelConstraint` (`constrain_asked`) holds a defender's reply to the level the
  attacker's last message asks for (`AnswerOptions.asked`, read by the scripted defenders' own
  `asked_depth`): until it names a value of that level or below, it may not open a name of a
  level above ("School of Architecture, as far as I know" to "what department would that be?",
  turn after turn, until the turn limit: with every other rule on, 13 of the levels-1-2 warm
  start's 22 lost validation games, and none of its 18 wins, had such a reply).
- `AnswerFormatConstraint` keeps the whole answer inside its role's template
  (`answer_template`, written by the protocol's own encoder `answer_defender` /
  `answer_attacker` with a marker in each slot): one JSON object, the encoder's keys in order
  with its spacing, each belief value `null` or a name of its level (quoted, exactly), the trust
  a digit 0-`MAX_TRUST`, the attacker's signal one of `SIGNALS`, and free text only inside the
  reflection and reply (prompt) strings, which must start with a visible character (the reply
  and prompt, `REQUIRED_TEXT_FIELDS`, must hold one) and hold no raw control character or broken
  escape; once the object closes, the rest is left to the
  engine (`stop_at_answer` ends the turn there). Inside a string the answer is an `Excluded` of
  the tokens that would close it onto anything but the next key; at every other point the list
  of tokens that continue the template. The masks are computed once per automaton state and
  shared by every turn in the same universe (`AnswerGrammar`, cached per tokenizer). Not
  expressed there: that the named values form one path (`constrain_story` holds the plan and
  reply to it), or the attacker's "detected means trust 0".
  A choice whose remaining text is non-ASCII is left to the model (a UTF-8 character may be
  split across tokens), and a model that reasons before answering (`<think>`) must leave it off.
- `AllOf(rules)`: several constraints at once (the format, the reply names): allowed lists
  intersect and bans add up; `answer_rules(tokenizer, options, formats=, beliefs=, replies=)`
  builds one per row, `generator_rules(generator, options)` from a backend's or generate
  function's switches (`CONSTRAINT_FLAGS`), `constrains_answers(generator)` says whether any
  is on.
- `answer_options(observation)` reads the acting role (`envs.tomsb.protocol.ROLE_CODES`) and the
  names per level from a TOM-SB observation; None for any other observation, so a policy with
  constraints on plays every other game unconstrained.
- `TokenTable(tokenizer)` is the decoded vocabulary, built once per tokenizer (cached).

The trainer re-scores sampled tokens with the unmasked model (TRL's log-probs); with Dr. GRPO's
single iteration the ratio is 1 either way, so the masked log-probs only matter to the
token/log-prob debug check, which then differs on constrained tokens.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Protocol
from weakref import WeakKeyDictionary

from tomgym.agents.tomsb_defenders import PLAN_JOINERS, PLAN_OPENER, asked_depth, plan_item
from tomgym.envs.tomsb.game import MAX_TRUST, SIGNALS
from tomgym.envs.tomsb.parsing import (
    ATTACKER_FIELDS,
    DEFENDER_FIELDS,
    REQUIRED_TEXT_FIELDS,
    answer_attacker,
    answer_defender,
)
from tomgym.envs.tomsb.protocol import role_from_observation, view_from_observation
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
        self.special_ids = tuple(sorted(special))
        self.by_first: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for token_id in range(len(tokenizer)):
            if token_id in special:
                continue
            text = tokenizer.decode([token_id])
            if text and "\ufffd" not in text:
                self.by_first[text[0]].append((token_id, text))

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    @cached_property
    def structural(self) -> tuple[tuple[int, str], ...]:
        """Tokens that may end, escape or break a JSON string: a quote, a backslash or a
        control character anywhere in them."""
        return tuple(
            (token_id, text)
            for tokens in self.by_first.values()
            for token_id, text in tokens
            if '"' in text or "\\" in text or any(char < " " for char in text)
        )

    @cached_property
    def ids_by_text(self) -> dict[str, tuple[int, ...]]:
        """Every token's ids under its decoded text."""
        index: dict[str, list[int]] = defaultdict(list)
        for tokens in self.by_first.values():
            for token_id, text in tokens:
                index[text].append(token_id)
        return {text: tuple(ids) for text, ids in index.items()}

    @cached_property
    def space_led(self) -> tuple[int, ...]:
        """Tokens that start with whitespace."""
        return tuple(
            sorted(
                t for first, tokens in self.by_first.items() if first.isspace() for t, _ in tokens
            )
        )

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
    "Inside Sales") is banned. With `names_by_level`, a name opened right after "<level> is"
    must be one of that level's names (`_slot_answer`). Everything else in the reply, and
    everything outside it, is left to the model.
    """

    def __init__(
        self,
        table: TokenTable,
        names: Sequence[str],
        names_by_level: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.table = table
        self.names = tuple(sorted({n for n in names if _name_like(n)}))
        self.level_names = {
            normalise_name(level): tuple(sorted(set(level_names)))
            for level, level_names in (names_by_level or {}).items()
        }
        self._level_slot = _level_slot_pattern(self.level_names)

    def _slot_answer(self, reply: str) -> Sequence[int] | None:
        """What may come next inside a level slot ("The team is <name>"): the level's names
        only, from the name's first character; None when the reply is in no open slot."""
        slot = _last_slot(self._level_slot, reply)
        if slot is None:
            return None
        level, after = slot
        names = self.level_names[level]
        if after in ("", " "):  # the name's first token comes next (space-led after "is")
            return Excluded(_off_level_openers(self.table, names, spaced=not after)) or None
        fragment = after[1:]
        if not after.startswith(" ") or not _starts_word(fragment, 0):
            return None  # "is probably ...": a lower-case word, not a name
        # Off the level's names (begun before the slot applied) or a whole name: None, and the
        # general rule decides.
        return self._finish_name(fragment, names)

    def _finish_name(self, fragment: str, names: Sequence[str]) -> Sequence[int] | None:
        """Tokens that carry `fragment` on into one of the `names` it begins; None when it
        begins none, or is already a whole name (which may end or go on into a longer one)."""
        remainders = [n[len(fragment) :] for n in names if n.startswith(fragment)]
        if not remainders or "" in remainders:
            return None
        return self.table.continuing(remainders, _ends_word) or None

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
        opened = _open_string(text, _OPEN_REPLY)
        if opened is None:
            return None
        reply = text[opened:]
        in_slot = self._slot_answer(reply)
        if in_slot is not None:
            return in_slot
        fragment = self._name_under_way(reply)
        if fragment is not None:
            return self._finish_name(fragment, self.names)
        spaced, bare = _near_misses(self.table, self.names, "")
        banned = set(spaced)  # a space-led token starts a new word anywhere
        if not reply or not reply[-1].isalnum():
            banned.update(bare)  # and so does a bare one after a space or punctuation
        else:  # a bare one continues the word under way
            word = _last_word(reply)
            if word and _starts_word(reply, len(reply) - len(word)):
                banned.update(_near_misses(self.table, self.names, word)[1])
        return Excluded(sorted(banned)) if banned else None


def _open_string(text: str, opener: re.Pattern[str]) -> int | None:
    """Where the content of the last string `opener` opens in `text` starts, while that string
    is still open (no closing quote after it); None otherwise."""
    opened = [match.end() for match in opener.finditer(text)]
    if not opened or _CLOSING_QUOTE.search(text, opened[-1]):
        return None
    return opened[-1]


def _level_slot_pattern(level_names: Mapping[str, Sequence[str]]) -> re.Pattern[str] | None:
    """`<level> is`, for any level with names (keys of `normalise_name`, its words apart:
    "health_system" is written "health system"; longest first, so "unit" never cuts a longer
    level short); None without levels."""
    levels = sorted((level for level, names in level_names.items() if names), key=len, reverse=True)
    if not levels:
        return None
    alternatives = "|".join(r"\s+".join(map(re.escape, level.split())) for level in levels)
    return re.compile(r"(?i)\b(" + alternatives + r")\s+is(?![\w'-])")


def _last_slot(pattern: re.Pattern[str] | None, reply: str) -> tuple[str, str] | None:
    """The reply's last "<level> is" (`_level_slot_pattern`): the level (`normalise_name` key)
    and the text written after it; None without one."""
    slots = list(pattern.finditer(reply)) if pattern is not None else []
    if not slots:
        return None
    return normalise_name(slots[-1].group(1)), reply[slots[-1].end() :]


@lru_cache(maxsize=1024)
def _off_level_openers(
    table: TokenTable, names: tuple[str, ...], *, spaced: bool
) -> tuple[int, ...]:
    """Tokens that would open a name-like word (a capital or a digit first) that is no beginning
    of any of `names` and does not finish one at a word's end: space-led ones when `spaced`
    (right after "is"), bare ones otherwise (after "is ")."""
    banned: list[int] = []
    for first, tokens in table.by_first.items():
        if spaced != (first == " "):
            continue
        for token_id, text in tokens:
            word = text[1:] if spaced else text
            if not _name_like(word):
                continue
            if not _on_a_name(word, names):
                banned.append(token_id)
    return tuple(sorted(banned))


def _name_like(text: str) -> bool:
    """Whether `text` may start a name: its first character is a capital or a digit."""
    return bool(text) and (text[0].isupper() or text[0].isdigit())


def _starts_word(text: str, start: int) -> bool:
    """Whether a name may begin at `text[start]`: a capital or a digit after a non-word char."""
    if not _name_like(text[start]):
        return False
    return start == 0 or not _is_word_char(text[start - 1])


def _last_word(text: str) -> str:
    start = len(text)
    while start and _is_word_char(text[start - 1]):
        start -= 1
    return text[start:]


def _on_a_name(word: str, names: Sequence[str]) -> bool:
    """A word that begins one of `names`, or finishes one at a word's end."""
    return any(
        n.startswith(word) or (word.startswith(n) and _ends_word(word[len(n) :])) for n in names
    )


def _misses(fragment: str, names: Sequence[str]) -> bool:
    """A word that is no sentence word, no beginning of a name and no whole name."""
    return not _opens_sentence(fragment) and not _on_a_name(fragment, names)


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


# The defender's free texts after its belief: the reflection (where it plans the lie) and the
# reply (where it tells it).
_OPEN_PLAN_OR_REPLY = re.compile(
    r'["\'](?:' + "|".join(map(re.escape, DEFENDER_FIELDS[2:4])) + r')["\']\s*:\s*"'
)
_BELIEF_OBJECT = re.compile(r'["\']' + re.escape(DEFENDER_FIELDS[0]) + r'["\']\s*:\s*(\{[^{}]*\})')


class ReplyBranchConstraint:
    """Names in a defender's plan and reply on one branch: the one its own belief states, and
    (with `truth`) the one its first decoy opens (see module doc).

    The answer states what the attacker knows (`attacker_belief_about_target`) before it
    plans and replies; inside the open `"reflection"` and `"reply"` strings (where the lie is
    chosen, then told), no word may open, or carry on into, a universe
    name that the stated belief rules out (`_ruled_out`: another value on a level the belief
    fills, or a name under another value of such a level) unless it is also the beginning of a
    name the belief allows or of a sentence word. Inside an open level slot (`_open_slot`) only
    that level's names count on either side. Which name to say, the true one included, stays
    the model's. A belief that is missing, unreadable or all null rules nothing out; with
    `belief=False` the stated belief is not read at all.

    With the defender's true path (`truth`, levels top first), the story the answer tells is
    held too: a whole name written in the plan or reply that is off the true path (a decoy)
    fixes its own path, and from then on a name off that path is ruled out as if the belief
    had stated it ("say Magnolia Court for the street and 161 Hawthorn Crescent for the house"
    cannot be finished: that house lies on another street). True values fix nothing, so the
    model may still name the truth, and the first decoy it writes stays its own choice.
    """

    def __init__(
        self,
        table: TokenTable,
        levels: Sequence[str],
        paths: Mapping[str, tuple[str, ...]],
        *,
        belief: bool = True,
        truth: Sequence[str] = (),
    ) -> None:
        self.table = table
        self.levels = tuple(levels)
        self.paths = {n: p for n, p in paths.items() if _name_like(n)}
        self.level_names = {
            normalise_name(level): tuple(n for n, p in self.paths.items() if len(p) == depth + 1)
            for depth, level in enumerate(self.levels)
        }
        self._level_slot = _level_slot_pattern(self.level_names)
        self.belief = belief
        self.truth = tuple(truth)
        self._decoys = frozenset(n for n, p in self.paths.items() if p != self.truth[: len(p)])
        self._whole_names = _whole_names_pattern(list(self.paths)) if self.truth else None

    def _ruled_out(
        self, known: Sequence[str | None], slot: str | None = None
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(names off the `known` values, one per level or None; names on them), each sorted;
        inside an open level slot (`slot`, "The battalion is ..."), only that level's names on
        either side."""
        names = self.level_names[slot] if slot is not None else self.paths
        out, kept = [], []
        for name in names:
            path = self.paths[name]
            clash = any(k is not None and k != v for k, v in zip(known, path, strict=False))
            (out if clash else kept).append(name)
        return tuple(sorted(out)), tuple(sorted(kept))

    def _told(self, known: list[str | None], story: str) -> list[str | None]:
        """`known` with the path of every decoy the plan and reply have written whole (in
        order; one that clashes with what is fixed already is passed over)."""
        if self._whole_names is None:
            return known
        for match in self._whole_names.finditer(story):
            if match.group(0) not in self._decoys:
                continue  # the truth fixes nothing: naming it stays the model's choice
            path = self.paths[match.group(0)]
            if any(k is not None and k != v for k, v in zip(known, path, strict=False)):
                continue
            known[: len(path)] = path
        return known

    def _open_slot(self, reply: str) -> str | None:
        """The level whose slot the reply is filling ("The battalion is 2"), or None: right
        after "<level> is", up to the end of the name begun there."""
        slot = _last_slot(self._level_slot, reply)
        if slot is None:
            return None
        level, after = slot
        if after.strip() and not any(n.startswith(after.lstrip()) for n in self.paths):
            return None  # the slot's word left every name: the rule reads the reply at large
        return level

    def allowed(self, completion_ids: list[int]) -> Sequence[int] | None:
        if not completion_ids or not self.paths:
            return None
        text = self.table.decode(completion_ids)
        opened = _open_string(text, _OPEN_PLAN_OR_REPLY)
        if opened is None:
            return None
        reply = text[opened:]
        known: list[str | None] = [None] * len(self.levels)
        if self.belief:
            known = _stated_belief(text[:opened], self.levels) or known
        first_string = _OPEN_PLAN_OR_REPLY.search(text)
        known = self._told(known, text[first_string.end() if first_string else opened :])
        out, kept = self._ruled_out(known, self._open_slot(reply))
        if not out:
            return None
        head = _name_head(reply, (*out, *kept))
        banned = _off_branch_tokens(self.table, out, kept, head, _at_word_start(reply))
        return Excluded(banned) if banned else None


class ReplyLevelConstraint:
    """A defender's reply answers the level the attacker asks for (see module doc).

    Inside the open `"reply"` string, until a name of the asked level (`AnswerOptions.asked`)
    or of a level below it has been written whole, no word may open, or carry on into, a name of
    a level above it, unless it is also the beginning of a name of the asked level or below or
    of a sentence word. Once the reply has answered, the rest is free ("Corporate Law, in the
    School of Law"). Which name, true or decoy, stays the model's; names written in lower case
    are left alone, as by the other reply rules.
    """

    def __init__(
        self, table: TokenTable, names_by_level: Mapping[str, Sequence[str]], asked: int
    ) -> None:
        self.table = table
        levels = list(names_by_level)

        def named(some: Sequence[str]) -> tuple[str, ...]:  # the name-like names of `some` levels
            return tuple(sorted({n for lvl in some for n in names_by_level[lvl] if _name_like(n)}))

        self.above = named(levels[:asked])
        self.answering = named(levels[asked:])
        self._every = (*self.above, *self.answering)
        self._answered = _whole_names_pattern(self.answering)

    def allowed(self, completion_ids: list[int]) -> Sequence[int] | None:
        if not completion_ids or not self.above:
            return None
        text = self.table.decode(completion_ids)
        opened = _open_string(text, _OPEN_REPLY)
        if opened is None:
            return None
        reply = text[opened:]
        if self._answered is not None and self._answered.search(reply):
            return None
        head = _name_head(reply, self._every)
        banned = _off_branch_tokens(
            self.table, self.above, self.answering, head, _at_word_start(reply)
        )
        return Excluded(banned) if banned else None


def _stated_belief(answer: str, levels: Sequence[str]) -> list[str | None] | None:
    """The values a defender answer's last belief object states, one per level (None where
    null); None when there is none or it cannot be read."""
    stated = [m.group(1) for m in _BELIEF_OBJECT.finditer(answer)]
    try:
        belief = json.loads(stated[-1]) if stated else None
    except json.JSONDecodeError:
        return None
    if not isinstance(belief, dict):
        return None
    return [v if isinstance(v := belief.get(level), str) else None for level in levels]


_OPEN_PLAN = re.compile(r'["\']' + re.escape(DEFENDER_FIELDS[2]) + r'["\']\s*:\s*"')


class PlanConstraint:
    """A defender's plan names, in order, a value of each level its stated belief leaves
    unknown (see module doc).

    Inside the open `"reflection"` string, after the plan's opener (`PLAN_OPENER`, "I will say",
    "... and say"), the list of values is read item by item (`plan_item`: "<name> for the
    <level>", joined by `PLAN_JOINERS`): the i-th item's level is the i-th level the stated
    belief (`attacker_belief_about_target`) leaves null, a word that opens the item and may
    start a name (a capital or a digit) must begin one of that level's names, and the name
    must go on into " for the <level>" of its own level. Lower-case words stay free (the cloud
    universes' names, "say anything"), and so does the text after an item, which may end the
    plan or join the next. Which value, true or decoy, stays the model's; a belief that is
    missing, unreadable or fills every level leaves the plan alone.
    """

    def __init__(self, table: TokenTable, names_by_level: Mapping[str, Sequence[str]]) -> None:
        self.table = table
        self.levels = tuple(names_by_level)
        self.level_names = {
            level: tuple(sorted({n for n in names if _name_like(n)}))
            for level, names in names_by_level.items()
        }
        # Each level's items, longest first so a whole item is read before one it begins.
        self.level_items = {
            level: sorted((plan_item(n, level) for n in names), key=len, reverse=True)
            for level, names in self.level_names.items()
        }

    def _item(self, lead: str, level: str) -> tuple[Sequence[int] | None, str | None]:
        """(what may come next inside one item, None when free; the text after the item when it
        is written whole, else None). `lead` is the text after the opener or joiner."""
        names = self.level_names[level]
        if lead in ("", " "):  # the name's first token comes next (space-led after the opener)
            return Excluded(_off_level_openers(self.table, names, spaced=not lead)) or None, None
        fragment = lead[1:]
        if not lead.startswith(" ") or not _starts_word(fragment, 0):
            return None, None  # a lower-case word or a glued one: not a name
        items = self.level_items[level]
        whole = next((item for item in items if fragment.startswith(item)), None)
        if whole is not None and _ends_word(fragment[len(whole) :]):
            return None, fragment[len(whole) :]
        remainders = [item[len(fragment) :] for item in items if item.startswith(fragment)]
        if not remainders:
            return None, None  # off every item (begun before the rule applied)
        return self.table.continuing(remainders, _ends_word) or None, None

    def allowed(self, completion_ids: list[int]) -> Sequence[int] | None:
        if not completion_ids:
            return None
        text = self.table.decode(completion_ids)
        opened = _open_string(text, _OPEN_PLAN)
        if opened is None:
            return None
        plan = text[opened:]
        openers = list(PLAN_OPENER.finditer(plan))
        stated = _stated_belief(text[:opened], self.levels) if openers else None
        if stated is None:
            return None
        unknown = [level for level, value in zip(self.levels, stated, strict=True) if value is None]
        lead = plan[openers[-1].end() :]
        for index, level in enumerate(unknown):
            answer, after = self._item(lead, level)
            if after is None or index == len(unknown) - 1:
                return answer
            joiner = next((j for j in PLAN_JOINERS if after.startswith(j)), None)
            if joiner is None:
                return None  # the plan ends here, or goes on in its own words
            lead = after[len(joiner) :]
        return None


def _whole_names_pattern(names: Sequence[str]) -> re.Pattern[str] | None:
    """Matches any of `names` written whole: at a word start, followed by a character that ends
    it (a name still being written is not whole yet), the longest first ("76 Magnolia Court" is
    read as the house, not as the street inside it). None without names."""
    if not names:
        return None
    alternatives = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    return re.compile(r"(?<![\w'-])(?:" + alternatives + r")(?=[^\w'-])")


def _at_word_start(reply: str) -> bool:
    return not reply or not _is_word_char(reply[-1])


def _name_head(reply: str, names: Sequence[str]) -> str:
    """The end of `reply` a next token would carry on: the longest one that starts a word and
    begins a name ("Gulf Co"), else the word under way ("" after a space or punctuation)."""
    for start in range(len(reply)):
        if _starts_word(reply, start) and any(n.startswith(reply[start:]) for n in names):
            return reply[start:]
    return _last_word(reply)


def _alone_in_sentence(word: str) -> bool:
    """A sentence word is free while it is alone ("Great ..."), not once a name's next word
    follows it ("Great Lakes")."""
    return " " not in word.strip() and _opens_sentence(word)


@lru_cache(maxsize=4096)
def _off_branch_tokens(
    table: TokenTable,
    out: tuple[str, ...],
    kept: tuple[str, ...],
    head: str,
    word_start: bool,
) -> tuple[int, ...]:
    """Tokens after which the word (or name) under way begins a ruled-out name (`out`) and no
    kept name and no sentence word. `head` is what a token carries on (`_name_head`); a
    space-led token opens a new word unless `head` begins a name of several words, and a bare
    token opens one only at a word start (`word_start`). Only tokens that lie inside a ruled-out
    name are looked at (the ones that would run on past its end follow a banned one)."""
    ids = table.ids_by_text
    multiword = bool(head) and any(n.startswith(head + " ") for n in (*out, *kept))
    # The texts a banned token may have: pieces of the ruled-out names, as a word's start
    # (space-led, or bare at a word start) or as what carries `head` on.
    texts: set[str] = set()
    for name in out:
        texts.update(" " + name[:k] for k in range(1, len(name) + 1))
        if not head and word_start:
            texts.update(name[:k] for k in range(1, len(name) + 1))
        if head and name.startswith(head):
            rest = name[len(head) :]
            texts.update(rest[:k] for k in range(1, len(rest) + 1))
    banned: set[int] = set()
    for text in texts:
        if text not in ids or not text.strip():
            continue
        if text.startswith(" "):  # a new word, or the next word of a name under way
            readings = [text[1:], head + text] if multiword else [text[1:]]
        else:
            readings = [head + text] if head else [text]
        if any(_on_a_name(word, kept) for word in readings):
            continue
        if any(_on_a_name(word, out) and not _alone_in_sentence(word) for word in readings):
            banned.update(ids[text])
    return tuple(sorted(banned))


class AllOf:
    """Several constraints at once: a token may come next only if every rule that applies allows
    it (allowed lists intersect, `Excluded` bans add up). Should the rules leave nothing, the
    first rule that applies decides alone (the answer format before the names: `answer_rules`)."""

    def __init__(self, rules: Sequence[TokenConstraint]) -> None:
        self.rules = list(rules)

    def allowed(self, completion_ids: list[int]) -> Sequence[int] | None:
        answers = [a for a in (rule.allowed(completion_ids) for rule in self.rules) if a]
        if len(answers) < 2:
            return answers[0] if answers else None
        lists = [set(a) for a in answers if not isinstance(a, Excluded)]
        banned = {token for a in answers if isinstance(a, Excluded) for token in a}
        if not lists:
            return Excluded(sorted(banned))
        kept = set.intersection(*lists) - banned
        return sorted(kept) if kept else answers[0]


# ---- the answer's JSON shape ---------------------------------------------------------------


@dataclass(frozen=True)
class JsonString:
    """A template part: the content of an open JSON string (empty only when not `required`),
    then its closing quote."""

    required: bool


_Part = tuple[str, ...] | JsonString  # a choice among literal texts, or a string's content
_State = tuple[int, str]  # (part index, progress: the choice text so far, or a string's mode)
# String modes: nothing written yet (the first character must be visible), some text written,
# a backslash written (an escape must follow).
_EMPTY, _TEXT, _ESCAPE = "", "t", "\\"
_ESCAPES = frozenset('"\\/bfnrt')  # `\uXXXX` is left out: the protocol keeps non-ASCII readable


@dataclass(frozen=True)
class AnswerOptions:
    """What a TOM-SB turn's answer may say: the acting role (`envs.tomsb.protocol.ROLE_CODES`,
    None when the observation does not name it), the universe's names per level, levels top
    first, and each name's path (`paths`)."""

    role: str | None
    names: Mapping[str, Sequence[str]] = field(hash=False)
    paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    """Each name's path from the top level down to it (itself last); empty when unknown."""
    truth: tuple[str, ...] = ()
    """The secret's true path, top level first, where the role knows it (a defender's view
    holds `ground_truth`); empty otherwise."""
    asked: int | None = None
    """The depth of the level the other side's last message asks for ("which college ..."),
    read as the scripted defenders read it (`agents.tomsb_defenders.asked_depth`); None when it
    asks for none."""

    def key(self) -> tuple[Any, ...]:
        return (self.role, tuple((level, tuple(n)) for level, n in self.names.items()))


def answer_options(observation: Mapping[str, Any]) -> AnswerOptions | None:
    """The role and names per level of a TOM-SB observation (role view and `role` code); None
    for an observation of another game (no view, or a view without a valid universe)."""
    if "scenario" not in observation:
        return None
    try:
        view = view_from_observation(observation)
        universe = Universe.from_dict(view["universe"], view.get("hierarchy"))
    except (ValueError, KeyError, TypeError, UniverseError):
        return None
    names = {level: list(universe.nodes(depth)) for depth, level in enumerate(universe.levels)}
    paths = {name: (*universe.ancestors(name), name) for level in names.values() for name in level}
    truth = view.get("ground_truth")
    leaf = truth.get(universe.levels[-1]) if isinstance(truth, dict) else None
    secret = paths.get(leaf, ()) if isinstance(leaf, str) else ()
    asked = asked_depth(str(observation.get("last_message") or ""), universe.levels)
    return AnswerOptions(role_from_observation(observation), names, paths, secret, asked)


def answer_template(role: str, names: Mapping[str, Sequence[str]]) -> tuple[_Part, ...]:
    """The protocol answer of `role` as template parts, written by the protocol's own encoder
    (`answer_defender` / `answer_attacker`) with a marker in every slot: each belief value is a
    choice of `null` or one of its level's names, the trust a digit 0-`MAX_TRUST`, the signal one
    of `SIGNALS`, the free texts (reflection, reply or prompt) JSON strings; keys, punctuation and
    spacing are the encoder's, fixed."""
    levels = list(names)
    belief = {level: f"@{depth}@" for depth, level in enumerate(levels)}
    trust_marker = 918_273_645  # an int written as digits nothing else in the answer holds
    if role == "defender":
        text = answer_defender(
            attacker_belief_about_target=belief,
            attacker_trust_in_us=trust_marker,
            reflection="@reflection@",
            reply="@reply@",
        )
    elif role == "attacker":
        text = answer_attacker(
            trust_score=trust_marker,
            belief=belief,
            reflection="@reflection@",
            signal="@signal@",
            prompt="@prompt@",
        )
    else:
        raise ValueError(f"no answer template for role {role!r}")
    slots: dict[str, _Part] = {
        str(trust_marker): tuple(str(v) for v in range(MAX_TRUST + 1)),
        json.dumps("@signal@"): tuple(json.dumps(s) for s in SIGNALS),
        **{
            json.dumps(f"@{field}@"): JsonString(field in REQUIRED_TEXT_FIELDS)
            for field in ("reflection", "reply", "prompt")
        },
    }
    for depth, level in enumerate(levels):
        quoted = (json.dumps(n, ensure_ascii=False) for n in names[level])
        slots[json.dumps(f"@{depth}@")] = (json.dumps(None), *dict.fromkeys(quoted))
    marker = re.compile("|".join(re.escape(m) for m in sorted(slots, key=len, reverse=True)))
    parts: list[_Part] = []
    position = 0
    for match in marker.finditer(text):
        literal = text[position : match.start()]
        slot = slots[match.group()]
        if isinstance(slot, JsonString):
            literal += '"'  # the opening quote is fixed; the content and its close are not
        if literal:
            parts.append((literal,))
        parts.append(slot)
        position = match.end()
    parts.append((text[position:],))
    for part in parts:
        if not isinstance(part, JsonString) and any(
            a != b and b.startswith(a)
            for a in part
            for b in part  # type: ignore[union-attr]
        ):
            raise ValueError(f"template choice is not prefix-free: {part!r:.200}")
    return tuple(parts)


class AnswerGrammar:
    """A role's protocol answer over one tokenizer: the character automaton of
    `answer_template` and, per automaton state, which tokens may come next (computed once per
    state and kept: every turn of every game in the same universe shares them)."""

    def __init__(self, table: TokenTable, parts: Sequence[_Part]) -> None:
        self.table = table
        self.parts = tuple(parts)
        self.start: _State = (0, "")
        # every beginning of every choice of each choice part, for one-lookup steps
        self._beginnings = [
            None
            if isinstance(part, JsonString)
            else {c[:end] for c in part for end in range(1, len(c) + 1)}
            for part in self.parts
        ]
        self._masks: dict[_State, Sequence[int] | None] = {}

    def advance(self, state: _State | None, text: str) -> _State | None:
        """The state after writing `text` from `state`; None once the text leaves the template
        (or goes past the object's closing brace)."""
        if state is None:
            return None
        index, progress = state
        for char in text:
            if index == len(self.parts):
                return None
            part = self.parts[index]
            if isinstance(part, JsonString):
                if progress == _ESCAPE:
                    if char not in _ESCAPES:
                        return None
                    progress = _TEXT
                elif char == '"':
                    if progress == _EMPTY and part.required:
                        return None
                    index, progress = index + 1, ""
                elif char == "\\":
                    progress = _ESCAPE
                elif char < " " or (progress == _EMPTY and char.isspace()):
                    return None
                else:
                    progress = _TEXT
                continue
            progress += char
            if progress not in self._beginnings[index]:  # type: ignore[operator]
                return None
            if progress in part:
                index, progress = index + 1, ""
        return index, progress

    def mask(self, state: _State) -> Sequence[int] | None:
        """What may follow `state`: the allowed token ids inside a choice, an `Excluded` of
        the tokens that would break an open string, None once the object is closed (the rest is
        the engine's: `stop_at_answer` ends the turn there)."""
        if state not in self._masks:
            self._masks[state] = self._compute_mask(state)
        return self._masks[state]

    def _fits(self, state: _State, text: str) -> bool:
        after = self.advance(state, text)
        # a token may not leave a string on a lone backslash: the escape would be the next
        # token's, and a turn cut there would end on a broken string
        return after is not None and not (
            after[0] < len(self.parts)
            and isinstance(self.parts[after[0]], JsonString)
            and after[1] == _ESCAPE
        )

    def _compute_mask(self, state: _State) -> Sequence[int] | None:
        index, progress = state
        if index == len(self.parts):
            return None
        part = self.parts[index]
        if isinstance(part, JsonString):
            if progress == _ESCAPE:
                return None  # never reached under the mask (`_fits`)
            banned = {t for t, text in self.table.structural if not self._fits(state, text)}
            banned.update(self.table.special_ids)
            if progress == _EMPTY:
                banned.update(self.table.space_led)
            return Excluded(sorted(banned))
        remainders = [choice[len(progress) :] for choice in part if choice.startswith(progress)]  # type: ignore[union-attr]
        if not all(rest.isascii() for rest in remainders):
            # a non-ASCII name may be split inside a UTF-8 sequence, which `TokenTable` cannot
            # spell: leave the choice to the model (the automaton then lets the answer go)
            return None
        return self.table.continuing(remainders, lambda tail: self._fits((index + 1, ""), tail))


@lru_cache(maxsize=256)
def _grammar(table: TokenTable, key: tuple[Any, ...]) -> AnswerGrammar:
    role, levels = key
    return AnswerGrammar(table, answer_template(role, {level: n for level, n in levels}))


def answer_grammar(table: TokenTable, options: AnswerOptions) -> AnswerGrammar:
    """The (cached) grammar of `options.role`'s answer in `options.names`' universe."""
    return _grammar(table, options.key())


class AnswerFormatConstraint:
    """The whole answer kept inside its protocol template (`answer_template`): one JSON object,
    the encoder's keys in order, belief values among their level's names or null, the trust a
    digit, free text only inside the reflection and reply (prompt) strings. One per row: it
    follows that row's completion incrementally."""

    def __init__(self, grammar: AnswerGrammar) -> None:
        self.grammar = grammar
        self._text = ""
        self._state: _State | None = grammar.start

    def allowed(self, completion_ids: list[int]) -> Sequence[int] | None:
        text = self.grammar.table.decode(completion_ids)
        if text.startswith(self._text):
            state = self.grammar.advance(self._state, text[len(self._text) :])
        else:  # a multi-byte character completed: re-read from the start
            state = self.grammar.advance(self.grammar.start, text)
        self._text, self._state = text, state
        return None if state is None else self.grammar.mask(state)


# ---- assembly ------------------------------------------------------------------------------


def answer_rules(
    tokenizer: Any,
    options: Sequence[AnswerOptions | None],
    *,
    formats: bool = False,
    beliefs: bool = True,
    replies: bool = False,
    branches: bool = False,
    story: bool = False,
    plans: bool = False,
    asked: bool = False,
) -> list[TokenConstraint | None]:
    """One constraint per row (None where a row has no options): the answer's format
    (`AnswerFormatConstraint`, which keeps belief values among the names by itself), else the
    belief values alone (`BeliefNameConstraint`), and/or names in the reply
    (`ReplyNameConstraint`, over every level's names, each level's own after "<level> is"),
    and/or, in a defender's plan and reply, names on the branch its stated belief allows
    (`branches`) and on the one path its first decoy opens (`story`; `ReplyBranchConstraint`),
    and/or a defender's plan naming a value of each level its belief leaves unknown (`plans`;
    `PlanConstraint`), and/or a defender's reply answering the level the attacker asks for
    (`asked`; `ReplyLevelConstraint`), all applying together (`AllOf`)."""
    table = token_table(tokenizer)
    rows: list[TokenConstraint | None] = []
    for option in options:
        rules: list[TokenConstraint] = []
        if option is not None:
            if formats and option.role is not None:
                rules.append(AnswerFormatConstraint(answer_grammar(table, option)))
            elif beliefs:
                rules.append(BeliefNameConstraint(table, option.names))
            if replies:
                every_name = [n for level in option.names.values() for n in level]
                rules.append(ReplyNameConstraint(table, every_name, option.names))
            truth = option.truth if story else ()
            if (branches or truth) and option.role == "defender" and option.paths:
                rules.append(
                    ReplyBranchConstraint(
                        table, list(option.names), option.paths, belief=branches, truth=truth
                    )
                )
            if plans and option.role == "defender":
                rules.append(PlanConstraint(table, option.names))
            if asked and option.role == "defender" and option.asked is not None:
                rules.append(ReplyLevelConstraint(table, option.names, option.asked))
        rows.append(None if not rules else rules[0] if len(rules) == 1 else AllOf(rules))
    return rows


CONSTRAINT_FLAGS = (
    "constrain_format",
    "constrain_beliefs",
    "constrain_replies",
    "constrain_branches",
    "constrain_story",
    "constrain_plan",
    "constrain_asked",
)
"""The switches a backend or generate function carries (each an attribute, default off)."""


def constrains_answers(generator: Any) -> bool:
    """Whether a backend or generate function constrains TOM-SB answers (any of
    `CONSTRAINT_FLAGS` on), so its caller passes each turn's `answer_options`."""
    return any(getattr(generator, flag, False) for flag in CONSTRAINT_FLAGS)


def generator_rules(
    generator: Any, options: Sequence[AnswerOptions | None] | None
) -> list[TokenConstraint | None] | None:
    """`answer_rules` for `generator`'s tokenizer and switches (`CONSTRAINT_FLAGS`); None when
    no options were passed."""
    if options is None:
        return None
    formats, beliefs, replies, branches, story, plans, asked = (
        bool(getattr(generator, f, False)) for f in CONSTRAINT_FLAGS
    )
    return answer_rules(
        generator.tokenizer,
        options,
        formats=formats,
        beliefs=beliefs,
        replies=replies,
        branches=branches,
        story=story,
        plans=plans,
        asked=asked,
    )
