"""Non-LLM Decrypto players: a uniform random baseline and the word-embedding baseline.

The embedding baseline re-implements the agents of the Decrypto paper's appendix E (our own code)
on GloVe 6B 50d vectors (`envs.word_vectors`) and our own hint vocabulary of 5,700 common nouns
(`agents/data/hint_nouns.txt`, rebuilt by `tools/build_hint_vocab.py`).

Both policies play any role of `tomgym/decrypto-v0`: they read the structured observation fields
`role` (0 encoder, 1 decoder, 2 interceptor), `question` (1 hints, 2 guess, 3 predict the
interceptor's guess, 4/5/6 the interceptor's keyword questions: vanilla, representational change,
false belief), `keywords`, `code`, `hints` and `history` (JSON list of public past rounds), and
answer in the env's text formats, written by `envs.decrypto.parsing.answer_*`:
`ANSWER: {"hints": ["a", "b", "c"]}`, `ANSWER: {"guess": "3-1-4"}`,
`ANSWER: {"keywords": ["w", "x", "y", "z"]}`.

Embedding baseline, per question:
- hints (encoder): for each code digit, the top-(K + n) vocabulary nouns by cosine similarity to
  the target keyword, where n is how often that keyword was hinted before in this game (so K
  "grows by 1" per reuse), excluding every noun equal to, containing or contained in any of the 4
  keywords; the n earlier hints for that keyword are dropped, which leaves about K candidates. One
  candidate closer to the target than to each other keyword is drawn at random (seeded); if none
  is, any candidate is drawn.
- guess (decoder): the 3x4 hint-keyword cosine matrix, best assignment of distinct digits
  (`scipy.optimize.linear_sum_assignment`, maximising total similarity).
- guess (interceptor): the same assignment against each keyword slot's mean (unit) hint vector
  from the public history; a slot never hinted scores 0; in round 1 every slot is empty and the
  guess is a seeded blind draw. Ties (several empty slots) are broken by seeded jitter.
- predict (encoder's perspective-taking question): runs the interceptor logic above on the public
  history and the current hints, with a random stream of its own (side questions never change
  the game's own random draws).
- keywords (interceptor's questions): per slot the vocabulary noun nearest to the slot's mean
  hint vector (excluding the slot's own hints and nouns already named for another slot), or
  "no_keyword" for a slot never hinted. The same answer is given to all three variants: the
  baseline's belief depends only on the public history, so its representational-change answer
  equals its vanilla answer and it expects another interceptor to think the same.

Randomness: every (game, agent) pair gets its own `numpy.random.Generator`, seeded from the
policy seed, the game id, the agent id and the purpose with `envs.seeding.derive_seed` (never
Python's salted `hash()`), so a game replays identically in any process and whether or not the
same policy object plays other roles or other games at the same time. `reset(game_id)` restarts
a game's streams; `forget(game_id)` drops them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from tomgym.agents.base import BasePolicy, Turn
from tomgym.agents.vectors import DEFAULT_VECTORS, VECTOR_NAMES, TextVectors, load_vectors
from tomgym.envs.decrypto.game import ALL_CODES, CODE_LENGTH, NUM_KEYWORDS
from tomgym.envs.decrypto.parsing import answer_guess, answer_hints, answer_keywords
from tomgym.envs.seeding import derive_seed
from tomgym.envs.word_vectors import normalise_text, unit_rows

ROLE_ENCODER, ROLE_DECODER, ROLE_INTERCEPTOR = 0, 1, 2
ROLE_NAMES = ("encoder", "decoder", "interceptor")
Q_NONE, Q_HINTS, Q_GUESS, Q_PREDICT, Q_FB_VANILLA, Q_FB_RC, Q_FB_FB = range(7)
KEYWORD_QUESTIONS = frozenset({Q_FB_VANILLA, Q_FB_RC, Q_FB_FB})
NO_KEYWORD = "no_keyword"
DEFAULT_K = 16
HINT_VOCAB_RESOURCE = "data/hint_nouns.txt"

Code = tuple[int, int, int]


# --------------------------------------------------------------------------- helpers


def hint_history_from_json(history_json: str) -> list[list[str]]:
    """Public hints grouped by keyword slot (index 0 = keyword 1) from the env's `history` field.

    `history_json` is a JSON list of rounds, each with at least `code` (3 digits 1..4) and `hints`
    (3 strings, in code order). Malformed input raises `ValueError` naming the problem.
    """
    try:
        rounds = json.loads(history_json) if history_json else []
    except json.JSONDecodeError as exc:
        raise ValueError(f"history is not valid JSON: {exc.msg} at char {exc.pos}") from None
    if not isinstance(rounds, list):
        raise ValueError(f"history must be a JSON list of rounds, got {type(rounds).__name__}")
    slots: list[list[str]] = [[] for _ in range(NUM_KEYWORDS)]
    for i, entry in enumerate(rounds):
        if not isinstance(entry, Mapping) or "code" not in entry or "hints" not in entry:
            raise ValueError(f"history round {i + 1} needs 'code' and 'hints'")
        code, hints = entry["code"], entry["hints"]
        if (
            not isinstance(code, list)
            or not isinstance(hints, list)
            or len(code) != CODE_LENGTH
            or len(hints) != CODE_LENGTH
        ):
            raise ValueError(f"history round {i + 1} needs 3 code digits and 3 hints")
        for digit, hint in zip(code, hints, strict=True):
            if not isinstance(digit, int) or not 1 <= digit <= NUM_KEYWORDS:
                raise ValueError(f"history round {i + 1} has code digit {digit!r}, not 1..4")
            slots[digit - 1].append(str(hint))
    return slots


def load_hint_vocabulary(path: str | Path | None = None) -> tuple[str, ...]:
    """The bundled hint nouns (or a user file: one word a line, '#' comments), de-duplicated."""
    if path is None:
        text = resources.files("tomgym.agents").joinpath(HINT_VOCAB_RESOURCE).read_text("utf-8")
    else:
        try:
            text = Path(path).read_text("utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read hint vocabulary {path}: {exc.strerror}") from None
    words: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        word = normalise_text(line.split("#", 1)[0])
        if word and word not in seen:
            seen.add(word)
            words.append(word)
    if len(words) < 2 * CODE_LENGTH:
        raise ValueError(
            f"hint vocabulary {path or HINT_VOCAB_RESOURCE} has only {len(words)} words"
        )
    return tuple(words)


@dataclass(frozen=True)
class EmbeddedVocabulary:
    """Hint words with their unit vectors (rows of `unit`), computed once."""

    words: tuple[str, ...]
    unit: np.ndarray  # (n_words, dim) float32, unit rows

    @classmethod
    def build(cls, words: Sequence[str], vectors: TextVectors) -> EmbeddedVocabulary:
        unit = vectors.unit_vectors(words)
        unit.flags.writeable = False
        return cls(tuple(words), unit)


@lru_cache(maxsize=len(VECTOR_NAMES))
def default_vocabulary(vectors_name: str = DEFAULT_VECTORS) -> EmbeddedVocabulary:
    """The bundled hint nouns embedded once per process with the named vectors."""
    return EmbeddedVocabulary.build(load_hint_vocabulary(), load_vectors(vectors_name))


def random_code(rng: np.random.Generator) -> Code:
    return ALL_CODES[int(rng.integers(len(ALL_CODES)))]


def assign_code(scores: np.ndarray, rng: np.random.Generator | None = None) -> Code:
    """Distinct digits maximising the summed (hint i -> keyword j) scores of a 3x4 matrix.

    With `rng`, exact ties (e.g. several never-hinted slots scoring 0) are broken at random by a
    jitter far below any real similarity difference; without it the lowest digit wins ties.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != (CODE_LENGTH, NUM_KEYWORDS):
        raise ValueError(f"score matrix must be 3x4, got {scores.shape}")
    if rng is not None:
        scores = scores + rng.uniform(0.0, 1e-9, size=scores.shape)
    rows, cols = linear_sum_assignment(scores, maximize=True)
    code = [0] * CODE_LENGTH
    for r, c in zip(rows, cols, strict=True):
        code[r] = int(c) + 1
    return tuple(code)  # type: ignore[return-value]


