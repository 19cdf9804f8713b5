# Two entry points (README): `make repro` sets up and runs the pipeline; `make test` sets up and runs the tests.
# Set-up is idempotent: the venv is rebuilt only when pyproject.toml or the lock file change.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rlvr-installed
PYTEST_ARGS ?=
CHROMIUM ?= chromium

.PHONY: setup system how-to-run repro test lint docs bench clean

setup: system $(STAMP)
	@$(MAKE) -s --no-print-directory how-to-run

# rlvr (and dvc, pytest) live in the venv, not on PATH: say how to run them
how-to-run:
	@echo "rlvr is installed in $(VENV): run $(BIN)/rlvr (e.g. $(BIN)/rlvr check), or 'source $(BIN)/activate' to put rlvr, dvc and pytest on PATH"

# System packages: bubblewrap for the judge's sandbox, a C compiler for the sandbox's compiled loop and wipe
# (rlvr/judge/sandbox/forkloop.py builds it on first use; without one the judge falls back to its Python loop), the
# interpreter the sandbox runs (Debian's python3, with the two libraries benchmark solutions import: sortedcontainers
# for LeetCode, numpy for EvalPlus Hub tests), and — optional — headless chromium, in which one test checks the HTML
# report renders (installed when running as root with apt-get; otherwise that test is skipped, saying why).
system:
	@missing=""; optional=""; command -v bwrap >/dev/null 2>&1 || missing="bubblewrap"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v $(CHROMIUM) >/dev/null 2>&1 || optional="chromium"; \
	/usr/bin/python3 -c "import sortedcontainers, numpy" >/dev/null 2>&1 || missing="$$missing python3 python3-sortedcontainers python3-numpy"; \
	if [ -n "$$missing$$optional" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing system packages:$$missing $$optional"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing $$optional >/dev/null; \
	elif [ -n "$$missing" ]; then \
	  echo "rlvr needs the system packages:$$missing — install them (e.g. sudo apt-get install$$missing) and re-run"; \
	  exit 1; \
	elif [ -n "$$optional" ]; then \
	  echo "optional: chromium is not installed (sudo apt-get install chromium); only the report's browser test needs it and is skipped without it"; \
	fi

$(STAMP): pyproject.toml requirements/lock.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c requirements/lock.txt -e ".[dev]"
	touch $(STAMP)

# starts with `rlvr check` (params, dataset names, model id, judge, GPUs: one line per problem, in seconds) and ends
# with the run's result per phase and dataset (`rlvr summary`); every metric: `dvc metrics show`
repro: setup
	$(BIN)/rlvr check
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	$(BIN)/rlvr summary
	@$(MAKE) -s --no-print-directory how-to-run

test: setup
	$(BIN)/pytest -q --durations=30 $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check rlvr stages tests bench docs_hooks

# the docs site (MkDocs Material, API reference from docstrings) into site/; `make test` builds it too (--strict)
docs: setup
	$(BIN)/mkdocs build --strict

bench: setup
	$(BIN)/python bench/judge/bench_judge.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
