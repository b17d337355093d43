"""Run folders: `config.yaml`, `games.jsonl` (one episode record a line) and `summary.json`.

Records are appended one line at a time with flush + fsync, so a run killed at any moment (even
SIGKILL mid-write) leaves at most one torn last line; `completed_ids` cuts it off before a resumed
run appends, so no game is lost, duplicated or corrupted. Records are read back with
`tomgym.rewards.episode.load_record`, so files written by earlier versions still load.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from tomgym.rewards.episode import EpisodeRecord, RecordError, load_record

CONFIG_FILE = "config.yaml"
GAMES_FILE = "games.jsonl"
SUMMARY_FILE = "summary.json"


class RunFolderError(RuntimeError):
    """A run folder that cannot be used as asked; the message says why."""


class RunFolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def games_path(self) -> Path:
        return self.path / GAMES_FILE

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    def start(self, config: dict[str, Any], *, resume: bool) -> None:
        """Create the folder and write its config; with `resume`, continue an existing run."""
        if resume:
            if not self.games_path.exists() and not self.config_path.exists():
                raise RunFolderError(f"cannot resume: {self.path} holds no run (no {GAMES_FILE})")
            old = self.config()
            for key in ("env_id", "agents", "seed"):
                if key in old and key in config and old[key] != config[key]:
                    raise RunFolderError(
                        f"cannot resume {self.path}: its {key} is {old[key]!r}, this run asks for {config[key]!r}"
                    )
            return
        if self.games_path.exists() and self.games_path.stat().st_size > 0:
            raise RunFolderError(
                f"{self.path} already holds games; pass --resume to continue it or choose a new --out"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = self.config_path.with_suffix(".yaml.tmp")
        tmp.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        os.replace(tmp, self.config_path)
        self.games_path.touch()

    def config(self) -> dict[str, Any]:
        if not self.config_path.exists():
            return {}
        try:
            data = yaml.safe_load(self.config_path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise RunFolderError(f"{self.config_path} is not valid YAML: {exc}") from None
        return data or {}

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
        return {record["game_id"] for record in self.iter_records()}

    def append(self, record: EpisodeRecord) -> None:
        line = json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"
        with self.games_path.open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def iter_records(self) -> Iterator[EpisodeRecord]:
        if not self.games_path.exists():
            raise RunFolderError(f"{self.path} holds no {GAMES_FILE}")
        with self.games_path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise RunFolderError(
                        f"{self.games_path}:{number}: corrupt record ({exc.msg}); "
                        "a torn last line is repaired by --resume, other lines must be fixed by hand"
                    ) from None
                try:
                    yield load_record(record, f"{self.games_path}:{number}")
                except RecordError as exc:
                    raise RunFolderError(str(exc)) from None

    def records(self) -> list[EpisodeRecord]:
        return list(self.iter_records())

    def write_summary(self, summary: dict[str, Any]) -> Path:
        path = self.path / SUMMARY_FILE
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(
            json.dumps(summary, indent=2, ensure_ascii=False, allow_nan=False), encoding="utf-8"
        )
        os.replace(tmp, path)
        return path
