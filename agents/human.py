"""A person at a terminal as a tomgym `Policy` (Decrypto and TOM-SB, one or several roles).

Contract:
- What is shown: only the observation of the agent being asked (never another agent's). The
  first time an agent is asked in a game, and after the screen was cleared for a hot-seat
  hand-over, the standalone `prompt` is shown (the role's rules only once per game); otherwise
  the `message` (what is new since the agent's last answer; on a re-ask it says what was wrong).
  TOM-SB scenario JSON lines are drawn as a readable tree.
- What is asked: the answer is built field by field in the env's format by the pure builders of
  this module (Decrypto: 3 hints, a guess like `3-1-4`, or 4 keywords -> one `ANSWER: {...}`
  line; TOM-SB defender: the reply and, unless `ask_estimates=False`, the private estimate of
  the attacker's prior and trust; TOM-SB attacker: trust, belief, signal and message). Each field
  is checked on entry with the env's own validation, so the env re-asks only answers the person
  typed raw (`:raw` or `edit`). With `confirm`, every answer is shown and sent only after
  `send? [Y/n/edit]` (n: start the answer again, edit: type the raw answer text).
- Hot seat: one `HumanPolicy` may play several agents on the same terminal. When the agent to
  answer changes, the screen (and scrollback) is cleared and the next player presses Enter before
  anything of theirs is shown, so no player sees another's private view.
- Commands at any question: `:show` reprints the full prompt, `:raw` types the answer text
  directly, `:help` lists the commands, `:quit` (or end of input) raises `HumanQuit`, which the
  runner reports after every finished game has been saved; `unfinished_games()` then returns the
  answers the person already sent in the game left unfinished.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from tomgym.agents.base import BasePolicy, Turn
from tomgym.envs.decrypto.match import QUESTION_KINDS
from tomgym.envs.decrypto.parsing import (
    answer_guess,
    answer_hints,
    answer_keywords,
    parse_guess,
    parse_hints,
    parse_keywords,
)
from tomgym.envs.tomsb.game import MAX_TRUST, SIGNAL_DETECTED, SIGNAL_QUERY, SIGNAL_SUCCESS
from tomgym.envs.tomsb.parsing import (
    MAX_REPLY_CHARS,
    AnswerError,
    answer_attacker,
    answer_defender,
    validate_attacker,
    validate_defender,
)
from tomgym.envs.tomsb.universe import Universe, UniverseError, normalise_name

# Clear the screen, move home, and clear the scrollback (xterm `E3`) so scrolling up after a
# hot-seat hand-over does not reveal the previous player's view.
CLEAR_SCREEN = "\x1b[H\x1b[2J\x1b[3J"
UNKNOWN_WORDS = frozenset({"-", "?", "null", "none", "unknown"})
SIGNAL_KEYS = {"q": SIGNAL_QUERY, "s": SIGNAL_SUCCESS, "d": SIGNAL_DETECTED}
HELP_TEXT = (
    "Commands: :show reprint the full prompt, :raw type the raw answer, "
    ":help this list, :quit stop playing (finished games stay saved)."
)
ROLE_TITLES = {
    "encoder_0": "Encoder",
    "decoder_0": "Decoder",
    "interceptor_0": "Interceptor",
    "attacker_0": "Attacker",
    "defender_0": "Defender",
}


class HumanQuit(Exception):
    """The person asked to stop (`:quit`, Ctrl-D); finished games are already saved."""


class _RawRequested(Exception):
    pass


class _ShowRequested(Exception):
    pass


# --------------------------------------------------------------------------- pure builders


def decrypto_hints_answer(hints: Sequence[str]) -> str:
    """`ANSWER: {"hints": [...]}` from 3 hints; raises ValueError with the env's reason."""
    answer = answer_hints([" ".join(str(h).split()) for h in hints])
    _, error = parse_hints(answer)
    if error:
        raise ValueError(error)
    return answer


def read_guess(text: str) -> tuple[int, int, int]:
    """Digits of a typed guess ("3-1-4", "3 1 4", "314"); raises ValueError with the reason."""
    if not text.strip():
        raise ValueError("type three distinct digits from 1-4, e.g. 3-1-4")
    digits, error = parse_guess(text, strict=True)
    if error or digits is None:
        raise ValueError(error or "no guess found")
    return digits  # type: ignore[return-value]


