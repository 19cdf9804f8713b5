"""Runner/driver records → per-test verdicts, on the host (where every expected value lives).

A record (from :mod:`rlvr.judge.sandbox.inside.runner`, ``calls`` or ``driver``) has a ``status``: ``ok``,
``exception`` (``exc_type``, ``message``), ``timeout``/``skipped``, ``signal``, ``no_result`` (the process ended
without reporting), ``unserialisable`` (a return value that is not a plain value). stdio outputs and call return
values are compared here (:mod:`rlvr.judge.compare`); converted asserts compare with Python's ``==`` on values this
process parsed itself. A cgroup OOM kill during the submission turns SIGKILLed tests into ``memory_limit``.
"""

from __future__ import annotations

import time
from typing import Any

from rlvr.data.schema import Problem, StdioTest
from rlvr.judge.compare import compare_stdout, first_difference, parse_literal, values_equal
from rlvr.judge.literal import LONG_INT_DIGITS
from rlvr.judge.verdict import TestResult, Verdict

__all__ = ["CheckBudget", "checked", "failure_verdict", "int_digit_bound", "parse_bounds", "printable",
           "request_bound_s", "score"]

TRUSTED_INT_DIGITS = 10**8  # bound for the dataset's own expected values (HumanEval+/139 holds 263k-digit integers)


def parse_bounds(value: Any) -> dict[str, int]:
    """Bounds for parsing a submission's value that is compared with ``value`` (the expected one, already parsed), as
    keyword arguments of :func:`rlvr.judge.literal.parse_literal`:

    * ``max_int_digits``: :data:`rlvr.judge.literal.LONG_INT_DIGITS` (CPython's default limit), raised to the longest
      integer in ``value`` (decimal length estimated from ``int.bit_length()``, never converted to text) plus 2;
    * ``max_long_digits``: the digits of ``value``'s integers longer than that default, in all, plus one default
      integer's worth;
    * ``max_items``: ``value``'s number of values (scalars and containers) plus 64.

    A value equal to ``value`` (Python ``==``, or EvalPlus's same-type ``allclose``) has as many values as it and the
    same integers, so an honest answer is always read back, and a forged one costs the host no more than the
    reference does (a million-element tuple against a scalar is refused after 65 values).

    >>> parse_bounds([1, 2])["max_items"], parse_bounds({"k": (10**300_000,)})["max_int_digits"] > 300_000
    (67, True)
    """
    longest = long_digits = items = 0
    stack = [value]
    while stack:
        v = stack.pop()
        items += 1
        if isinstance(v, int) and not isinstance(v, bool):
            d = int(v.bit_length() * 0.30103) + 2
            longest = max(longest, d)
            if d > LONG_INT_DIGITS:
                long_digits += d
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
    return {"max_int_digits": max(LONG_INT_DIGITS, longest), "max_long_digits": long_digits + LONG_INT_DIGITS,
            "max_items": items + 64}


def int_digit_bound(value: Any) -> int:
    """Digit bound for one integer of a submission's value compared with ``value``: ``parse_bounds(value)
    ["max_int_digits"]`` (kept for callers of the former API).

    >>> int_digit_bound([1, 2]) == LONG_INT_DIGITS, int_digit_bound({"k": (10**300_000,)}) > 300_000
    (True, True)
    """
    return parse_bounds(value)["max_int_digits"]

REPORT_STDOUT = 1000
REPORT_STDERR = 2000
_SIGNAL_NAMES = {9: "SIGKILL", 11: "SIGSEGV", 6: "SIGABRT", 15: "SIGTERM", 24: "SIGXCPU", 25: "SIGXFSZ", 8: "SIGFPE"}


def printable(text: Any, cap: int, tail: bool = False) -> str:
    """``text`` as valid UTF-8 (lone surrogates from undecodable bytes replaced), capped to ``cap`` characters."""
    s = text if isinstance(text, str) else ""
    s = s[-cap:] if tail else s[:cap]
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace") if s else ""


