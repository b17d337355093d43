"""Full games with the bundled model in every role (transformers backend, CPU).

The 135M model rarely follows the answer formats, so these games exercise exactly what matters:
re-asks and fallbacks are counted, transcripts stay valid and nothing crashes.
"""

from __future__ import annotations

import pytest
from tomgym.agents.policies import make_policy
from tomgym.training.runner import GameSpec, RunStats, play_games

from tests.agents.transcripts import check_transcript

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model_policy():
    policy = make_policy("default,max_new_tokens=40,temperature=0.6", seed=0)
    yield policy
    policy.close()


def test_full_decrypto_game_with_default_model_in_every_role(model_policy):
    agents = ("encoder_0", "decoder_0", "interceptor_0")
    stats = RunStats()
    records = play_games(
        "tomgym/decrypto-v0",
        [GameSpec("llm-d0", 1, {"tom": ["perspective_taking"]}), GameSpec("llm-d1", 2)],
        {a: model_policy for a in agents},
        concurrency=2,
        env_config={"max_rounds": 2, "max_retries": 1},
        stats=stats,
    )
    assert len(records) == 2
    for record in records:
        assert record["outcome"] in {"survived", "miscommunication", "interception", "both"}
        assert 1 <= record["infos"]["encoder_0"]["rounds"] <= 2
        check_transcript(record, agents)
    # Both games were batched into the same model calls.
    assert stats.policy_calls[model_policy.name] < stats.turns


def test_full_tomsb_episode_with_default_model_in_both_roles(model_policy):
    agents = ("attacker_0", "defender_0")
    records = play_games(
        "tomgym/tomsb-v0",
        [GameSpec("llm-t0", 3, {"split": "validation", "attacker": "cross_examiner"})],
        {a: model_policy for a in agents},
        env_config={"max_attacker_turns": 2, "max_retries": 1},
    )
    record = records[0]
    assert record["outcome"] in {"fooled", "extracted", "detected", "baited"}
    assert record["infos"]["defender_0"]["turns"] <= 2
    check_transcript(record, agents)
