"""Scripted TOM-SB defenders, scripted-player policies and a fast pure episode driver.

Each defender plays `defender_0` for one episode from its own view, `{"hierarchy", "universe",
"ground_truth"}` (+ optional "attacker_prior" when the oracle switch reveals it, + optional
"person"), and a seed. `respond(attacker_message) -> str` returns the defender's answer as JSON
text in the protocol `{"attacker_belief_about_target": {level: value|null},
"attacker_trust_in_us": 0-5, "reflection": str, "reply": str}`; `respond_dict` returns the dict.

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

Policies: `make_scripted_tomsb_policy(name, seed)` wraps a defender strategy or an attacker
variant (`envs.tomsb.attackers.VARIANTS`) as an `agents.base.Policy`, one scripted object per
game id, built lazily from the observation's `scenario` JSON; `last_message` feeds it; a re-ask
(`retry` > 0) repeats the last (valid) answer without advancing the script.

`play_scripted_episode` and `run_matrix` drive scripted players through the pure rules
(`TomSBState`, answers validated by `envs.tomsb.parsing`) at hundreds of episodes per second.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tomgym.agents.base import BasePolicy, Turn
from tomgym.envs.tomsb.attackers import (
    DEFAULT_PERSON,
    VARIANTS,
    NameMatcher,
    attacker_view,
    cached_normalise,
    make_attacker,
)
from tomgym.envs.tomsb.game import (
    OUTCOMES,
    AttackerMove,
    DefenderMove,
    TomSBState,
    belief_from_mapping,
)
from tomgym.envs.tomsb.parsing import parse_attacker, parse_defender
from tomgym.envs.tomsb.universe import DEPTH, Scenario, Universe, UniverseError, normalise_name

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
_PROBE_FIRST = (
    "Happy to help. What do you already know about {person}?",
    "Before I answer, what have you heard so far?",
    "Sure, but what do you know already?",
)
_PROBE_AGAIN = (
    "Anything else you know already?",
    "Is there anything more you've heard?",
    "What else do you know about {person}?",
)
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


# ---- reading the attacker ------------------------------------------------------------------------


@dataclass(frozen=True)
class AttackerMessage:
    """What an attacker message asks, as a scripted defender reads it."""

    asked: int | None  # depth named right after "which"/"what", if any
    mentions: list[tuple[int, str]]  # non-negated universe names, in order


def read_attacker_message(text: str, universe: Universe, matcher: NameMatcher) -> AttackerMessage:
    tokens = cached_normalise(text).split()
    level_words = [cached_normalise(level).split() for level in universe.levels]
    asked: int | None = None
    # The first level named within three words after "which"/"what" ("which division does the
    # NLP team sit in" asks for the division even though a team is named too).
    for i, token in enumerate(tokens):
        if token not in ("which", "what") or asked is not None:
            continue
        for j in range(i + 1, min(i + 4, len(tokens))):
            for depth, words in enumerate(level_words):
                got = tokens[j : j + len(words)]
                if got[:-1] == words[:-1] and got and got[-1] in _plural_forms(words[-1]):
                    asked = depth
                    break
            if asked is not None:
                break
    mentions = [(m.depth, m.name) for m in matcher.find(text) if not m.negated]
    return AttackerMessage(asked, mentions)


def _plural_forms(word: str) -> set[str]:
    return {word, word + "s", word + "es", word[:-1] + "ies"} if word else {word}


def _parse_defender_view(view: Mapping[str, Any]) -> tuple[Universe, tuple[str, ...], dict, str]:
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
    return universe, truth, revealed, str(view.get("person") or DEFAULT_PERSON)


def defender_view(scenario: Scenario, *, reveal_prior: bool = False) -> dict[str, Any]:
    """The defender's view of a `Scenario` as the env publishes it (+ person)."""
    view: dict[str, Any] = {
        "hierarchy": list(scenario.levels),
        "universe": scenario.universe.to_dict(),
        "ground_truth": scenario.truth_dict(),
        "person": scenario.person,
    }
    if reveal_prior:
        view["attacker_prior"] = scenario.prior_dict()
    return view


# ---- defenders -----------------------------------------------------------------------------------


