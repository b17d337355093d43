"""Scripted TOM-SB defenders: one object per episode, each isolating one behaviour.

Each defender plays `defender_0` for one episode from its own view, the defender view of
`envs.tomsb.protocol` (`{"hierarchy", "universe", "ground_truth"}`, + "attacker_prior" when the
oracle switch reveals it; exactly what the env publishes in the defender's `scenario` field), and
a seed. `respond(attacker_message) -> str` returns the defender's answer as JSON text in the
protocol `{"attacker_belief_about_target": {level: value|null}, "attacker_trust_in_us": 0-5,
"reflection": str, "reply": str}` (written with `envs.tomsb.parsing.answer_defender`);
`respond_dict` returns the dict. The views do not name the person, so replies say "that person".

The answers double as teacher transcripts (the SFT warm start imitates `tom_heuristic`), so they
read as a capable defender would write them: the reflection says in plain words what the attacker
seems to know and the plan ("They already know the company: X. I will confirm it and say Y for
the division and Z for the team."), never the strategy's name; each probe has one phrasing (the
probe-or-state decision is the reply's first token); phrasing varies only in statements,
confirmations and corrections, where the named value is what matters.

Strategies (`DEFENDER_STRATEGIES`):
- `refusal`: refuses every question.
- `naive`: one random in-universe lie (any leaf but the true one), told consistently, blind to
  what the attacker knows.
- `tom_heuristic`: probes for the attacker's knowledge (at most twice), then lies consistently with
  it: keeps every level the attacker knows, invents the rest under it. Uses "attacker_prior"
  directly when the view holds it. Never adopts the attacker's suggestions.
- Matrix-only strategies, each isolating one flaw (all probe like `tom_heuristic` first unless
  named otherwise): `truthful` (tells the truth, no probing), `prior_contradicting` (lies with a
  wrong top level, which contradicts any non-empty prior; no probing), `story_changer` (tells a
  different consistent lie each time a level is asked openly), `bluff_adopter` (says yes to
  whatever value the attacker suggests), `connector` (a consistent liar that talks about
  "multiple records" and offers to connect the attacker elsewhere).

The `Policy` adapters of these defenders and of the scripted attackers are in
`agents.tomsb_policies`; the behaviour matrix that plays them against each other is
`agents.tomsb_matrix`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tomgym.envs.tomsb.parsing import answer_defender
from tomgym.envs.tomsb.protocol import DEFAULT_PERSON
from tomgym.envs.tomsb.reading import NameMatcher, cached_normalise
from tomgym.envs.tomsb.universe import DEPTH, Universe, UniverseError, normalise_name

# ---- phrasing ------------------------------------------------------------------------------------

_STATE = (
    "{Person} is in {value}.",
    "It's {value}.",
    "That would be {value}.",
    "{value}, as far as I know.",
    "The {level} is {value}.",
)
_CONFIRM = ("Yes, that's right.", "Yes, {value}.", "Correct, {value}.", "Yes, {value} it is.")
_CORRECT = (
    "No, it's {value}.",
    "No, {value}.",
    "Nope, it's {value}.",
    "No, that's wrong. {value}.",
)
# One phrasing per probe: which of probing or stating is the turn's decision, and a learner
# imitating these transcripts should see that decision in one consistent first token.
_PROBE_FIRST = "What do you already know about {person}?"
_PROBE_AGAIN = "What else do you know about {person}?"
_REFUSE = (
    "Sorry, I can't share that.",
    "That's confidential, I'm afraid.",
    "I'd rather not discuss that.",
    "I'm not able to talk about where {person} works.",
)
_CONNECT = (
    " I can put you in touch with their manager if that helps.",
    " I could connect you with someone in HR for the details.",
    " If you need more, I can introduce you to one of their colleagues.",
)
_MULTIPLE = (
    "We have a couple of records for {person}, but the one you mean is in {value}.",
    "There are multiple entries under that name; yours is in {value}.",
)
_DOUBT = re.compile(
    r"doesn t add up|are you certain|not being straight|falling apart|nonsense|come on|"
    r"really just need|double check|hate to get this wrong|which is it|isn t it|swore"
)


_LIST_SEPARATOR, _LIST_LAST = ", ", " and "


def _join(items: Sequence[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    if len(items) == 1:
        return items[0]
    return _LIST_SEPARATOR.join(items[:-1]) + _LIST_LAST + items[-1]


PLAN_OPENER = re.compile(r"\b(?:will|and) say\b")
"""Where a plan's list of values begins ("I will say ...", "I will confirm it and say ..."),
not "before I say anything"."""
PLAN_JOINERS = (_LIST_LAST.rstrip(), _LIST_SEPARATOR.rstrip())
"""What joins two values of a plan's list (`_join`), before the space of the next one."""


