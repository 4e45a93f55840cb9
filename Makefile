# Two commands do all set-up on a fresh machine: `make demo` (the embedded default sweep, launchers/sweeps/demo.yaml, and its
# report) and `make test`. Both run scripts/setup.sh first, which is idempotent and quick when warm.
SHELL := /bin/bash
VENV ?= .venv
export HVDBENCH_VENV := $(abspath $(VENV))
BIN := $(HVDBENCH_VENV)/bin
DEMO_OUT ?= results/demo

.PHONY: setup demo test clean

setup:
	bash scripts/setup.sh

demo: setup
	$(BIN)/hvdbench sweep --output $(DEMO_OUT)

test: setup
	bash scripts/test-tools.sh
	$(BIN)/python -m pytest -ra $(PYTEST_ARGS)

clean:
	rm -rf results hvdbench-logs .pytest_cache
