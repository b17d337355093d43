"""Convert the bundled SmolLM2-135M-Instruct GGUF to a cached Hugging Face checkpoint.

Usage: `python -m tools.convert_default_model [--cache-dir DIR]`. Prints the checkpoint path.
Safe to run repeatedly: an intact cache is reused, a corrupt one is rebuilt.
"""

from __future__ import annotations

import argparse
import sys

from tomgym.agents.default_model import DefaultModelError, default_model_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="checkpoint directory (default: $TOMGYM_CACHE/models/smollm2-135m-instruct "
        "or ~/.cache/tomgym/models/smollm2-135m-instruct)",
    )
    args = parser.parse_args(argv)
    try:
        path = default_model_path(args.cache_dir)
    except DefaultModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
