"""Judge tests run on both per-test loops of the sandbox's runner: the compiled one (``forkloop.c``, the default
where a C compiler exists) and the Python one it falls back to; the verdicts must not depend on which ran."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rlvr.judge import Judge


@pytest.fixture(scope="session")
def judge_python_loop():
    """A two-worker judge whose sandboxes run stdio tests through the Python loop (``forkloop=False``)."""
    j = Judge(workers=2, forkloop=False)
    yield j
    j.close()


@pytest.fixture(scope="session", params=["forkloop", "python_loop"])
def judge(request, judge):
    """The session's judge (compiled loop) or :func:`judge_python_loop`, each test once with each."""
    return judge if request.param == "forkloop" else request.getfixturevalue("judge_python_loop")


PROC = Path(__file__).resolve().parents[2] / "rlvr" / "judge" / "sandbox" / "inside" / "proc.py"


@pytest.fixture(scope="module")
def proc():
    """A fresh instance of the sandbox's ``proc`` module (standard library only), imported on the host, per test
    module."""
    spec = importlib.util.spec_from_file_location("rlvr_inside_proc_under_test", PROC)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
