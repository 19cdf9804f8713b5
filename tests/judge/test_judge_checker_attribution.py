"""Penalty attribution of checker failures (issue 28, item 4): a checker made to crash, run out of memory or time by
the submission's output is the submission's ``wrong_answer`` (scored as a failure by every reward mode, never left out
like ``sandbox_error``); only a checker failing on the reference output is infrastructure (and governance removes its
problem). Checker time counts in the request's bound (:class:`rlvr.judge.scoring.CheckBudget`)."""

from __future__ import annotations

from typing import Any

import pytest

from rlvr.data.schema import Checker, Problem, StdioTest
from rlvr.judge import checkers as ck
from rlvr.judge.core import RunResult
from rlvr.judge.scoring import CheckBudget, checked
from rlvr.reward.modes import REWARD_MODES, RewardShaping, score


def _problem(checker: Checker, n_tests: int = 1) -> Problem:
    tests = [StdioTest(stdin=f"{i}\n", stdout=f"{i}\n") for i in range(n_tests)]
    return Problem(id="t/checker", source="t", split="test", statement="", tests=tests, checker=checker)


class Scripted:
    """A judge stand-in whose checker runs fail on any output but the jury's answer (``ref_ok``) or on every output;
    records each run."""

    def __init__(self, failure: RunResult, ref_ok: bool = True) -> None:
        self.failure, self.ref_ok, self.runs = failure, ref_ok, []

    def run_code(self, code: str, **kw: Any) -> RunResult:
        files = kw["files"]
        is_ref = files["actual.txt"] == files["expected.txt"]
        self.runs.append("ref" if is_ref else "output")
        if is_ref and self.ref_ok:
            return RunResult(status="Finished", verdict="accepted", exit_code=0)
        return self.failure


FAILURES = {
    "crash": RunResult(status="Finished", verdict="runtime_error", exit_code=-11, stderr="Segmentation fault"),
    "fail_exit_3": RunResult(status="Finished", verdict="runtime_error", exit_code=3, stderr="FAIL"),
    "oom": RunResult(status="Finished", verdict="memory_limit", exit_code=None),
    "timeout": RunResult(status="TimeLimitExceeded", verdict="timeout", exit_code=None),
}
CHECKER = Checker(kind="python", source="def check(i, e, a):\n    return True\n", time_limit_s=1.0)


@pytest.fixture(autouse=True)
def _fresh_reference_cache():
    ck._ref_ok.clear()
    yield
    ck._ref_ok.clear()


@pytest.mark.parametrize("failure", FAILURES, ids=list(FAILURES))
def test_checker_failure_on_the_output_is_the_submissions_wrong_answer(failure: str) -> None:
    j = Scripted(FAILURES[failure])
    p = _problem(CHECKER)
    verdict, message = checked(p, p.tests[0], "garbage that breaks the checker", j)
    assert verdict == "wrong_answer" and "made the checker fail" in message
    assert j.runs == ["output", "ref"]
    for mode in REWARD_MODES:  # a failure in every reward mode, never excluded
        assert score(mode, RewardShaping(sandbox_error="exclude"), accepted=False, pass_ratio=0.0,
                     status=verdict) is not None


@pytest.mark.parametrize("failure", FAILURES, ids=list(FAILURES))
def test_checker_failing_on_the_reference_output_is_infrastructure(failure: str) -> None:
    j = Scripted(FAILURES[failure], ref_ok=False)
    p = _problem(CHECKER)
    verdict, message = checked(p, p.tests[0], "anything", j)
    assert verdict == "sandbox_error" and "reference output" in message
    assert ck.self_check(j, p) is not None and "test 0" in ck.self_check(j, p)


