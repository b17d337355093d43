"""Names in TOM-SB replies spelled exactly (`agents.llm.constraints.ReplyNameConstraint`).

Covers: a name under way continues only into the names it begins (and may stop once one is
whole), sentence words and short fragments are left alone, tokens that would start a near miss
("Hills" for "Hillcrest Restaurant") are banned at word starts and only there, nothing outside
the open reply string is touched, `AllOf` hands the belief object and the reply to their own
rules, the engine masks an `Excluded` answer, and the bundled model, sampling hot, finishes a
name it has begun; given the names per level, a reply that names a level ("The location is")
opens only a name of that level, and the bundled model, sampling hot, fills it with one.
"""

from __future__ import annotations

from typing import Any

import pytest
from tomgym.agents.llm.constraints import (
    MIN_NAME_PREFIX,
    AllOf,
    AnswerOptions,
    BeliefNameConstraint,
    Excluded,
    ReplyNameConstraint,
    answer_rules,
    token_table,
)
from tomgym.envs.tomsb.parsing import DEFENDER_FIELDS
from tomgym.envs.tomsb.protocol import ROLE_CODES

from tests.agents.engines import uncached_engine

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

NAMES = [
    "Castillo Restaurant Group",
    "Hillcrest Restaurant",
    "Lakeshore Restaurant",
    "Tokyo",
    "Tokyo to Boise",
    "Tokyo to Tbilisi",
    "Bellflower 2C",
    "Bellflower 20A",
    "Thatcher Row",
]
BELIEF, REPLY = DEFENDER_FIELDS[0], DEFENDER_FIELDS[3]
OPEN = f'{{"{BELIEF}": {{"brand": null}}, "reflection": "Lie.", "{REPLY}": "'


BY_LEVEL = {
    "brand": ["Castillo Restaurant Group"],
    "health_system": ["Thatcher Row"],
    "location": ["Hillcrest Restaurant", "Lakeshore Restaurant"],
    "route": ["Tokyo to Boise", "Tokyo to Tbilisi"],
    "unit": ["Bellflower 2C", "Bellflower 20A"],
}


def _rule(tokenizer: Any) -> ReplyNameConstraint:
    return ReplyNameConstraint(token_table(tokenizer), NAMES)


def _level_rule(tokenizer: Any) -> ReplyNameConstraint:
    return ReplyNameConstraint(token_table(tokenizer), NAMES, BY_LEVEL)


def _opener(tokenizer: Any, name: str, *, spaced: bool = True) -> int:
    """The first token of `name` as the tokenizer writes it after a word ("is") or a space."""
    return tokenizer.encode((" " if spaced else "") + name)[0]


def _answer(tokenizer: Any, reply: str) -> Any:
    return _rule(tokenizer).allowed(tokenizer.encode(OPEN + reply))


def _texts(tokenizer: Any, ids: Any) -> list[str]:
    return [tokenizer.decode([i]) for i in ids]


@pytest.mark.parametrize(
    ("reply", "names"),
    [
        ("The location is Hill", ["Hillcrest Restaurant"]),
        ("It is Hillcrest", ["Hillcrest Restaurant"]),
        ("The unit is Bellflower", ["Bellflower 2C", "Bellflower 20A"]),
        ("Yes: Tokyo to", ["Tokyo to Boise", "Tokyo to Tbilisi"]),
    ],
)
def test_a_name_under_way_continues_only_into_the_names_it_begins(
    loaded, reply: str, names: list[str]
) -> None:
    _, tokenizer = loaded
    allowed = _answer(tokenizer, reply)
    assert allowed and not isinstance(allowed, Excluded)
    start = max(reply.rfind(n[:MIN_NAME_PREFIX]) for n in names)
    fragment = reply[start:]
    for text in _texts(tokenizer, allowed):
        written = fragment + text
        assert any(n.startswith(written) or written.startswith(n) for n in names), text
        # A token that runs past a name ends the word there.
        for n in names:
            if written.startswith(n) and len(written) > len(n):
                assert not written[len(n)].isalnum(), text


