#!/bin/sh
# Run one stage script with the project's Python, whatever PATH holds: every dvc.yaml command is
# `sh stages/run.sh stages/<stage>.py ARGS`, so `.venv/bin/dvc repro` works without activating the venv.
# The interpreter is the first of $RLVR_PYTHON (when set, the only one tried), .venv/bin/python (the venv
# `make setup` builds), python3, python (on PATH: an activated venv, or PYTHONPATH as on the GPU machines) that can
# import rlvr (checked with -P: the working directory does not count). None can: one line saying what to do, exit 1.
stage="${1:?usage: sh stages/run.sh stages/<stage>.py [ARGS...]}"
can_import() { "$1" -P -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('rlvr') is None)" >/dev/null 2>&1; }
if [ -n "${RLVR_PYTHON:-}" ]; then
  if can_import "$RLVR_PYTHON"; then exec "$RLVR_PYTHON" "$@"; fi
  echo "$stage: RLVR_PYTHON=$RLVR_PYTHON cannot import rlvr: point it at the interpreter of the environment holding rlvr (e.g. .venv/bin/python), or unset it" >&2
  exit 1
fi
for py in .venv/bin/python python3 python; do
  if can_import "$py"; then exec "$py" "$@"; fi
done
echo "$stage: no Python here can import rlvr (tried .venv/bin/python, python3 and python on PATH): run 'make setup' (builds .venv), activate the environment holding rlvr, or set RLVR_PYTHON to its interpreter" >&2
exit 1
