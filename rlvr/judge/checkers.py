"""Special checkers: deciding a stdio test's verdict with a per-problem program instead of token comparison.

Problems with several correct outputs (any permutation, any shortest path, floats with a custom metric) declare a
:class:`Checker`. Two kinds:

* ``python``: the source defines ``def check(input: str, expected: str, actual: str) -> bool``; ``True`` = accepted,
  anything falsy or an exception = wrong answer (a checker that cannot parse the output rejects it).
* ``testlib``: a complete program in ``language`` (``python``, or a compiled language of :mod:`rlvr.judge.languages`
  whose binary runs as ``./main``: ``cpp``, ``c``, ``go``, ``rust``) called as testlib checkers are
  (MikeMirzayanov/testlib ``README.md``, "Checker"): ``checker <input-file> <output-file> <answer-file>``, i.e.
  ``argv[1]`` = the test's input, ``argv[2]`` = the submission's output, ``argv[3]`` = the jury's expected answer.
  Exit codes (testlib ``TResult``): 0 = OK → accepted, 1 = WA and 2 = PE → wrong answer, 3 = FAIL (the checker
  detected a jury error) and any other code/signal/timeout → :class:`CheckerError`. ``testlib.h`` itself is not
  provided in the sandbox: checkers must be self-contained.

Penalty attribution (who is blamed when a checker fails, issue 28): a checker that crashes, runs out of memory or time
on a submission's output was made to fail by that output unless it also fails on the jury's own answer. So
:func:`rlvr.judge.scoring.score` answers a :class:`CheckerError` by running the checker once on the reference output
(:func:`reference_check`: ``actual`` = ``expected``): when the checker accepts it, the failure is the submission's
(verdict ``wrong_answer``, which every reward mode scores as a failure); only a checker that fails or rejects the
reference output is an infrastructure error (``sandbox_error``) — such a problem is removed by governance before
training or evaluation (:func:`self_check`, the ``checkers`` step of :func:`rlvr.data.governance.run_governance`).
A submission cannot escape its zero by breaking the checker.

Every checker run happens INSIDE a sandbox through ``judge.run_code`` with the three texts as files
(``input.txt``, ``actual.txt``, ``expected.txt``), so dataset checker code is isolated like submissions are, and the
expected output is only ever visible to the checker's run, never to the submission's. A compiled checker is compiled
once per (language, source) inside a sandbox (a Python driver runs the language table's compiler and returns the
binary on stdout, base64) and the binary is cached in this process (LRU); later runs ship it back as a file.

Only a real diagnostic is cached (issue 43, item 2): the compiler ran to its end and exited with a status > 0; the
cache keeps that status and its stderr. A compile run that failed for any other reason (the sandbox failed, the
compiler or its driver timed out, was killed by a signal or the memory limit, could not start, the run's output is not
the driver's record) raises :class:`CheckerCompileError` and leaves nothing behind: the next check compiles again. A
cached diagnostic may still be the sandbox's (a compiler that cannot fork its back end exits 1 with a message of its
own), so :func:`rlvr.judge.scoring.checked` re-verifies one compiled before the submission began (one fresh compile,
``fresh_after``) before its verdict becomes ``sandbox_error``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
import time
from collections import OrderedDict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["CheckOutcome", "Checker", "CheckerCompileError", "CheckerError", "check_output", "reference_check",
           "run_checker", "self_check"]

try:  # the schema addition proposed to the lead (``rlvr.data.schema.Checker``); until then it lives here
    from rlvr.data.schema import Checker  # type: ignore[attr-defined]
except ImportError:

    class Checker(BaseModel):  # type: ignore[no-redef]
        """A problem's special checker (see the module docstring).

        Fields: ``kind`` (``python`` function / ``testlib`` program), ``language`` (of a ``testlib`` checker),
        ``source`` (program text), ``time_limit_s`` (wall seconds per check), ``memory_limit_mb`` (MB)."""

        model_config = ConfigDict(extra="forbid")

        kind: Literal["python", "testlib"]
        language: str = "python"
        source: str
        time_limit_s: float = 10.0
        memory_limit_mb: int = 1024


class CheckerError(RuntimeError):
    """The checker itself failed (does not compile, crashed, ran out of memory or time, exit code 3 = FAIL).

    Whose fault it is is decided by :func:`rlvr.judge.scoring.score` with :func:`reference_check` (see the module
    docstring): the submission's (``wrong_answer``) when the checker accepts the reference output, else the
    infrastructure's (``sandbox_error``)."""


