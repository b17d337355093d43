"""Benchmarks and research scripts (not installed): run from the repository root as
`python -m bench.NAME`; each prints one JSON object on the last line of stdout."""