def test_reference_check_runs_once_per_test_and_checker_time_is_bounded() -> None:
    j = Scripted(FAILURES["timeout"])
    p = _problem(CHECKER, n_tests=6)
    budget = CheckBudget(3)
    verdicts = [checked(p, t, "x", j, budget)[0] for t in p.tests]
    assert verdicts == ["wrong_answer"] * 6
    # three failing checks (each with its reference check), then the budget is spent: no more checker runs
    assert j.runs == ["output", "ref"] * 3
    j.runs.clear()
    checked(p, p.tests[0], "y", j, CheckBudget(3))
    assert j.runs == ["output"]  # the reference check of test 0 is remembered
    unbounded = CheckBudget(0)
    for t in p.tests:
        checked(p, t, "x", j, unbounded)
    assert unbounded.failures == 6


# ------------------------------------------------------------------------------------------------ real sandbox
HOSTILE_CHECKER = Checker(
    kind="python",
    time_limit_s=1.0,
    memory_limit_mb=256,
    source=(
        "import os\n"
        "def check(input, expected, actual):\n"
        "    if 'crash' in actual:\n"
        "        os._exit(7)\n"
        "    if 'hang' in actual:\n"
        "        while True:\n"
        "            pass\n"
        "    if 'oom' in actual:\n"
        "        hog = [bytearray(1 << 20) for _ in range(4096)]\n"
        "    return actual.split() == expected.split()\n"
    ),
)


@pytest.mark.slow
@pytest.mark.parametrize("word", ["crash", "hang", "oom"])
def test_output_that_breaks_a_real_checker_is_wrong_answer(judge, word: str) -> None:
    p = _problem(HOSTILE_CHECKER, n_tests=2)
    res = judge.judge(p, f"input()\nprint({word!r})\n")
    assert res.verdict == "wrong_answer" and {t.verdict for t in res.tests} == {"wrong_answer"}
    if word != "oom":  # the function driver turns a MemoryError into a rejection: wrong_answer either way
        assert "made the checker fail" in res.tests[0].message
    assert judge.judge(p, "print(input())\n").verdict == "accepted"


@pytest.mark.slow
def test_checker_broken_on_the_reference_is_sandbox_error_and_fails_governance(judge) -> None:
    broken = Checker(kind="python", source="import os\ndef check(i, e, a):\n    os._exit(7)\n", time_limit_s=2.0)
    p = _problem(broken)
    assert judge.judge(p, "print(input())\n").verdict == "sandbox_error"
    assert "test 0" in (ck.self_check(judge, p) or "")
    assert ck.self_check(judge, _problem(HOSTILE_CHECKER, n_tests=2)) is None


@pytest.mark.slow
def test_governance_drops_a_problem_whose_checker_fails_on_its_reference(judge) -> None:
    from rlvr.data.governance import _checker_audit

    broken = Checker(kind="python", source="def check(i, e, a):\n    return a != e\n", time_limit_s=2.0)
    good, bad = _problem(HOSTILE_CHECKER), _problem(broken).model_copy(update={"id": "t/broken"})
    kept, report = _checker_audit([good, bad], judge)
    assert [p.id for p in kept] == [good.id]
    assert report["checked"] == 2 and report["dropped"][0]["id"] == "t/broken"
    assert "rejects the reference output" in report["dropped"][0]["reason"]


def test_the_request_bounds_of_rewards_and_client_count_checker_time() -> None:
    from rlvr.reward.scoring import judge_bound_s

    plain = _problem(CHECKER, n_tests=4).model_copy(update={"checker": None})
    checked_problem = _problem(CHECKER.model_copy(update={"time_limit_s": 10.0}), n_tests=4)
    assert judge_bound_s(checked_problem) == judge_bound_s(plain) + 2 * 4 * 12.0 + 130.0
    from rlvr.judge.client import RemoteJudge

    assert RemoteJudge._hang_timeout(checked_problem, 4) == judge_bound_s(checked_problem)
    assert RemoteJudge._hang_timeout(checked_problem, 4, False) == judge_bound_s(plain)  # call_outputs: no checks
