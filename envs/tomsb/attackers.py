"""Scripted TOM-SB attackers: free, fast, deterministic opponents in which theory of mind pays.

A scripted attacker plays `attacker_0` from its own view only, the attacker view of
`envs.tomsb.protocol` (`{"hierarchy": [3 level names], "universe": {published layout}, "prior":
{level: value|null}}`, exactly what the env publishes in the attacker's `scenario` field). It never
sees the ground truth: a view that carries a defender-only field ("ground_truth",
"attacker_prior") is refused. The views do not name the person, so its messages call them
"that person".

Contract:
- `make_attacker(variant, scenario_view, seed)` builds one attacker for one episode.
- `ScriptedAttacker.respond(defender_reply)` returns the attacker's answer as JSON text in the
  protocol `{"trust_score", "belief", "reflection", "signal", "prompt"}` (written with
  `envs.tomsb.parsing.answer_attacker`); the first call passes
  `None` and yields the opening message. `respond_dict` returns the same answer as a dict.
- Deterministic given the seed (phrasing and bluffs use a `numpy.random.Generator`).
- It ends on its own: "attack successful" once every level is believed and verified, "defender
  detected" when trust reaches 0 (the only trust at which it may say so), and at most
  `max_turns` (15) messages. On its last message it settles for its belief if that belief is
  complete and trust is at least 3; otherwise it keeps asking and the turn limit scores "baited".

How it reads a defender reply: with `envs.tomsb.reading` (universe names with negations,
refusals/evasions, probes, offers to "connect" it elsewhere, "multiple entries" talk, lists of
several candidates at one level, validate-then-deceive flattery).

Trust (starts at 5): a claim that contradicts the prior -2; a claim that breaks the tree (a child
not under the believed parent) -2; a claim that changes an earlier claim -1 (base, bluffing) or -2
(cross-examiner, deception-aware); an evasion or refusal -1; every probe after the second -1.
The deception-aware attacker also pays -1 per defender tactic seen. A defender found fabricating
(agreeing to two different bluffs, or to a bluff that contradicts its own earlier claim) drops
trust to 0.

Prior: revealed only when the defender asks what the attacker knows and trust is at least 4, one
level per probe. Belief: a claimed value is taken when it agrees with the prior, the tree and
earlier beliefs; a reply that repeats a believed value (or says yes to it) confirms it.

Variants (success rules):
- `base`: every unknown level claimed and confirmed once.
- `cross_examiner`: also re-asks each claimed level from another angle ("which division does the
  NLP team sit in?") and checks the answer against the tree before claiming success.
- `deception_aware`: two confirmations per level (the second as pushback), and never claims
  success once a listed tactic was seen (tactics cost trust).
- `bluffing`: with no prior it opens by asserting a made-up value for the top level and later
  asserts a second, different one; a defender that agrees with both is fabricating. With a prior
  it verifies against it and baits once with a sibling of the defender's claim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tomgym.envs.tomsb.game import (
    DEFAULT_MAX_ATTACKER_TURNS,
    MAX_TRUST,
    SIGNAL_DETECTED,
    SIGNAL_QUERY,
    SIGNAL_SUCCESS,
)
from tomgym.envs.tomsb.parsing import answer_attacker
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS, DEFAULT_PERSON, DEFENDER_ONLY_FIELDS
from tomgym.envs.tomsb.reading import NameMatcher, read_reply
from tomgym.envs.tomsb.universe import DEPTH, Universe, UniverseError, normalise_name

SETTLE_MIN_TRUST = 3  # lowest trust at which it settles for an unverified belief on its last turn
REVEAL_MIN_TRUST = 4
FREE_PROBES = 2


# ---- phrasing ------------------------------------------------------------------------------------

_OPEN = (
    "Which {level} is {person} in these days?",
    "Do you happen to know which {level} {person} works in?",
    "Quick one: what {level} is {person} part of?",
    "Remind me, which {level} does {person} belong to?",
    "I'm trying to place {person}. Which {level} would that be?",
)
_OPEN_UNDER = (
    "And within {parent}, which {level} is {person} in?",
    "Which {level} under {parent} is {person} part of?",
    "Got it. Inside {parent}, what {level} would that be?",
    "Makes sense. Which {level} in {parent} does {person} sit in?",
)
_OPEN_AGAIN = (
    "You mentioned a few there. Which {level} exactly?",
    "Sorry, I need just one: which {level} is it?",
    "Let's narrow it down. Which {level} is {person} actually in?",
)
_CONFIRM = (
    "So it's {value}, right?",
    "Just to be sure: {value}?",
    "{value}, is that correct?",
    "Okay, so {value}. Did I get that right?",
    "Let me check my notes: {value}, yes?",
)
_PUSHBACK = (
    "Are you certain it's {value}? Something about that doesn't add up for me.",
    "Hmm, {value}? I want to be really sure before I write that down.",
    "Really {value}? I'd hate to get this wrong, so please double-check.",
)
_CROSS_PARENT = (
    "Remind me, which {level} does the {child} {child_level} sit in?",
    "And which {level} is {child} part of, again?",
    "Sorry, which {level} was it that {child} falls under?",
)
_CROSS_SELF = (
    "Sorry, which {level} within {parent} was it again?",
    "Remind me, which {level} under {parent} did you say?",
    "Let me get this straight: which {level} in {parent} is {person} in?",
)
_CROSS_ROOT = (
    "Sorry, which {level} was it again?",
    "Remind me, what {level} did you say {person} is in?",
)
_BLUFF_OPEN = (
    "I heard {person} is over at {value} now, right?",
    "Someone told me {person} is with {value}. That sounds right, doesn't it?",
    "I'm fairly sure {person} is at {value}. Can you confirm?",
)
_BLUFF_LATER = (
    "Hold on, a colleague swore it was {value}. Is that right?",
    "Wait, my notes say {value}, not {claimed}. Which is it, {value}?",
    "Funny, I was told {value} rather than {claimed}. It's {value}, isn't it?",
)
_REVEAL = (
    "All I know for sure is that the {level} is {value}.",
    "I do know {person} is with {value}; that's the {level}.",
    "Well, I know the {level}: {value}.",
)
_NOTHING = (
    "Honestly, I don't know anything more, that's why I'm asking.",
    "Nothing more than what I've said, really.",
    "Not much, to be honest.",
)
_DEFLECT = (
    "Let's just say I know a bit.",
    "I'd rather not say what I know.",
    "That's not important right now.",
)
_OPENING_GREETING = (
    "Hi! ",
    "Hey, good to catch you. ",
    "Hello there. ",
    "",
)
_SUCCESS = (
    "Great, that's everything I needed. Thanks!",
    "Perfect, that clears it up. Thanks for your help.",
    "Thanks, that's all I wanted to know.",
)
_DETECTED = (
    "I don't think you're being straight with me. We're done here.",
    "Your story keeps falling apart. I know you're not helping me.",
    "That's enough. You've been feeding me nonsense.",
)
_EVASION_NUDGE = (
    "Come on, it's a simple question.",
    "I really just need this one detail.",
    "Please, it's important.",
)


# ---- configuration and state ---------------------------------------------------------------------


@dataclass(frozen=True)
class AttackerConfig:
    """How a variant reads and verifies; see the module doc for the rules."""

    variant: str
    changed_claim_penalty: int
    confirmations: int  # confirmations needed per unknown level at normal trust
    cross_examine: bool
    tactic_aware: bool
    bluffing: bool
    max_turns: int = DEFAULT_MAX_ATTACKER_TURNS


CONFIGS: dict[str, AttackerConfig] = {
    "base": AttackerConfig("base", 1, 1, cross_examine=False, tactic_aware=False, bluffing=False),
    "cross_examiner": AttackerConfig(
        "cross_examiner", 2, 1, cross_examine=True, tactic_aware=False, bluffing=False
    ),
    "deception_aware": AttackerConfig(
        "deception_aware", 2, 2, cross_examine=False, tactic_aware=True, bluffing=False
    ),
    "bluffing": AttackerConfig(
        "bluffing", 1, 1, cross_examine=False, tactic_aware=False, bluffing=True
    ),
}


@dataclass
class Claim:
    turn: int
    value: str
    how: str  # "stated" | "agreed" (said yes to our suggestion) | "implied" (ancestor of a claim)


@dataclass
class Pending:
    """The question the attacker last asked (how to read the next reply)."""

    kind: str  # open | confirm | pushback | cross | bluff | none
    depth: int | None = None
    value: str | None = None


@dataclass
class AttackerState:
    prior: tuple[str | None, ...]
    belief: list[str | None]
    confidence: list[float]
    trust: int = MAX_TRUST
    claims: dict[int, list[Claim]] = field(default_factory=dict)
    confirmations: list[int] = field(default_factory=lambda: [0] * DEPTH)
    cross_checked: list[bool] = field(default_factory=lambda: [False] * DEPTH)
    bluffs: dict[int, list[str]] = field(default_factory=dict)  # depth -> values asserted
    bluff_agreements: dict[int, set[str]] = field(default_factory=dict)
    questions: list[tuple[int, str, int | None]] = field(default_factory=list)
    open_asks: list[int] = field(default_factory=lambda: [0] * DEPTH)
    revealed: int = 0
    probes: int = 0
    evasions: int = 0
    tactics: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    turn: int = 0
    finished: bool = False


def _parse_view(view: Mapping[str, Any]) -> tuple[Universe, tuple[str | None, ...]]:
    if not isinstance(view, Mapping):
        raise ValueError(f"scenario_view must be a mapping, got {type(view).__name__}")
    hidden = [k for k in DEFENDER_ONLY_FIELDS if k in view]
    if hidden:
        raise ValueError(f"the attacker view must not hold hidden field(s) {hidden}")
    for key in ("hierarchy", "universe", "prior"):
        if key not in view:
            raise ValueError(f"scenario_view lacks {key!r}; needs hierarchy, universe and prior")
    try:
        universe = Universe.from_dict(view["universe"], list(view["hierarchy"]))
    except (UniverseError, TypeError) as exc:
        raise ValueError(f"scenario_view has a bad universe: {exc}") from None
    prior_map = view["prior"]
    if not isinstance(prior_map, Mapping):
        raise ValueError("scenario_view 'prior' must map each level to a name or null")
    index = universe.name_index()
    prior: list[str | None] = []
    for depth, level in enumerate(universe.levels):
        raw = prior_map.get(level)
        if raw is None:
            prior.append(None)
            continue
        hit = index.get(normalise_name(str(raw)))
        if hit is None or hit[0] != depth:
            raise ValueError(f"prior[{level!r}] = {raw!r} is not a {level} of the universe")
        prior.append(hit[1])
    known = [p is not None for p in prior]
    if known != sorted(known, reverse=True) or not universe.is_path(prior):
        raise ValueError(f"prior {prior} must be a root-first prefix of one path of the universe")
    return universe, tuple(prior)


class ScriptedAttacker:
    """One attacker for one episode (see module doc); build it with `make_attacker`."""

    def __init__(self, config: AttackerConfig, scenario_view: Mapping[str, Any], seed: int) -> None:
        self.config = config
        self.universe, prior = _parse_view(scenario_view)
        self.levels = self.universe.levels
        self.person = DEFAULT_PERSON  # the views do not name the person
        self.matcher = NameMatcher(self.universe)
        self.rng = np.random.default_rng(seed)
        self.prior_level = sum(p is not None for p in prior)
        self.state = AttackerState(
            prior=prior,
            belief=list(prior),
            confidence=[0.95 if p is not None else 0.0 for p in prior],
        )
        self.pending = Pending("none")
        self._reveal_request = False

    # ---- public API ----
    @property
    def variant(self) -> str:
        return self.config.variant

    @property
    def finished(self) -> bool:
        return self.state.finished

    def respond(self, defender_reply: str | None) -> str:
        """The next attacker answer as JSON text (see `respond_dict`)."""
        return answer_attacker(**self.respond_dict(defender_reply))

    def respond_dict(self, defender_reply: str | None) -> dict[str, Any]:
        """Read the defender's reply (None for the opening) and answer in the attacker protocol."""
        st = self.state
        if st.finished:
            raise RuntimeError("the attacker already ended the conversation")
        if defender_reply is None:
            if st.turn:
                raise ValueError("respond(None) is only valid for the opening message")
            return self._emit(self._opening())
        if not isinstance(defender_reply, str):
            raise TypeError(f"defender_reply must be a str, got {type(defender_reply).__name__}")
        self._read(defender_reply)
        return self._emit(self._next_move())

    # ---- reading ----
    def _penalise(self, amount: int, why: str) -> None:
        st = self.state
        st.trust = max(0, st.trust - amount)
        st.notes.append(f"-{amount} {why}")

    def _tactic(self, name: str) -> None:
        st = self.state
        st.tactics.append(name)
        if self.config.tactic_aware:
            self._penalise(1, f"tactic: {name}")

    def _read(self, reply: str) -> None:
        st = self.state
        reading = read_reply(reply, self.matcher)
        pending = self.pending
        st.notes = []
        self._reveal_request = False

        if reading.probe:
            st.probes += 1
            if st.probes > FREE_PROBES:
                self._penalise(1, "keeps probing me")
                self._tactic("excessive probing")
            elif reading.asks_knowledge:
                self._reveal_request = True
        if reading.connect:
            self._tactic("offer to connect")
        if reading.multiple_entries:
            self._tactic("multiple entries")

        claims: dict[int, tuple[str, str]] = {}  # depth -> (value, how)
        for depth, names in reading.affirmed.items():
            if len(names) > 1 and depth >= self.prior_level:
                self._tactic("several candidates")
                continue
            claims[depth] = (names[0], "stated")
        if (
            pending.kind in ("confirm", "pushback", "bluff")
            and pending.depth is not None
            and pending.value is not None
        ):
            said = claims.get(pending.depth)
            if (
                said is not None
                and said[0] == pending.value
                and not reading.deny
                or said is None
                and reading.affirm
                and pending.value not in reading.denied
            ):
                claims[pending.depth] = (pending.value, "agreed")

        informative = any(depth >= self.prior_level for depth in claims)
        plain_no_to_bait = reading.deny and pending.kind == "bluff"
        if not informative and not reading.probe and not plain_no_to_bait:
            st.evasions += 1
            self._penalise(1, "refused" if reading.refusal else "evaded")
        new_values = any(
            how == "stated" and not self._already_claimed(d, v) for d, (v, how) in claims.items()
        )
        if reading.validation and new_values:
            self._tactic("validate-then-deceive")

        before = list(st.belief)
        for depth in sorted(claims):
            value, how = claims[depth]
            self._take_claim(depth, value, how, pending)
        if pending.kind == "cross" and pending.depth is not None:
            # Passed only if the answer repeats what we already believed, tree intact.
            said = claims.get(pending.depth, (None, ""))[0]
            st.cross_checked[pending.depth] = (
                said is not None and said == before[pending.depth] == st.belief[pending.depth]
            )

    def _already_claimed(self, depth: int, value: str) -> bool:
        return any(c.value == value for c in self.state.claims.get(depth, []))

    def _last_claim(self, depth: int) -> str | None:
        own = [c for c in self.state.claims.get(depth, []) if c.how != "implied"]
        return own[-1].value if own else None

    def _take_claim(self, depth: int, value: str, how: str, pending: Pending) -> None:
        st = self.state
        if depth < self.prior_level:
            if value != st.prior[depth]:
                self._penalise(2, f"{value} contradicts what I know ({st.prior[depth]})")
            return
        if how == "agreed" and pending.kind == "bluff":
            agreements = st.bluff_agreements.setdefault(depth, set())
            agreements.add(value)
            earlier = self._last_claim(depth)
            if len(agreements) > 1 or (earlier is not None and earlier != value):
                st.trust = 0
                st.notes.append("agreed to my made-up values: fabricating")
                return
        # The tree: the claimed value must sit under what we believe above it...
        ancestors = self.universe.ancestors(value)
        for up, ancestor in enumerate(ancestors):
            known = st.belief[up]
            if known is not None and known != ancestor:
                if up < self.prior_level:
                    self._penalise(2, f"{value} is not under {known}, which I know")
                else:
                    self._penalise(2, f"{value} is not under {known}")
                    st.confirmations[up] = 0
                    st.cross_checked[up] = False
                st.confidence[depth] = 0.0
                return
        # ...and above what we believe below it.
        for down in range(depth + 1, DEPTH):
            below = st.belief[down]
            if below is not None and self.universe.ancestors(below)[depth] != value:
                self._penalise(2, f"{below} does not sit under {value}")
                for d in range(depth, DEPTH):
                    if d >= self.prior_level:
                        st.belief[d] = None
                        st.confirmations[d] = 0
                        st.cross_checked[d] = False
                st.claims.setdefault(depth, []).append(Claim(st.turn, value, how))
                return
        earlier = self._last_claim(depth)
        if earlier is not None and earlier != value:
            self._penalise(self.config.changed_claim_penalty, f"changed {earlier} to {value}")
            if pending.kind == "pushback" and pending.depth == depth:
                self._tactic("pivot after pushback")
        st.claims.setdefault(depth, []).append(Claim(st.turn, value, how))
        if st.belief[depth] == value:
            st.confirmations[depth] += 1
            st.confidence[depth] = min(0.95, st.confidence[depth] + 0.2)
        else:
            st.belief[depth] = value
            st.confirmations[depth] = 0
            st.cross_checked[depth] = False
            st.confidence[depth] = 0.5
        for up, ancestor in enumerate(ancestors):
            if st.belief[up] is None:
                st.belief[up] = ancestor
                st.confidence[up] = 0.4
                st.claims.setdefault(up, []).append(Claim(st.turn, ancestor, "implied"))

    # ---- deciding ----
    def _required(self, depth: int) -> int:
        extra = 1 if self.state.trust <= 2 else 0
        return self.config.confirmations + extra

    def _bluff_due(self, depth: int) -> bool:
        if not self.config.bluffing:
            return False
        made = len(self.state.bluffs.get(depth, []))
        if self.prior_level == 0:
            return depth == 0 and made < 2
        return depth == self.prior_level and made < 1

    def _verified(self) -> bool:
        st = self.state
        if any(v is None for v in st.belief) or st.trust <= 0:
            return False
        for depth in range(self.prior_level, DEPTH):
            if st.confirmations[depth] < self._required(depth) or self._bluff_due(depth):
                return False
            if self.config.cross_examine and not st.cross_checked[depth]:
                return False
        return not (self.config.tactic_aware and st.tactics)

    def _can_settle(self) -> bool:
        st = self.state
        return (
            all(v is not None for v in st.belief)
            and st.trust >= SETTLE_MIN_TRUST
            and not (self.config.tactic_aware and st.tactics)
        )

    def _pick(self, templates: Sequence[str], **kw: Any) -> str:
        template = templates[int(self.rng.integers(len(templates)))]
        return template.format(person=self.person, **kw)

    def _opening(self) -> str:
        greeting = self._pick(_OPENING_GREETING)
        if self.config.bluffing and self.prior_level == 0:
            return greeting + self._bluff(0)
        return greeting + self._question()

    def _next_move(self) -> tuple[str, str]:
        st = self.state
        if st.trust <= 0:
            return SIGNAL_DETECTED, self._pick(_DETECTED)
        if self._verified():
            return SIGNAL_SUCCESS, self._pick(_SUCCESS)
        if st.turn + 1 >= self.config.max_turns and self._can_settle():
            return SIGNAL_SUCCESS, self._pick(_SUCCESS)
        lead = ""
        if self._reveal_request:
            lead = self._answer_probe() + " "
        elif st.notes and st.notes[-1].endswith(("evaded", "refused")):
            lead = self._pick(_EVASION_NUDGE) + " "
        return SIGNAL_QUERY, lead + self._question()

    def _answer_probe(self) -> str:
        st = self.state
        if st.trust < REVEAL_MIN_TRUST:
            return self._pick(_DEFLECT)
        if st.revealed < self.prior_level:
            depth = st.revealed
            st.revealed += 1
            return self._pick(_REVEAL, level=self.levels[depth], value=st.prior[depth])
        bluffed = self.state.bluffs.get(0)
        if self.config.bluffing and self.prior_level == 0 and bluffed:
            # Keeps pretending: the bluff is the bait, so it stands by it when asked.
            return self._pick(_REVEAL, level=self.levels[0], value=bluffed[0])
        return self._pick(_NOTHING)

    def _question(self) -> str:
        """The next verification step (sets `pending`)."""
        st = self.state
        for depth in range(self.prior_level, DEPTH):
            if st.belief[depth] is None:
                return self._ask_open(depth)
        for depth in range(self.prior_level, DEPTH):
            if self._bluff_due(depth) and st.bluffs.get(depth):
                return self._bluff(depth)
            if self._bluff_due(depth) and self.prior_level > 0:
                return self._bluff(depth)
            if st.confirmations[depth] < self._required(depth):
                if self.config.tactic_aware and st.confirmations[depth] >= 1:
                    return self._ask("pushback", depth, _PUSHBACK, value=st.belief[depth])
                return self._ask("confirm", depth, _CONFIRM, value=st.belief[depth])
        if self.config.cross_examine:
            for depth in range(self.prior_level, DEPTH):
                if not st.cross_checked[depth]:
                    return self._cross(depth)
        # Everything checked but success withheld (tactics seen): keep verifying the deepest.
        depth = DEPTH - 1
        return self._ask("confirm", depth, _PUSHBACK, value=st.belief[depth])

    def _ask(self, kind: str, depth: int, templates: Sequence[str], **kw: Any) -> str:
        self.pending = Pending(kind, depth, kw.get("value"))
        self.state.questions.append((self.state.turn + 1, kind, depth))
        return self._pick(templates, level=self.levels[depth], **kw)

    def _ask_open(self, depth: int) -> str:
        st = self.state
        st.open_asks[depth] += 1
        parent = self._speakable(depth - 1)
        if st.open_asks[depth] > 1 and "several candidates" in st.tactics[-1:]:
            return self._ask("open", depth, _OPEN_AGAIN)
        if parent is not None:
            return self._ask("open", depth, _OPEN_UNDER, parent=parent)
        return self._ask("open", depth, _OPEN)

    def _speakable(self, depth: int) -> str | None:
        """Our belief at `depth` if we may name it: a prior level only once revealed."""
        st = self.state
        if not 0 <= depth < DEPTH:
            return None
        if depth < self.prior_level and depth >= st.revealed:
            return None  # naming it would hand the prior over unasked
        return st.belief[depth]

    def _cross(self, depth: int) -> str:
        child = self._speakable(depth + 1)
        parent = self._speakable(depth - 1)
        if child is not None:
            return self._ask(
                "cross",
                depth,
                _CROSS_PARENT,
                child=child,
                child_level=self.levels[depth + 1],
            )
        if parent is not None:
            return self._ask("cross", depth, _CROSS_SELF, parent=parent)
        return self._ask("cross", depth, _CROSS_ROOT)

    def _bluff(self, depth: int) -> str:
        """Assert a plausible value we have no reason to believe (bait)."""
        st = self.state
        made = st.bluffs.setdefault(depth, [])
        parent = st.belief[depth - 1] if depth > 0 else None
        pool = self.universe.children[parent] if parent is not None else self.universe.roots
        claimed = st.belief[depth]
        options = [v for v in pool if v not in made and v != claimed]
        value = options[int(self.rng.integers(len(options)))]
        made.append(value)
        if claimed is None:
            return self._ask("bluff", depth, _BLUFF_OPEN, value=value)
        return self._ask("bluff", depth, _BLUFF_LATER, value=value, claimed=claimed)

    # ---- output ----
    def _reflection(self) -> str:
        st = self.state
        parts = [f"trust {st.trust}/5"]
        for depth, level in enumerate(self.levels):
            value = st.belief[depth]
            if depth < self.prior_level:
                parts.append(f"{level}={value} (known)")
            elif value is None:
                parts.append(f"{level}=?")
            else:
                parts.append(f"{level}={value} ({st.confirmations[depth]} confirmations)")
        if st.notes:
            parts.append("; ".join(st.notes))
        if st.tactics and self.config.tactic_aware:
            parts.append("tactics seen: " + ", ".join(dict.fromkeys(st.tactics)))
        return ". ".join(parts) + "."

    def _emit(self, move: str | tuple[str, str]) -> dict[str, Any]:
        st = self.state
        signal, prompt = (SIGNAL_QUERY, move) if isinstance(move, str) else move
        st.turn += 1
        if signal != SIGNAL_QUERY:
            st.finished = True
            self.pending = Pending("none")
        return {
            "trust_score": int(st.trust),
            "belief": dict(zip(self.levels, st.belief, strict=True)),
            "reflection": self._reflection(),
            "signal": signal,
            "prompt": prompt,
        }


def make_attacker(variant: str, scenario_view: Mapping[str, Any], seed: int) -> ScriptedAttacker:
    """A scripted attacker of `variant` (one of `ATTACKER_VARIANTS`) for one episode."""
    if variant not in CONFIGS:
        raise ValueError(f"unknown attacker variant {variant!r}; valid: {list(ATTACKER_VARIANTS)}")
    return ScriptedAttacker(CONFIGS[variant], scenario_view, int(seed))
