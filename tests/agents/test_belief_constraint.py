"""Constrained decoding of TOM-SB belief values (`agents.llm.constraints`).

Covers: which tokens may continue a belief value (only spellings of that level's names, closed
by the object's punctuation), where the constraint does not apply (before the belief object,
unknown level keys, the reply), the engine's masking (the pick and the log-probs follow the
allowed set), the bundled model forced into a belief value spelling a name under sampling, the
names read from a real TOM-SB observation, and the policy / spec plumbing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from tomgym.agents.llm.constraints import (
    CONSTRAINT_FLAGS,
    BeliefNameConstraint,
    answer_options,
    token_table,
)
from tomgym.envs.tomsb.parsing import DEFENDER_FIELDS

from tests.agents.engines import uncached_engine

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

NAMES = {"league": ["Premier League", "La Liga", "Serie A"], "team": ["Arsenal", "Chelsea"]}
BELIEF = DEFENDER_FIELDS[0]


def _allowed_texts(tokenizer: Any, prefix: str) -> list[str] | None:
    rule = BeliefNameConstraint(token_table(tokenizer), NAMES)
    allowed = rule.allowed(tokenizer.encode(prefix))
    return None if allowed is None else [tokenizer.decode([i]) for i in allowed]


def test_a_belief_value_continues_only_into_a_name_of_its_level(loaded) -> None:
    _, tokenizer = loaded
    texts = _allowed_texts(tokenizer, f'{{"{BELIEF}": {{"league": "')
    assert texts
    closers = {t for t in texts if t.startswith('"')}
    # Closing at once is the empty value (null to the parser), with the object's punctuation.
    assert '"' in closers and closers <= {'"', '",', '","', '"}', '"},'}
    starts = [t for t in texts if not t.startswith('"')]
    assert starts and all(any(name.startswith(t) for name in NAMES["league"]) for t in starts)
    assert not any(any(name.startswith(t) for name in NAMES["team"]) for t in starts if t != "")
    # Mid-name: only the rest of the names that begin so.
    middle = _allowed_texts(tokenizer, f'{{"{BELIEF}": {{"league": null, "team": "Chel')
    assert middle and all("Chelsea".startswith("Chel" + t) for t in middle)
    # The whole name: only the closing quote (alone or with punctuation).
    done = _allowed_texts(tokenizer, f'{{"{BELIEF}": {{"league": "La Liga')
    assert done and all(t.startswith('"') for t in done)


@pytest.mark.parametrize(
    "prefix",
    [
        "",
        '{"reflection": "',
        f'{{"{BELIEF}": {{"coach": "',  # not a level: left to the model
        f'{{"{BELIEF}": {{"league": "La Liga"}}, "reply": "I work at ',
        f'{{"{BELIEF}": {{"league": "Bundes',  # already off every name
    ],
)
def test_outside_a_belief_value_nothing_is_constrained(loaded, prefix: str) -> None:
    _, tokenizer = loaded
    assert _allowed_texts(tokenizer, prefix) is None


class ForceThen:
    """A test constraint: force `prefix` token by token, then defer to `then` (or nothing)."""

    def __init__(self, prefix: Sequence[int], then: Any = None) -> None:
        self.prefix = list(prefix)
        self.then = then

    def allowed(self, completion_ids: list[int]) -> list[int] | None:
        if len(completion_ids) < len(self.prefix):
            return [self.prefix[len(completion_ids)]]
        return self.then.allowed(completion_ids) if self.then is not None else None


def test_the_engine_picks_and_scores_within_the_allowed_tokens(loaded) -> None:
    model, tokenizer = loaded
    engine = uncached_engine(model, tokenizer)
    target = tokenizer.encode(" zebra quantum banana")
    prompt = tokenizer.encode("Say hello.")
    torch.manual_seed(0)
    out = engine.generate(
        [prompt, prompt],
        max_new_tokens=len(target),
        temperature=1.0,
        constraints=[ForceThen(target), None],
    )
    assert out[0].ids == target
    # One allowed token: it has all the masked distribution's mass.
    assert out[0].logprobs == pytest.approx([0.0] * len(target), abs=1e-6)
    assert out[1].ids != target  # the unconstrained row samples freely
    with pytest.raises(ValueError, match="constraints"):
        engine.generate([prompt], max_new_tokens=2, constraints=[None, None])


def test_the_bundled_model_forced_into_a_belief_value_spells_a_name(loaded) -> None:
    model, tokenizer = loaded
    engine = uncached_engine(model, tokenizer)
    opening = f'{{"{BELIEF}": {{"team": "'
    forced = tokenizer.encode(opening)
    rule = BeliefNameConstraint(token_table(tokenizer), NAMES)
    prompt = tokenizer.encode("Write anything at all.")
    torch.manual_seed(3)
    # Hot sampling: unconstrained, a 135M model writes anything after the quote.
    outs = engine.generate(
        [prompt] * 6,
        max_new_tokens=len(forced) + 8,
        temperature=1.5,
        constraints=[ForceThen(forced, rule) for _ in range(6)],
    )
    for out in outs:
        text = tokenizer.decode(out.ids)
        assert text.startswith(opening)
        value = text[len(opening) :].split('"')
        assert len(value) > 1, text  # the value closed within 8 tokens
        assert value[0] in ("", *NAMES["team"]), text


def _tomsb_defender_observation() -> dict[str, Any]:
    from tomgym.envs import tomsb_v0
    from tomgym.envs.tomsb.env import DEFENDER

    env = tomsb_v0.env()
    env.reset(seed=0)
    return dict(env.observe(DEFENDER))


def test_answer_options_are_the_role_and_the_universe_names_per_level() -> None:
    from tomgym.envs.tomsb.universe import Universe

    observation = _tomsb_defender_observation()
    view = json.loads(observation["scenario"])
    universe = Universe.from_dict(view["universe"], view["hierarchy"])
    options = answer_options(observation)
    assert options is not None and options.role == "defender"
    assert list(options.names) == list(universe.levels)
    for depth, level in enumerate(universe.levels):
        assert options.names[level] == list(universe.nodes(depth))
        for name in universe.nodes(depth):  # each name's path, top level first, itself last
            assert options.paths[name] == (*universe.ancestors(name), name)
            assert len(options.paths[name]) == depth + 1
    assert answer_options({"message": "Decrypto has no scenario"}) is None
    assert answer_options({"scenario": "not json"}) is None
    unnamed = answer_options({**observation, "role": 7})
    assert unnamed is not None and unnamed.role is None and unnamed.names == options.names


class RecordingBackend:
    """A backend stub that records what `LLMPolicy` passes it."""

    kind = "stub"
    context_window = None
    accepts_conversation_keys = True

    def __init__(
        self,
        constrain_beliefs: bool,
        constrain_replies: bool = False,
        constrain_format: bool = False,
    ) -> None:
        self.constrain_beliefs = constrain_beliefs
        self.constrain_replies = constrain_replies
        self.constrain_format = constrain_format
        self.calls: list[dict[str, Any]] = []

    def generate(self, chats: Sequence[Any], **kwargs: Any) -> list[str]:
        self.calls.append(kwargs)
        return ["{}"] * len(chats)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.kind}

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("beliefs", "replies", "formats"),
    [(True, False, False), (False, True, False), (False, False, True), (False, False, False)],
)
def test_the_policy_passes_each_turns_names_to_a_constraining_backend(
    beliefs: bool, replies: bool, formats: bool
) -> None:
    from tomgym.agents.base import Turn
    from tomgym.agents.llm.policy import LLMPolicy

    on = beliefs or replies or formats
    observation = _tomsb_defender_observation()
    backend = RecordingBackend(beliefs, replies, formats)
    policy = LLMPolicy(backend, name="p", temperature=0.0)  # type: ignore[arg-type]
    other = {"system": "s", "message": "a Decrypto clue"}
    policy.act_batch([Turn("g1", "defender", observation), Turn("g2", "encoder", other)])
    (call,) = backend.calls
    if on:
        assert call["answer_options"] == [answer_options(observation), None]
    else:
        assert "answer_options" not in call


def test_the_spec_option_turns_the_constraint_on(loaded) -> None:
    from tomgym.agents.llm.backends.hf import HFBackend
    from tomgym.agents.specs import parse_spec

    assert parse_spec(
        "hf:default,constrain_format=true,constrain_beliefs=true,constrain_replies=true"
    ).typed_options() == {
        "constrain_format": True,
        "constrain_beliefs": True,
        "constrain_replies": True,
    }
    model, tokenizer = loaded
    flags = dict.fromkeys(CONSTRAINT_FLAGS, True)
    backend = HFBackend.from_model(model, tokenizer, **flags)
    assert {flag: backend.describe()[flag] for flag in CONSTRAINT_FLAGS} == flags
    plain = HFBackend.from_model(model, tokenizer)
    assert not any(getattr(plain, flag) for flag in CONSTRAINT_FLAGS)