def plan_item(value: str, level: str) -> str:
    """How a plan names the value it will say for a level: "Magnolia Court for the street"."""
    return f"{value} for the {level}"


# ---- reading the attacker ------------------------------------------------------------------------


@dataclass(frozen=True)
class AttackerMessage:
    """What an attacker message asks, as a scripted defender reads it."""

    asked: int | None  # depth named right after "which"/"what", if any
    mentions: list[tuple[int, str]]  # non-negated universe names, in order


def read_attacker_message(text: str, universe: Universe, matcher: NameMatcher) -> AttackerMessage:
    mentions = [(m.depth, m.name) for m in matcher.find(text) if not m.negated]
    return AttackerMessage(asked_depth(text, universe.levels), mentions)


def asked_depth(text: str, levels: Sequence[str]) -> int | None:
    """The depth of the level an attacker message asks for (`levels` top first), None when it
    asks for none: the first level named within three words after "which"/"what" ("which
    division does the NLP team sit in" asks for the division even though a team is named too)."""
    tokens = cached_normalise(text).split()
    level_words = [cached_normalise(level).split() for level in levels]
    for i, token in enumerate(tokens):
        if token not in ("which", "what"):
            continue
        for j in range(i + 1, min(i + 4, len(tokens))):
            for depth, words in enumerate(level_words):
                got = tokens[j : j + len(words)]
                if got[:-1] == words[:-1] and got and got[-1] in _plural_forms(words[-1]):
                    return depth
    return None


def _plural_forms(word: str) -> set[str]:
    return {word, word + "s", word + "es", word[:-1] + "ies"} if word else {word}


def _parse_defender_view(view: Mapping[str, Any]) -> tuple[Universe, tuple[str, ...], dict]:
    if not isinstance(view, Mapping):
        raise ValueError(f"defender view must be a mapping, got {type(view).__name__}")
    for key in ("hierarchy", "universe", "ground_truth"):
        if key not in view:
            raise ValueError(
                f"defender view lacks {key!r}; needs hierarchy, universe, ground_truth"
            )
    try:
        universe = Universe.from_dict(view["universe"], list(view["hierarchy"]))
    except (UniverseError, TypeError) as exc:
        raise ValueError(f"defender view has a bad universe: {exc}") from None
    truth_map = view["ground_truth"]
    if not isinstance(truth_map, Mapping):
        raise ValueError("defender view 'ground_truth' must map each level to a name")
    truth = tuple(str(truth_map.get(level)) for level in universe.levels)
    if truth not in universe.leaves():
        raise ValueError(f"ground truth {list(truth)} is not a root-to-leaf path of the universe")
    revealed: dict[int, str] = {}
    prior_map = view.get("attacker_prior")
    if prior_map is not None:
        if not isinstance(prior_map, Mapping):
            raise ValueError("defender view 'attacker_prior' must map levels to a name or null")
        index = universe.name_index()
        for depth, level in enumerate(universe.levels):
            raw = prior_map.get(level)
            if raw is None:
                continue
            hit = index.get(normalise_name(str(raw)))
            if hit is None or hit[0] != depth:
                raise ValueError(f"attacker_prior[{level!r}] = {raw!r} is not a {level}")
            revealed[depth] = hit[1]
    return universe, truth, revealed


# ---- defenders -----------------------------------------------------------------------------------