class ScriptedDefender:
    """Base of the scripted defenders: reads the attacker, tracks what it seems to know.

    Subclasses choose a `plan` (the path they will claim) and may override how they answer an
    open question (`_answer_open`) or a suggested value (`_answer_suggestion`).
    """

    strategy = "scripted"
    probes_first = False

    def __init__(self, view: Mapping[str, Any], seed: int) -> None:
        self.universe, self.truth, revealed, person = _parse_defender_view(view)
        self.levels = self.universe.levels
        self.person = person
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
        return json.dumps(self.respond_dict(attacker_message), ensure_ascii=False)

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
                self.own.update(self._ancestors(m.name))
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
            for up, ancestor in enumerate(self._ancestors(value)):
                self.known.setdefault(up, ancestor)
        if self.probes_sent and not self.probing_done and (not new or self.probes_sent >= 2):
            self.probing_done = True

    def _ancestors(self, value: str) -> list[str]:
        chain: list[str] = []
        node = self.universe.parent_of(value)
        while node is not None:
            chain.insert(0, node)
            node = self.universe.parent_of(node)
        return chain

    def _known_path(self) -> list[str | None]:
        path: list[str | None] = [self.known.get(d) for d in range(DEPTH)]
        deepest = max((d for d in range(DEPTH) if path[d] is not None), default=None)
        if deepest is not None:
            for up, ancestor in enumerate(self._ancestors(path[deepest])):  # type: ignore[arg-type]
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
        text = templates[int(self.rng.integers(len(templates)))]
        return text.format(
            person=self.person, Person=self.person[:1].upper() + self.person[1:], **kw
        )

    def _reply(self, message: AttackerMessage) -> str:
        if not self.probing_done:
            self.probes_sent += 1
            return self._pick(_PROBE_FIRST if self.probes_sent == 1 else _PROBE_AGAIN)
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
        known = {self.levels[d]: v for d, v in sorted(self.known.items())} or "nothing"
        plan = " > ".join(self.plan) if self.plan else "undecided"
        return f"{self.strategy}: attacker seems to know {known}; my story: {plan}."


class RefusalDefender(ScriptedDefender):
    strategy = "refusal"

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
            prefix: list[str | None] = [*self._ancestors(value), value]
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


# ---- policies ------------------------------------------------------------------------------------


def derive_seed(seed: int, game_id: str, role: str) -> int:
    """A per-game seed from the policy seed and the game id (stable across processes)."""
    digest = hashlib.blake2b(f"{seed}|{game_id}|{role}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def _scenario_view(turn: Turn) -> dict[str, Any]:
    raw = turn.observation.get("scenario")
    if raw is None:
        raise ValueError(f"game {turn.game_id!r}: observation has no 'scenario' field")
    try:
        view = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (json.JSONDecodeError, TypeError, ValueError) as exc:
        raise ValueError(f"game {turn.game_id!r}: 'scenario' is not a JSON object: {exc}") from None
    if not isinstance(view, dict):
        raise ValueError(f"game {turn.game_id!r}: 'scenario' is not a JSON object")
    return view


class _ScriptedPolicy(BasePolicy):
    role = "player"

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.seed = int(seed)
        self._games: dict[str, Any] = {}
        self._last: dict[str, str] = {}

    def reset(self, game_id: str) -> None:
        self._games.pop(game_id, None)
        self._last.pop(game_id, None)

    def close(self) -> None:
        self._games.clear()
        self._last.clear()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "scripted", "role": self.role, "seed": self.seed}

    def act(self, turn: Turn) -> str:
        obs = turn.observation
        if int(obs.get("retry", 0) or 0) > 0 and turn.game_id in self._last:
            return self._last[turn.game_id]
        answer = self._advance(turn)
        self._last[turn.game_id] = answer
        return answer

    def _advance(self, turn: Turn) -> str:
        raise NotImplementedError


class ScriptedDefenderPolicy(_ScriptedPolicy):
    role = "defender"

    def __init__(self, strategy: str, seed: int = 0) -> None:
        if strategy not in DEFENDER_STRATEGIES:
            raise ValueError(
                f"unknown defender strategy {strategy!r}; valid: {list(DEFENDER_STRATEGIES)}"
            )
        super().__init__(strategy, seed)

    def _advance(self, turn: Turn) -> str:
        game = self._games.get(turn.game_id)
        if game is None:
            seed = derive_seed(self.seed, turn.game_id, self.role)
            game = self._games[turn.game_id] = make_defender(self.name, _scenario_view(turn), seed)
        return game.respond(str(turn.observation.get("last_message") or ""))


class ScriptedAttackerPolicy(_ScriptedPolicy):
    role = "attacker"

    def __init__(self, variant: str, seed: int = 0) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"unknown attacker variant {variant!r}; valid: {list(VARIANTS)}")
        super().__init__(variant, seed)

    def _advance(self, turn: Turn) -> str:
        game = self._games.get(turn.game_id)
        if game is None:
            seed = derive_seed(self.seed, turn.game_id, self.role)
            game = self._games[turn.game_id] = make_attacker(self.name, _scenario_view(turn), seed)
            return game.respond(None)
        return game.respond(str(turn.observation.get("last_message") or ""))


def make_scripted_tomsb_policy(name: str, seed: int = 0) -> BasePolicy:
    """A scripted TOM-SB policy: a defender strategy or an attacker variant, by name."""
    if name in DEFENDER_STRATEGIES:
        return ScriptedDefenderPolicy(name, seed)
    if name in VARIANTS:
        return ScriptedAttackerPolicy(name, seed)
    raise ValueError(
        f"unknown scripted TOM-SB policy {name!r}; defenders: {list(DEFENDER_STRATEGIES)}, "
        f"attackers: {list(VARIANTS)}"
    )


