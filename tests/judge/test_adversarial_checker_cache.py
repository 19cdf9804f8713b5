"""Adversarial suite, the checker cache (issue 43, item 2): a sandbox failure is never a permanent verdict on a problem.

The cache of compiled checkers (:mod:`rlvr.judge.checkers`) keeps a binary or a compiler's own diagnostic (its exit
status > 0 and stderr), never a compile run that failed, timed out or was killed; a cached diagnostic from before a
submission began is compiled again once before that submission's verdict becomes ``sandbox_error``.

Hostile cases (real sandbox, a C++ testlib checker): a compile run in a process state an earlier submission could have
left (issue 43, item 1: an inherited ``RLIMIT_NPROC``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``, ``RLIMIT_AS``; written as a
prefix run in the compile's driver), a compile killed or timed out, a compile run the sandbox failed, a driver's
record garbled; then a correct submission through the judge: ``accepted``. On the former code each of these cached
"checker does not compile" and every later submission on the problem was ``sandbox_error``.
"""

from __future__ import annotations

from typing import Any

import pytest

from rlvr.data.schema import Checker, Problem, StdioTest
from rlvr.judge import checkers as ck
from rlvr.judge.checkers import CheckerCompileError
from rlvr.judge.core import RunResult
from rlvr.judge.scoring import CheckBudget, checked

CPP_PERMUTATION = r"""
#include <algorithm>
#include <cstdio>
#include <vector>
int main(int argc, char** argv) {
    if (argc != 4) return 3;
    FILE* in = std::fopen(argv[1], "r");
    FILE* out = std::fopen(argv[2], "r");
    FILE* ans = std::fopen(argv[3], "r");
    if (!in || !out || !ans) return 3;
    long n, v;
    if (std::fscanf(in, "%ld", &n) != 1) return 3;
    std::vector<long> got, want;
    while (std::fscanf(out, "%ld", &v) == 1) got.push_back(v);
    while (std::fscanf(ans, "%ld", &v) == 1) want.push_back(v);
    std::sort(got.begin(), got.end());
    std::sort(want.begin(), want.end());
    return got == want ? 0 : 1;
}
"""
CHECKER = Checker(kind="testlib", language="cpp", source=CPP_PERMUTATION, time_limit_s=10.0)
#: Correct for the problem below (any permutation of 1..n): accepted only through the checker.
CORRECT = "n = int(input())\nprint(*range(n, 0, -1))\n"


def _problem() -> Problem:
    tests = [StdioTest(stdin="4\n", stdout="1 2 3 4\n"), StdioTest(stdin="3\n", stdout="1 2 3\n")]
    return Problem(id="adv/checker_cache", source="adv", split="test", statement="print a permutation of 1..n",
                   tests=tests, checker=CHECKER, time_limit_s=5.0, memory_limit_mb=512)


@pytest.fixture(autouse=True)
def _fresh_caches():
    ck._cache.clear()
    ck._ref_ok.clear()
    yield
    ck._cache.clear()
    ck._ref_ok.clear()


def _is_compile(code: str) -> bool:
    """True for the checker compile's driver program (on this code and the former one alike)."""
    return "subprocess.run(" in code and "b64encode" in code


class Poisoned:
    """A judge whose next ``times`` checker compilations go wrong: ``prefix`` (Python) runs first in the compile's
    driver, or ``result`` replaces the run's result; other runs pass through to ``judge``."""

    def __init__(self, judge: Any, prefix: str = "", result: RunResult | None = None, times: int = 1) -> None:
        self.judge, self.prefix, self.result, self.times, self.compiles = judge, prefix, result, times, 0

    def run_code(self, code: str, **kw: Any) -> RunResult:
        if _is_compile(code):
            self.compiles += 1
            if self.times > 0:
                self.times -= 1
                if self.result is not None:
                    return self.result
                code = self.prefix + code
        return self.judge.run_code(code, **kw)


def _nproc(extra: int) -> str:
    # as an inherited RLIMIT_NPROC would: the processes of this sandbox's uid (all in its pid namespace) plus `extra`
    return ("import os, resource\n"
            "_n = sum(1 for _d in os.listdir('/proc') if _d.isdigit())\n"
            f"resource.setrlimit(resource.RLIMIT_NPROC, (_n + {extra}, _n + {extra}))\n")


