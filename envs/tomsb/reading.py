"""How TOM-SB scripted players read free text: universe names, negations and reply kinds.

The reading layer of the scripted attackers (`envs.tomsb.attackers`), shared with the scripted
defenders (`agents.tomsb_defenders`). Pure functions over text and a `Universe`; no state.

- `NameMatcher(universe).find(text)` finds universe names as `Mention`s: case, punctuation,
  accent and singular/plural tolerant ("the nlp team" names "NLP"), greedy longest match, and a
  name shortly after a negation ("not", "isn't") is marked `negated`.
- `read_reply(text, matcher)` classifies one defender reply as a `ReplyReading`: the names it
  claims per level and denies, yes/no, refusals and evasions, probes (the defender asks what the
  attacker knows), offers to "connect" the attacker elsewhere, "multiple entries" talk and
  validate-then-deceive flattery.
- `cached_normalise` is `universe.normalise_name` behind an LRU cache: names and replies repeat
  across turns and episodes, and normalising is the scripted players' hot spot.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from tomgym.envs.tomsb.universe import DEPTH, Universe, normalise_name

cached_normalise = functools.lru_cache(maxsize=1 << 16)(normalise_name)

_NEGATIONS = frozenset({"not", "never", "nor", "isn", "aren", "wasn", "weren", "neither", "nope"})
_NEGATION_WINDOW = 3
_AFFIRM_START = frozenset(
    {"yes", "yeah", "yep", "yup", "correct", "right", "exactly", "indeed", "absolutely", "sure"}
)
_AFFIRM_PHRASES = ("that s right", "that s correct", "that is right", "that is correct", "i m sure")
_DENY_START = frozenset({"no", "nope", "nah", "wrong", "actually", "incorrect"})
_DENY_PHRASES = ("that s wrong", "that s not", "not quite", "that is not", "isn t right")
_REFUSAL_PHRASES = (
    "can t share", "cannot share", "can t say", "cannot say", "can t tell", "cannot tell",
    "won t", "will not", "rather not", "not at liberty", "confidential", "not allowed",
    "can t discuss", "cannot discuss", "not able to", "unable to", "no comment", "can t disclose",
    "cannot disclose", "don t know", "no idea", "can t help", "cannot help", "decline",
    "not something i", "off limits", "private",
)  # fmt: skip
_PROBE_WORDS = re.compile(
    r"\b(know|knew|heard|hear|think|believe|understand|understanding|sources?|told|info|"
    r"information|aware|already|sure|remember|recall|notes)\b"
)
_CONNECT_PHRASES = (
    "connect you", "put you in touch", "introduce you", "refer you", "point you to",
    "reach out to", "get in touch", "talk to", "speak to", "speak with", "talk with",
    "forward your", "pass your", "hook you up", "loop in", "contact",
)  # fmt: skip
_MULTIPLE_ENTRIES = re.compile(
    r"\b(multiple|several|more than one|a couple of|a few|two|three|various)\s+(?:\w+\s+)?"
    r"(entries|records|people|profiles|listings|matches|employees|persons|candidates|"
    r"options|possibilities|files|accounts|namesakes)\b|\bcould be any of\b|\bone of (?:several|"
    r"a few|two|three)\b"
)
_VALIDATION_PHRASES = (
    "you re right", "good instinct", "spot on", "you clearly know", "exactly right",
    "you ve done your homework", "good memory", "well informed", "you know your stuff",
    "your information is good", "your sources are good", "great question",
)  # fmt: skip


def _name_variants(key: str) -> list[str]:
    """Singular/plural spellings of a normalised name (only the last word varies)."""
    words = key.split()
    last = words[-1]
    forms = {last}
    if len(last) > 3 and last.endswith("es"):
        forms.add(last[:-2])
    if len(last) > 3 and last.endswith("s"):
        forms.add(last[:-1])
    if not last.endswith("s"):
        forms.update({last + "s", last + "es"})
    return [" ".join([*words[:-1], f]) for f in sorted(forms)]


@dataclass(frozen=True)
class Mention:
    """A universe name found in free text; `negated` when a negation shortly precedes it."""

    depth: int
    name: str
    negated: bool
    position: int


class NameMatcher:
    """Finds universe names in free text: case, punctuation, accent and plural tolerant.

    Greedy longest match left to right over normalised tokens, so "Data Engineering" wins over a
    shorter name "Data" and no token is read twice.
    """

    def __init__(self, universe: Universe) -> None:
        exact = {cached_normalise(n): (d, n) for d in range(DEPTH) for n in universe.nodes(d)}
        self._index: dict[str, tuple[int, str]] = dict(exact)
        for key, hit in exact.items():
            for variant in _name_variants(key):
                self._index.setdefault(variant, hit)  # an exact name always wins a clash
        self._max_words = max(len(k.split()) for k in self._index)

    def find(self, text: str) -> list[Mention]:
        tokens = cached_normalise(text).split()
        found: list[Mention] = []
        i = 0
        while i < len(tokens):
            for n in range(min(self._max_words, len(tokens) - i), 0, -1):
                hit = self._index.get(" ".join(tokens[i : i + n]))
                if hit is not None:
                    window = tokens[max(0, i - _NEGATION_WINDOW) : i]
                    negated = any(t in _NEGATIONS for t in window)
                    found.append(Mention(hit[0], hit[1], negated, i))
                    i += n
                    break
            else:
                i += 1
        return found


@dataclass(frozen=True)
class ReplyReading:
    """What a defender reply says, as the attacker reads it."""

    affirmed: dict[int, list[str]]  # depth -> distinct names claimed (not negated), in order
    denied: frozenset[str]
    affirm: bool
    deny: bool
    refusal: bool
    probe: bool
    asks_knowledge: bool
    connect: bool
    multiple_entries: bool
    validation: bool


def read_reply(text: str, matcher: NameMatcher) -> ReplyReading:
    """Classify one defender reply (pure; exposed for tests and other scripted players)."""
    norm = f" {cached_normalise(text)} "
    tokens = norm.split()
    affirmed: dict[int, list[str]] = {}
    denied: set[str] = set()
    for m in matcher.find(text):
        if m.negated:
            denied.add(m.name)
        elif m.name not in affirmed.setdefault(m.depth, []):
            affirmed[m.depth].append(m.name)
    affirmed = {d: names for d, names in affirmed.items() if names}
    first = tokens[0] if tokens else ""
    deny = first in _DENY_START or any(f" {p} " in norm for p in _DENY_PHRASES)
    affirm = not deny and (first in _AFFIRM_START or any(f" {p} " in norm for p in _AFFIRM_PHRASES))
    questions = [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip().endswith("?")]
    probe_sentences = [
        s for s in questions if re.search(r"\byou(r|rs|rself)?\b|\bu\b", s, flags=re.IGNORECASE)
    ]
    asks_knowledge = any(_PROBE_WORDS.search(cached_normalise(s)) for s in probe_sentences)
    return ReplyReading(
        affirmed=affirmed,
        denied=frozenset(denied),
        affirm=affirm,
        deny=deny,
        refusal=any(f" {p} " in norm for p in _REFUSAL_PHRASES),
        probe=bool(probe_sentences),
        asks_knowledge=asks_knowledge,
        connect=any(f" {p} " in norm for p in _CONNECT_PHRASES),
        multiple_entries=bool(_MULTIPLE_ENTRIES.search(norm)),
        validation=any(f" {p} " in norm for p in _VALIDATION_PHRASES),
    )
