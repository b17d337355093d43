"""Fingerprints of the weights a policy spec loads, so a stored run can tell a retrained model apart.

A spec names its model by path (`hf:runs/x/final`, `adapter=runs/x/grpo/final`), and a path
outlives its contents: a model trained again into the same folder keeps the spec's text. Run
folders therefore store, beside the specs, `weights_fingerprint(spec)` of every spec that loads
local files, and a resume or a reader reusing a finished evaluation compares it
(`tomgym.training.run_folder`).

Contract:
- `weights_fingerprint(spec)` is `"sha256:<16 hex>"` over the spec's local weight and config
  files (names, sizes and contents: `WEIGHT_SUFFIXES` and `CONFIG_FILES`, in the model folder and
  the adapter folder), or None when the spec loads no local file (scripted and embedding players,
  servers, hub ids not on disk, and text that is no spec: a test's own policy factory may name
  its players anything). `default` is the bundled GGUF the default checkpoint is converted from.
- The same files give the same fingerprint wherever they lie (copies, moved folders, relative or
  absolute paths); any changed byte gives another.
- Hashing reads every file once per process: results are kept per (path, size, mtime).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from tomgym.agents.specs import DEFAULT_MODEL, LLM_KINDS, PolicySpec, SpecError, parse_spec

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
"""Files that hold parameters."""

CONFIG_FILES = ("config.json", "adapter_config.json", "generation_config.json")
"""Files whose settings change what the parameters compute (LoRA alpha, rope scaling, ...)."""

_PREFIX = "sha256:"
_DIGITS = 16
_file_digests: dict[tuple[str, int, int], str] = {}


def weights_fingerprint(spec: str | PolicySpec) -> str | None:
    """The fingerprint of the local files `spec` loads, or None when it loads none (see module)."""
    try:
        parsed = parse_spec(spec)
    except SpecError:
        return None
    files = sorted(_weight_files(parsed), key=lambda item: item[0])
    if not files:
        return None
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(f"{name}\0{path.stat().st_size}\0{_file_digest(path)}\n".encode())
    return _PREFIX + digest.hexdigest()[:_DIGITS]


def weights_fingerprints(specs: Iterable[tuple[str, str | PolicySpec]]) -> dict[str, str]:
    """`{slot: fingerprint}` of the (slot, spec) pairs whose spec loads local files."""
    found = {slot: weights_fingerprint(spec) for slot, spec in specs}
    return {slot: value for slot, value in found.items() if value is not None}


def _weight_files(spec: PolicySpec) -> list[tuple[str, Path]]:
    """(name as hashed, path) of the files `spec` loads: the model's, then the adapter's."""
    if spec.kind not in LLM_KINDS or spec.kind == "openai":
        return []
    files: list[tuple[str, Path]] = []
    if spec.target == DEFAULT_MODEL:
        from tomgym.agents.default_model import DefaultModelError, gguf_path

        try:
            source = gguf_path()
        except DefaultModelError:
            source = None
        if source is not None:
            files.append((f"model/{source.name}", source))
    else:
        files.extend(_folder_files("model", Path(spec.target).expanduser()))
    adapter = spec.option_dict().get("adapter")
    if adapter:
        files.extend(_folder_files("adapter", Path(adapter).expanduser()))
    return files


def _folder_files(label: str, path: Path) -> list[tuple[str, Path]]:
    """The weight and config files of a model folder (or the one file `path` names); top level
    only, as `from_pretrained` reads it (checkpoint sub-folders are other models)."""
    if path.is_file():
        return [(f"{label}/{path.name}", path)]
    if not path.is_dir():
        return []
    return [
        (f"{label}/{item.name}", item)
        for item in path.iterdir()
        if item.is_file() and (item.suffix in WEIGHT_SUFFIXES or item.name in CONFIG_FILES)
    ]


def _file_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _file_digests:
        with path.open("rb") as handle:
            _file_digests[key] = hashlib.file_digest(handle, "sha256").hexdigest()
    return _file_digests[key]