#: scenario -> (prefix, replaced result): what the first compile of the checker meets.
SCENARIOS: dict[str, tuple[str, RunResult | None]] = {
    # the driver starts the compiler, which cannot start its back end (g++'s own "cannot fork" diagnostic, exit 1)
    "nproc_compiler_cannot_fork": (_nproc(1), None),
    # the driver itself cannot start the compiler (BlockingIOError: exit 1, no record)
    "nproc_driver_cannot_fork": (_nproc(0), None),
    # the compiler is killed by SIGKILL/SIGXCPU at once (an inherited RLIMIT_CPU of 0 s left over)
    "cpu_limit_kills_the_compiler": ("import resource\nresource.setrlimit(resource.RLIMIT_CPU, (0, 0))\n", None),
    # the compiler cannot write its output (an inherited RLIMIT_FSIZE of 0 bytes: SIGXFSZ or "File too large")
    "fsize_limit_blocks_the_output": ("import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))\n", None),
    # the compiler runs out of address space (an inherited RLIMIT_AS of 64 MB)
    "address_space_starves_the_compiler": (
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (64 << 20, 64 << 20))\n", None),
    # the compile is killed by the memory limit (the sandbox's OOM kill)
    "compile_killed": ("", RunResult(status="Finished", verdict="memory_limit", exit_code=-9)),
    # the compile times out (a loaded host)
    "compile_timed_out": ("", RunResult(status="TimeLimitExceeded", verdict="timeout")),
    # the sandbox fails during the compile (a sandbox restarted under it)
    "compile_sandbox_error": ("", RunResult(status="Error", verdict="sandbox_error", stderr="sandbox lost")),
    # the driver's record is garbled (stdout cut short: no end marker, or not the driver's at all)
    "garbled_record": ("import sys\nsys.stdout.write('junk')\n", None),
    # the driver is killed by a signal before its record (SIGKILL from the outside)
    "driver_killed": ("", RunResult(status="Finished", verdict="runtime_error", exit_code=-9)),
}


def _compiles(available: list[str]) -> None:
    if "cpp" not in available:
        pytest.skip("g++ not installed")


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_broken_compile_is_never_a_verdict_on_later_submissions(request, judge, scenario):
    from rlvr.judge.languages import available_languages

    _compiles(available_languages())
    if request.node.callspec.params.get("judge") == "python_loop":
        pytest.skip("the checker's compile does not use the per-test loop: run once")
    prefix, result = SCENARIOS[scenario]
    p = _problem()
    poisoned = Poisoned(judge, prefix, result)
    verdict, message = checked(p, p.tests[0], "4 3 2 1\n", poisoned, CheckBudget(3))
    # the submission under the broken compile: never blamed (its output was never read)
    assert verdict in ("accepted", "sandbox_error"), (verdict, message)
    assert poisoned.compiles >= 1 and poisoned.times == 0
    res = judge.judge(p, CORRECT)  # a later, correct submission on the same problem
    assert res.verdict == "accepted", (scenario, res.verdict, res.message, [t.message for t in res.tests])


def test_a_real_diagnostic_is_cached_and_re_verified_once_per_submission(request, judge):
    from rlvr.judge.languages import available_languages

    _compiles(available_languages())
    if request.node.callspec.params.get("judge") == "python_loop":
        pytest.skip("the checker's compile does not use the per-test loop: run once")
    broken = _problem().model_copy(update={"checker": CHECKER.model_copy(update={"source": "int main( {"})})
    counting = Poisoned(judge, times=0)
    budget = CheckBudget(3)
    for t in broken.tests:  # one submission, two tests: one compile for both
        verdict, message = checked(broken, t, "1 2 3\n", counting, budget)
        assert verdict == "sandbox_error" and "does not compile (exit status 1)" in message
    assert counting.compiles == 1
    verdict, _ = checked(broken, broken.tests[0], "1 2 3\n", counting, CheckBudget(3))  # a later submission
    assert verdict == "sandbox_error" and counting.compiles == 2  # re-verified once, still a diagnostic


