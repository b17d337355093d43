"""The typed episode record: built once, one outcome key for every env, old files still load."""

from __future__ import annotations

import pytest
from tomgym.rewards.episode import (
    RecordError,
    eval_block,
    final_infos,
    first_infos,
    load_record,
    new_record,
    outcome,
    policy_name,
)

from tests.rewards.records import tomsb_record


def _record(infos: dict, eval_block_: dict | None = None):
    return new_record(
        game_id="g",
        env_id="tomgym/x-v0",
        env_config={},
        seed=1,
        options={},
        policies={"a_0": {"name": "p"}},
        turns=[],
        infos=infos,
        rewards={"a_0": 1},
        eval_block=eval_block_,
    )


def test_outcome_is_one_key_for_tomsb_outcome_and_decrypto_ending() -> None:
    assert _record({"a_0": {"outcome": "fooled"}})["outcome"] == "fooled"
    assert _record({"a_0": {"ending": "interception"}})["outcome"] == "interception"
    assert _record({"a_0": {}})["outcome"] is None


def test_eval_block_is_written_with_the_record_and_absent_when_empty() -> None:
    assert "eval" not in _record({"a_0": {}})
    record = _record({"a_0": {}}, {"seed": 2})
    assert eval_block(record) == {"seed": 2} and policy_name(record, "a_0") == "p"
    assert record["rewards"] == {"a_0": 1.0} and isinstance(record["rewards"]["a_0"], float)


def test_records_of_earlier_versions_load() -> None:
    old = tomsb_record("detected")
    old.pop("outcome", None)
    old.pop("eval", None)
    loaded = load_record(old)
    assert loaded["outcome"] == "detected" == outcome(old)
    assert first_infos(loaded) is final_infos(loaded, "attacker_0")  # the first agent's
    assert eval_block(loaded) == {}


def test_not_a_record() -> None:
    with pytest.raises(RecordError, match="games.jsonl:3: not an episode record"):
        load_record({"turns": []}, "games.jsonl:3")
    with pytest.raises(RecordError, match="no final infos for agent 'b_0'"):
        final_infos(_record({"a_0": {}}), "b_0")
