# Two commands: `make run` (main job, offline) and `make test` (every test tier, services included).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run test lint typecheck pytest bench clean

# torch first: `torch==2.13.0` takes the CPU build on disk; a plain requirement would pull CUDA.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip wheel
	$(BIN)/pip install torch==2.13.0

# One pip command per environment so the resolver sees every pin at once.
$(VENV)/.run-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[offline]'
	touch $@

# CMAKE_ARGS: llama-cpp-python compiles llama.cpp; a native build (the default) dies at the first
# decode on CPUs with AMX and a cached native wheel dies on CPUs without its instructions, so the
# build is portable (AVX2/FMA/F16C) on every machine. --no-binary keeps a cached wheel out.
$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install -e '.[offline,dev,local-llm,judges]'
	touch $@ $(VENV)/.run-deps

run: $(VENV)/.run-deps
	$(BIN)/advrag run --data data

lint: $(VENV)/.test-deps
	$(BIN)/ruff check llama_index_ext_advrag tests benchmarks
	$(BIN)/ruff format --check llama_index_ext_advrag tests benchmarks

typecheck: $(VENV)/.test-deps
	$(BIN)/mypy llama_index_ext_advrag

# The test session starts a Milvus 2.3 standalone server and the llama.cpp server itself
# (tests/conftest.py), waits for their ports and stops them at the end. With
# ADVRAG_REQUIRE_SERVICES=1 a service that cannot start fails the run instead of skipping.
pytest: $(VENV)/.test-deps
	ADVRAG_REQUIRE_SERVICES=1 $(BIN)/python -m pytest -ra

test: lint typecheck pytest

bench: $(VENV)/.test-deps
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .advrag build dist