class CheckerCompileError(CheckerError):
    """A compiled checker has no binary: its compiler's cached diagnostic (``compiled_at`` = the
    :func:`time.monotonic` second it was compiled), or a compile run that did not complete (``compiled_at`` =
    ``None``: nothing was cached). The checker never saw the submission's output, so this is never the submission's
    fault (see :func:`rlvr.judge.scoring.checked`)."""

    def __init__(self, message: str, compiled_at: float | None = None) -> None:
        super().__init__(message)
        self.compiled_at = compiled_at


class CheckOutcome(BaseModel):
    """Result of one check: ``accepted`` and a short ``message`` (the checker's stderr/stdout tail on rejection)."""

    accepted: bool
    message: str = ""


_FILES = ("input.txt", "actual.txt", "expected.txt")  # testlib order: input, output (submission's), answer (jury's)
_COMPILE_TIMEOUT_S = 60.0
_COMPILE_MEMORY_MB = 4096
_CACHE_MAX = 256
_cache: OrderedDict[str, tuple[bytes | str, float]] = OrderedDict()  # key → (binary or diagnostic, monotonic s)
_cache_lock = threading.Lock()
_key_locks: dict[str, threading.Lock] = {}
_REF_CACHE_MAX = 4096
_ref_ok: OrderedDict[str, None] = OrderedDict()  # (checker, input, answer) keys whose reference check passed

_PY_FUNCTION_DRIVER = """
import sys
def _read(name):
    with open(name, encoding="utf-8", errors="surrogateescape") as fh:
        return fh.read()
_ns = {{"__name__": "__checker__"}}
try:
    _code = compile({src!r}, "checker.py", "exec")
except (SyntaxError, ValueError) as _exc:
    sys.stderr.write("checker does not compile: %s\\n" % _exc)
    sys.exit(3)
exec(_code, _ns)
_check = _ns.get("check")
if not callable(_check):
    sys.stderr.write("checker source defines no function check(input, expected, actual)\\n")
    sys.exit(3)
try:
    _ok = _check(_read("input.txt"), _read("expected.txt"), _read("actual.txt"))
except Exception as _exc:
    sys.stderr.write("checker rejected the output: %s: %s\\n" % (type(_exc).__name__, _exc))
    sys.exit(1)
sys.exit(0 if _ok is True or (type(_ok) in (int, bool) and bool(_ok)) else 1)
"""

_PY_PROGRAM_DRIVER = """
import sys
sys.argv = ["checker", "input.txt", "actual.txt", "expected.txt"]
try:
    _code = compile({src!r}, "checker.py", "exec")
except (SyntaxError, ValueError) as _exc:
    sys.stderr.write("checker does not compile: %s\\n" % _exc)
    sys.exit(3)
exec(_code, {{"__name__": "__main__"}})
"""

# The driver's record on stdout, its only output: "binary:" + base64 + ":end" (a truncated output is no record), or
# "diagnostic:" + JSON {rc, stderr} when the compiler ran to its end and failed. Anything else (a timeout or a failed
# start raises: exit 1; a compiler killed by a signal: exit 4) is no record, and nothing is cached.
_COMPILE_DRIVER = """
import base64, json, subprocess, sys
r = subprocess.run({argv!r}, capture_output=True, timeout={timeout!r})
if r.returncode < 0:
    sys.stderr.write("compiler killed by signal %d\\n" % -r.returncode)
    sys.exit(4)
if r.returncode > 0:
    err = (r.stderr or r.stdout).decode("utf-8", "replace")[-4000:]
    sys.stdout.write("diagnostic:" + json.dumps({{"rc": r.returncode, "stderr": err}}))
    sys.exit(0)
with open("main", "rb") as fh:
    sys.stdout.write("binary:" + base64.b64encode(fh.read()).decode() + ":end")
"""


