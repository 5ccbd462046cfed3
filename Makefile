# The two commands a newcomer needs: `make run` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint typecheck check browser clean-data

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

test: $(STAMP) browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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
