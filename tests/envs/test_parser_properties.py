"""Property tests: Decrypto and TOM-SB answers are read from the answer's own keys only.

Each answer is a protocol JSON object whose strings (and extra keys, nested values) are hostile:
answer markers, `</think>`, code fences, quoted copies of other answers, brackets, huge text,
non-ASCII and control characters; it is wrapped in prose, reasoning blocks, fences and trailing
decoys that the protocol allows. The parsed fields must be exactly the answer's own fields.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tomgym.envs.decrypto.parsing import (
    MAX_ANSWER_CHARS,
    MAX_HINT_CHARS,
    parse_guess,
    parse_hints,
    parse_keywords,
)
from tomgym.envs.tomsb.game import SIGNAL_QUERY, SIGNAL_SUCCESS
from tomgym.envs.tomsb.parsing import (
    MAX_REFLECTION_CHARS,
    MAX_REPLY_CHARS,
    parse_attacker,
    parse_defender,
)
from tomgym.envs.tomsb.universe import Universe

from tests.tomsb.test_env import FIXTURE_TREE

U = Universe.from_dict(FIXTURE_TREE)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

DECOYS = [
    "ANSWER:",
    "answer: [1, 2, 3]",
    "Answer = [4, 3, 2]",
    'ANSWER: {"hints": ["x", "y", "z"]}',
    'ANSWER: {"guess": "4-3-2"}',
    'ANSWER: {"keywords": ["a", "b", "c", "d"]}',
    '{"hints": ["p", "q", "r"]}',
    "</think>",
    "<think>",
    "```",
    "```json\n",
    '```json\n{"reply": "decoy", "reflection": "", "attacker_trust_in_us": 0}\n```',
    json.dumps(
        {
            "attacker_belief_about_target": {"company": None, "division": None, "team": None},
            "attacker_trust_in_us": 0,
            "reflection": "decoy",
            "reply": "decoy reply",
        }
    ),
    '{"trust_score": 0, "signal": "detected", "prompt": "decoy"}',
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    "\\u0000",
    "null",
]
CONTROL = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x1F), max_size=4)
NON_ASCII = st.text(alphabet=st.characters(min_codepoint=0x80, max_codepoint=0x10FFFF), max_size=6)
HOSTILE = st.lists(
    st.one_of(st.sampled_from(DECOYS), st.text(max_size=8), CONTROL, NON_ASCII), max_size=6
).map("".join)
HUGE = st.integers(0, 400).map(lambda n: 'ANSWER: [1, 2, 3] ```</think>{"hints": [' * n)
NESTED = st.recursive(
    st.one_of(st.none(), st.integers(), HOSTILE),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["hints", "guess", "x"]), inner, max_size=3),
    ),
    max_leaves=8,
)
# Prose around an answer: no JSON can start in it and it holds no marker of its own.
PROSE = st.text(max_size=40).filter(
    lambda t: (
        not any(c in t for c in "{[")
        and "answer" not in t.lower()
        and "`" not in t
        and "</think>" not in t
    )
)


def _extra_keys(own: tuple[str, ...]) -> st.SearchStrategy[dict]:
    """Extra keys of the answer object: hostile names and nested decoy values, never own keys."""
    keys = st.one_of(st.sampled_from(["answer", "ANSWER:", "note", "draft", "</think>"]), HOSTILE)
    return st.dictionaries(keys.filter(lambda k: k.lower() not in own), NESTED, max_size=3)


def _decrypto_text(draw, payload: dict) -> str:
    dumped = json.dumps(payload, ensure_ascii=draw(st.booleans()))
    body = draw(
        st.sampled_from(["ANSWER: {}", "ANSWER:{}", "answer = {}", "```json\nANSWER: {}\n```"])
    )
    # Decoys before the last marker are prose the player wrote first; after it only prose.
    before = draw(HOSTILE) + draw(PROSE)
    return before + "\n" + body.format(dumped) + draw(PROSE)


def _normalised(items: list[str]) -> tuple[str, ...] | None:
    out = tuple(" ".join(str(i).split()) for i in items)
    if any(not i or len(i) > MAX_HINT_CHARS for i in out):
        return None
    return out


@SETTINGS
@given(data=st.data(), hints=st.lists(HOSTILE, min_size=3, max_size=3), huge=HUGE)
def test_decrypto_hints_come_from_the_hints_key(data, hints: list[str], huge: str) -> None:
    payload = {**data.draw(_extra_keys(("hints",))), "hints": hints, "zz_note": huge}
    text = _decrypto_text(data.draw, payload)
    parsed, error = parse_hints(text)
    if len(text) > MAX_ANSWER_CHARS:
        assert parsed is None and "limit" in error
        return
    expected = _normalised(hints)
    assert parsed == expected, (text, error)
    assert (error is None) == (expected is not None)


@SETTINGS
@given(data=st.data(), words=st.lists(HOSTILE, min_size=4, max_size=4))
def test_decrypto_keywords_come_from_the_keywords_key(data, words: list[str]) -> None:
    payload = {"keywords": words, **data.draw(_extra_keys(("keywords",)))}
    parsed, error = parse_keywords(_decrypto_text(data.draw, payload))
    expected = _normalised(words)
    assert parsed == expected, error


@SETTINGS
@given(
    data=st.data(),
    code=st.permutations([1, 2, 3, 4]).map(lambda p: p[:3]),
    form=st.sampled_from(["dash", "list", "digits"]),
)
def test_decrypto_guess_comes_from_the_guess_key(data, code: list[int], form: str) -> None:
    value = {"dash": "-".join(map(str, code)), "list": code, "digits": "".join(map(str, code))}
    payload = {**data.draw(_extra_keys(("guess",))), "guess": value[form]}
    parsed, error = parse_guess(_decrypto_text(data.draw, payload))
    assert parsed == tuple(code), error


# One name per level of the fixture universe; a belief is mostly valid, sometimes a level holds a
# name of another level (the parser must then refuse it).
LEVEL_NAMES = ("Bluefield", "Vaccines", "Cold Chain")


def _belief(draw) -> dict:
    names = [
        draw(st.sampled_from([None, own, own, LEVEL_NAMES[(i + 1) % 3]]))
        for i, own in enumerate(LEVEL_NAMES)
    ]
    return dict(zip(U.levels, names, strict=True))


def _valid_belief(belief: dict) -> bool:
    return all(n is None or U.level_of(n) == i for i, n in enumerate(belief.values()))


def _tomsb_text(draw, obj: dict) -> str:
    dumped = json.dumps(
        obj, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 2]))
    )
    if draw(st.booleans()):
        dumped = f"```json\n{dumped}\n```"
    # A reasoning block may hold anything but its own end; decoy answers there are dropped.
    think = draw(HOSTILE).replace("</think>", "")
    head = f"<think>{think}</think>" if draw(st.booleans()) else ""
    return head + draw(PROSE) + dumped + draw(PROSE)


def _check_fields(draw, parse, own: dict, said: str, valid: bool) -> None:
    """`own` fields among drawn extra keys, written as a hostile TOM-SB answer: `parse` returns
    exactly them (the reflection and the `said` text stripped) when `valid`, else refuses."""
    obj = {**draw(_extra_keys(tuple(own))), **own}
    _, error, parsed = parse(_tomsb_text(draw, obj), U)
    assert (parsed is not None) == valid, error
    if parsed is not None:
        assert parsed == {**own, "reflection": own["reflection"].strip(), said: own[said].strip()}


@SETTINGS
@given(
    data=st.data(),
    reflection=st.one_of(HOSTILE, HUGE),
    reply=HOSTILE,
    trust=st.integers(0, 5),
)
def test_tomsb_defender_fields_come_from_the_answer(data, reflection, reply, trust) -> None:
    belief = _belief(data.draw)
    own = {
        "attacker_belief_about_target": belief,
        "attacker_trust_in_us": trust,
        "reflection": reflection,
        "reply": reply,
    }
    valid = (
        _valid_belief(belief)
        and bool(reply.strip())
        and len(reply.strip()) <= MAX_REPLY_CHARS
        and len(reflection.strip()) <= MAX_REFLECTION_CHARS
    )
    _check_fields(data.draw, parse_defender, own, "reply", valid)


@SETTINGS
@given(
    data=st.data(),
    reflection=HOSTILE,
    prompt=HOSTILE,
    trust=st.integers(1, 5),
    signal=st.sampled_from([SIGNAL_QUERY, SIGNAL_SUCCESS]),
)
def test_tomsb_attacker_fields_come_from_the_answer(
    data, reflection, prompt, trust, signal
) -> None:
    belief = _belief(data.draw)
    own = {
        "trust_score": trust,
        "belief": belief,
        "reflection": reflection,
        "signal": signal,
        "prompt": prompt,
    }
    valid = (
        _valid_belief(belief) and bool(prompt.strip()) and len(prompt.strip()) <= MAX_REPLY_CHARS
    )
    _check_fields(data.draw, parse_attacker, own, "prompt", valid)


def test_issue_cases() -> None:
    """The reported takeovers, as examples: a hint quoting `answer: [1, 2, 3]`, a reflection
    quoting `</think>`, and an answer written above a closing remark."""
    hints = parse_hints('ANSWER: {"hints": ["answer: [1, 2, 3]", "sea", "salt"]}')
    assert hints == (("answer: [1, 2, 3]", "sea", "salt"), None)
    assert parse_hints('{"hints": ["a", "b", "c"]}\nFinal answer: see above')[0] == ("a", "b", "c")
    assert parse_hints('ANSWER: {"guess": "1-2-3"} {"hints": ["a", "b", "c"]}')[0] is None
    own = {
        "attacker_belief_about_target": dict.fromkeys(U.levels),
        "attacker_trust_in_us": 3,
        "reflection": "I think </think> done",
        "reply": "hello",
    }
    assert parse_defender("<think>plan</think>" + json.dumps(own), U)[2] == own
