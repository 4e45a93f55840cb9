# Two commands do all set-up on a fresh machine: `make demo` (the embedded default sweep, launchers/sweeps/demo.yaml, and its
# report) and `make test`. Both run scripts/setup.sh first, which is idempotent and quick when warm, and
# installs every package at the version constraints.txt pins (`make lock` refreshes it).
SHELL := /bin/bash
VENV ?= .venv
export HVDBENCH_VENV := $(abspath $(VENV))
BIN := $(HVDBENCH_VENV)/bin
DEMO_OUT ?= results/demo

.PHONY: setup demo test quick lint lock clean mpich impi

setup:
	bash scripts/setup.sh

demo: setup
	$(BIN)/hvdbench sweep --output $(DEMO_OUT)

# every test; the MPICH and Intel MPI environments built beside them at the lowest priority (scripts/test.sh)
test: setup
	bash scripts/test.sh $(PYTEST_ARGS)

# the style and type gate (ruff, mypy; scripts/lint.sh), which CI runs before the tests
lint: setup
	bash scripts/lint.sh

# the quick loop: every test that starts no process, two at a time as make test runs them (HVDBENCH_TEST_WORKERS,
# scripts/test.sh; 1: one at a time in pytest's own process)
WORKERS := $(or $(HVDBENCH_TEST_WORKERS),2)
quick: setup
	$(BIN)/python -m pytest -q -m "not slow" $(if $(filter-out 1,$(WORKERS)),-n $(WORKERS)) $(PYTEST_ARGS)

# environments on MPICH and Intel MPI beside the first (.venv-mpich, .venv-impi; scripts/mpi-env.sh)
mpich: setup
	bash scripts/mpi-env.sh mpich
impi: setup
	bash scripts/mpi-env.sh impi

# constraints.txt made again from what pip resolves today (scripts/lock.sh)
lock:
	bash scripts/lock.sh

clean:
	rm -rf results hvdbench-logs .pytest_cache