def _overlaps(word: str, keyword: str) -> bool:
    return word == keyword or keyword in word or word in keyword


@lru_cache(maxsize=512)
def _banned_mask(words: tuple[str, ...], keywords: tuple[str, ...]) -> np.ndarray:
    """Vocabulary nouns that equal, contain or are contained in any keyword (never hinted)."""
    lowered = [normalise_text(k) for k in keywords]
    return np.fromiter(
        (any(_overlaps(w, k) for k in lowered) for w in words), dtype=bool, count=len(words)
    )


# --------------------------------------------------------------------------- embedding logic


def encoder_hints(
    keywords: Sequence[str],
    code: Sequence[int],
    hint_history: Sequence[Sequence[str]],
    k: int,
    rng: np.random.Generator,
    vocab: EmbeddedVocabulary,
    vectors: TextVectors,
) -> list[str]:
    """One hint per code digit (see the module docstring for the rule)."""
    keyword_unit = vectors.unit_vectors(keywords)  # (4, dim)
    sims = vocab.unit @ keyword_unit.T  # (n_words, 4)
    banned = _banned_mask(vocab.words, tuple(keywords))
    hints: list[str] = []
    for digit in code:
        target = int(digit) - 1
        used = {normalise_text(h) for h in hint_history[target]}
        column = np.where(banned, -np.inf, sims[:, target])
        allowed = int((~banned).sum())
        take = min(k + len(hint_history[target]), allowed)
        top = np.argpartition(-column, take - 1)[:take]
        top = top[np.argsort(-column[top], kind="stable")]
        candidates = [i for i in top if vocab.words[i] not in used and vocab.words[i] not in hints]
        if not candidates:  # only when the vocabulary is tiny: fall back to anything allowed
            candidates = [i for i in np.flatnonzero(~banned) if vocab.words[i] not in used]
        others = [j for j in range(NUM_KEYWORDS) if j != target]
        closer = [i for i in candidates if sims[i, target] > sims[i, others].max()]
        pool = closer or candidates
        hints.append(vocab.words[pool[int(rng.integers(len(pool)))]])
    return hints


