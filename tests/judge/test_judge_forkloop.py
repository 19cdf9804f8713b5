"""The compiled runner code (``rlvr/judge/sandbox/forkloop.py`` builds ``inside/forkloop.c`` and ``inside/wipe.c``
into one library): built once from the current sources, never used when stale, incomplete or missing, reported by the
judge, and the same records as the Python loop (the compiled wipe's behaviour: test_judge_pristine.py, both ways)."""

from __future__ import annotations

import importlib.util
import logging
import shutil
import subprocess
import sys

import pytest

from rlvr.data.schema import Problem
from rlvr.judge import Judge
from rlvr.judge.sandbox import forkloop


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """forkloop with its sources and library in ``tmp_path`` and no memory of earlier builds."""
    for src in forkloop.SOURCES:
        shutil.copy(src, tmp_path / src.name)
    monkeypatch.setattr(forkloop, "SOURCES", tuple(tmp_path / src.name for src in forkloop.SOURCES))
    monkeypatch.setattr(forkloop, "LIBRARY", tmp_path / "_forkloop.so")
    monkeypatch.setattr(forkloop, "_built", {})
    return forkloop


needs_cc = pytest.mark.skipif(forkloop._compiler() is None, reason="needs a C compiler")


@needs_cc
def test_built_once_from_the_current_source_and_rebuilt_when_it_changes(fresh):
    assert fresh.ensure_built()
    lib = fresh.LIBRARY
    sha = fresh._source_sha()
    assert sha.encode() in lib.read_bytes() and lib.stat().st_mode & 0o777 == 0o644
    before = lib.stat().st_mtime_ns
    fresh._built.clear()  # as a new process would: the library on disk is current, nothing is compiled
    assert fresh.ensure_built() and lib.stat().st_mtime_ns == before
    for src in fresh.SOURCES:  # a change to either source rebuilds
        src.write_text(src.read_text() + "\n/* changed */\n")
        assert fresh.ensure_built()
        assert fresh._source_sha() != sha and fresh._source_sha().encode() in lib.read_bytes()
        sha = fresh._source_sha()
    assert not [p for p in lib.parent.iterdir() if p.name.startswith("._forkloop-")]  # no temp file left


def test_without_a_compiler_the_python_loop_runs_and_says_why(fresh, monkeypatch, caplog):
    monkeypatch.setattr(fresh, "_compiler", lambda: None)
    with caplog.at_level(logging.WARNING, logger=fresh.__name__):
        assert fresh.ensure_built() is False
    assert "no C compiler" in caplog.text and not fresh.LIBRARY.exists()


@needs_cc
def test_a_failed_build_leaves_no_library_and_says_why(fresh, caplog):
    fresh.SOURCES[-1].write_text("this is not C\n")
    with caplog.at_level(logging.WARNING, logger=fresh.__name__):
        assert fresh.ensure_built() is False
    assert "building _forkloop.so failed" in caplog.text and not fresh.LIBRARY.exists()
    assert not [p for p in fresh.LIBRARY.parent.iterdir() if p.name.startswith("._forkloop-")]


@pytest.fixture
def binding(proc, monkeypatch):
    """The sandbox's ``forkloop`` binding (inside/forkloop.py), imported on the host over the ``proc`` fixture."""
    monkeypatch.setitem(sys.modules, "proc", proc)
    spec = importlib.util.spec_from_file_location("rlvr_inside_forkloop_under_test",
                                                  forkloop.LIBRARY.with_name("forkloop.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@needs_cc
def test_a_library_of_another_layout_or_incomplete_is_never_called(binding, tmp_path):
    """The sandbox compares the library's struct sizes with its ctypes layout, and needs all its functions."""
    assert forkloop.ensure_built()
    other = tmp_path / "other.c"
    other.write_text("long long fl_sizes(void) { return 1; }\nint fl_run(void *b) { return 1; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "other.so"), str(other)], check=True)
    assert binding.load(str(tmp_path / "other.so")) is False and binding.RUN is None
    assert binding.load(str(tmp_path / "missing.so")) is False and binding.RUN is None
    # the loop alone (no wipe.c): the right layout, but not the whole library
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / "loop.so"), str(forkloop.SOURCES[0])], check=True)
    assert binding.load(str(tmp_path / "loop.so")) is False and binding.RUN is None and binding.WIPE is None
    assert binding.load(str(forkloop.LIBRARY)) is True and binding.RUN is not None and binding.WIPE is not None


PROGRAMS = {
    "echo": "print(input())",
    "wrong": "print('no')",
    "raises": "x = input()\nraise ValueError('bad ' + x)",
    "exit3": "import sys\nprint(input())\nsys.exit(3)",
    "no_record": "import os\nprint(input(), flush=True)\nos._exit(0)",
    "slow_second": "import time\nx = input()\nif x == 'b':\n    time.sleep(30)\nprint(x)",
    "litter": "import os\nprint(input() if not os.listdir('.') else 'dirty')\nos.mkdir('d')\nopen('d/f', 'w')",
}


@needs_cc
def test_both_loops_give_the_same_records(judge_python_loop):
    """Every status the runner can give a stdio test, on the compiled loop and on the Python loop."""
    problem = Problem(id="t/loops", source="t", split="test", statement="", time_limit_s=1.0,
                      tests=[{"kind": "stdio", "stdin": s, "stdout": s} for s in ("a", "b", "c")])
    with Judge(workers=1) as compiled:
        got = {}
        for name, code in PROGRAMS.items():
            a, b = compiled.judge(problem, code), judge_python_loop.judge(problem, code)
            got[name] = [t.verdict for t in a.tests]
            assert [t.verdict for t in a.tests] == [t.verdict for t in b.tests], name
            assert [(t.stdout, t.exit_code) for t in a.tests] == [(t.stdout, t.exit_code) for t in b.tests], name
        assert compiled.isolation_info()["forkloop"] is True
    assert judge_python_loop.isolation_info()["forkloop"] is False
    assert got["echo"] == ["accepted"] * 3 and got["wrong"] == ["wrong_answer"] * 3
    assert got["raises"] == ["runtime_error"] * 3 and got["exit3"] == ["runtime_error"] * 3
    assert got["no_record"] == ["runtime_error"] * 3
    assert got["slow_second"] == ["accepted", "timeout", "accepted"]
    assert got["litter"] == ["accepted"] * 3  # every test starts in an empty work dir
