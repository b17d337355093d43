"""Text rendering of Decrypto observations (our own wording; versioned by PROMPT_VERSION).

Each role has a system prompt in several wording variants (the paper measured robustness to
prompt variation), a per-turn message holding only what is new since the player's last answer,
and a standalone prompt (system + full state + question) for stateless players.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from tomgym.envs.decrypto.game import DecryptoGame, RoundResult
from tomgym.envs.decrypto.parsing import code_text

PROMPT_VERSION = "decrypto-prompts-1"
ROLES = ("encoder", "decoder", "interceptor")

_RULES = (
    "Decrypto is played by three players in two teams. The Encoder and the Decoder share four "
    "secret keywords, numbered 1 to 4. Each round the Encoder gets a secret code of three "
    "distinct digits from 1-4 (e.g. 3-1-4) and gives three hints, one per digit in code order, "
    "each pointing at the meaning of that digit's keyword. The Decoder, who knows the keywords, "
    "guesses the code; the Interceptor, who never sees the keywords, also guesses the code from "
    "the hints and the public history of earlier rounds. A wrong Decoder guess gives the team a "
    "Miscommunication token; a correct Interceptor guess gives an Interception token. Two "
    "Miscommunications or two Interceptions and the Interceptor wins; the team wins by "
    "surviving {max_rounds} rounds. After each round the code, hints and guesses become public, "
    "so hints must help the Decoder without letting the Interceptor spot the pattern."
)

_SYSTEM_VARIANTS: dict[str, tuple[str, str, str]] = {
    "encoder": (
        "You are the Encoder in a game of Decrypto. {rules} Give clever hints that your teammate "
        "will decode but the Interceptor will not.",
        "Role: ENCODER (Decrypto). {rules} Your job: turn each secret code into three hints your "
        "partner understands and the eavesdropper does not.",
        "You are playing Decrypto as the player who writes hints. {rules} Think about what the "
        "Interceptor has already learned from past hints before you choose new ones.",
    ),
    "decoder": (
        "You are the Decoder in a game of Decrypto. {rules} Match each hint to the keyword it "
        "points at to recover your teammate's code.",
        "Role: DECODER (Decrypto). {rules} Your job: read your partner's three hints and name the "
        "code they encode.",
        "You are playing Decrypto as the Encoder's teammate. {rules} Use the keywords and the "
        "history of your partner's hints to decode each code.",
    ),
    "interceptor": (
        "You are the Interceptor in a game of Decrypto. {rules} You do not know the keywords: "
        "infer them from the history of hints and crack the code.",
        "Role: INTERCEPTOR (Decrypto). {rules} Your job: learn which hidden keyword each hint "
        "slot stands for and intercept the team's code.",
        "You are playing Decrypto against a team whose keywords are hidden from you. {rules} "
        "Track the hints given for each digit and guess the code.",
    ),
}
NUM_PROMPT_VARIANTS = 3

FORMAT_HINTS = 'Reply with your reasoning if you like, then a final line exactly like:\nANSWER: {"hints": ["hint one", "hint two", "hint three"]}'
FORMAT_GUESS = 'Reply with your reasoning if you like, then a final line exactly like:\nANSWER: {"guess": "3-1-4"}'
FORMAT_KEYWORDS = 'Reply with your reasoning if you like, then a final line exactly like:\nANSWER: {"keywords": ["first", "second", "third", "fourth"]}'


def system_prompt(role: str, variant: int, max_rounds: int) -> str:
    template = _SYSTEM_VARIANTS[role][variant % NUM_PROMPT_VARIANTS]
    return template.format(rules=_RULES.format(max_rounds=max_rounds))


def keywords_block(keywords: Sequence[str]) -> str:
    return "Your keywords: " + ", ".join(f"{i + 1}. {w}" for i, w in enumerate(keywords))


def round_summary(result: RoundResult) -> str:
    tokens = []
    if result.miscommunication:
        tokens.append("a Miscommunication token")
    if result.interception:
        tokens.append("an Interception token")
    gained = " and ".join(tokens) if tokens else "no token"
    return (
        f"Round {result.round} result: code {code_text(result.code)}, hints "
        f"{json.dumps(list(result.hints), ensure_ascii=False)}, Decoder guessed "
        f"{code_text(result.decoder_guess)}, Interceptor guessed "
        f"{code_text(result.interceptor_guess)}; the team gained {gained}."
    )


def public_history(game: DecryptoGame) -> str:
    """Hint history by keyword slot, code history and counts (what every role may see)."""
    if not game.history:
        return "No round has been played yet."
    lines = ["Hints given so far, by keyword digit:"]
    for digit, hints in enumerate(game.hint_history(), start=1):
        lines.append(f"  {digit}: " + (", ".join(hints) if hints else "(none yet)"))
    lines.append("Codes so far: " + ", ".join(code_text(r.code) for r in game.history))
    return "\n".join(lines)


def status_line(game: DecryptoGame) -> str:
    return (
        f"Round {game.round} of {game.max_rounds}. Miscommunication tokens: "
        f"{game.miscommunications}/2. Interception tokens: {game.interceptions}/2."
    )


def question_text(role: str, kind: str, game: DecryptoGame) -> str:
    """The request for one answer (`kind`: hints, guess, predict, fb_vanilla, fb_rc, fb_fb)."""
    hints = json.dumps(list(game.hints or ()), ensure_ascii=False)
    if kind == "hints":
        code = game.code
        mapping = ", ".join(f"{d} -> {game.keywords[d - 1]}" for d in code)
        return (
            f"Your secret code this round is {code_text(code)} ({mapping}). Give three hints, "
            f"one per digit, in code order.\n{FORMAT_HINTS}"
        )
    if kind == "guess":
        return f"The Encoder's hints this round are {hints}. Guess the code.\n{FORMAT_GUESS}"
    if kind == "predict":
        return (
            f"Side question (not part of the game): you gave the hints {hints}. What code do you "
            f"think the Interceptor will guess this round?\n{FORMAT_GUESS}"
        )
    reveal = ", ".join(f"{i + 1}. {w}" for i, w in enumerate(game.keywords))
    if kind == "fb_vanilla":
        return (
            "Side question (not part of the game): from the hint history, what do you think the "
            f"four secret keywords are, in digit order?\n{FORMAT_KEYWORDS}"
        )
    if kind == "fb_rc":
        return (
            f"Side question (not part of the game): the secret keywords are revealed to you: "
            f"{reveal}. Before this reveal, what did YOU think the four keywords were?\n"
            f"{FORMAT_KEYWORDS}"
        )
    if kind == "fb_fb":
        return (
            f"Side question (not part of the game): the secret keywords are revealed to you: "
            f"{reveal}. Another interceptor saw exactly the same hint history as you but not this "
            f"reveal. What will they think the four keywords are?\n{FORMAT_KEYWORDS}"
        )
    raise ValueError(f"unknown question kind {kind!r}")


def state_text(role: str, game: DecryptoGame) -> str:
    """Everything the role may know now, for a standalone prompt."""
    parts = []
    if role in ("encoder", "decoder"):
        parts.append(keywords_block(game.keywords))
    if game.history:
        parts.append(round_summary(game.history[-1]))
    parts.append(public_history(game))
    parts.append(status_line(game))
    return "\n".join(parts)