def decoder_guess(hints: Sequence[str], keywords: Sequence[str], vectors: TextVectors) -> Code:
    scores = vectors.unit_vectors(hints) @ vectors.unit_vectors(keywords).T
    return assign_code(scores)


def slot_vectors(hint_history: Sequence[Sequence[str]], vectors: TextVectors) -> np.ndarray:
    """(4, dim) unit mean vector of each slot's past hints; a zero row for a slot never hinted."""
    rows = np.zeros((NUM_KEYWORDS, vectors.dim), dtype=np.float32)
    for slot, hints in enumerate(hint_history):
        if hints:
            rows[slot] = vectors.unit_vectors(hints).mean(axis=0)
    return unit_rows(rows)


def interceptor_guess(
    hints: Sequence[str],
    hint_history: Sequence[Sequence[str]],
    vectors: TextVectors,
    rng: np.random.Generator,
) -> Code:
    if not any(hint_history):
        return random_code(rng)  # round 1: nothing to compare the hints with
    scores = vectors.unit_vectors(hints) @ slot_vectors(hint_history, vectors).T
    return assign_code(scores, rng)


def keyword_beliefs(
    hint_history: Sequence[Sequence[str]], vocab: EmbeddedVocabulary, vectors: TextVectors
) -> list[str]:
    """Per slot, the vocabulary noun nearest the slot's mean hint vector, or "no_keyword"."""
    centres = slot_vectors(hint_history, vectors)
    scores = vocab.unit @ centres.T  # (n_words, 4)
    index = {w: i for i, w in enumerate(vocab.words)}
    beliefs: list[str] = []
    for slot, hints in enumerate(hint_history):
        if not hints:
            beliefs.append(NO_KEYWORD)
            continue
        column = scores[:, slot].copy()
        for word in [*hints, *beliefs]:
            row = index.get(normalise_text(word))
            if row is not None:
                column[row] = -np.inf
        beliefs.append(vocab.words[int(np.argmax(column))])
    return beliefs


# --------------------------------------------------------------------------- policies