def failure_verdict(rec: dict[str, Any], kind: str, oom: bool = False) -> tuple[Verdict, str] | None:
    """Map a record to a failing (verdict, message), or None when the process completed normally. ``kind``: the
    test kind (``stdio``/``call``/``assert``); ``oom``: the sandbox's cgroup OOM-killed something meanwhile."""
    status = rec.get("status")
    if status in ("timeout", "skipped"):
        return "timeout", rec.get("message") or "time limit exceeded"
    if status == "handle":
        return "wrong_answer", f"unserialisable return value: {rec.get('message', '')}"[:500]
    if status == "unserialisable":
        return "wrong_answer", f"unserialisable return value: {rec.get('message', '')}"[:500]
    if status == "exception":
        exc = rec.get("exc_type", "")
        msg = str(rec.get("message", ""))
        if exc == "MemoryError":
            return "memory_limit", "memory limit exceeded (MemoryError)"
        if exc == "Unserialisable" or (kind == "assert" and exc == "AssertionError"):
            return "wrong_answer", "assertion failed" if exc == "AssertionError" else msg[:500]
        return "runtime_error", msg or exc
    if status == "signal":
        sig = rec.get("signal")
        if oom and sig == 9:
            return "memory_limit", "memory limit of the sandbox exceeded (killed by the cgroup OOM killer)"
        return "runtime_error", f"killed by signal {_SIGNAL_NAMES.get(sig, sig)}"
    if status == "no_result":
        return "runtime_error", rec.get("message") or "the program exited before the test could report"
    if status != "ok":
        return "runtime_error", f"no valid result for this test ({status!r})"
    return None


def request_bound_s(problem: Problem, n_tests: int | None = None, checks: bool = True) -> float:
    """Wall seconds one submission of ``problem`` may keep a judge busy: ``n × (time limit + 2 s) + 60 s`` for ``n``
    tests (default: all of them; the embedded judge's hang bound) plus, with a special checker and ``checks``, its
    time: ``2 × n × (checker time limit + 2 s) + 130 s`` (each test's check, at most one reference check per check
    that failed, see :class:`CheckBudget`, and at most two compilations of a compiled checker of at most 65 s each:
    one, and its re-verification, :func:`checked`). The bound the reward layer
    and :class:`~rlvr.judge.client.RemoteJudge` wait for before calling a request lost."""
    n = len(problem.tests) if n_tests is None else n_tests
    bound = n * (float(problem.time_limit_s) + 2.0) + 60.0
    checker = getattr(problem, "checker", None)
    if checks and checker is not None:
        bound += 2 * n * (float(checker.time_limit_s) + 2.0) + 130.0
    return bound


class CheckBudget:
    """How many more checker failures one submission may cause before its remaining checks are skipped.

    Checker time counts in the request's bound: each check runs at most ``checker.time_limit_s``; a check that fails
    on the submission's output also costs one reference check (:func:`rlvr.judge.checkers.reference_check`, once per
    test and process). After ``max_failures`` such failures (the judge's ``max_timeouts``; 0 = no bound) the
    submission's remaining checks are not run and score ``wrong_answer``, so a submission whose output breaks the
    checker costs at most ``max_failures × 2`` checker time limits beyond the ordinary checks. ``started``: the
    :func:`time.monotonic` second the submission's scoring began (a compiled checker's cached diagnostic from before
    it is re-verified once, :func:`checked`); ``compile_error``: the message of a compilation that failed after that
    (the submission's remaining checks are ``sandbox_error`` without compiling again)."""

    def __init__(self, max_failures: int) -> None:
        self.max_failures = max_failures
        self.failures = 0
        self.started = time.monotonic()
        self.compile_error: str | None = None  # set once the checker's compilation failed for this submission

    @property
    def exhausted(self) -> bool:
        """True once ``max_failures`` (> 0) checker failures were attributed to the submission."""
        return 0 < self.max_failures <= self.failures


def checked(problem: Problem, test: StdioTest, actual: str, judge: Any,
            budget: CheckBudget | None = None) -> tuple[Verdict, str]:
    """The (verdict, message) of ``actual`` on ``test`` decided by ``problem.checker`` (in a sandbox, via ``judge``).

    A checker failure (:class:`~rlvr.judge.checkers.CheckerError`: crash, out of memory, timeout, FAIL) is attributed
    by a reference check (the checker on the jury's own answer, see :mod:`rlvr.judge.checkers`): ``wrong_answer``
    when the checker accepts the reference output (the submission's output broke it; every reward mode scores this
    as a failure), ``sandbox_error`` when it fails on the reference too (a broken checker: infrastructure, which
    governance removes). A compiled checker without a binary (:class:`~rlvr.judge.checkers.CheckerCompileError`) never
    read the output: its diagnostic, when cached before the submission began (``budget.started``; without a budget,
    always), or a compile run that did not complete, is re-verified by one fresh compile, and only a failure of that
    is ``sandbox_error`` (issue 43: a compile broken by the sandbox is never a permanent verdict on a problem).
    ``budget``: the submission's :class:`CheckBudget`; when exhausted, the check is skipped and the test is
    ``wrong_answer``."""
    from rlvr.judge.checkers import CheckerCompileError, CheckerError, check_output, reference_check

    if budget is not None and budget.exhausted:
        return "wrong_answer", f"not checked: the checker failed on {budget.failures} earlier outputs of this program"
    if budget is not None and budget.compile_error is not None:
        return "sandbox_error", budget.compile_error
    started = budget.started if budget is not None else time.monotonic()
    try:
        try:
            out = check_output(judge, problem.checker, test.stdin, test.stdout, actual)
        except CheckerCompileError:
            # no binary: the checker never read the output. A diagnostic cached before this submission began, or a
            # compile run that did not complete, is re-verified by one fresh compile before it becomes a verdict
            out = check_output(judge, problem.checker, test.stdin, test.stdout, actual, fresh_after=started)
    except CheckerCompileError as exc:
        message = printable(str(exc), 2000)
        if budget is not None:
            budget.compile_error = message
        return "sandbox_error", message
    except CheckerError as exc:
        try:
            reference_check(judge, problem.checker, test.stdin, test.stdout)
        except CheckerError as ref_exc:
            return "sandbox_error", printable(f"{exc}; and on the reference output: {ref_exc}", 2000)
        if budget is not None:
            budget.failures += 1
        return "wrong_answer", printable(f"this output made the checker fail ({exc})", 500)
    if out.accepted:
        return "accepted", ""
    return "wrong_answer", printable(out.message, 500)


