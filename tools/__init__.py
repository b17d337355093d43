"""Maintainer tools (not installed): rebuild shipped data, convert the default model.
Run from the repository root as `python -m tools.NAME`."""