# ------------------------------------------------------------------------------------------------ without a sandbox
class Scripted:
    """Compile runs answered from ``compiles`` in turn (then a good binary record); checker runs accept."""

    def __init__(self, *compiles: RunResult) -> None:
        self.compiles, self.runs = list(compiles), []

    def run_code(self, code: str, **kw: Any) -> RunResult:
        if _is_compile(code):
            self.runs.append("compile")
            if self.compiles:
                return self.compiles.pop(0)
            return RunResult(status="Finished", verdict="accepted", exit_code=0, stdout="binary:AAAA:end")
        self.runs.append("check")
        return RunResult(status="Finished", verdict="accepted", exit_code=0)


def _ok(stdout: str) -> RunResult:
    return RunResult(status="Finished", verdict="accepted", exit_code=0, stdout=stdout)


@pytest.mark.parametrize("record", [
    RunResult(status="Finished", verdict="runtime_error", exit_code=1, stderr="BlockingIOError: [Errno 11]"),
    RunResult(status="Finished", verdict="runtime_error", exit_code=4, stderr="compiler killed by signal 9"),
    RunResult(status="TimeLimitExceeded", verdict="timeout"),
    RunResult(status="Finished", verdict="memory_limit"),
    RunResult(status="Error", verdict="sandbox_error"),
    _ok(""), _ok("AAAA"), _ok("binary:AAAA"), _ok("binary:A!A:end"), _ok("diagnostic:{"), _ok('diagnostic:{"rc": -9}'),
], ids=["driver_error", "signal", "timeout", "memory", "sandbox", "empty", "former_format", "cut_short",
        "bad_base64", "bad_json", "killed_rc"])
def test_only_a_completed_record_is_cached(record):
    j = Scripted(record)
    p = _problem()
    assert checked(p, p.tests[0], "4 3 2 1\n", j, CheckBudget(3)) == ("accepted", "")
    assert j.runs == ["compile", "compile", "check"]  # not cached: compiled again at once
    assert [v for v, _ in ck._cache.values()] == [b"\x00\x00\x00"]


def test_a_cached_diagnostic_from_before_the_submission_is_re_verified():
    diagnostic = _ok('diagnostic:{"rc": 1, "stderr": "g++: fatal error: cannot execute cc1plus: vfork"}')
    j = Scripted(diagnostic)
    p = _problem()
    verdict, message = checked(p, p.tests[0], "4 3 2 1\n", j, CheckBudget(3))
    assert verdict == "sandbox_error" and "exit status 1" in message and "cc1plus" in message
    assert j.runs == ["compile"]  # compiled during this submission: no second compile
    assert checked(p, p.tests[0], "4 3 2 1\n", j, CheckBudget(3)) == ("accepted", "")  # a later submission
    assert j.runs == ["compile", "compile", "check"]


def test_a_compile_failure_costs_one_retry_per_submission_not_one_per_test():
    hang = RunResult(status="TimeLimitExceeded", verdict="timeout")
    j = Scripted(hang, hang, hang)
    p = _problem()
    budget = CheckBudget(3)
    assert [checked(p, t, "1\n", j, budget)[0] for t in p.tests] == ["sandbox_error", "sandbox_error"]
    assert j.runs == ["compile", "compile"] and not ck._cache
    with pytest.raises(CheckerCompileError, match="did not complete"):
        ck.check_output(j, CHECKER, "4\n", "1 2 3 4\n", "4 3 2 1\n")


def test_governance_does_not_drop_a_problem_for_a_broken_compile():
    from rlvr.judge.checkers import self_check

    diagnostic = _ok('diagnostic:{"rc": 1, "stderr": "cannot execute cc1plus"}')
    for first in (diagnostic, RunResult(status="TimeLimitExceeded", verdict="timeout")):
        ck._cache.clear()
        ck._ref_ok.clear()
        j = Scripted(first)
        assert self_check(j, _problem()) is None
        assert j.runs[:2] == ["compile", "compile"]
    ck._cache.clear()
    ck._ref_ok.clear()
    j = Scripted(diagnostic, diagnostic)  # a diagnostic twice: the checker really does not compile
    assert "does not compile (exit status 1)" in (self_check(j, _problem()) or "")