def score(problem: Problem, test: Any, i: int, rec: dict[str, Any], judge: Any, oom: bool = False,
          converted: str | None = None, budget: CheckBudget | None = None) -> TestResult:
    """One test's :class:`TestResult`. ``converted``: the expected literal of an assert run as a call (compared with
    ``==``). ``judge`` runs the problem's checker, if any (never call this while holding a sandbox; attribution of
    checker failures: :func:`checked`); ``budget``: the submission's :class:`CheckBudget` (None = unbounded)."""
    base = {
        "index": i,
        "time_s": float(rec.get("wall_s") or 0.0),
        "cpu_s": float(rec.get("cpu_s") or 0.0),
        "exit_code": rec.get("exit_code") if isinstance(rec.get("exit_code"), int) else None,
        "stdout": printable(rec.get("stdout"), REPORT_STDOUT),
        "stderr": printable(rec.get("stderr"), REPORT_STDERR, tail=True),
    }
    failed = failure_verdict(rec, "assert" if converted is not None else test.kind, oom)
    if failed is not None:
        return TestResult(verdict=failed[0], message=printable(str(failed[1]), 2000), **base)
    if isinstance(test, StdioTest):
        if rec.get("exit_code") not in (0, None):
            return TestResult(verdict="runtime_error", message=f"exit code {rec['exit_code']}", **base)
        if rec.get("stdout_truncated"):
            return TestResult(verdict="wrong_answer", message="output larger than the output cap", **base)
        actual = rec.get("stdout") if isinstance(rec.get("stdout"), str) else ""
        if problem.checker is not None:  # runs in a sandbox of its own
            verdict, message = checked(problem, test, actual, judge, budget)
            return TestResult(verdict=verdict, message=message, **base)
        if compare_stdout(test.stdout, actual, problem.float_tolerance):
            return TestResult(verdict="accepted", **base)
        return TestResult(verdict="wrong_answer", message=printable(first_difference(test.stdout, actual), 500), **base)
    if test.kind == "assert" and converted is None:
        return TestResult(verdict="accepted", **base)
    got = rec.get("value") if isinstance(rec.get("value"), str) else ""
    ref_text = converted if converted is not None else test.expected
    if ref_text is None:
        return TestResult(verdict="sandbox_error", message="test has no expected output", **base)
    try:  # the expected value is trusted (the dataset's): its integers may be as long as they are
        ref = parse_literal(ref_text, max_int_digits=TRUSTED_INT_DIGITS, ast_fallback_chars=len(ref_text))
    except (ValueError, RecursionError, MemoryError) as exc:
        return TestResult(verdict="wrong_answer", message=f"expected value unreadable: {exc}"[:300], **base)
    try:  # the submission's value: no more values, and no longer integers, than an equal one would hold
        actual = parse_literal(got, **parse_bounds(ref))
    except ValueError as exc:
        return TestResult(verdict="wrong_answer", message=f"return value could not be read back: {exc}"[:300], **base)
    try:
        ok = bool(ref == actual) if converted is not None else values_equal(ref, actual, test.atol)
    except (ValueError, OverflowError, TypeError, RecursionError, MemoryError) as exc:
        ok = False
        got = f"{got[:60]} ({type(exc).__name__})"
    if ok:
        return TestResult(verdict="accepted", **base)
    return TestResult(verdict="wrong_answer", message="assertion failed" if converted else f"returned {got[:80]}",
                      **base)
