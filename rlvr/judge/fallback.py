"""Plain-SandboxFusion fallback of :class:`~rlvr.judge.client.RemoteJudge`: one ``/run_code`` request per test.

Used against a SandboxFusion server (bytedance/SandboxFusion, or a fork such as ScaleBox) that has no ``/rlvr/*``
endpoints. The program of a test is a generated Python *driver* (:func:`driver_program`) that compiles and executes the
submission (``solution_prefix`` + solution, then ``test_setup``) in a fresh ``__main__`` namespace, then — for a call
test — parses the arguments with :mod:`rlvr.judge.literal` (inlined), calls the entry point and reports ``repr`` of the
value (exact builtin types only), or — for an assert test — binds ``candidate`` and runs the assert code. The driver
reports on stderr behind a random per-request marker (:func:`split_reports`); stdio outputs and call values are
compared here, on the client, with :func:`rlvr.judge.compare.compare_stdout` /
:func:`~rlvr.judge.compare.values_equal`, so expected outputs never leave this process (:func:`score_run`).

Limits of this mode: the submission shares the driver's process (no restored builtins, no return-value screening as
the embedded harness does), so it is weaker against deliberate reward hacking; one interpreter start per test
(slower); the per-test ``run_timeout`` includes interpreter start-up.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest
from rlvr.judge.compare import compare_stdout, first_difference, parse_literal, values_equal
from rlvr.judge.scoring import parse_bounds
from rlvr.judge.verdict import JudgeResult, TestResult, Verdict, summarise

__all__ = [
    "Post",
    "call_outputs_fallback",
    "driver_program",
    "failure_from_stderr",
    "judge_fallback",
    "run_body",
    "score_run",
    "split_reports",
]

#: Sends one ``/run_code`` body with a client timeout (seconds) and returns the decoded response; raises
#: :class:`~rlvr.judge.sandbox.SandboxError` when the server does not answer 200.
Post = Callable[[dict[str, Any], float], dict[str, Any]]
#: Bounds on a returned value's text before it is parsed on this side (int(str) is quadratic in the digits): longer
#: texts, or integers of more digits, are a wrong answer without parsing.
MAX_VALUE_CHARS = 1 << 20
MAX_VALUE_DIGITS = 100_000
_DIGITS = re.compile(r"\d+")
_REPORT_STDOUT = 1000
_REPORT_STDERR = 2000
_PY = ("python", "python3", "py")


def _cut(text: str | None, n: int, tail: bool = False) -> str:
    text = text or ""
    return text[-n:] if tail else text[:n]


def _module_src(name: str) -> str:
    """Program text that runs this package's ``<name>.py`` as the top-level module ``name`` (put in ``sys.modules``),
    as the sandbox's ``/judge`` import path holds it: how the driver program gets :mod:`rlvr.judge.literal_scan`,
    which ``literal.py`` imports by that name outside the package."""
    src = Path(__file__).with_name(f"{name}.py").read_text(encoding="utf-8")
    return (f"import sys as _lsys, types as _ltypes\n_lmod = _ltypes.ModuleType({name!r})\n"
            f"exec(compile({src!r}, {name + '.py'!r}, 'exec'), _lmod.__dict__)\n_lsys.modules[{name!r}] = _lmod\n")


_LITERAL_SRC = _module_src("literal_scan") + Path(__file__).with_name("literal.py").read_text(encoding="utf-8")

_DRIVER = '''
import os as _os, sys as _sys, traceback as _tb
_MARK = {mark!r}
_SRC = {src!r}
_SETUP = {setup!r}
_KIND = {kind!r}
_ENTRY = {entry!r}
_ARGS = {args!r}
_TEST = {test!r}
_PLAIN = (int, float, complex, str, bytes, bool, type(None))


def _report(tag, text=""):
    for s in (_sys.stdout, _sys.stderr):
        try:
            s.flush()
        except BaseException:
            pass
    _os.write(2, ("\\n" + _MARK + tag + " " + text + "\\n").encode("utf-8", "replace"))


def _describe(exc):
    line = _tb.format_exception_only(type(exc), exc)[-1].strip().replace("\\n", " ")
    return type(exc).__name__ + " " + line[:500]


def _plain(v, depth=0):
    t = type(v)
    if depth > 100:
        return False
    if t in _PLAIN:
        return True
    if t in (list, tuple, set, frozenset):
        return all(_plain(x, depth + 1) for x in v)
    if t is dict:
        return all(_plain(k, depth + 1) and _plain(x, depth + 1) for k, x in v.items())
    return False


def _main():
    try:
        code = compile(_SRC, "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        _tb.print_exc()
        _report("syntax", _describe(exc))
        raise SystemExit(1)
    ns = {{"__name__": "__main__", "__builtins__": __builtins__}}
    try:
        exec(code, ns)
        if _KIND != "stdio" and _SETUP:
            exec(compile(_SETUP, "setup.py", "exec"), ns)
    except SystemExit:
        if _KIND != "stdio":
            _report("exit")
        raise
    except BaseException as exc:
        _tb.print_exc()
        _report("error", _describe(exc))
        raise SystemExit(1)
    if _KIND == "stdio":
        return
    try:
        fn = eval(_ENTRY, ns) if _ENTRY else None
        if _KIND == "call":
            args = parse_literal(_ARGS)
            value = fn(*args) if isinstance(args, (list, tuple)) else fn(args)
            if _plain(value):
                _report("value", repr(value))
            else:
                _report("nonplain", type(value).__name__)
        else:
            if fn is not None:
                ns["candidate"] = fn
            exec(compile(_TEST, "test.py", "exec"), ns)
            _report("pass")
    except SystemExit:
        _report("exit")
        raise
    except BaseException as exc:
        _tb.print_exc()
        _report("error", _describe(exc))
        raise SystemExit(1)


_main()
'''


def driver_program(problem: Problem, solution: str, test: Any, mark: str) -> str:
    """The Python program that runs ``solution`` on one ``test`` of ``problem`` (fallback mode, see module docstring).

    ``mark``: the random marker its reports on stderr start with (``<mark><tag> <text>``; tags ``syntax``, ``error``,
    ``exit``, ``value``, ``nonplain``, ``pass``)."""
    src = f"{problem.solution_prefix}\n{solution}" if problem.solution_prefix else solution
    kind = {StdioTest: "stdio", CallTest: "call", AssertTest: "assert"}[type(test)]
    return _LITERAL_SRC + _DRIVER.format(
        mark=mark, src=src, setup=problem.test_setup, kind=kind, entry=problem.entry_point,
        args=getattr(test, "args", ""), test=getattr(test, "code", ""),
    )


def split_reports(stderr: str, mark: str) -> tuple[str, tuple[str, str] | None]:
    """Remove the driver's report lines (lines starting with ``mark``) from ``stderr``; return (clean stderr, last
    (tag, text) or None). Linear in ``stderr`` (``str.find`` from report to report), extra memory ~ its length (no
    list of lines)."""
    key = "\n" + mark
    pieces: list[str] = []
    last = None
    pos = 0
    idx = 0 if stderr.startswith(mark) else -1
    while True:
        if idx < 0:
            p = stderr.find(key, max(pos - 1, 0))
            if p < 0:
                break
            idx = p + 1
        eol = stderr.find("\n", idx)
        if eol < 0:
            eol = len(stderr)
        tag, _, text = stderr[idx + len(mark):eol].partition(" ")
        last = (tag, text)
        pieces.append(stderr[pos:idx])
        pos, idx = eol + 1, -1
    pieces.append(stderr[pos:])
    clean = "".join(pieces).rstrip("\n")
    return (clean + "\n" if clean else ""), last


def failure_from_stderr(stderr: str, language: str) -> Verdict:
    """Best-effort verdict of a failed run from its stderr (plain SandboxFusion reports no verdict): its last
    non-blank line. Linear, no list of lines."""
    text = stderr.strip()
    last = text[text.rfind("\n") + 1:]
    if "MemoryError" in last:
        return "memory_limit"
    if language.lower() in ("python", "python3", "py") and last.startswith(
        ("SyntaxError", "IndentationError", "TabError")
    ):
        return "syntax_error"
    return "runtime_error"


def score_run(
    i: int, test: Any, data: dict[str, Any], mark: str, python: bool, float_tolerance: float | None
) -> TestResult:
    """Verdict of one fallback-mode run (a ``/run_code`` response) of ``test``."""
    if data.get("status") == "SandboxError":
        return TestResult(index=i, verdict="sandbox_error", message=_cut(data.get("message"), 2000))
    comp = data.get("compile_result") or {}
    if comp and (comp.get("status") != "Finished" or comp.get("return_code")):
        return TestResult(index=i, verdict="syntax_error", message=_cut(comp.get("stderr"), 2000, tail=True))
    run = data.get("run_result") or {}
    if not run or run.get("status") == "Error":
        return TestResult(index=i, verdict="sandbox_error", message=_cut(data.get("message") or "no run result", 2000))
    stderr, report = split_reports(run.get("stderr") or "", mark)
    stdout = run.get("stdout") or ""
    rc = run.get("return_code")
    base = {"index": i, "time_s": float(run.get("execution_time") or 0.0), "cpu_s": float(run.get("cpu_time") or 0.0),
            "exit_code": rc, "stdout": _cut(stdout, _REPORT_STDOUT), "stderr": _cut(stderr, _REPORT_STDERR, tail=True)}

    def res(verdict: Verdict, message: str = "") -> TestResult:
        return TestResult(verdict=verdict, message=message, **base)

    if run.get("status") == "TimeLimitExceeded":
        return res("timeout", "time limit exceeded")
    tag, text = report if report is not None else ("", "")
    if tag == "syntax":
        return res("syntax_error", text.partition(" ")[2])
    if tag == "error":
        exc, _, msg = text.partition(" ")
        if exc == "MemoryError":
            return res("memory_limit", "memory limit exceeded (MemoryError)")
        if isinstance(test, AssertTest) and exc == "AssertionError":
            return res("wrong_answer", "assertion failed")
        return res("runtime_error", msg or exc)
    if isinstance(test, StdioTest):
        if rc not in (0, None):
            return res(failure_from_stderr(stderr, "python" if python else ""), f"exit code {rc}")
        if compare_stdout(test.stdout, stdout, float_tolerance):
            return res("accepted")
        return res("wrong_answer", first_difference(test.stdout, stdout))
    if tag == "pass" and isinstance(test, AssertTest):
        return res("accepted")
    if tag == "nonplain":
        return res("wrong_answer", f"return value of type {text} is not a plain builtin value")
    if tag == "value" and isinstance(test, CallTest):
        if test.expected is None:
            return res("sandbox_error", "test has no expected output")
        if len(text) > MAX_VALUE_CHARS or any(len(m) > MAX_VALUE_DIGITS for m in _DIGITS.findall(text)):
            return res("wrong_answer", "return value too large to read back")
        try:
            ref = parse_literal(test.expected, max_int_digits=10**8, ast_fallback_chars=len(test.expected))
            actual = parse_literal(text, **parse_bounds(ref))
            same = values_equal(ref, actual, test.atol)
        except (ValueError, ArithmeticError, TypeError, RecursionError, MemoryError):
            return res("wrong_answer", "return value could not be read back or compared")
        if same:
            return res("accepted")
        return res("wrong_answer", f"returned {text[:80]}")
    if rc not in (0, None) and "MemoryError" in stderr:
        return res("memory_limit", "memory limit exceeded")
    return res("runtime_error", "the program exited before the test could report")


def run_body(problem: Problem, solution: str, test: Any, language: str = "python") -> tuple[dict[str, Any], str]:
    """The ``/run_code`` body that runs ``solution`` on one ``test`` (Python: through :func:`driver_program`; other
    languages: the program itself, stdio tests only) and the random report marker it uses."""
    mark = f"@@rlvr-{secrets.token_hex(8)}@@"
    python = language.lower() in _PY
    code = driver_program(problem, solution, test, mark) if python else solution
    body = {
        "code": code, "language": "python" if python else language,
        "stdin": test.stdin if isinstance(test, StdioTest) else "", "run_timeout": problem.time_limit_s,
        "compile_timeout": 30.0, "memory_limit_MB": problem.memory_limit_mb, "files": {}, "fetch_files": [],
    }
    return body, mark


def _report(data: dict[str, Any], mark: str) -> tuple[str, str] | None:
    run = data.get("run_result") or {}
    return split_reports(run.get("stderr") or "", mark)[1]


def judge_fallback(
    post: Post, problem: Problem, solution: str, language: str, max_timeouts: int, t0: float
) -> JudgeResult:
    """Judge ``solution`` on every test of ``problem``, one ``post`` per test (``t0``: ``time.monotonic()`` at the
    start, for ``judge_s``). After ``max_timeouts`` timed-out tests the rest are not run and count as timeouts (0 =
    run all). Raises ``ValueError`` for call/assert tests in a language other than Python, and what ``post``
    raises."""
    python = language.lower() in _PY
    if not python and any(not isinstance(t, StdioTest) for t in problem.tests):
        raise ValueError(f"{problem.id}: call/assert tests need python, got language {language!r}")
    results: list[TestResult] = []
    timeouts = 0
    for i, test in enumerate(problem.tests):
        if max_timeouts and timeouts >= max_timeouts:
            results.append(TestResult(index=i, verdict="timeout", message="not run: too many timeouts"))
            continue
        body, mark = run_body(problem, solution, test, language)
        tr = score_run(i, test, post(body, problem.time_limit_s + 90.0), mark, python, problem.float_tolerance)
        timeouts += tr.verdict == "timeout"
        results.append(tr)
        if tr.verdict == "syntax_error":  # nothing else can run either
            results += [tr.model_copy(update={"index": j}) for j in range(i + 1, len(problem.tests))]
            break
    first_fail = next((r for r in results if r.verdict != "accepted"), None)
    return summarise(results, time.monotonic() - t0, first_fail.message if first_fail else "")


def call_outputs_fallback(post: Post, problem: Problem, solution: str) -> list[str | None]:
    """``repr`` of each call test's return value through ``post`` (``None`` where it failed). Raises ``ValueError``
    when the solution does not compile, and what ``post`` raises."""
    out: list[str | None] = []
    for t in problem.tests:
        if not isinstance(t, CallTest):
            continue
        body, mark = run_body(problem, solution, t)
        report = _report(post(body, problem.time_limit_s + 90.0), mark)
        if report is not None and report[0] == "syntax":
            raise ValueError(f"{problem.id}: solution does not compile: {report[1]}")
        out.append(report[1] if report is not None and report[0] == "value" else None)
    return out
