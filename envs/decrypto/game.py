"""Pure rules of Decrypto (no text, no PettingZoo, no model).

Three players in two teams: the encoder and decoder (the team) against the interceptor. Four
secret keywords are bound to digits 1..4. Each round (at most `max_rounds`, default 8) the encoder
receives a secret code of 3 distinct digits and gives one hint per digit; the decoder (who knows
the keywords) and the interceptor (who sees only hints and the public history) each guess the
code. Scoring is by exact ordered match: a wrong decoder guess is a miscommunication token, a
correct interceptor guess an interception token, both possibly in the same round.

Endings, checked after every round (before survival, so a second token in the last round loses):
`miscommunication` (2 miscommunications), `interception` (2 interceptions), `both` (both reach 2
in the same round), otherwise `survived` after the last round. Terminal rewards: the team +1 and
the interceptor -1, or the reverse. In "play on" mode (used to collect human games) an
interception ending does not stop play: rounds continue to `max_rounds` with tokens still counted
(rounds flagged `after_end`), and the recorded ending stays the first one.

Codes depend only on the code generator (never on the players' actions) and never repeat
within a game.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

NUM_KEYWORDS = 4
CODE_LENGTH = 3
DEFAULT_MAX_ROUNDS = 8
TOKENS_TO_LOSE = 2
ALL_CODES: tuple[tuple[int, int, int], ...] = tuple(
    itertools.permutations(range(1, NUM_KEYWORDS + 1), CODE_LENGTH)  # type: ignore[arg-type]
)
ENDINGS = ("survived", "miscommunication", "interception", "both")

Code = tuple[int, int, int]
# A guess is 3 digits (possibly repeating, from recorded play) or None for "no valid guess".
Guess = tuple[int, ...] | None


def code_index(code: Sequence[int]) -> int:
    """Index of a code in `ALL_CODES` (the structured action space is Discrete(24))."""
    return ALL_CODES.index(tuple(code))  # type: ignore[arg-type]


def load_keyword_list(path: str | Path | None = None) -> tuple[str, ...]:
    """The bundled keyword list (our own, >= 680 nouns) or a user file (one word a line, '#' comments)."""
    if path is None:
        text = (
            resources.files("tomgym.envs.decrypto").joinpath("data/keywords.txt").read_text("utf-8")
        )
        source = "bundled keyword list"
    else:
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read keyword list {path}: {exc.strerror}") from None
        source = str(path)
    words: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        word = line.split("#", 1)[0].strip()
        if word and word.lower() not in seen:
            seen.add(word.lower())
            words.append(word)
    if len(words) < NUM_KEYWORDS:
        raise ValueError(
            f"{source} holds {len(words)} distinct words; at least {NUM_KEYWORDS} needed"
        )
    return tuple(words)


def sample_keywords(rng: np.random.Generator, word_list: Sequence[str]) -> tuple[str, ...]:
    picks = rng.choice(len(word_list), size=NUM_KEYWORDS, replace=False)
    return tuple(word_list[i] for i in picks)


def sample_codes(rng: np.random.Generator, rounds: int) -> list[Code]:
    """`rounds` distinct codes (at most 24), drawn without replacement."""
    if not 1 <= rounds <= len(ALL_CODES):
        raise ValueError(f"rounds must be in 1..{len(ALL_CODES)}, got {rounds}")
    order = rng.permutation(len(ALL_CODES))[:rounds]
    return [ALL_CODES[i] for i in order]


def validate_codes(codes: Sequence[Sequence[int]], rounds: int) -> list[Code]:
    """Check pinned codes: `rounds` codes of 3 distinct digits 1..4, none repeated."""
    result: list[Code] = []
    for i, code in enumerate(codes):
        try:
            digits = tuple(int(d) for d in code)
        except (TypeError, ValueError):
            raise ValueError(f"code {i + 1} ({code!r}) is not a list of digits") from None
        if digits not in ALL_CODES:
            raise ValueError(f"code {i + 1} ({list(digits)}) must be 3 distinct digits from 1..4")
        if digits in result:
            raise ValueError(f"code {i + 1} ({list(digits)}) repeats an earlier code")
        result.append(digits)  # type: ignore[arg-type]
    if len(result) < rounds:
        raise ValueError(f"{len(result)} codes pinned but the game may last {rounds} rounds")
    return result


def validate_keywords(keywords: Sequence[str]) -> tuple[str, ...]:
    words = tuple(str(k).strip() for k in keywords)
    if len(words) != NUM_KEYWORDS or any(not w for w in words):
        raise ValueError(
            f"keywords must be {NUM_KEYWORDS} non-empty strings, got {list(keywords)!r}"
        )
    if len({w.lower() for w in words}) != NUM_KEYWORDS:
        raise ValueError(f"keywords must be distinct, got {list(words)}")
    return words


@dataclass(frozen=True)
class RoundResult:
    """Everything public about a finished round."""

    round: int
    code: Code
    hints: tuple[str, str, str]
    decoder_guess: Guess
    interceptor_guess: Guess
    miscommunication: bool
    interception: bool
    miscommunications: int  # running totals after this round
    interceptions: int
    after_end: bool = False

    def to_dict(self) -> dict:
        return {
            "round": self.round,
            "code": list(self.code),
            "hints": list(self.hints),
            "decoder_guess": None if self.decoder_guess is None else list(self.decoder_guess),
            "interceptor_guess": None
            if self.interceptor_guess is None
            else list(self.interceptor_guess),
            "miscommunication": self.miscommunication,
            "interception": self.interception,
            "miscommunications": self.miscommunications,
            "interceptions": self.interceptions,
            "after_end": self.after_end,
        }


@dataclass
class DecryptoGame:
    """State of one game; advance it with `give_hints` then `resolve_guesses`, round by round."""

    keywords: tuple[str, ...]
    codes: list[Code]
    max_rounds: int = DEFAULT_MAX_ROUNDS
    play_on: bool = False
    history: list[RoundResult] = field(default_factory=list)
    hints: tuple[str, str, str] | None = None
    miscommunications: int = 0
    interceptions: int = 0
    ending: str | None = None
    ending_round: int | None = None
    finished: bool = False

    def __post_init__(self) -> None:
        self.keywords = validate_keywords(self.keywords)
        self.codes = validate_codes(self.codes, self.max_rounds)

    @property
    def round(self) -> int:
        """The current round, 1-based (the last one played once finished)."""
        return len(self.history) + (0 if self.finished else 1)

    @property
    def code(self) -> Code:
        return self.codes[self.round - 1]

    @property
    def in_play_on(self) -> bool:
        return self.ending is not None and not self.finished

    def give_hints(self, hints: Sequence[str]) -> None:
        if self.finished:
            raise RuntimeError("the game is over")
        if self.hints is not None:
            raise RuntimeError("hints for this round were already given")
        if len(hints) != CODE_LENGTH:
            raise ValueError(f"exactly {CODE_LENGTH} hints are needed")
        self.hints = tuple(hints)  # type: ignore[assignment]

    def resolve_guesses(self, decoder_guess: Guess, interceptor_guess: Guess) -> RoundResult:
        """Score the round, record it publicly and decide whether the game ends."""
        if self.finished or self.hints is None:
            raise RuntimeError("guesses need a running round with hints")
        code = self.code
        miscommunication = decoder_guess is None or tuple(decoder_guess) != code
        interception = interceptor_guess is not None and tuple(interceptor_guess) == code
        self.miscommunications += miscommunication
        self.interceptions += interception
        result = RoundResult(
            round=self.round,
            code=code,
            hints=self.hints,
            decoder_guess=None if decoder_guess is None else tuple(decoder_guess),
            interceptor_guess=None if interceptor_guess is None else tuple(interceptor_guess),
            miscommunication=miscommunication,
            interception=interception,
            miscommunications=self.miscommunications,
            interceptions=self.interceptions,
            after_end=self.ending is not None,
        )
        self.history.append(result)
        self.hints = None
        if self.ending is None:
            self._decide_ending()
        if len(self.history) >= self.max_rounds:
            self.finished = True
        return result

    def _decide_ending(self) -> None:
        lost_m = self.miscommunications >= TOKENS_TO_LOSE
        lost_i = self.interceptions >= TOKENS_TO_LOSE
        if lost_m or lost_i:
            self.ending = (
                "both" if lost_m and lost_i else ("miscommunication" if lost_m else "interception")
            )
            self.ending_round = len(self.history)
            # Play-on continues only after a pure interception ending.
            self.finished = not (self.play_on and self.ending == "interception")
        elif len(self.history) >= self.max_rounds:
            self.ending = "survived"
            self.ending_round = len(self.history)
            self.finished = True

    @property
    def team_won(self) -> bool | None:
        if self.ending is None:
            return None
        return self.ending == "survived"

    def hint_history(self) -> list[list[str]]:
        """Public hints grouped by keyword slot (index 0 = keyword 1)."""
        slots: list[list[str]] = [[] for _ in range(NUM_KEYWORDS)]
        for result in self.history:
            for digit, hint in zip(result.code, result.hints, strict=True):
                slots[digit - 1].append(hint)
        return slots