@pytest.mark.parametrize(
    "reply",
    [
        "That would be Tokyo",  # a whole name: it may end or go on ("Tokyo to ...")
        "That",  # a sentence word, though "Thatcher Row" begins so
        "Tok",  # shorter than MIN_NAME_PREFIX
        "I said Hillcrest Restaurant",  # whole
        "I said Hillcrest Restaurant, and",  # past it
    ],
)
def test_whole_names_sentence_words_and_short_fragments_are_free(loaded, reply: str) -> None:
    _, tokenizer = loaded
    answer = _answer(tokenizer, reply)
    assert answer is None or isinstance(answer, Excluded)


def test_near_miss_word_starts_are_banned_at_word_starts_only(loaded) -> None:
    _, tokenizer = loaded
    at_start = _answer(tokenizer, "The location is")
    assert isinstance(at_start, Excluded)
    banned = set(_texts(tokenizer, at_start))
    assert " Hills" in banned  # shares "Hill" with Hillcrest, then leaves every name
    assert not {" Hill", " The", " That", " Tokyo", " Bell"} & banned  # name starts, sentence words
    assert all(t.startswith(" ") for t in banned)  # after a letter a bare token continues a word
    after_space = _answer(tokenizer, "The location is ")
    assert isinstance(after_space, Excluded)
    assert set(_texts(tokenizer, after_space)) >= banned  # and a bare one may start a word


@pytest.mark.parametrize(
    "text",
    [
        "",
        '{"reflection": "Hill',  # not the reply
        f'{{"{BELIEF}": {{"location": "Hill',  # the belief object is the other rule's
        OPEN + 'It is Hillcrest Restaurant." ',  # the reply string is closed
    ],
)
def test_nothing_outside_the_open_reply_is_constrained(loaded, text: str) -> None:
    _, tokenizer = loaded
    assert _rule(tokenizer).allowed(tokenizer.encode(text) if text else []) is None


def test_all_of_hands_each_part_of_the_answer_to_its_own_rule(loaded) -> None:
    _, tokenizer = loaded
    table = token_table(tokenizer)
    belief = BeliefNameConstraint(table, {"location": ["Hillcrest Restaurant"]})
    both = AllOf([belief, ReplyNameConstraint(table, NAMES)])
    in_belief = tokenizer.encode(f'{{"{BELIEF}": {{"location": "Hill')
    assert both.allowed(in_belief) == belief.allowed(in_belief)
    in_reply = tokenizer.encode(OPEN + "It is Hill")
    assert belief.allowed(in_reply) is None
    assert both.allowed(in_reply) == _rule(tokenizer).allowed(in_reply)


class Ban:
    """A test constraint that bans fixed tokens."""

    def __init__(self, banned: list[int]) -> None:
        self.banned = Excluded(banned)

    def allowed(self, completion_ids: list[int]) -> Excluded:
        return self.banned


def test_the_engine_never_picks_an_excluded_token(loaded) -> None:
    model, tokenizer = loaded
    engine = uncached_engine(model, tokenizer)
    prompt = tokenizer.encode("Count: one, two, three,")
    free = engine.generate([prompt], max_new_tokens=1)[0].ids
    banned = engine.generate([prompt], max_new_tokens=1, constraints=[Ban(free)])[0]
    assert banned.ids != free
    assert banned.logprobs[0] <= 0.0


def _hot_samples(loaded: Any, rule: Any, reply: str, seed: int) -> list[str]:
    """Four continuations of `reply` by the bundled model sampling at temperature 1.5 under
    `rule` (the reply string open, as in a defender's answer)."""
    model, tokenizer = loaded
    engine = uncached_engine(model, tokenizer)
    prompt = tokenizer.encode(OPEN + reply)

    class Continue:
        def allowed(self, completion_ids: list[int]) -> Any:
            return rule.allowed(prompt + completion_ids)

    torch.manual_seed(seed)
    outs = engine.generate([prompt] * 4, max_new_tokens=16, temperature=1.5,
                           constraints=[Continue() for _ in range(4)])  # fmt: skip
    return [tokenizer.decode(out.ids) for out in outs]


def test_the_bundled_model_finishes_a_name_it_has_begun(loaded) -> None:
    for text in _hot_samples(loaded, _rule(loaded[1]), "The location is Hill", seed=5):
        assert ("Hill" + text).startswith("Hillcrest Restaurant"), text