def _role_and_question(turn: Turn) -> tuple[int, int]:
    obs = turn.observation
    try:
        role, question = int(obs["role"]), int(obs["question"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            f"turn {turn.game_id}/{turn.agent}: observation lacks integer 'role' and 'question' "
            "fields (is this a tomgym/decrypto-v0 observation?)"
        ) from None
    if role not in (ROLE_ENCODER, ROLE_DECODER, ROLE_INTERCEPTOR):
        raise ValueError(f"turn {turn.game_id}/{turn.agent}: unknown role {role}")
    if question == Q_NONE or question > Q_FB_FB:
        raise ValueError(f"turn {turn.game_id}/{turn.agent}: question {question} is not answerable")
    return role, question


@dataclass
class _GameStreams:
    """Random streams of one game: one per (agent, purpose), created on first use."""

    seed: int
    game_id: str
    streams: dict[tuple[str, str], np.random.Generator] = field(default_factory=dict)

    def rng(self, agent: str, purpose: str) -> np.random.Generator:
        key = (agent, purpose)
        if key not in self.streams:
            self.streams[key] = np.random.default_rng(
                derive_seed(self.seed, self.game_id, agent, purpose)
            )
        return self.streams[key]


class _SeededDecryptoPolicy(BasePolicy):
    """Per-game seeded streams and dispatch on the observation's role and question."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)
        self._games: dict[str, _GameStreams] = {}

    def reset(self, game_id: str) -> None:
        self._games[game_id] = _GameStreams(self.seed, game_id)

    def forget(self, game_id: str) -> None:
        """Drop a finished game's streams (the runner calls this to keep memory flat)."""
        self._games.pop(game_id, None)

    def close(self) -> None:
        self._games.clear()

    def _rng(self, turn: Turn, purpose: str) -> np.random.Generator:
        if turn.game_id not in self._games:
            self.reset(turn.game_id)
        return self._games[turn.game_id].rng(turn.agent, purpose)

    def act(self, turn: Turn) -> str:
        role, question = _role_and_question(turn)
        obs = turn.observation
        if question == Q_HINTS:
            if role != ROLE_ENCODER:
                raise ValueError(f"turn {turn.game_id}/{turn.agent}: only the encoder gives hints")
            return answer_hints(self.hints(turn, obs))
        if question == Q_GUESS:
            if role == ROLE_ENCODER:
                raise ValueError(f"turn {turn.game_id}/{turn.agent}: the encoder does not guess")
            return answer_guess(self.guess(turn, obs, role))
        if question == Q_PREDICT:
            return answer_guess(self.predict_interceptor(turn, obs))
        return answer_keywords(self.keyword_answer(turn, obs, question))

    # Subclasses implement the four decisions.
    def hints(self, turn: Turn, obs: Mapping[str, Any]) -> list[str]:
        raise NotImplementedError

    def guess(self, turn: Turn, obs: Mapping[str, Any], role: int) -> Code:
        raise NotImplementedError

    def predict_interceptor(self, turn: Turn, obs: Mapping[str, Any]) -> Code:
        raise NotImplementedError

    def keyword_answer(self, turn: Turn, obs: Mapping[str, Any], question: int) -> list[str]:
        raise NotImplementedError


class RandomDecryptoPolicy(_SeededDecryptoPolicy):
    """Uniform random play: 3 distinct random hint nouns, random valid codes, random keywords."""

    name = "decrypto-random"

    def __init__(self, seed: int = 0, vocabulary: Sequence[str] | None = None) -> None:
        super().__init__(seed)
        self.vocabulary = tuple(vocabulary) if vocabulary is not None else load_hint_vocabulary()

    def _words(self, rng: np.random.Generator, n: int) -> list[str]:
        picks = rng.choice(len(self.vocabulary), size=n, replace=False)
        return [self.vocabulary[int(i)] for i in picks]

    def hints(self, turn: Turn, obs: Mapping[str, Any]) -> list[str]:
        return self._words(self._rng(turn, "play"), CODE_LENGTH)

    def guess(self, turn: Turn, obs: Mapping[str, Any], role: int) -> Code:
        return random_code(self._rng(turn, "play"))

    def predict_interceptor(self, turn: Turn, obs: Mapping[str, Any]) -> Code:
        return random_code(self._rng(turn, "side"))

    def keyword_answer(self, turn: Turn, obs: Mapping[str, Any], question: int) -> list[str]:
        return self._words(self._rng(turn, "side"), NUM_KEYWORDS)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": "scripted",
            "seed": self.seed,
            "vocabulary_size": len(self.vocabulary),
        }