def _compile_record(rr: Any) -> bytes | str | None:
    """The compile run's outcome: the binary (bytes), the compiler's diagnostic (str: exit status and stderr), or
    ``None`` when the run is not the driver's completed record (see ``_COMPILE_DRIVER``)."""
    out = rr.stdout or ""
    if rr.verdict != "accepted" or rr.exit_code not in (0, None):
        return None
    if out.startswith("binary:") and out.endswith(":end"):
        try:
            return base64.b64decode(out[len("binary:"):-len(":end")], validate=True)
        except (binascii.Error, ValueError):
            return None
    if out.startswith("diagnostic:"):
        try:
            rec = json.loads(out[len("diagnostic:"):])
        except ValueError:
            return None
        rc = rec.get("rc") if isinstance(rec, dict) else None
        if type(rc) is int and rc > 0 and isinstance(rec.get("stderr"), str):
            return f"checker does not compile (exit status {rc}): {rec['stderr'][-2000:]}"
    return None


_EXEC_DRIVER = """
import os, subprocess, sys
os.chmod("checker_bin", 0o700)
sys.exit(subprocess.run(["./checker_bin", "input.txt", "actual.txt", "expected.txt"]).returncode)
"""


def _compiled(judge: Any, checker: Any, fresh_after: float | None = None) -> bytes:
    """The checker's binary, compiled once per (language, source) inside a sandbox (module docstring: only a real
    diagnostic is cached). ``fresh_after``: a :func:`time.monotonic` second; a cached diagnostic from before it is not
    used but re-verified by one fresh compile. Raises :class:`CheckerError` for an unsupported language,
    :class:`CheckerCompileError` for a diagnostic or a compile run that did not complete."""
    from rlvr.judge.languages import get_language

    lang = get_language(checker.language)
    if lang.compile is None or lang.run != ("./main",) or "-o" not in lang.compile:
        raise CheckerError(f"testlib checkers in {checker.language!r} are not supported (needs a ./main binary)")
    key = hashlib.sha256(f"{lang.name}\0{checker.source}".encode()).hexdigest()
    with _cache_lock:
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:  # one compile per key even when many threads check at once
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
        stale = hit is not None and isinstance(hit[0], str) and fresh_after is not None and hit[1] < fresh_after
        if hit is None or stale:
            code = _COMPILE_DRIVER.format(argv=list(lang.compile), timeout=_COMPILE_TIMEOUT_S)
            rr = judge.run_code(
                code,
                timeout_s=_COMPILE_TIMEOUT_S + 5.0,
                memory_limit_mb=_COMPILE_MEMORY_MB,
                files={lang.source: checker.source.encode()},
            )
            result = _compile_record(rr)
            if result is None:  # not the compiler's own verdict: nothing cached, the next check compiles again
                with _cache_lock:
                    _cache.pop(key, None)
                tail = (rr.stderr or rr.stdout or "")[-500:]
                raise CheckerCompileError(f"checker compilation did not complete ({rr.verdict}, exit code "
                                          f"{rr.exit_code}): {tail}")
            hit = (result, time.monotonic())
            with _cache_lock:
                _cache[key] = hit
                while len(_cache) > _CACHE_MAX:
                    _cache.popitem(last=False)
    if isinstance(hit[0], str):
        raise CheckerCompileError(hit[0], compiled_at=hit[1])
    return hit[0]