def decrypto_guess_answer(guess: str | Sequence[int]) -> str:
    """`ANSWER: {"guess": "3-1-4"}` from typed text or digits; raises ValueError."""
    digits = read_guess(guess if isinstance(guess, str) else "-".join(str(d) for d in guess))
    return answer_guess(digits)


def decrypto_keywords_answer(words: Sequence[str]) -> str:
    """`ANSWER: {"keywords": [...]}` from 4 words; raises ValueError with the env's reason."""
    answer = answer_keywords([" ".join(str(w).split()) for w in words])
    _, error = parse_keywords(answer)
    if error:
        raise ValueError(error)
    return answer


def _check(validate: Callable[..., Any], obj: dict[str, Any], universe: Universe | None) -> None:
    if universe is None:
        return
    try:
        validate(obj, universe)
    except AnswerError as exc:
        raise ValueError(str(exc)) from None


def tomsb_defender_answer(
    reply: str,
    estimate: Mapping[str, str | None],
    trust: int,
    reflection: str = "",
    *,
    universe: Universe | None = None,
) -> str:
    """The defender's JSON answer; with `universe`, validated as the env will (ValueError)."""
    obj = {
        "attacker_belief_about_target": dict(estimate),
        "attacker_trust_in_us": int(trust),
        "reflection": reflection,
        "reply": reply.strip(),
    }
    _check(validate_defender, obj, universe)
    return answer_defender(**obj)


def tomsb_attacker_answer(
    trust: int,
    belief: Mapping[str, str | None],
    signal: str,
    message: str,
    reflection: str = "",
    *,
    universe: Universe | None = None,
) -> str:
    """The attacker's JSON answer; with `universe`, validated as the env will (ValueError)."""
    obj = {
        "trust_score": int(trust),
        "belief": dict(belief),
        "reflection": reflection,
        "signal": signal,
        "prompt": message.strip(),
    }
    _check(validate_attacker, obj, universe)
    return answer_attacker(**obj)


def read_trust(text: str, default: int | None = None) -> int:
    """A trust level 0-5 (empty text gives `default`); raises ValueError."""
    text = text.strip()
    if not text and default is not None:
        return default
    if not text.isdigit() or not 0 <= int(text) <= MAX_TRUST:
        raise ValueError(f"trust is a whole number from 0 to {MAX_TRUST}, got {text!r}")
    return int(text)


def read_signal(text: str, default: str = SIGNAL_QUERY) -> str:
    """`q`/`s`/`d`, 1/2/3 or the full signal name (empty text gives `default`); raises ValueError."""
    key = text.strip().lower()
    if not key:
        return default
    names = list(SIGNAL_KEYS.values())
    if key in SIGNAL_KEYS:
        return SIGNAL_KEYS[key]
    if key.isdigit() and 1 <= int(key) <= len(names):
        return names[int(key) - 1]
    if key in names:
        return key
    raise ValueError(
        f"signal is q (query again), s (attack successful) or d (defender detected), got {text!r}"
    )


def level_options(universe: Universe, depth: int, chosen: Sequence[str | None]) -> tuple[str, ...]:
    """Names offered at `depth`: the descendants of the deepest name chosen above it, else all."""
    for above in range(min(depth, len(chosen)) - 1, -1, -1):
        ancestor = chosen[above]
        if ancestor is None or ancestor not in universe.nodes(above):
            continue
        names: tuple[str, ...] = (ancestor,)
        for _ in range(depth - above):
            names = tuple(kid for name in names for kid in universe.children[name])
        return names
    return universe.nodes(depth)


