# Two entry points (README): `make repro` sets up and runs the pipeline; `make test` sets up and runs the tests.
# Set-up is idempotent: the venv is rebuilt only when pyproject.toml or the lock file change.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.rlvr-installed
PYTEST_ARGS ?=

.PHONY: setup system repro test lint docs bench clean

setup: system $(STAMP)

# System packages: bubblewrap for the judge's sandbox, a C compiler for the sandbox's compiled loop and wipe
# (rlvr/judge/sandbox/forkloop.py builds it on first use; without one the judge falls back to its Python loop), the
# interpreter the sandbox runs (Debian's python3, with the two libraries benchmark solutions import: sortedcontainers
# for LeetCode, numpy for EvalPlus Hub tests), and headless chromium, in which a test checks the HTML report renders.
system:
	@missing=""; command -v bwrap >/dev/null 2>&1 || missing="bubblewrap"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	/usr/bin/python3 -c "import sortedcontainers, numpy" >/dev/null 2>&1 || missing="$$missing python3 python3-sortedcontainers python3-numpy"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing system packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "rlvr needs the system packages:$$missing — install them (e.g. sudo apt-get install$$missing) and re-run"; \
	    exit 1; \
	  fi; \
	fi

$(STAMP): pyproject.toml requirements/lock.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c requirements/lock.txt -e ".[dev]"
	touch $(STAMP)

# ends with the run's result per phase and dataset (`rlvr summary`); every metric: `dvc metrics show`
repro: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	$(BIN)/rlvr summary

test: setup
	$(BIN)/pytest -q $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check rlvr stages tests bench docs_hooks

# the docs site (MkDocs Material, API reference from docstrings) into site/; `make test` builds it too (--strict)
docs: setup
	$(BIN)/mkdocs build --strict

bench: setup
	$(BIN)/python bench/judge/bench_judge.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
