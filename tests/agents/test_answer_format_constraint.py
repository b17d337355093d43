"""Constrained decoding of the whole TOM-SB answer (`agents.llm.constraints.AnswerFormatConstraint`).

Covers: the template is the protocol encoder's own output (every answer `answer_defender` /
`answer_attacker` writes with valid names walks it to the end), the answers small models were
seen to break (a string closed early and concatenated, an unquoted value, a wrong key, a missing
level, a raw newline, `")` for `"}`) leave it, which tokens the masks allow at the choices and
inside the free strings, `AllOf` with the reply-name rule, the bundled model sampled hot under
the constraint writing only template prefixes (and parseable answers once closed), and the
assembly from a backend's switches.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from tomgym.agents.llm.constraints import (
    AllOf,
    AnswerFormatConstraint,
    AnswerOptions,
    BeliefNameConstraint,
    Excluded,
    JsonString,
    ReplyNameConstraint,
    answer_grammar,
    answer_options,
    answer_rules,
    answer_template,
    generator_rules,
    token_table,
)
from tomgym.agents.llm.stopping import answer_stop
from tomgym.envs.tomsb.game import MAX_TRUST, SIGNALS
from tomgym.envs.tomsb.parsing import answer_attacker, answer_defender, parse_defender

from tests.agents.engines import uncached_engine

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

NAMES = {
    "league": ["Premier League", "La Liga"],
    "club": ["Arsenal", "Chelsea", "Real Madrid"],
    "coach": ["Ana Ruiz", "Tom Hale"],
}
DEFENDER = AnswerOptions("defender", NAMES)
ATTACKER = AnswerOptions("attacker", NAMES)


def _defender_answer(**changes: Any) -> str:
    fields: dict[str, Any] = {
        "attacker_belief_about_target": {"league": "La Liga", "club": None, "coach": None},
        "attacker_trust_in_us": 4,
        "reflection": "They know the league only.",
        "reply": "I think it is Chelsea.",
    }
    fields.update(changes)
    return answer_defender(**fields)


def _complete(grammar: Any, text: str) -> bool:
    return grammar.advance(grammar.start, text) == (len(grammar.parts), "")


def test_every_answer_the_encoders_write_walks_the_template_to_its_end(loaded) -> None:
    _, tokenizer = loaded
    table = token_table(tokenizer)
    defender, attacker = answer_grammar(table, DEFENDER), answer_grammar(table, ATTACKER)
    rng = random.Random(0)
    for _ in range(50):
        belief = {level: rng.choice([None, *names]) for level, names in NAMES.items()}
        trust = rng.randint(0, MAX_TRUST)
        text = rng.choice(["Sure.", 'She said "hi" \\ then left', "Ça va, très bien", "x" * 300])
        assert _complete(
            defender,
            _defender_answer(
                attacker_belief_about_target=belief, attacker_trust_in_us=trust, reply=text
            ),
        )
        assert _complete(
            attacker,
            answer_attacker(
                trust_score=trust,
                belief=belief,
                reflection=text,
                signal=rng.choice(SIGNALS),
                prompt="Which club?",
            ),
        )
    # The template's parts: fixed literals around the slots, the free texts as JSON strings,
    # of which only the reply must not be empty (the protocol's REQUIRED_TEXT_FIELDS).
    parts = answer_template("defender", NAMES)
    assert [p for p in parts if isinstance(p, JsonString)] == [JsonString(False), JsonString(True)]
    assert _complete(defender, _defender_answer(reflection=""))
    assert ("null", '"Arsenal"', '"Chelsea"', '"Real Madrid"') in parts
    assert tuple(str(v) for v in range(MAX_TRUST + 1)) in parts
    with pytest.raises(ValueError, match="role"):
        answer_template("referee", NAMES)


@pytest.mark.parametrize(
    "broken",
    [
        # a string closed early and concatenated (seen in sampled rollouts)
        _defender_answer().replace('"They know', '"They know: " + Chelsea + "'),
        _defender_answer().replace('"La Liga"', "La Liga"),  # unquoted value
        _defender_answer().replace('"La Liga"', '"Bundesliga"'),  # not a name
        _defender_answer().replace('"La Liga"', '"Arsenal"'),  # a name of another level
        _defender_answer().replace('"club": null, ', ""),  # a level missing
        _defender_answer().replace("attacker_trust_in_us", "trust_in_us"),  # a wrong key
        _defender_answer().replace('"attacker_trust_in_us": 4', '"attacker_trust_in_us": 7'),
        _defender_answer().replace("league only.", "league\nonly."),  # raw newline in a string
        _defender_answer().replace('"reply": "I think', '"reply": " I think'),  # space-led text
        _defender_answer(reply=""),  # an empty reply
        _defender_answer()[:-2] + '")',  # `")` for `"}`
        "```json\n" + _defender_answer(),  # a fence before the object
        _defender_answer() + " and more",  # text past the closing brace
    ],
)
def test_answers_that_break_the_protocol_leave_the_template(loaded, broken: str) -> None:
    _, tokenizer = loaded
    grammar = answer_grammar(token_table(tokenizer), DEFENDER)
    assert grammar.advance(grammar.start, broken) is None


def _texts(tokenizer: Any, ids: Any) -> set[str]:
    return {tokenizer.decode([i]) for i in ids}


def test_the_masks_allow_the_template_and_ban_what_breaks_a_string(loaded) -> None:
    _, tokenizer = loaded
    table = token_table(tokenizer)
    grammar = answer_grammar(table, DEFENDER)
    rule = AnswerFormatConstraint(grammar)
    # The first token can only open the object.
    assert _texts(tokenizer, rule.allowed([])) <= {"{", '{"'}
    # A belief value: null or the opening of one of the level's names, nothing else.
    at_club = tokenizer.encode('{"attacker_belief_about_target": {"league": null, "club": ')
    club = _texts(tokenizer, AnswerFormatConstraint(grammar).allowed(at_club))
    assert club and all(
        any(choice.startswith(t) for choice in ("null", '"Arsenal"', '"Chelsea"', '"Real Madrid"'))
        for t in club
    )
    # Inside the reflection: a ban list (free text), which holds every token that would close the
    # string onto anything but the template's next key, and never an ordinary word.
    head = _defender_answer().split('"reflection": "')[0] + '"reflection": "They know'
    inside = AnswerFormatConstraint(grammar).allowed(tokenizer.encode(head))
    assert isinstance(inside, Excluded)
    banned = set(inside)
    by_text = {text: token_id for token_id, text in table.structural}
    for text in ('")', '" +', '"\n', "\n"):
        if text in by_text:
            assert by_text[text] in banned, text
    for text in ('"', '",', ", "):
        token_id = by_text.get(text, tokenizer.encode(text)[0])
        assert token_id not in banned, text
    assert tokenizer.encode(" Chelsea")[0] not in banned
    assert set(table.special_ids) <= banned
    # Right after the opening quote, the text may not start with whitespace.
    opened = AnswerFormatConstraint(grammar).allowed(tokenizer.encode(head[: -len("They know")]))
    assert isinstance(opened, Excluded) and tokenizer.encode(" They")[0] in set(opened)
    # Once the object is closed, the rest is the engine's (stop_at_answer).
    assert AnswerFormatConstraint(grammar).allowed(tokenizer.encode(_defender_answer())) is None


def test_all_of_keeps_reply_names_spelled_inside_the_format(loaded) -> None:
    _, tokenizer = loaded
    table = token_table(tokenizer)
    names = ["Hillcrest Restaurant", "Chelsea"]
    options = AnswerOptions("defender", {"place": names})
    head = answer_defender(
        attacker_belief_about_target={"place": None},
        attacker_trust_in_us=3,
        reflection="Lie.",
        reply="It is Hillc",
    )[: -len('"}')]
    ids = tokenizer.encode(head)
    both = AllOf(
        [AnswerFormatConstraint(answer_grammar(table, options)), ReplyNameConstraint(table, names)]
    )
    allowed = both.allowed(ids)
    assert allowed is not None and not isinstance(allowed, Excluded)
    assert _texts(tokenizer, allowed) and all(
        "Hillcrest Restaurant".startswith("Hillc" + t) for t in _texts(tokenizer, allowed)
    )
    # The rows the assembly builds: the format (subsuming the belief rule) and the reply rule.
    (row, none) = answer_rules(tokenizer, [options, None], formats=True, replies=True)
    assert none is None and isinstance(row, AllOf)
    assert [type(r) for r in row.rules] == [AnswerFormatConstraint, ReplyNameConstraint]
    (beliefs_only,) = answer_rules(tokenizer, [AnswerOptions(None, {"place": names})], formats=True)
    assert isinstance(beliefs_only, BeliefNameConstraint)  # no role: no template to follow


class Switches:
    def __init__(self, tokenizer: Any, **flags: bool) -> None:
        self.tokenizer = tokenizer
        self.__dict__.update(flags)


def test_generator_rules_read_the_backends_switches(loaded) -> None:
    _, tokenizer = loaded
    assert generator_rules(Switches(tokenizer, constrain_format=True), None) is None
    (row,) = generator_rules(Switches(tokenizer, constrain_format=True), [DEFENDER])
    assert isinstance(row, AnswerFormatConstraint)
    (row,) = generator_rules(Switches(tokenizer, constrain_beliefs=True), [DEFENDER])
    assert isinstance(row, BeliefNameConstraint)
    assert generator_rules(Switches(tokenizer), [DEFENDER]) == [None]


def test_the_bundled_model_sampled_hot_writes_only_template_prefixes(loaded) -> None:
    from tomgym.envs import tomsb_v0
    from tomgym.envs.tomsb.env import DEFENDER as DEFENDER_AGENT
    from tomgym.envs.tomsb.protocol import view_from_observation
    from tomgym.envs.tomsb.universe import Universe

    model, tokenizer = loaded
    env = tomsb_v0.env()
    env.reset(seed=0)
    observation = dict(env.observe(DEFENDER_AGENT))
    options = answer_options(observation)
    assert options is not None and options.role == "defender"
    grammar = answer_grammar(token_table(tokenizer), options)
    view = view_from_observation(observation)
    universe = Universe.from_dict(view["universe"], view["hierarchy"])
    chat = [
        {"role": "system", "content": observation["system"]},
        {"role": "user", "content": observation["message"]},
    ]
    prompt = tokenizer.encode(
        tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    )
    # Forced to the reply, the rest sampled hot: the only way out of the string is the template.
    head = (
        answer_defender(
            attacker_belief_about_target=dict.fromkeys(options.names),
            attacker_trust_in_us=5,
            reflection="Probe first.",
            reply="X",
        ).split('"reply": "')[0]
        + '"reply": "'
    )
    head_ids = tokenizer.encode(head)
    torch.manual_seed(0)
    outs = uncached_engine(model, tokenizer).generate(
        [prompt, prompt + head_ids],
        max_new_tokens=48,
        temperature=1.3,
        constraints=[AnswerFormatConstraint(grammar), Prefixed(head_ids, grammar)],
        stop_when=answer_stop(tokenizer),
    )
    whole, reply = (tokenizer.decode(out.ids, skip_special_tokens=True) for out in outs)
    for text in (whole, head + reply):
        closed = _walk(grammar, text)
        if closed is not None:  # the object closed within the budget: a valid answer
            move, error, _ = parse_defender(closed, universe)
            assert error is None and move is not None, (closed, error)
    json.dumps(options.names)  # the options are plain data (passed to backends as is)


class Prefixed:
    """The format rule for a row whose prompt already holds `head` of the answer."""

    def __init__(self, head: list[int], grammar: Any) -> None:
        self.head = head
        self.rule = AnswerFormatConstraint(grammar)

    def allowed(self, completion_ids: list[int]) -> Any:
        return self.rule.allowed(self.head + completion_ids)


def _walk(grammar: Any, text: str) -> str | None:
    """The text up to the object's close (None while still open); fails on any character that
    leaves the template before the close."""
    state = grammar.start
    for end, char in enumerate(text, 1):
        state = grammar.advance(state, char)
        assert state is not None, f"left the template at {text[:end]!r}"
        if state == (len(grammar.parts), ""):
            return text[:end]
    return None


def test_the_engine_marks_the_tokens_a_constraint_forced(loaded) -> None:
    model, tokenizer = loaded
    grammar = answer_grammar(token_table(tokenizer), DEFENDER)
    prompt = tokenizer.encode("Answer in JSON.")
    (out,) = uncached_engine(model, tokenizer).generate(
        [prompt], max_new_tokens=12, temperature=0.0, constraints=[AnswerFormatConstraint(grammar)]
    )
    assert len(out.forced) == len(out.ids)
    masks = [AnswerFormatConstraint(grammar).allowed(out.ids[:i]) for i in range(len(out.ids))]
    expected = [m is not None and not isinstance(m, Excluded) and len(m) == 1 for m in masks]
    assert out.forced == expected and any(expected)  # the object's first key is fixed
    (free,) = uncached_engine(model, tokenizer).generate([prompt], max_new_tokens=4)
    assert free.forced == [False] * len(free.ids)


def test_a_non_ascii_name_is_left_to_the_model_and_still_walks(loaded) -> None:
    _, tokenizer = loaded
    options = AnswerOptions("defender", {"city": ["Zürich", "Basel"], "street": ["Hauptgasse"]})
    grammar = answer_grammar(token_table(tokenizer), options)
    head = '{"attacker_belief_about_target": {"city": '
    state = grammar.advance(grammar.start, head)
    assert state is not None
    assert grammar.mask(state) is None  # "Zürich" may be split inside a UTF-8 sequence
    assert grammar.mask(grammar.advance(state, '"Bas')) is not None  # an ASCII rest is kept
    answer = answer_defender(
        attacker_belief_about_target={"city": "Zürich", "street": None},
        attacker_trust_in_us=1,
        reflection="ok",
        reply="Zürich, I think.",
    )
    assert _complete(grammar, answer)
