# The two commands a newcomer needs: `make run` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint typecheck check browser clean-data soak bench bench-full

$(STAMP): pyproject.toml clients/python/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet ".[dev]"
	$(BIN)/python -m pip install --quiet -e ./clients/python
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python manage.py run_stack

# Browser tests drive Debian's Chromium; install it when we can (root with apt).
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Installing Debian's chromium for the browser tests..."; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "NOTICE: could not install chromium; browser tests will be skipped."; \
	  else \
	    echo "NOTICE: chromium is not installed (apt-get install -y chromium); browser tests will be skipped."; \
	  fi; \
	fi

# Two processes by default, each with its own embedded PostgreSQL, Celery worker and
# browser; a test file stays in one process (docs/testing.md). TEST_WORKERS=0 runs
# the suite in one process.
TEST_WORKERS ?= 2
test: $(STAMP) browser
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# 50 agents for 5 minutes against a private stack, then each fault; figures in
# bench/out/soak.json (docs/operations.md, "Load and faults"). Needs redis-server.
# SOAK_AGENTS, SOAK_SECONDS, SOAK_FAULT_AGENTS, SOAK_FAULTS=0 and SOAK_OUT change it.
soak: $(STAMP)
	$(BIN)/python -m bench.soak

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy .

check: lint typecheck
	@# The development settings: production secrets are checked where they are set (README).
	DEBUG=1 $(BIN)/python manage.py check

clean-data:
	rm -rf .data

# Speed at scale (bench/scale.py, bench/README.md): its own embedded PostgreSQL in a temporary
# folder, never .data. About 5 minutes at 100 k facts; the full run takes much longer.
bench: $(STAMP)
	$(BIN)/python bench/scale.py $(BENCH_ARGS)

bench-full: $(STAMP)
	$(BIN)/python bench/scale.py --full $(BENCH_ARGS)