def read_level_name(
    text: str, universe: Universe, depth: int, options: Sequence[str], default: str | None
) -> str | None:
    """A name at level `depth` by number (into `options`) or by name; `-` is unknown (None).

    Empty text keeps `default`. Raises ValueError naming the problem.
    """
    raw = text.strip()
    if not raw:
        return default
    if raw.lower() in UNKNOWN_WORDS:
        return None
    level = universe.levels[depth]
    if raw.isdigit():
        number = int(raw)
        if not 1 <= number <= len(options):
            raise ValueError(
                f"choose a number from 1 to {len(options)}, a {level} name, or - for unknown"
            )
        return options[number - 1]
    key = normalise_name(raw)
    for name in universe.nodes(depth):
        if normalise_name(name) == key:
            return name
    hit = universe.name_index().get(key)
    if hit is not None:
        raise ValueError(f"{hit[1]!r} is a {universe.levels[hit[0]]}, not a {level}")
    raise ValueError(f"{raw!r} is not a {level} of this universe")


def scenario_universe(view: Mapping[str, Any]) -> Universe | None:
    """The `Universe` of a TOM-SB observation's `scenario` dict, or None if it has none."""
    try:
        return Universe.from_dict(view["universe"], list(view["hierarchy"]))
    except (KeyError, TypeError, UniverseError):
        return None


def render_scenario(view: Mapping[str, Any]) -> str:
    """A TOM-SB scenario view (`scenario` field) as an indented tree plus what the role knows."""
    universe = scenario_universe(view)
    if universe is None:
        return json.dumps(view, ensure_ascii=False)
    levels = universe.levels
    lines = [f"Universe ({' > '.join(levels)}):"]
    for root in universe.roots:
        lines.append(f"  {root}")
        for middle in universe.children[root]:
            lines.append(f"    {middle}: {', '.join(universe.children[middle])}")
    labels = (
        ("ground_truth", "The true path (secret)"),
        ("attacker_prior", "What the attacker knew before"),
        ("prior", "What you already know"),
    )
    for key, label in labels:
        path = view.get(key)
        if isinstance(path, Mapping):
            shown = ", ".join(f"{lvl} = {path.get(lvl) or '?'}" for lvl in levels)
            lines.append(f"{label}: {shown}")
    return "\n".join(lines)


def readable(text: str) -> str:
    """Observation text for people: lines holding a TOM-SB scenario JSON become a tree."""
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith('{"hierarchy"'):
            try:
                view = json.loads(stripped)
            except json.JSONDecodeError:
                view = None
            if isinstance(view, dict) and "universe" in view:
                out.append(render_scenario(view))
                continue
        out.append(line)
    return "\n".join(out)


# --------------------------------------------------------------------------- the policy


