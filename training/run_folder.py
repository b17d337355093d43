"""Run folders: `config.yaml`, `games.jsonl` (one episode record a line) and `summary.json`.

Guarantees (each with the test that shows it, see README "Guarantees"):
- One writer at a time: `start` takes an OS advisory lock (`fcntl.flock` on `.lock`, which also
  holds the holder's PID) and keeps it until `close()`, the folder object is collected or the
  process ends. A second writer (a fresh run or a `--resume`) is refused with one line naming the
  holder's PID. The kernel drops the lock when its process dies, so a killed run never leaves a
  stale lock behind. On platforms without `fcntl` no lock is taken.
- Resume continues exactly the run that was started: the resumed run's complete configuration
  and its kind (`config["kind"]`, or `config["command"]` for play/human: play, eval_tomsb,
  eval_decrypto, replay_decrypto ...) must equal the stored `config.yaml`, except for keys in
  `RESUME_FREE_KEYS` (they change no record); any difference is refused with a one-line diff
  (`--resume refused: env_config.max_attacker_turns 12 -> 3`) and `config.yaml` is never
  rewritten on resume. The same holds for the weights the specs load (`WEIGHTS_KEY`: the
  `tomgym.agents.weights` fingerprints the evaluators store), so a model retrained at the same
  path never resumes, or passes for, the old one's run; folders written before fingerprints
  were stored, and specs whose files are gone, cannot be checked and are not refused for it.
- Crash safety: records are appended one line at a time with flush + fsync, so a run killed at any
  moment (even SIGKILL mid-write) leaves at most one torn last line; `completed_ids` cuts it off
  before a resumed run appends, so no game is lost, duplicated or corrupted.
- One record per key: `records()` keeps the first record of each key (`record_key`: the game
  id and its players) and lists the repeated game ids in `duplicates` (folders written by
  versions without the lock); `duplicate_keys()` names them without building the list.
- Nothing secret is stored: a config with an inline API key is refused before anything is
  written, and config, records and summary pass through `tomgym.redaction.redact_data`.

Records are read back with `tomgym.rewards.episode.load_record`, so files written by earlier
versions still load.
"""

from __future__ import annotations

import json
import os
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from tomgym.rewards.episode import EpisodeRecord, RecordError, dedupe, load_record

from tomgym.json_text import json_lines
from tomgym.redaction import find_inline_secrets, redact_data

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

CONFIG_FILE = "config.yaml"
GAMES_FILE = "games.jsonl"
SUMMARY_FILE = "summary.json"
LOCK_FILE = ".lock"
RESUME_FREE_KEYS = frozenset({"concurrency"})
"""Top-level config keys a resume may change: how many games run at once changes no record."""
WEIGHTS_KEY = "weights"
"""Top-level config key of `{slot: weights fingerprint}`; per slot, compared only where both
configs hold one (an older folder, or a model deleted since, has nothing to compare)."""


class RunFolderError(RuntimeError):
    """A run folder that cannot be used as asked; the message says why."""


class RunFolderLocked(RunFolderError):
    """Another live process holds the folder's lock; `pid` is its process id (None if unknown)."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


def run_kind(config: Mapping[str, Any]) -> str | None:
    """What wrote a run folder: `config["kind"]` (eval jobs), else `config["command"]` (play,
    human, train); None for a config that names neither."""
    kind = config.get("kind") or config.get("command")
    return None if kind is None else str(kind)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted leaf paths -> values; an empty mapping has no leaves (`{}` equals unset)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def config_diff(
    old: Mapping[str, Any], new: Mapping[str, Any], free: frozenset[str] = RESUME_FREE_KEYS
) -> list[str]:
    """`key old -> new` for every leaf setting that differs (`unset` for a missing one), in the
    new config's order; top-level keys in `free` are not compared, and a `WEIGHTS_KEY` slot only
    where both configs fingerprint it."""
    flat_old = _flatten({k: v for k, v in old.items() if k not in free})
    flat_new = _flatten({k: v for k, v in new.items() if k not in free})
    weights = f"{WEIGHTS_KEY}."
    keys = list(flat_new) + [k for k in flat_old if k not in flat_new]
    keys = [k for k in keys if not k.startswith(weights) or (k in flat_old and k in flat_new)]
    unset = object()
    diffs = []
    for key in keys:
        before, after = flat_old.get(key, unset), flat_new.get(key, unset)
        if before != after:
            shown = [
                "unset" if v is unset else json.dumps(v, ensure_ascii=False, default=str)
                for v in (before, after)
            ]
            diffs.append(f"{key} {shown[0]} -> {shown[1]}")
    return diffs


def _stored_form(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config as config.yaml will hold it (redacted, YAML-typed), for exact comparisons."""
    return yaml.safe_load(yaml.safe_dump(redact_data(dict(config)), sort_keys=False)) or {}


