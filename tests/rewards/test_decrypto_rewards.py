from __future__ import annotations

import pytest
from tomgym.rewards import RecordError, tom_probe_accuracy
from tomgym.rewards.decrypto import (
    interception,
    miscommunication,
    outcome_indicators,
    rounds_survived,
    win,
)

from tests.rewards.records import decrypto_record

CASES = [
    # ending, miscommunications, interceptions, rounds
    ("survived", 1, 1, 8),
    ("miscommunication", 2, 0, 3),
    ("interception", 0, 2, 5),
    ("both", 2, 2, 6),
]


@pytest.mark.parametrize(("ending", "misc", "inter", "rounds"), CASES)
def test_per_role_outcome_rewards(ending: str, misc: int, inter: int, rounds: int) -> None:
    record = decrypto_record(ending, misc, inter, rounds)
    team_won = ending == "survived"
    for agent in ("encoder_0", "decoder_0"):
        assert win(record, agent) == float(team_won)
        assert miscommunication(record, agent) == -misc / 2
        assert interception(record, agent) == -inter / 2
        assert rounds_survived(record, agent) == rounds / 8
    assert win(record, "interceptor_0") == float(not team_won)
    assert interception(record, "interceptor_0") == inter / 2
    assert rounds_survived(record, "interceptor_0") == 1 - rounds / 8
    assert outcome_indicators(record, "encoder_0")[f"outcome/{ending}"] == 1.0


def test_bad_agent_and_bad_ending() -> None:
    with pytest.raises(RecordError, match="not a Decrypto agent"):
        win(decrypto_record(), "attacker_0")
    with pytest.raises(RecordError, match="ending 'draw'"):
        win(decrypto_record(ending="draw"), "encoder_0")


def test_tom_probe_accuracy() -> None:
    tom = {
        "perspective_taking": {"rounds": 4, "predicted_interceptor": 0.75},
        "false_belief": {"strong_fb": None},
    }
    record = decrypto_record(tom=tom)
    assert tom_probe_accuracy(record, "encoder_0") == 0.75
    assert tom_probe_accuracy(record, "interceptor_0") == 0.0  # asked, but no round counted
    with pytest.raises(RecordError, match="lack the 'tom' summary"):
        tom_probe_accuracy(decrypto_record(), "encoder_0")
    with pytest.raises(RecordError, match="lacks 'false_belief.weak_rc'"):
        tom_probe_accuracy(decrypto_record(tom={}), "interceptor_0", "false_belief.weak_rc")
