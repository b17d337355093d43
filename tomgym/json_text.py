"""JSON and JSON Lines text parsed with one-line errors: which file, which line, what is wrong.

Every reader of our JSON files (episode records in a run folder, scenario files, recorded games to
replay) goes through `json_document` or `json_lines`, so a corrupt file is reported alike
wherever it is read. Standard library only, so every layer may import it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def json_document(text: str, where: str | Path, error: type[Exception]) -> Any:
    """`text` parsed as one JSON value; if it is not JSON, raises
    `error("WHERE: corrupt JSON (reason at line L, column C)")` with no chained traceback."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{where}: corrupt JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None


def json_lines(
    lines: Iterable[str],
    where: str | Path,
    error: type[Exception],
    *,
    what: str = "JSON",
    hint: str = "",
) -> Iterator[tuple[int, Any]]:
    """`(line number from 1, value)` of every non-blank line of `lines` (text lines or an open
    file). A line that is not JSON raises `error("WHERE:N: corrupt WHAT (reason at column C)")`
    with `hint` appended, and no chained traceback."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(
                f"{where}:{number}: corrupt {what} ({exc.msg} at column {exc.colno}){hint}"
            ) from None
        yield number, value