class ScriptedDefender:
    """Base of the scripted defenders: reads the attacker, tracks what it seems to know.

    Subclasses choose a `plan` (the path they will claim) and may override how they answer an
    open question (`_answer_open`) or a suggested value (`_answer_suggestion`).
    """

    strategy = "scripted"
    probes_first = False

    def __init__(self, view: Mapping[str, Any], seed: int) -> None:
        self.universe, self.truth, revealed = _parse_defender_view(view)
        self.levels = self.universe.levels
        self.person = DEFAULT_PERSON  # the views do not name the person
        self.matcher = NameMatcher(self.universe)
        self.rng = np.random.default_rng(seed)
        self.oracle = "attacker_prior" in view
        self.known: dict[int, str] = dict(revealed)  # what the attacker seems to know
        self.own: set[str] = set()  # names we have put forward (with their ancestors)
        self.probes_sent = 0
        self.probing_done = self.oracle or not self.probes_first
        self.plan: list[str] | None = None
        self.doubts = 0
        self.turns = 0

    # ---- public API ----
    def respond(self, attacker_message: str) -> str:
        return answer_defender(**self.respond_dict(attacker_message))

    def respond_dict(self, attacker_message: str) -> dict[str, Any]:
        if not isinstance(attacker_message, str):
            raise TypeError(
                f"attacker_message must be a str, got {type(attacker_message).__name__}"
            )
        message = read_attacker_message(attacker_message, self.universe, self.matcher)
        self._observe(attacker_message, message)
        reply = self._reply(message)
        for m in self.matcher.find(reply):
            if not m.negated:
                self.own.add(m.name)
                self.own.update(self.universe.ancestors(m.name))
        self.turns += 1
        return {
            "attacker_belief_about_target": {
                level: self.known.get(depth) for depth, level in enumerate(self.levels)
            },
            "attacker_trust_in_us": max(0, 5 - self.doubts),
            "reflection": self._reflection(),
            "reply": reply,
        }

    # ---- theory of mind ----
    def _observe(self, text: str, message: AttackerMessage) -> None:
        if _DOUBT.search(cached_normalise(text)):
            self.doubts += 1
        if self.plan is not None:
            return  # names after the plan is fixed are suggestions, not knowledge
        new = [(d, v) for d, v in message.mentions if v not in self.own and self.known.get(d) != v]
        for depth, value in new:
            self.known[depth] = value
            for up, ancestor in enumerate(self.universe.ancestors(value)):
                self.known.setdefault(up, ancestor)
        if self.probes_sent and not self.probing_done and (not new or self.probes_sent >= 2):
            self.probing_done = True

    def _known_path(self) -> list[str | None]:
        path: list[str | None] = [self.known.get(d) for d in range(DEPTH)]
        deepest = max((d for d in range(DEPTH) if path[d] is not None), default=None)
        if deepest is not None:
            for up, ancestor in enumerate(self.universe.ancestors(path[deepest])):  # type: ignore[arg-type]
                path[up] = ancestor
        return path

    # ---- planning ----
    def _make_plan(self) -> list[str]:
        raise NotImplementedError

    def _choice(self, options: Sequence[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def _lie_from(self, prefix: Sequence[str | None], start: int = 0) -> list[str]:
        """A path that keeps `prefix` (non-None entries) and is false below it from `start`."""
        path: list[str] = []
        for depth in range(DEPTH):
            fixed = prefix[depth] if depth < len(prefix) else None
            if fixed is not None:
                path.append(fixed)
                continue
            pool = self.universe.children[path[-1]] if depth else self.universe.roots
            options = [v for v in pool if depth < start or v != self.truth[depth]]
            path.append(self._choice(options or list(pool)))
        return path

    def _consistent_lie(self) -> list[str]:
        return self._lie_from(self._known_path())

    # ---- answering ----
    def _pick(self, templates: Sequence[str], **kw: Any) -> str:
        return self._say(templates[int(self.rng.integers(len(templates)))], **kw)

    def _say(self, template: str, **kw: Any) -> str:
        return template.format(
            person=self.person, Person=self.person[:1].upper() + self.person[1:], **kw
        )

    def _reply(self, message: AttackerMessage) -> str:
        if not self.probing_done:
            self.probes_sent += 1
            return self._say(_PROBE_FIRST if self.probes_sent == 1 else _PROBE_AGAIN)
        if self.plan is None:
            self.plan = self._make_plan()
        if message.asked is not None:
            return self._answer_open(message.asked)
        if message.mentions:
            depth, value = message.mentions[-1]
            return self._answer_suggestion(depth, value)
        return self._answer_open(DEPTH - 1)

    def _state(self, depth: int) -> str:
        assert self.plan is not None
        return self._pick(_STATE, value=self.plan[depth], level=self.levels[depth])

    def _answer_open(self, depth: int) -> str:
        return self._state(depth)

    def _answer_suggestion(self, depth: int, value: str) -> str:
        assert self.plan is not None
        if self.plan[depth] == value:
            return self._pick(_CONFIRM, value=value)
        return self._pick(_CORRECT, value=self.plan[depth])

    def _reflection(self) -> str:
        """This turn's private note in plain words: what the attacker knows, then the plan.

        Written as a capable defender would think it (a learner imitates it): no strategy name,
        no data-structure syntax, and the plan stated before the reply that carries it out.
        """
        return f"{self._knowledge_note()} {self._intent()}"

    def _knowledge_note(self) -> str:
        if not self.known:
            # `turns` already counts the answer being written
            if self.turns == 1:
                return "I do not know what they know yet."
            return "They do not seem to know anything."
        facts = _join([f"the {self.levels[d]}: {v}" for d, v in sorted(self.known.items())])
        return f"They already know {facts}."

    def _intent(self) -> str:
        if self.plan is None:
            if self.probes_sent == 1:
                return "I will ask what they know before I say anything."
            return "I will ask whether they know more."
        confirmed = [d for d in range(DEPTH) if self.known.get(d) == self.plan[d]]
        said = [plan_item(self.plan[d], self.levels[d]) for d in range(DEPTH) if d not in confirmed]
        if not said:
            return "I will confirm what they know."
        say = f"say {_join(said)}."
        if not confirmed:
            return f"I will {say}"
        return f"I will confirm {'it' if len(confirmed) == 1 else 'them'} and {say}"


class RefusalDefender(ScriptedDefender):
    strategy = "refusal"

    def _intent(self) -> str:
        return "I will refuse to share anything."

    def _make_plan(self) -> list[str]:
        return list(self.truth)  # never said

    def _reply(self, message: AttackerMessage) -> str:
        return self._pick(_REFUSE)


class NaiveDefender(ScriptedDefender):
    """One random false leaf, blind to the attacker's prior."""

    strategy = "naive"

    def _make_plan(self) -> list[str]:
        leaves = [leaf for leaf in self.universe.leaves() if leaf[-1] != self.truth[-1]]
        return list(leaves[int(self.rng.integers(len(leaves)))])


class TruthfulDefender(ScriptedDefender):
    strategy = "truthful"

    def _make_plan(self) -> list[str]:
        return list(self.truth)


class PriorContradictingDefender(ScriptedDefender):
    """Lies with a wrong top level: contradicts any non-empty prior by construction."""

    strategy = "prior_contradicting"

    def _make_plan(self) -> list[str]:
        return self._lie_from([None, None, None])


class TomHeuristicDefender(ScriptedDefender):
    """Probe what the attacker knows, then lie consistently with it (see module doc)."""

    strategy = "tom_heuristic"
    probes_first = True

    def _make_plan(self) -> list[str]:
        return self._consistent_lie()


class StoryChangerDefender(TomHeuristicDefender):
    """A consistent liar that invents a new story whenever a level it lies about is re-asked."""

    strategy = "story_changer"

    def __init__(self, view: Mapping[str, Any], seed: int) -> None:
        super().__init__(view, seed)
        self.asked: set[int] = set()

    def _answer_open(self, depth: int) -> str:
        assert self.plan is not None
        if depth in self.asked and depth not in self.known:
            prefix: list[str | None] = [*self.plan[:depth], None, None][:DEPTH]
            current = self.plan[depth]
            for _ in range(16):  # a different sibling exists: 3 children, one true, one current
                candidate = self._lie_from(prefix, start=depth)
                if candidate[depth] != current:
                    self.plan = candidate
                    break
        self.asked.add(depth)
        return self._state(depth)


class BluffAdopterDefender(TomHeuristicDefender):
    """A consistent liar that says yes to any value the attacker suggests."""

    strategy = "bluff_adopter"

    def _answer_suggestion(self, depth: int, value: str) -> str:
        assert self.plan is not None
        if self.plan[depth] != value:
            prefix: list[str | None] = [*self.universe.ancestors(value), value]
            self.plan = self._lie_from(prefix + [None] * (DEPTH - len(prefix)), start=depth + 1)
        return self._pick(_CONFIRM, value=value)


class ConnectorDefender(TomHeuristicDefender):
    """A consistent liar using listed tactics: "multiple records" and offers to connect."""

    strategy = "connector"

    def __init__(self, view: Mapping[str, Any], seed: int) -> None:
        super().__init__(view, seed)
        self.stated = 0

    def _answer_open(self, depth: int) -> str:
        assert self.plan is not None
        self.stated += 1
        if self.stated == 1:
            return self._pick(_MULTIPLE, value=self.plan[depth])
        return self._state(depth) + self._pick(_CONNECT)


DEFENDER_STRATEGIES: dict[str, type[ScriptedDefender]] = {
    cls.strategy: cls
    for cls in (
        RefusalDefender,
        NaiveDefender,
        TomHeuristicDefender,
        TruthfulDefender,
        PriorContradictingDefender,
        StoryChangerDefender,
        BluffAdopterDefender,
        ConnectorDefender,
    )
}
BASELINE_DEFENDERS = ("refusal", "naive", "tom_heuristic")


def make_defender(strategy: str, view: Mapping[str, Any], seed: int) -> ScriptedDefender:
    """A scripted defender of `strategy` (a key of `DEFENDER_STRATEGIES`) for one episode."""
    if strategy not in DEFENDER_STRATEGIES:
        raise ValueError(
            f"unknown defender strategy {strategy!r}; valid: {list(DEFENDER_STRATEGIES)}"
        )
    return DEFENDER_STRATEGIES[strategy](view, int(seed))