class HumanPolicy(BasePolicy):
    """A person answers every turn on the terminal; see the module docstring for the contract.

    `input_fn(prompt) -> str` reads one line (raising EOFError at end of input), `output` receives
    everything shown. `clear_screen` clears between hot-seat players; `confirm` asks before
    sending; `ask_estimates` (TOM-SB defender) asks the private estimate and trust every turn,
    else the previous turn's values (all unknown and trust 5 at first) are sent.
    """

    name = "human"

    def __init__(
        self,
        input_fn: Callable[[str], str] = input,
        output: TextIO = sys.stdout,
        clear_screen: bool = True,
        confirm: bool = True,
        *,
        ask_estimates: bool = True,
    ) -> None:
        self.input_fn = input_fn
        self.output = output
        self.clear_screen = clear_screen
        self.confirm = confirm
        self.ask_estimates = ask_estimates
        self._last_agent: str | None = None
        self._seen_system: set[tuple[str, str]] = set()
        self._context_shown: set[tuple[str, str]] = set()
        # (game, agent) -> last sent TOM-SB fields, offered as defaults on the next turn
        self._previous: dict[tuple[str, str], dict[str, Any]] = {}
        # game -> answers sent in a game not finished yet (kept if the person quits mid-game)
        self._sent: dict[str, list[dict[str, Any]]] = {}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "human", "confirm": self.confirm}

    def reset(self, game_id: str) -> None:
        self.forget(game_id)

    def forget(self, game_id: str) -> None:
        for table in (self._seen_system, self._context_shown):
            for key in [k for k in table if k[0] == game_id]:
                table.discard(key)
        for key in [k for k in self._previous if k[0] == game_id]:
            del self._previous[key]
        self._sent.pop(game_id, None)

    def unfinished_games(self) -> dict[str, list[dict[str, Any]]]:
        """Answers sent in games that have not ended (the runner `forget`s finished games)."""
        return {game: list(turns) for game, turns in self._sent.items() if turns}

    def act_batch(self, turns: Sequence[Turn]) -> list[str]:
        # One turn at a time: a person answers sequentially, whatever the runner batched.
        return [self.act(turn) for turn in turns]

    # ------------------------------------------------------------------ terminal helpers
    def _say(self, text: str = "") -> None:
        self.output.write(text + "\n")
        self.output.flush()

    def _read(self, prompt: str) -> str:
        self.output.flush()
        try:
            line = self.input_fn(prompt)
        except EOFError:
            raise HumanQuit("end of input") from None
        command = line.strip().lower()
        if command == ":quit":
            raise HumanQuit("the player quit")
        if command == ":raw":
            raise _RawRequested
        if command == ":show":
            raise _ShowRequested
        if command == ":help":
            self._say(HELP_TEXT)
            return self._read(prompt)
        return line

    def _ask(self, prompt: str, parse: Callable[[str], Any]) -> Any:
        """Read until `parse` accepts the line; its ValueError is shown and the line re-asked."""
        while True:
            line = self._read(prompt)
            try:
                return parse(line)
            except ValueError as exc:
                self._say(f"  ! {exc}")

    def _ask_text(self, prompt: str, *, required: bool = True, limit: int | None = None) -> str:
        """A line of text; an empty one (when `required`) or one over `limit` characters is
        re-asked here, so a long message never reaches the whole-answer check."""

        def parse(line: str) -> str:
            text = " ".join(line.split())
            if required and not text:
                raise ValueError("this cannot be empty")
            if limit is not None and len(text) > limit:
                raise ValueError(
                    f"this is {len(text)} characters long; the limit is {limit}: say it shorter"
                )
            return text

        return self._ask(prompt, parse)

    # ------------------------------------------------------------------ one turn
    def act(self, turn: Turn) -> str:
        self._hand_over(turn.agent)
        self._show(turn, full=(turn.game_id, turn.agent) not in self._context_shown)
        answer = self._compose(turn)
        while self.confirm:
            self._say(f"\nYour answer:\n  {answer}")
            try:
                choice = self._read("send? [Y/n/edit] ").strip().lower()
            except _ShowRequested:
                self._show(turn, full=True, rules=True)
                continue
            except _RawRequested:
                choice = "edit"
            if choice in ("", "y", "yes"):
                break
            if choice in ("n", "no"):
                answer = self._compose(turn)
            elif choice in ("e", "edit"):
                answer = self._raw_answer()
            else:
                self._say("  ! answer y (send), n (start again) or edit (type the raw answer)")
        self._remember(turn, answer)
        self._sent.setdefault(turn.game_id, []).append(
            {
                "agent": turn.agent,
                "message": str(turn.observation.get("message", "")),
                "raw": answer,
                "retry": int(turn.observation.get("retry", 0)),
                "side_question": turn.side_question,
            }
        )
        return answer

    def _hand_over(self, agent: str) -> None:
        previous, self._last_agent = self._last_agent, agent
        if previous is None or previous == agent or not self.clear_screen:
            return
        self.output.write(CLEAR_SCREEN)
        self._say(f"Pass the keyboard to the {ROLE_TITLES.get(agent, agent)} ({agent}).")
        while True:
            try:
                self._read("Press Enter when ready... ")
                break
            except (_RawRequested, _ShowRequested):
                continue
        self.output.write(CLEAR_SCREEN)
        self.output.flush()
        # The cleared screen lost this agent's context: show the full prompt again.
        self._context_shown = {k for k in self._context_shown if k[1] != agent}

    def _show(self, turn: Turn, *, full: bool, rules: bool = False) -> None:
        obs = turn.observation
        key = (turn.game_id, turn.agent)
        title = ROLE_TITLES.get(turn.agent, turn.agent)
        where = [f"game {turn.game_id}"]
        if "round" in obs and "hints" in obs:
            where.append(f"round {int(obs['round'])}")
        elif "turn" in obs:
            where.append(f"attacker turn {int(obs['turn'])}")
        side = "  [side question: not part of the game]" if turn.side_question else ""
        self._say(f"\n=== {title} ({turn.agent}) · {' · '.join(where)} ==={side}")
        if full:
            prompt = str(obs.get("prompt", ""))
            system = str(obs.get("system", ""))
            if not rules and key in self._seen_system and system and prompt.startswith(system):
                prompt = prompt[len(system) :].lstrip("\n")
            self._say(readable(prompt))
            self._seen_system.add(key)
            self._context_shown.add(key)
            self._say(f"({HELP_TEXT})")
        else:
            self._say(readable(str(obs.get("message", ""))))

    def _raw_answer(self) -> str:
        while True:
            try:
                return self._ask("Raw answer (one line, sent as typed): ", _non_empty)
            except (_RawRequested, _ShowRequested):
                continue

    def _compose(self, turn: Turn) -> str:
        while True:
            try:
                return self._build(turn)
            except _RawRequested:
                return self._raw_answer()
            except _ShowRequested:
                self._show(turn, full=True, rules=True)

    def _build(self, turn: Turn) -> str:
        obs = turn.observation
        if "hints" in obs and "question" in obs and "keywords" in obs:
            return self._build_decrypto(obs)
        if "scenario" in obs and "last_message" in obs:
            return self._build_tomsb(turn)
        return self._raw_answer()  # an env this module does not know: the answer text as typed

    # ------------------------------------------------------------------ Decrypto
    def _build_decrypto(self, obs: Mapping[str, Any]) -> str:
        index = int(obs.get("question", 0))
        kind = QUESTION_KINDS[index] if 0 <= index < len(QUESTION_KINDS) else "none"
        if kind == "hints":
            keywords = [str(k) for k in obs.get("keywords", ())]
            code = [int(d) for d in obs.get("code", ())]
            hints = []
            for position, digit in enumerate(code, start=1):
                target = (
                    f"digit {digit} ({keywords[digit - 1]})"
                    if 1 <= digit <= len(keywords) and keywords[digit - 1]
                    else f"digit {digit}"
                )
                hints.append(self._ask(f"Hint {position} of 3, for {target}: ", _one_hint))
            return self._ask_built(lambda: decrypto_hints_answer(hints))
        if kind in ("guess", "predict"):
            label = (
                "Your guess" if kind == "guess" else "The Interceptor's guess, as you predict it"
            )
            return self._ask(
                f"{label} (three distinct digits 1-4, e.g. 3-1-4): ", decrypto_guess_answer
            )
        if kind.startswith("fb_"):
            words = [self._ask_text(f"Keyword {slot}: ") for slot in range(1, 5)]
            return self._ask_built(lambda: decrypto_keywords_answer(words))
        return self._raw_answer()

    def _ask_built(self, build: Callable[[], str]) -> str:
        try:
            return build()
        except ValueError as exc:
            # Per-field checks make this rare; the whole answer is re-asked rather than guessed at.
            self._say(f"  ! {exc}; type the answer as raw text")
            return self._raw_answer()

    # ------------------------------------------------------------------ TOM-SB
    def _build_tomsb(self, turn: Turn) -> str:
        obs = turn.observation
        raw = obs.get("scenario")
        try:
            view = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        except (json.JSONDecodeError, TypeError, ValueError):
            view = {}
        universe = scenario_universe(view)
        if universe is None:
            self._say("  ! this observation has no readable universe; type the answer as raw text")
            return self._raw_answer()
        previous = _sane_defaults(universe, self._previous.get((turn.game_id, turn.agent), {}))
        if int(obs.get("role", 1)) == 0:
            return self._build_attacker(universe, view, previous)
        return self._build_defender(universe, previous)

    def _ask_path(
        self, universe: Universe, question: str, defaults: Sequence[str | None]
    ) -> dict[str, str | None]:
        self._say(question + " (number or name, - for unknown, Enter keeps the [default])")
        chosen: list[str | None] = []
        for depth, level in enumerate(universe.levels):
            options = level_options(universe, depth, chosen)
            listing = "  ".join(f"{i}) {name}" for i, name in enumerate(options, start=1))
            self._say(f"  {level}: {listing}")
            default = defaults[depth] if depth < len(defaults) else None
            chosen.append(
                self._ask(
                    f"  {level} [{default or '-'}]: ",
                    lambda line, d=depth, o=options, df=default: read_level_name(
                        line, universe, d, o, df
                    ),
                )
            )
        return dict(zip(universe.levels, chosen, strict=True))

    def _build_defender(self, universe: Universe, previous: Mapping[str, Any]) -> str:
        reply = self._ask_text("Your reply to the attacker: ", limit=MAX_REPLY_CHARS)
        estimate = previous.get("estimate") or dict.fromkeys(universe.levels)
        trust = int(previous.get("trust", MAX_TRUST))
        if self.ask_estimates:
            estimate = self._ask_path(
                universe,
                "Private: what did the attacker know about the target before this conversation?",
                [estimate.get(level) for level in universe.levels],
            )
            trust = self._ask(
                f"Private: the attacker's trust in you, 0-{MAX_TRUST} [{trust}]: ",
                lambda line: read_trust(line, trust),
            )
        return self._ask_built(
            lambda: tomsb_defender_answer(reply, estimate, trust, universe=universe)
        )

    def _build_attacker(
        self, universe: Universe, view: Mapping[str, Any], previous: Mapping[str, Any]
    ) -> str:
        trust_default = int(previous.get("trust", MAX_TRUST))
        trust = self._ask(
            f"Your trust in the defender, 0-{MAX_TRUST} [{trust_default}]: ",
            lambda line: read_trust(line, trust_default),
        )
        prior = view.get("prior") if isinstance(view.get("prior"), Mapping) else {}
        belief_default = (
            previous.get("belief") or _sane_defaults(universe, {"belief": prior})["belief"]
        )
        belief = self._ask_path(
            universe,
            "Your belief about the target's path",
            [belief_default.get(level) for level in universe.levels],
        )

        def parse_signal(line: str) -> str:
            signal = read_signal(line)
            if signal == SIGNAL_DETECTED and trust != 0:
                raise ValueError(
                    f"{SIGNAL_DETECTED!r} is only allowed at trust 0 (you gave {trust})"
                )
            return signal

        signal = self._ask(
            "Signal: q) query again  s) attack successful  d) defender detected [q]: ", parse_signal
        )
        message = self._ask_text("Your message to the defender: ", limit=MAX_REPLY_CHARS)
        return self._ask_built(
            lambda: tomsb_attacker_answer(trust, belief, signal, message, universe=universe)
        )

    def _remember(self, turn: Turn, answer: str) -> None:
        """Keep the sent TOM-SB fields as the next turn's defaults (raw answers are read back)."""
        if "scenario" not in turn.observation:
            return
        try:
            obj = json.loads(answer)
        except json.JSONDecodeError:
            return
        if not isinstance(obj, dict):
            return
        key = (turn.game_id, turn.agent)
        if isinstance(obj.get("attacker_belief_about_target"), dict):
            self._previous[key] = {
                "estimate": obj["attacker_belief_about_target"],
                "trust": obj.get("attacker_trust_in_us", MAX_TRUST),
            }
        elif isinstance(obj.get("belief"), dict):
            self._previous[key] = {
                "belief": obj["belief"],
                "trust": obj.get("trust_score", MAX_TRUST),
            }


def _sane_defaults(universe: Universe, previous: Mapping[str, Any]) -> dict[str, Any]:
    """Earlier fields usable as defaults: raw answers may hold names or numbers the env refused."""
    sane: dict[str, Any] = {}
    trust = previous.get("trust")
    if isinstance(trust, int) and not isinstance(trust, bool) and 0 <= trust <= MAX_TRUST:
        sane["trust"] = trust
    for key in ("estimate", "belief"):
        path = previous.get(key)
        if isinstance(path, Mapping):
            sane[key] = {
                level: path.get(level) if path.get(level) in universe.nodes(depth) else None
                for depth, level in enumerate(universe.levels)
            }
    return sane


def _non_empty(line: str) -> str:
    if not line.strip():
        raise ValueError("the answer cannot be empty")
    return line


def _one_hint(line: str) -> str:
    hint = " ".join(line.split())
    if not hint:
        raise ValueError("a hint cannot be empty")
    # Checked with the env's own hint rules (length, emptiness) on a dummy triple.
    _, error = parse_hints(answer_hints([hint, "x", "x"]))
    if error:
        raise ValueError(error)
    return hint
