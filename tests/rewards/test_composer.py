from __future__ import annotations

import math

import pytest
import tomgym.rewards.composer as composer_module
from tomgym.rewards import RewardComposer

from tests.rewards.records import decrypto_record, defender_turn, tomsb_record


def test_format_gated_sum() -> None:
    composer = RewardComposer({"fooling": 1.0, "tom_prior": 1.0}, gate="format")
    total, parts = composer(tomsb_record(outcome="fooled"))
    assert total == 2.0
    assert parts["fooling"] == 1.0 and parts["tom_prior"] == 1.0 and parts["format"] == 1.0
    assert parts["outcome/fooled"] == 1.0

    bad = tomsb_record(outcome="fooled", format_failures=1)
    bad["turns"].append(defender_turn(None, valid=False))
    total, parts = composer(bad)
    assert total == 0.0 and parts["fooling"] == 1.0 and parts["format"] == 0.0


def test_additive_format_without_gate() -> None:
    composer = RewardComposer({"fooling": 1.0, "format": 0.5}, gate=None)
    total, _ = composer(tomsb_record(outcome="detected"))
    assert total == 0.5


def test_unknown_component_and_missing_tokenizer() -> None:
    with pytest.raises(ValueError, match="unknown reward component 'foolin'"):
        RewardComposer({"foolin": 1.0})
    with pytest.raises(ValueError, match="needs a tokenizer"):
        RewardComposer({"length": 1.0})
    with pytest.raises(ValueError, match="must be finite"):
        RewardComposer({"fooling": math.nan})


def test_nan_component_is_rejected_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(composer_module.COMPONENTS, "fooling", lambda r, c: math.inf)
    with pytest.raises(ValueError, match="component 'fooling' is inf"):
        RewardComposer({"fooling": 1.0})(tomsb_record())


def test_decrypto_role_composer() -> None:
    composer = RewardComposer(
        {"decrypto_win": 1.0, "decrypto_interception": 0.5}, gate=None, agent="encoder_0"
    )
    total, parts = composer(decrypto_record("interception", 0, 2, 4))
    assert total == -0.5 and parts["outcome/interception"] == 1.0
    # Side questions never fail the format gate.
    gated = RewardComposer({"decrypto_win": 1.0}, gate="format", agent="encoder_0")
    assert gated(decrypto_record())[0] == 1.0
