"""TOM-SB protocol facts: attacker variants, role views and answer encoders agree everywhere."""

from __future__ import annotations

import json

import pytest
from tomgym.envs.tomsb.attackers import CONFIGS
from tomgym.envs.tomsb.env import ATTACKER, DEFENDER
from tomgym.envs.tomsb.parsing import (
    answer_attacker,
    answer_defender,
    parse_attacker,
    parse_defender,
)
from tomgym.envs.tomsb.prompts import ATTACKER_SYSTEM_PROMPTS
from tomgym.envs.tomsb.protocol import (
    ATTACKER_VARIANTS,
    DEFENDER_ONLY_FIELDS,
    attacker_view,
    defender_view,
    pending_reply,
    view_from_observation,
)

from tests.tomsb.test_env import fixture_scenarios, make_env


def test_every_attacker_variant_has_a_prompt_and_a_scripted_attacker() -> None:
    assert tuple(ATTACKER_SYSTEM_PROMPTS) == ATTACKER_VARIANTS == tuple(CONFIGS)


@pytest.mark.parametrize("reveal", [False, True])
def test_the_env_publishes_exactly_the_role_views(reveal: bool) -> None:
    for scenario in fixture_scenarios():
        env = make_env(scenarios=[scenario])
        env.reset(options={"reveal_prior": reveal})
        assert view_from_observation(env.observe(ATTACKER)) == attacker_view(scenario)
        assert view_from_observation(env.observe(DEFENDER)) == defender_view(
            scenario, reveal_prior=reveal
        )
        assert not set(DEFENDER_ONLY_FIELDS) & set(attacker_view(scenario))


def test_view_from_observation_errors() -> None:
    with pytest.raises(ValueError, match="no 'scenario'"):
        view_from_observation({})
    with pytest.raises(ValueError, match="not a JSON object"):
        view_from_observation({"scenario": "[1, 2]"})
    assert view_from_observation({"scenario": {"a": 1}}) == {"a": 1}


def test_pending_reply_is_none_only_for_the_opening() -> None:
    env = make_env()
    env.reset(seed=0)
    assert pending_reply(env.observe(ATTACKER)) is None
    scenario = env._scenario
    env.step(
        answer_attacker(
            trust_score=5,
            belief=scenario.prior_dict(),
            reflection="",
            signal="query again",
            prompt="Which team?",
        )
    )
    env.step(
        answer_defender(
            attacker_belief_about_target=dict.fromkeys(scenario.levels),
            attacker_trust_in_us=5,
            reflection="",
            reply="Not sure.",
        )
    )
    assert pending_reply(env.observe(ATTACKER)) == "Not sure."


def test_answer_encoders_round_trip_through_the_parsers() -> None:
    scenario = fixture_scenarios()[0]
    universe, levels = scenario.universe, scenario.levels
    belief = dict(zip(levels, [scenario.ground_truth[0], None, None], strict=True))
    text = answer_attacker(
        trust_score=4, belief=belief, reflection="hm", signal="query again", prompt="Ça va?"
    )
    move, error, parsed = parse_attacker(text, universe)
    assert error is None and parsed == json.loads(text)
    assert "Ça" in text  # non-ASCII kept readable
    text = answer_defender(
        attacker_belief_about_target=belief, attacker_trust_in_us=3, reflection="", reply="Hi."
    )
    move, error, parsed = parse_defender(text, universe)
    assert error is None and parsed == json.loads(text)
    assert list(json.loads(text)) == [
        "attacker_belief_about_target",
        "attacker_trust_in_us",
        "reflection",
        "reply",
    ]