class RunFolder:
    """One run's folder. Open it for writing with `start` (takes the lock), then `append`
    records; `close()` (or leaving a `with` block) releases the lock. Readers (`records`,
    `config`, reports) take no lock: they may read while a run writes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.duplicates: list[str] = []
        self._lock_fd: int | None = None
        self._release: weakref.finalize | None = None

    @property
    def games_path(self) -> Path:
        return self.path / GAMES_FILE

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def lock_path(self) -> Path:
        return self.path / LOCK_FILE

    # -- writing -------------------------------------------------------------------------------

    def start(self, config: Mapping[str, Any], *, resume: bool) -> None:
        """Take the folder for this run: lock it, then write its config (a new run) or check that
        `config` is the stored one (`resume`). Refusals raise `RunFolderError` (one line) and leave
        the folder as it was, unlocked."""
        inline = find_inline_secrets(config)
        if inline:
            raise RunFolderError(
                f"inline API key in {', '.join(inline)}: keys are never written to a run folder; "
                "put the key in an environment variable and name it with api_key_env=NAME"
            )
        stored = _stored_form(config)
        if resume and not self.games_path.exists() and not self.config_path.exists():
            raise RunFolderError(f"cannot resume: {self.path} holds no run (no {GAMES_FILE})")
        self.path.mkdir(parents=True, exist_ok=True)
        self.acquire()
        try:
            if resume:
                self.check_resume(stored)
                return
            if self.games_path.exists() and self.games_path.stat().st_size > 0:
                raise RunFolderError(
                    f"{self.path} already holds games; pass --resume to continue it or choose a new --out"
                )
            tmp = self.config_path.with_suffix(".yaml.tmp")
            tmp.write_text(yaml.safe_dump(stored, sort_keys=False), encoding="utf-8")
            os.replace(tmp, self.config_path)
            self.games_path.touch()
        except BaseException:
            self.close()
            raise

    def check_resume(self, config: Mapping[str, Any]) -> None:
        """Refuse (one line) to resume with a config or run kind other than the stored one."""
        old = self.config()
        if not old:
            raise RunFolderError(
                f"--resume refused: {self.path} holds no {CONFIG_FILE} to check this run against"
            )
        new = _stored_form(config)
        if run_kind(old) != run_kind(new):
            raise RunFolderError(
                f"--resume refused: {self.path} holds a run of kind {run_kind(old) or 'unknown'}, "
                f"this one is {run_kind(new) or 'unknown'}"
            )
        diffs = config_diff(old, new)
        if diffs:
            raise RunFolderError(
                f"--resume refused: {'; '.join(diffs)} (the run in {self.path} was started with "
                "other settings; choose a new --out to change them)"
            )

    def differences(self, config: Mapping[str, Any]) -> list[str]:
        """`config_diff` of the stored config against `config` as config.yaml would hold it:
        empty when the folder's run was made with these settings (`RESUME_FREE_KEYS` apart)."""
        return config_diff(self.config(), _stored_form(config))

    def acquire(self) -> None:
        """Take the folder's lock (idempotent); raises `RunFolderLocked` naming the holder.

        Any writer of the folder (a trainer writing checkpoints too) takes it through here."""
        if self._lock_fd is not None or fcntl is None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = _read_pid(fd)
            os.close(fd)
            holder = f"process {pid}" if pid is not None else "another process"
            raise RunFolderLocked(
                f"{self.path} is in use by {holder} (it holds {self.lock_path}); wait for that "
                "run to end or choose another --out",
                pid,
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd
        self._release = weakref.finalize(self, os.close, fd)

    @property
    def locked(self) -> bool:
        """Whether this object holds the folder's lock."""
        return self._lock_fd is not None

    def close(self) -> None:
        """Release the lock (the kernel also releases it when the process ends)."""
        if self._release is not None:
            self._release()
        self._lock_fd = None
        self._release = None

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def repair(self) -> int:
        """Cut a torn last line (from a killed run); returns the bytes removed."""
        if not self.games_path.exists():
            return 0
        with self.games_path.open("rb+") as handle:
            data = handle.read()
            if not data or data.endswith(b"\n"):
                return 0
            keep = data.rfind(b"\n") + 1
            handle.truncate(keep)
            return len(data) - keep

    def completed_ids(self) -> set[str]:
        self.repair()
        return {str(record["game_id"]) for record in self.iter_records()}

    def append(self, record: EpisodeRecord) -> None:
        line = json.dumps(redact_data(record), ensure_ascii=False, allow_nan=False) + "\n"
        with self.games_path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def write_summary(self, summary: dict[str, Any]) -> Path:
        path = self.path / SUMMARY_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(
            json.dumps(redact_data(summary), indent=2, ensure_ascii=False, allow_nan=False),
            encoding="utf-8",
        )
        os.replace(tmp, path)
        return path

    # -- reading -------------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        if not self.config_path.exists():
            return {}
        try:
            data = yaml.safe_load(self.config_path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise RunFolderError(f"{self.config_path} is not valid YAML: {exc}") from None
        return data or {}

    def iter_records(self) -> Iterator[EpisodeRecord]:
        """Every record line in file order, repeated keys included (see `records`)."""
        if not self.games_path.exists():
            raise RunFolderError(f"{self.path} holds no {GAMES_FILE}")
        with self.games_path.open(encoding="utf-8", errors="replace") as handle:
            torn = "; a torn last line is repaired by --resume, other lines must be fixed by hand"
            lines = json_lines(handle, self.games_path, RunFolderError, what="record", hint=torn)
            for number, record in lines:
                try:
                    yield load_record(record, f"{self.games_path}:{number}")
                except RecordError as exc:
                    raise RunFolderError(str(exc)) from None

    def records(self) -> list[EpisodeRecord]:
        """The records, first of each key kept; repeated keys are left in `self.duplicates`."""
        records, self.duplicates = dedupe(self.iter_records())
        return records

    def duplicate_keys(self) -> list[str]:
        """Game ids whose key occurs on more than one line of games.jsonl (none for this
        version's runs)."""
        return dedupe(self.iter_records())[1]


def _read_pid(fd: int) -> int | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        return int(text.split()[0]) if text else None
    except (OSError, ValueError):
        return None


def duplicate_warning(folder: RunFolder, keys: list[str], shown: int = 5) -> str:
    """The one-line warning for repeated keys (`report` prints it; summaries count each once)."""
    names = ", ".join(keys[:shown]) + (
        f" and {len(keys) - shown} more" if len(keys) > shown else ""
    )
    return (
        f"warning: {folder.games_path} repeats {len(keys)} game id(s) ({names}); "
        "each is counted once (the first record), as written by a version without run-folder locks"
    )