def check_output(judge: Any, checker: Any, stdin: str, expected: str, actual: str,
                 fresh_after: float | None = None) -> CheckOutcome:
    """Run ``checker`` on one test inside a sandbox and return its decision.

    Args:
        judge: anything with :meth:`rlvr.judge.Judge.run_code` (embedded, remote or Ray judge).
        checker: a :class:`Checker` (kind, language, source, time_limit_s, memory_limit_mb).
        stdin / expected / actual: the test's input, the jury's expected output, the submission's output (text).
        fresh_after: for a compiled checker, a :func:`time.monotonic` second: a cached compile diagnostic from
            before it is re-verified by one fresh compile (``None``: the cache is trusted).
    Raises :class:`CheckerError` when the checker itself fails (see the module docstring for the exit-code map),
    :class:`CheckerCompileError` when a compiled checker has no binary."""
    files = {
        "input.txt": stdin.encode("utf-8", "surrogateescape"),
        "actual.txt": actual.encode("utf-8", "surrogateescape"),
        "expected.txt": expected.encode("utf-8", "surrogateescape"),
    }
    if checker.kind == "python":
        code = _PY_FUNCTION_DRIVER.format(src=checker.source)
    elif checker.kind == "testlib" and checker.language.lower() in ("python", "python3", "py"):
        code = _PY_PROGRAM_DRIVER.format(src=checker.source)
    elif checker.kind == "testlib":
        files["checker_bin"] = _compiled(judge, checker, fresh_after)
        code = _EXEC_DRIVER
    else:
        raise CheckerError(f"unknown checker kind {checker.kind!r}")
    rr = judge.run_code(
        code, timeout_s=float(checker.time_limit_s), memory_limit_mb=int(checker.memory_limit_mb), files=files
    )
    tail = (rr.stderr or rr.stdout or "").strip()[-500:]
    if rr.verdict == "accepted" and rr.exit_code in (0, None):
        return CheckOutcome(accepted=True)
    if rr.verdict == "runtime_error" and rr.exit_code in (1, 2):
        return CheckOutcome(accepted=False, message=f"checker: {tail}" if tail else "checker rejected the output")
    raise CheckerError(
        f"checker failed: verdict {rr.verdict}, exit code {rr.exit_code}" + (f": {tail}" if tail else "")
    )


def run_checker(judge: Any, checker: Any, stdin: str, expected: str, actual: str) -> bool:
    """True when ``checker`` accepts ``actual`` for this test (see :func:`check_output`, which also returns the
    checker's message). Raises :class:`CheckerError` when the checker itself fails."""
    return check_output(judge, checker, stdin, expected, actual).accepted


def _ref_key(checker: Any, stdin: str, expected: str) -> str:
    h = hashlib.sha256(checker.model_dump_json().encode())
    for part in (stdin, expected):
        raw = part.encode("utf-8", "surrogateescape")
        h.update(len(raw).to_bytes(8, "little"))
        h.update(raw)
    return h.hexdigest()


def reference_check(judge: Any, checker: Any, stdin: str, expected: str, fresh_after: float | None = None) -> None:
    """Check that ``checker`` accepts the jury's own answer for one test (``actual`` = ``expected``), inside a sandbox.

    Used to attribute a checker failure (module docstring). A passing check is remembered in this process (LRU of
    4,096 keys: sha256 of the checker, input and answer), so it costs one checker run per test and process at most;
    a failing one is not remembered (infrastructure may recover). ``fresh_after``: as for :func:`check_output`.
    Raises :class:`CheckerError` when the checker fails on, or rejects, the reference output."""
    key = _ref_key(checker, stdin, expected)
    with _cache_lock:
        if key in _ref_ok:
            _ref_ok.move_to_end(key)
            return
    out = check_output(judge, checker, stdin, expected, expected, fresh_after)
    if not out.accepted:
        raise CheckerError(f"checker rejects the reference output: {out.message}"[:2000])
    with _cache_lock:
        _ref_ok[key] = None
        while len(_ref_ok) > _REF_CACHE_MAX:
            _ref_ok.popitem(last=False)


def self_check(judge: Any, problem: Any) -> str | None:
    """Governance's check of a problem's checker: ``None`` when it accepts the reference output of every ``stdio``
    test (:func:`reference_check`), else a one-line reason naming the first failing test. A problem without a
    checker passes. A compiled checker without a binary is compiled once more before it drops a problem (its
    diagnostic, even a fresh one, or a compile run that did not complete may be the sandbox's)."""
    checker = getattr(problem, "checker", None)
    if checker is None:
        return None
    for i, test in enumerate(problem.tests):
        if getattr(test, "kind", None) != "stdio":
            continue
        try:
            try:
                reference_check(judge, checker, test.stdin, test.stdout)
            except CheckerCompileError:
                reference_check(judge, checker, test.stdin, test.stdout, fresh_after=time.monotonic())
        except CheckerError as exc:
            return f"checker fails on the reference output of test {i}: {exc}"[:500]
    return None