@pytest.mark.parametrize(
    ("reply", "level"),
    [
        ("The location is", "location"),
        ("Yes. the LOCATION is", "location"),  # any case
        ("The unit is", "unit"),
        ("The health system is", "health_system"),  # a level's underscore written as a space
        ("The brand is Castillo Restaurant Group and the route is", "route"),  # the last slot
    ],
)
def test_a_named_level_opens_only_a_name_of_that_level(loaded, reply: str, level: str) -> None:
    _, tokenizer = loaded
    answer = _level_rule(tokenizer).allowed(tokenizer.encode(OPEN + reply))
    assert isinstance(answer, Excluded)
    banned = set(answer)
    for other, names in BY_LEVEL.items():
        for name in names:
            assert (_opener(tokenizer, name) in banned) is (other != level), (other, name)
    # lower-case words stay free: "is probably ...", "is not something I can share"
    assert not {_opener(tokenizer, w) for w in ("probably", "not", "the")} & banned
    # after "is " the name's first token is a bare one
    after_space = _level_rule(tokenizer).allowed(tokenizer.encode(OPEN + reply + " "))
    assert isinstance(after_space, Excluded)
    assert _opener(tokenizer, "Tokyo", spaced=False) in set(after_space) or level == "route"


def test_a_level_slot_under_way_continues_only_into_that_levels_names(loaded) -> None:
    _, tokenizer = loaded
    reply = "The location is La"
    allowed = _level_rule(tokenizer).allowed(tokenizer.encode(OPEN + reply))
    assert allowed and not isinstance(allowed, Excluded)
    for text in _texts(tokenizer, allowed):
        written = "La" + text
        name = "Lakeshore Restaurant"
        assert name.startswith(written) or written.startswith(name), text
    # without the levels, "La" is shorter than a name prefix: no name is forced
    general = _rule(tokenizer).allowed(tokenizer.encode(OPEN + reply))
    assert general is None or isinstance(general, Excluded)


@pytest.mark.parametrize(
    "reply",
    [
        "The location is probably",  # a lower-case word after "is"
        "The location is Hillcrest Restaurant",  # a whole name: the general rule takes over
        "The location island",  # not the slot
        "The city is",  # not a level of this universe
    ],
)
def test_text_outside_a_level_slot_follows_the_general_rule(loaded, reply: str) -> None:
    _, tokenizer = loaded
    ids = tokenizer.encode(OPEN + reply)
    assert _level_rule(tokenizer).allowed(ids) == _rule(tokenizer).allowed(ids)


class OpensCapitalised:
    """A test constraint: the first token is a space-led capitalised word (the model must name
    something there), every later one is free."""

    def __init__(self, tokenizer: Any, prompt_length: int) -> None:
        spaced = token_table(tokenizer).by_first[" "]
        self.openers = sorted(t for t, text in spaced if text[1:2].isupper())
        self.prompt_length = prompt_length

    def allowed(self, completion_ids: list[int]) -> Any:
        return self.openers if len(completion_ids) == self.prompt_length else None


def test_the_bundled_model_fills_a_named_level_with_one_of_its_names(loaded) -> None:
    _, tokenizer = loaded
    reply = "The unit is"
    opens = OpensCapitalised(tokenizer, len(tokenizer.encode(OPEN + reply)))
    rule = AllOf([_level_rule(tokenizer), opens])
    for text in _hot_samples(loaded, rule, reply, seed=3):
        assert any(text.startswith(" " + n) for n in BY_LEVEL["unit"]), text


def test_answer_rules_give_the_reply_rule_the_names_of_each_level(loaded) -> None:
    _, tokenizer = loaded
    (rule,) = answer_rules(tokenizer, [AnswerOptions(ROLE_CODES[1], BY_LEVEL)], replies=True)
    assert rule is not None
    answer = rule.allowed(tokenizer.encode(OPEN + "The unit is"))
    assert isinstance(answer, Excluded)
    assert _opener(tokenizer, "Tokyo") in set(answer)
    assert _opener(tokenizer, "Bellflower") not in set(answer)
