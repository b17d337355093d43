"""Turn logic shared by the AEC and Parallel Decrypto envs: who is asked what, re-asks, ToM probes.

A `DecryptoMatch` wraps a `DecryptoGame` and walks it as a sequence of *phases*; each phase is a
set of requests (agent, question kind) that can be answered simultaneously:

    [encoder: hints] -> [encoder: predict]? -> [interceptor: fb_vanilla]? -> [fb_rc]? -> [fb_fb]?
    -> [decoder: guess, interceptor: guess]

(`predict` is asked when the "perspective_taking" experiment is on; the three `fb_*` side
questions from round 2 when "false_belief" is on.) An invalid answer keeps the request pending
with the reason, up to `max_retries` re-asks, then the default answer is used. The AEC env asks the
pending requests one at a time, the Parallel env all at once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tomgym.envs.decrypto import prompts
from tomgym.envs.decrypto.game import ALL_CODES, DecryptoGame
from tomgym.envs.decrypto.parsing import parse_guess, parse_hints, parse_keywords

AGENTS = ("encoder_0", "decoder_0", "interceptor_0")
ROLE_OF = {"encoder_0": "encoder", "decoder_0": "decoder", "interceptor_0": "interceptor"}
QUESTION_KINDS = ("none", "hints", "guess", "predict", "fb_vanilla", "fb_rc", "fb_fb")
SIDE_QUESTIONS = frozenset({"predict", "fb_vanilla", "fb_rc", "fb_fb"})
TOM_EXPERIMENTS = ("perspective_taking", "false_belief")
DEFAULT_HINTS = ("no_hint", "no_hint", "no_hint")
DEFAULT_KEYWORDS = ("no_keyword",) * 4


@dataclass
class Request:
    agent: str
    kind: str
    retries: int = 0
    error: str | None = None

    @property
    def side_question(self) -> bool:
        return self.kind in SIDE_QUESTIONS


@dataclass
class AgentLog:
    retries: int = 0
    fallbacks: int = 0
    answers: int = 0
    last_parse: dict[str, Any] = field(default_factory=lambda: {"valid": True, "error": None})
    kept_history_len: int = (
        -1
    )  # rounds of history the agent's kept conversation has seen (-1: none)


_ANSWER_KEY = {"hints": "hints", "guess": "guess", "predict": "guess"} | {
    k: "keywords" for k in ("fb_vanilla", "fb_rc", "fb_fb")
}


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


class DecryptoMatch:
    """Drives one game phase by phase; see module docstring."""

    def __init__(
        self,
        game: DecryptoGame,
        *,
        tom: Sequence[str] = (),
        max_retries: int = 10,
        strict_guesses: bool = True,
        prompt_variant: int = 0,
        structured_guesses: bool = False,
    ) -> None:
        unknown = set(tom) - set(TOM_EXPERIMENTS)
        if unknown:
            raise ValueError(
                f"unknown ToM experiment(s) {sorted(unknown)}; choose from {TOM_EXPERIMENTS}"
            )
        self.game = game
        self.tom = tuple(tom)
        self.max_retries = max_retries
        self.strict_guesses = strict_guesses
        self.prompt_variant = prompt_variant
        self.structured_guesses = structured_guesses
        self.logs = {agent: AgentLog() for agent in AGENTS}
        self.pending: list[Request] = []
        self._phases: list[list[Request]] = []
        self._guesses: dict[str, tuple[int, ...] | None] = {}
        self.predictions: list[dict[str, Any]] = []  # perspective taking, one per round
        self.belief_probes: list[dict[str, Any]] = []  # false belief, one per round >= 2
        self._probe: dict[str, Any] = {}
        self.last_result: dict[str, Any] | None = None
        self._plan_round()

    # ------------------------------------------------------------------ flow
    def _plan_round(self) -> None:
        phases = [[Request("encoder_0", "hints")]]
        if "perspective_taking" in self.tom:
            phases.append([Request("encoder_0", "predict")])
        if "false_belief" in self.tom and self.game.round >= 2:
            phases += [[Request("interceptor_0", k)] for k in ("fb_vanilla", "fb_rc", "fb_fb")]
        phases.append([Request("decoder_0", "guess"), Request("interceptor_0", "guess")])
        self._phases = phases
        self._next_phase()

    def _next_phase(self) -> None:
        self.pending = self._phases.pop(0) if self._phases else []

    @property
    def finished(self) -> bool:
        return self.game.finished

    def request_for(self, agent: str) -> Request | None:
        return next((r for r in self.pending if r.agent == agent), None)

    def answer(self, agent: str, action: str | int) -> bool:
        """Apply one answer; returns True if it was accepted (or fell back), False if re-asked."""
        request = self.request_for(agent)
        if request is None:
            raise ValueError(f"{agent} has no pending question")
        value, error = self._parse(request, action)
        log = self.logs[agent]
        log.answers += 1
        log.last_parse = {
            "valid": error is None,
            "error": error,
            "question": request.kind,
            "parsed": None if value is None else {_ANSWER_KEY[request.kind]: _jsonable(value)},
        }
        if error is not None:
            if request.retries < self.max_retries:
                request.retries += 1
                request.error = error
                log.retries += 1
                return False
            log.fallbacks += 1
            value = self._default(request)
        self._accept(request, value)
        return True

    def _parse(self, request: Request, action: str | int) -> tuple[Any, str | None]:
        if isinstance(action, int | float) and not isinstance(action, bool):
            if request.kind in ("guess", "predict") and self.structured_guesses:
                index = int(action)
                if not 0 <= index < len(ALL_CODES):
                    raise ValueError(
                        f"structured guess must be in 0..{len(ALL_CODES) - 1}, got {action}"
                    )
                return ALL_CODES[index], None
            raise TypeError(
                f"{request.agent} must answer {request.kind!r} with text, got {type(action).__name__}"
            )
        if not isinstance(action, str):
            raise TypeError(f"actions are strings (text answers), got {type(action).__name__}")
        if request.kind == "hints":
            return parse_hints(action)
        if request.kind in ("guess", "predict"):
            return parse_guess(action, strict=self.strict_guesses or request.kind == "predict")
        return parse_keywords(action)

    def _default(self, request: Request) -> Any:
        if request.kind == "hints":
            return DEFAULT_HINTS
        if request.kind in ("guess", "predict"):
            return None  # never equals the code
        return DEFAULT_KEYWORDS

    def _accept(self, request: Request, value: Any) -> None:
        self.pending.remove(request)
        if not request.side_question:
            self.logs[request.agent].kept_history_len = len(self.game.history)
        kind = request.kind
        if kind == "hints":
            self.game.give_hints(value)
        elif kind == "predict":
            self.predictions.append({"round": self.game.round, "prediction": value})
        elif kind.startswith("fb_"):
            self._probe[kind] = value
            if kind == "fb_fb":
                self.belief_probes.append({"round": self.game.round, **self._probe})
                self._probe = {}
        else:
            self._guesses[request.agent] = value
        if not self.pending:
            if kind == "guess":
                self._resolve()
            else:
                self._next_phase()

    def _resolve(self) -> None:
        result = self.game.resolve_guesses(
            self._guesses["decoder_0"], self._guesses["interceptor_0"]
        )
        self._guesses = {}
        self.last_result = result.to_dict()
        for prediction in self.predictions:
            if prediction["round"] == result.round:
                prediction["interceptor_guess"] = result.interceptor_guess
                prediction["code"] = result.code
                prediction["intercepted"] = result.interception
        if not self.game.finished:
            self._plan_round()
        else:
            self.pending = []

    # ------------------------------------------------------------------ text
    def system(self, agent: str) -> str:
        return prompts.system_prompt(ROLE_OF[agent], self.prompt_variant, self.game.max_rounds)

    def message(self, agent: str) -> str:
        """What is new for `agent` since its last kept answer, plus its current question."""
        request = self.request_for(agent)
        if request is None:
            return ""
        role = ROLE_OF[agent]
        log = self.logs[agent]
        parts: list[str] = []
        if request.retries:
            parts.append(
                f"Your previous answer could not be used: {request.error}. Please answer again."
            )
        else:
            seen = log.kept_history_len
            if seen < 0:
                parts.append(prompts.state_text(role, self.game))
            else:
                parts += [prompts.round_summary(r) for r in self.game.history[seen:]]
                if self.game.history[seen:]:
                    parts.append(prompts.public_history(self.game))
                parts.append(prompts.status_line(self.game))
        parts.append(prompts.question_text(role, request.kind, self.game))
        return "\n\n".join(parts)

    def prompt(self, agent: str) -> str:
        """Standalone prompt: system, full state and the current question (or a waiting note)."""
        role = ROLE_OF[agent]
        request = self.request_for(agent)
        parts = [self.system(agent), prompts.state_text(role, self.game)]
        if request is None:
            parts.append("The game is over." if self.finished else "Waiting for the other players.")
        else:
            if request.retries:
                parts.append(f"Your previous answer could not be used: {request.error}.")
            parts.append(prompts.question_text(role, request.kind, self.game))
        return "\n\n".join(parts)

    def history_json(self) -> str:
        public = [
            {
                k: v
                for k, v in r.to_dict().items()
                if k not in ("miscommunications", "interceptions", "after_end")
            }
            for r in self.game.history
        ]
        return json.dumps(public, ensure_ascii=False)

    # ------------------------------------------------------------------ ToM scores
    def tom_summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {}
        if "perspective_taking" in self.tom:
            summary["perspective_taking"] = perspective_taking_scores(self.predictions)
        if "false_belief" in self.tom:
            summary["false_belief"] = false_belief_scores(self.belief_probes, self.game.keywords)
        return summary


def _rate(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _match(a: Any, b: Any) -> bool:
    return a is not None and b is not None and tuple(a) == tuple(b)


def perspective_taking_scores(predictions: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates over rounds: prediction == Eve's guess (all rounds / intercepted rounds) and == code."""
    scored = [p for p in predictions if "code" in p]
    return {
        "rounds": len(scored),
        "predicted_interceptor": _rate(
            [_match(p["prediction"], p["interceptor_guess"]) for p in scored]
        ),
        "predicted_interceptor_when_intercepted": _rate(
            [_match(p["prediction"], p["interceptor_guess"]) for p in scored if p["intercepted"]]
        ),
        "expected_interception": _rate([_match(p["prediction"], p["code"]) for p in scored]),
    }


def _same_keywords(a: Sequence[str], b: Sequence[str]) -> bool:
    return [w.strip().lower() for w in a] == [w.strip().lower() for w in b]


def false_belief_scores(probes: list[dict[str, Any]], keywords: Sequence[str]) -> dict[str, Any]:
    """Weak/strong representational change and false belief, and self-other consistency.

    Only rounds where the vanilla answer is wrong count; slot-by-slot, case-insensitive, trimmed.
    """
    counted = [p for p in probes if not _same_keywords(p["fb_vanilla"], keywords)]
    return {
        "rounds_asked": len(probes),
        "rounds_counted": len(counted),
        "weak_rc": _rate([not _same_keywords(p["fb_rc"], keywords) for p in counted]),
        "weak_fb": _rate([not _same_keywords(p["fb_fb"], keywords) for p in counted]),
        "strong_rc": _rate([_same_keywords(p["fb_rc"], p["fb_vanilla"]) for p in counted]),
        "strong_fb": _rate([_same_keywords(p["fb_fb"], p["fb_vanilla"]) for p in counted]),
        "self_other_consistency": _rate([_same_keywords(p["fb_rc"], p["fb_fb"]) for p in counted]),
    }
