"""Running the installed `tomgym` command the way a user does: a fresh interpreter, from the repo."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_tomgym(
    *args: str, extra_env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`python -m tomgym.scripts.cli ARGS` with captured text output; `extra_env` is set over
    this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "tomgym.scripts.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(extra_env or {})},
    )