class EmbeddingDecryptoPolicy(_SeededDecryptoPolicy):
    """The paper's word-embedding baseline (appendix E) for every role; see the module docstring.

    Args:
        k: encoder candidate pool size (top-K nouns per keyword; the paper uses 16). Larger K
            means vaguer hints: more miscommunications, harder interception.
        seed: base seed; each (game, agent) stream derives from it and the game id.
        vectors: a provider name from `agents.vectors` ("glove", the default: GloVe 6B 50d;
            "minilm": all-MiniLM-L6-v2) or any `TextVectors` object. Every decision of this
            policy (hints, guesses, beliefs) is made in this one space.
        vocabulary: hint nouns (default: the bundled 5,700-noun list).
    """

    name = "decrypto-embedding"

    def __init__(
        self,
        k: int = DEFAULT_K,
        seed: int = 0,
        vectors: TextVectors | str = DEFAULT_VECTORS,
        vocabulary: Sequence[str] | None = None,
    ) -> None:
        if int(k) < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        super().__init__(seed)
        self.k = int(k)
        if isinstance(vectors, str):
            self.vectors = load_vectors(vectors)
        else:
            self.vectors = vectors
        if vocabulary is None and isinstance(vectors, str):
            self.vocab = default_vocabulary(vectors)
        else:
            words = tuple(vocabulary) if vocabulary is not None else load_hint_vocabulary()
            self.vocab = EmbeddedVocabulary.build(words, self.vectors)

    @staticmethod
    def _history(obs: Mapping[str, Any]) -> list[list[str]]:
        return hint_history_from_json(str(obs.get("history", "") or "[]"))

    @staticmethod
    def _current_hints(turn: Turn, obs: Mapping[str, Any]) -> list[str]:
        hints = [str(h) for h in obs.get("hints", ())]
        if len(hints) != CODE_LENGTH or not all(h.strip() for h in hints):
            raise ValueError(
                f"turn {turn.game_id}/{turn.agent}: the observation has no 3 hints yet"
            )
        return hints

    @staticmethod
    def _keywords(turn: Turn, obs: Mapping[str, Any]) -> list[str]:
        keywords = [str(k) for k in obs.get("keywords", ())]
        if len(keywords) != NUM_KEYWORDS or not all(k.strip() for k in keywords):
            raise ValueError(f"turn {turn.game_id}/{turn.agent}: the observation shows no keywords")
        return keywords

    def hints(self, turn: Turn, obs: Mapping[str, Any]) -> list[str]:
        code = [int(d) for d in np.asarray(obs["code"]).reshape(-1)]
        if sorted(set(code)) != sorted(code) or not all(1 <= d <= NUM_KEYWORDS for d in code):
            raise ValueError(
                f"turn {turn.game_id}/{turn.agent}: code {code} is not 3 distinct digits"
            )
        return encoder_hints(
            self._keywords(turn, obs),
            code,
            self._history(obs),
            self.k,
            self._rng(turn, "play"),
            self.vocab,
            self.vectors,
        )

    def guess(self, turn: Turn, obs: Mapping[str, Any], role: int) -> Code:
        hints = self._current_hints(turn, obs)
        if role == ROLE_DECODER:
            return decoder_guess(hints, self._keywords(turn, obs), self.vectors)
        return interceptor_guess(hints, self._history(obs), self.vectors, self._rng(turn, "play"))

    def predict_interceptor(self, turn: Turn, obs: Mapping[str, Any]) -> Code:
        hints = self._current_hints(turn, obs)
        return interceptor_guess(hints, self._history(obs), self.vectors, self._rng(turn, "side"))

    def keyword_answer(self, turn: Turn, obs: Mapping[str, Any], question: int) -> list[str]:
        return keyword_beliefs(self._history(obs), self.vocab, self.vectors)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "backend": "scripted",
            "k": self.k,
            "seed": self.seed,
            "vectors": self.vectors.name,
            "vocabulary_size": len(self.vocab.words),
        }