# ---- pure driver ---------------------------------------------------------------------------------


@dataclass
class EpisodeResult:
    """One scripted episode: outcome, turns and the visible dialogue."""

    scenario_id: str
    prior_level: int
    defender: str
    attacker: str
    outcome: str
    attacker_turns: int
    final_trust: int
    dialogue: list[tuple[str, str]] = field(default_factory=list)


def play_scripted_episode(
    scenario: Scenario,
    defender: str,
    attacker: str,
    seed: int = 0,
    *,
    reveal_prior: bool = False,
    max_attacker_turns: int = 15,
    validate: bool = True,
) -> EpisodeResult:
    """Play one scripted defender against one scripted attacker through the pure rules.

    With `validate` every answer goes through the env's parsers (`envs.tomsb.parsing`), so an
    invalid scripted answer fails loudly; without it the answers are only decoded (about twice
    as fast, for large matrices).
    """
    atk = make_attacker(
        attacker, attacker_view(scenario), derive_seed(seed, scenario.scenario_id, "a")
    )
    dfd = make_defender(
        defender,
        defender_view(scenario, reveal_prior=reveal_prior),
        derive_seed(seed, scenario.scenario_id, "d"),
    )
    state = TomSBState(scenario, max_attacker_turns=max_attacker_turns)
    dialogue: list[tuple[str, str]] = []
    reply: str | None = None
    trust = 5
    while not state.done:
        a_move, error = _attacker_move(atk.respond(reply), scenario, validate)
        if a_move is None:
            raise RuntimeError(f"scripted attacker {attacker!r} gave an invalid answer: {error}")
        state.apply_attacker(a_move)
        dialogue.append(("attacker", a_move.prompt))
        trust = a_move.trust_score
        if state.done:
            break
        d_move, error = _defender_move(dfd.respond(a_move.prompt), scenario, validate)
        if d_move is None:
            raise RuntimeError(f"scripted defender {defender!r} gave an invalid answer: {error}")
        state.apply_defender(d_move)
        dialogue.append(("defender", d_move.reply))
        reply = d_move.reply
    return EpisodeResult(
        scenario_id=scenario.scenario_id,
        prior_level=scenario.prior_level,
        defender=defender,
        attacker=attacker,
        outcome=str(state.outcome),
        attacker_turns=state.attacker_turns,
        final_trust=trust,
        dialogue=dialogue,
    )


def _attacker_move(
    text: str, scenario: Scenario, validate: bool
) -> tuple[AttackerMove | None, str | None]:
    if validate:
        move, error, _ = parse_attacker(text, scenario.universe)
        return move, error
    d = json.loads(text)
    belief = belief_from_mapping(scenario.levels, d["belief"])
    return AttackerMove(d["trust_score"], belief, d["reflection"], d["signal"], d["prompt"]), None


def _defender_move(
    text: str, scenario: Scenario, validate: bool
) -> tuple[DefenderMove | None, str | None]:
    if validate:
        move, error, _ = parse_defender(text, scenario.universe)
        return move, error
    d = json.loads(text)
    estimate = belief_from_mapping(scenario.levels, d["attacker_belief_about_target"])
    return DefenderMove(estimate, d["attacker_trust_in_us"], d["reflection"], d["reply"]), None


def outcome_rates(results: Iterable[EpisodeResult]) -> dict[str, float]:
    """Share of each outcome (plus `n`) over `results`."""
    results = list(results)
    n = len(results)
    rates: dict[str, float] = {o: 0.0 for o in OUTCOMES}
    for r in results:
        rates[r.outcome] += 1.0
    out = {o: (c / n if n else 0.0) for o, c in rates.items()}
    out["n"] = float(n)
    return out


def run_matrix(
    scenarios: Sequence[Scenario],
    defenders: Sequence[str] = tuple(DEFENDER_STRATEGIES),
    attackers: Sequence[str] = VARIANTS,
    *,
    episodes_per_scenario: int = 1,
    seed: int = 0,
    reveal_prior: bool = False,
    validate: bool = True,
) -> dict[str, dict[str, list[EpisodeResult]]]:
    """Every defender x attacker over `scenarios`: {defender: {attacker: [EpisodeResult]}}."""
    table: dict[str, dict[str, list[EpisodeResult]]] = {}
    for d in defenders:
        for a in attackers:
            results = table.setdefault(d, {}).setdefault(a, [])
            for scenario in scenarios:
                for k in range(episodes_per_scenario):
                    results.append(
                        play_scripted_episode(
                            scenario,
                            d,
                            a,
                            seed=seed + k,
                            reveal_prior=reveal_prior,
                            validate=validate,
                        )
                    )
    return table
