"""`tomgym.agents.specs`: one grammar for policy specs, its round trip, lists, attacker entries,
role checks and one-line errors."""

from __future__ import annotations

import pytest
from tomgym.agents.specs import (
    PolicySpec,
    SpecError,
    check_role,
    parse_attacker,
    parse_spec,
    split_specs,
)
from tomgym.envs.tomsb.protocol import ATTACKER_VARIANTS

# Every form the README, docs and configs use.
DOCUMENTED = [
    ("random", PolicySpec("random")),
    ("human", PolicySpec("human")),
    ("embedding", PolicySpec("embedding")),
    ("embedding:k=16", PolicySpec("embedding", "", (("k", "16"),))),
    (
        "embedding:k=8,vectors=minilm",
        PolicySpec("embedding", "", (("k", "8"), ("vectors", "minilm"))),
    ),
    ("scripted:base", PolicySpec("scripted", "base")),
    ("scripted:tom_heuristic", PolicySpec("scripted", "tom_heuristic")),
    ("default", PolicySpec("hf", "default")),
    ("default,kv_cache=false", PolicySpec("hf", "default", (("kv_cache", "false"),))),
    (
        "default,max_new_tokens=96,temperature=0.6",
        PolicySpec("hf", "default", (("max_new_tokens", "96"), ("temperature", "0.6"))),
    ),
    (
        "hf:Qwen/Qwen3-8B,adapter=runs/ada/final,temperature=0.7",
        PolicySpec("hf", "Qwen/Qwen3-8B", (("adapter", "runs/ada/final"), ("temperature", "0.7"))),
    ),
    (
        "vllm:org/model,tensor_parallel_size=2",
        PolicySpec("vllm", "org/model", (("tensor_parallel_size", "2"),)),
    ),
    (
        "openai:gpt-4o-mini,base_url=http://127.0.0.1:8080/v1,max_concurrency=16",
        PolicySpec(
            "openai",
            "gpt-4o-mini",
            (("base_url", "http://127.0.0.1:8080/v1"), ("max_concurrency", "16")),
        ),
    ),
    ("frozen,temperature=1.0", PolicySpec("frozen", "", (("temperature", "1.0"),))),
]


@pytest.mark.parametrize(("text", "expected"), DOCUMENTED)
def test_documented_forms_parse_and_round_trip(text: str, expected: PolicySpec) -> None:
    parsed = parse_spec(text)
    assert parsed == expected
    assert parsed.to_string() == text
    assert parse_spec(parsed.to_string()) == parsed


def test_aliases_parse_to_the_canonical_spec() -> None:
    assert parse_spec("embedding:16") == parse_spec("embedding:k=16")
    assert parse_spec("hf:default").to_string() == "default"
    assert parse_spec("  scripted:naive  ").to_string() == "scripted:naive"


def test_typed_options_and_with_options() -> None:
    spec = parse_spec("default,kv_cache=no,temperature=0.25,max_new_tokens=8")
    assert spec.typed_options() == {"kv_cache": False, "temperature": 0.25, "max_new_tokens": 8}
    changed = spec.with_options(temperature=0.0, stop_at_answer=True)
    assert changed.to_string() == (
        "default,kv_cache=no,temperature=0.0,max_new_tokens=8,stop_at_answer=true"
    )
    assert spec.is_llm and not parse_spec("embedding").is_llm


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty policy spec"),
        ("gpt-4", "unknown policy spec 'gpt-4'"),
        ("foo:bar", "unknown policy spec"),
        ("hf:", "needs a model"),
        ("scripted:", "needs a name"),
        ("scripted:oracle", "unknown scripted TOM-SB policy 'oracle'"),
        ("hf:m,novalue", "expected key=value, got 'novalue'"),
        ("hf:m,colour=red", "unknown option(s) colour"),
        ("hf:m,base_url=http://x", "unknown option(s) base_url"),
        ("openai:m,max_new_tokens=many", "max_new_tokens='many' must be an integer"),
        ("default,kv_cache=maybe", "kv_cache='maybe' must be true or false"),
        ("default,temperature=1,temperature=2", "given twice"),
        ("embedding:k=many", "k='many' must be an integer"),
        ("embedding:vectors=bert", "vectors must be one of"),
        ("embedding:k=0", "k must be >= 1"),
        ("embedding,k=4", "embedding options follow a colon"),
        ("random,seed=1", "random takes no"),
        ("scripted:base,seed=1", "scripted policies take no options"),
    ],
)
def test_malformed_specs_fail_with_one_line(text: str, reason: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(text)
    message = str(info.value)
    assert reason in message and "\n" not in message


def test_inline_api_key_is_rejected_without_echoing_it() -> None:
    with pytest.raises(SpecError, match="api_key_env") as info:
        parse_spec("openai:m,api_key=sk-secret123")
    assert "sk-secret123" not in str(info.value)


def test_split_specs_keeps_options_with_their_spec() -> None:
    assert split_specs("hf:m,temperature=0.7,default") == ["hf:m,temperature=0.7", "default"]
    assert split_specs("embedding:k=4,vectors=glove,random") == [
        "embedding:k=4,vectors=glove",
        "random",
    ]
    assert split_specs(",".join(ATTACKER_VARIANTS)) == list(ATTACKER_VARIANTS)
    assert split_specs("base=hf:m,temperature=0,bluffing=default") == [
        "base=hf:m,temperature=0",
        "bluffing=default",
    ]
    with pytest.raises(SpecError, match="before any policy spec"):
        split_specs("temperature=0,default")


def test_attacker_entries() -> None:
    entry = parse_attacker("cross_examiner=hf:m,temperature=0")
    assert (entry.label, entry.variant) == ("cross_examiner=hf:m,temperature=0", "cross_examiner")
    assert entry.spec == parse_spec("hf:m,temperature=0")
    assert parse_attacker("scripted:bluffing").variant == "bluffing"
    assert parse_attacker("openai:m").variant == "base"
    with pytest.raises(SpecError, match="scripted defender"):
        parse_attacker("scripted:naive")
    with pytest.raises(SpecError, match="empty attacker"):
        parse_attacker(" ")


def test_check_role_names_the_mismatch() -> None:
    check_role("scripted:base", "attacker_0", "tomsb")
    check_role("scripted:naive", "defender_0", "tomsb")
    check_role("default", "defender_0", "tomsb")
    check_role("embedding", "interceptor_0", "decrypto")
    with pytest.raises(SpecError, match="scripted:base is a TOM-SB attacker, but defender_0"):
        check_role("scripted:base", "defender_0", "tomsb")
    with pytest.raises(SpecError, match="Decrypto baseline cannot play tomsb"):
        check_role("random", "attacker_0", "tomsb")
    with pytest.raises(SpecError, match="scripted TOM-SB player cannot play decrypto"):
        check_role("scripted:base", "encoder_0", "decrypto")
    with pytest.raises(SpecError, match="only in training"):
        check_role("frozen", "defender_0", "tomsb")
