"""The data stages' time rules give the same result at any supported load (issue 45, item 5): oracle filling
(:func:`rlvr.data.oracles.fill_expected`), reference verification (:func:`rlvr.data.references.verify_references`)
and the judge_check counts (:func:`rlvr.judge.check.check_references`) re-run a timed-out reference with CPU-judged
limits (:mod:`rlvr.judge.settle`), so a reference near (or past) its wall limit is kept, and one that cannot finish is
dropped, the same way on an idle machine and on one ``slowdown`` times slower.

The fake judge models the embedded judge's limits: a plain limit is a wall limit (``need × slowdown`` must fit); a
CPU-judged copy's limit is a CPU limit (``need`` must fit) with a wall backstop of ``MAX_SLOWDOWN`` × it."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from rlvr.data.oracles import FILL_RETRY_FACTOR, fill_expected
from rlvr.data.references import ReferenceParams, verify_references
from rlvr.data.schema import CallTest, Problem, StdioTest
from rlvr.judge.check import check_references
from rlvr.judge.settle import MAX_SLOWDOWN, TIMEOUT_MARGIN, cpu_judged, cpu_judged_slack
from rlvr.judge.verdict import JudgeResult, TestResult

SLOWDOWNS = [1.0, 2.5, 7.5]  # idle; 2 x the cores busy on 2 cores; load ~14 on 2 cores (under MAX_SLOWDOWN)


class _Machine:
    """A judge on a machine ``slowdown`` times slower than idle. A program's CPU seconds per test come from
    ``need(problem, solution, test_index)``; ``math.inf`` is a CPU-bound infinite loop."""

    def __init__(self, need, slowdown: float):
        self.need, self.slowdown, self.calls = need, slowdown, []

    def _timed_out(self, p: Problem, t, cpu: float) -> bool:
        tl = t.time_limit_s or p.time_limit_s
        slack = cpu_judged_slack(p)
        if slack:  # CPU limit (RLIMIT_CPU / the call server's CPU), wall only a backstop
            return cpu > tl or cpu * self.slowdown > tl * slack
        return cpu * self.slowdown > tl

    def call_outputs(self, p: Problem, solution: str) -> list[str | None]:
        self.calls.append(("call_outputs", p.time_limit_s, cpu_judged_slack(p)))
        return [None if self._timed_out(p, t, self.need(p, solution, i)) else repr(i) for i, t in enumerate(p.tests)]

    def judge_many(self, items):
        self.calls.append(("judge_many", [p.time_limit_s for p, _ in items], [cpu_judged_slack(p) for p, _ in items]))
        out = []
        for p, s in items:
            tests = [TestResult(index=i, verdict="timeout" if self._timed_out(p, t, self.need(p, s, i)) else "accepted")
                     for i, t in enumerate(p.tests)]
            passed = sum(t.verdict == "accepted" for t in tests)
            out.append(JudgeResult(verdict="accepted" if passed == len(tests) else "timeout", passed=passed,
                                   total=len(tests), pass_ratio=passed / len(tests), judge_s=0.0, tests=tests))
        return out


def _evalplus(needs: list[float]) -> tuple[Problem, Callable[[Problem, str, int], float]]:
    """An EvalPlus-like problem (6 s per test, HumanEval+'s fill limit) whose reference needs ``needs[i]`` CPU
    seconds on test ``i``."""
    p = Problem(id="humanevalplus/HumanEval/83", source="humanevalplus", split="test", statement="s",
                entry_point="f", time_limit_s=6.0, solutions=["def f(n): ..."],
                tests=[CallTest(args=f"[{i}]", group="plus") for i in range(len(needs))])
    return p, lambda _p, _s, i: needs[i]


@pytest.mark.parametrize("slowdown", SLOWDOWNS)
def test_oracle_filling_keeps_a_reference_that_times_out_at_1x_idle_or_busy(slowdown):
    # test 1 needs 9 s of CPU: over its 6 s wall limit even idle, far under FILL_RETRY_FACTOR x 6 s of CPU; the old
    # rule (a second run at 10 x the *wall* limit) dropped it once the machine was 60/9 ~ 6.7 x slower
    p, need = _evalplus([0.1, 9.0, 0.2])
    judge = _Machine(need, slowdown)
    (out,), rep = fill_expected([p], judge, measure_limits=False)
    assert [t.expected for t in out.tests] == ["0", "1", "2"]
    assert rep["tests_failed"] == 0 and rep["failed_tests"] == {} and rep["dropped"] == []
    assert judge.calls == [("call_outputs", 6.0, 0.0), ("call_outputs", 6.0 * FILL_RETRY_FACTOR, MAX_SLOWDOWN)]


def test_oracle_filling_drops_a_cpu_bound_infinite_loop_the_same_idle_or_busy():
    results = []
    for slowdown in SLOWDOWNS:
        p, need = _evalplus([0.1, math.inf, 0.2])
        results.append(fill_expected([p], _Machine(need, slowdown), measure_limits=False))
    (out, rep), *rest = results
    assert all(r == (out, rep) for r in rest)
    assert [t.expected for t in out[0].tests] == ["0", "2"] and rep["failed_tests"] == {p.id: 1}


def test_oracle_filling_decides_by_the_retry_alone():
    # a test that fits idle but not busy at 1x, and one that needs more than the retry's CPU: kept / dropped alike
    p, need = _evalplus([5.0, 61.0])
    outs = {s: fill_expected([p], _Machine(need, s), measure_limits=False) for s in SLOWDOWNS}
    assert all(o == outs[1.0] for o in outs.values())
    assert [t.expected for t in outs[1.0][0][0].tests] == ["0"]


def _stdio(pid: str = "codecontests/1") -> Problem:
    return Problem(id=pid, source="codecontests", split="train", statement="s", time_limit_s=10.0,
                   solutions=["print(1)"], incorrect_solutions=["while True: pass"],
                   tests=[StdioTest(stdin="", stdout="1"), StdioTest(stdin="", stdout="1")], meta={"role": "train"})


def _needs(reference_s: float):
    """The reference needs ``reference_s`` CPU seconds per test; the incorrect solution loops forever."""
    return lambda _p, s, _i: reference_s if s == "print(1)" else math.inf


@pytest.mark.parametrize("slowdown", SLOWDOWNS)
def test_a_reference_between_1x_and_the_margin_is_accepted_idle_or_busy(slowdown):
    # 12 s of CPU against a 10 s limit (the CodeContests case: a second run is needed even idle); the old rule's
    # second run at 3 x the wall limit rejected it once the machine was 30/12 = 2.5 x slower
    judge = _Machine(_needs(12.0), slowdown)
    rows, rep = verify_references([_stdio()], judge, ReferenceParams())
    assert [(r["kind"], r["verdict"], r["pass_ratio"]) for r in rows] == [("solution", "accepted", 1.0),
                                                                         ("incorrect", "timeout", 0.0)]
    assert rep["counts"]["references_accepted"] == 1 and rep["counts"]["incorrect_rejected"] == 1
    second = judge.calls[1]
    assert second[1] == [10.0 * TIMEOUT_MARGIN] * 2 and second[2] == [MAX_SLOWDOWN] * 2


def test_reference_rows_and_judge_check_counts_are_the_same_at_every_supported_load():
    for reference_s in (3.0, 9.5, 12.0, 29.0, 31.0, math.inf):
        rows = {s: verify_references([_stdio()], _Machine(_needs(reference_s), s), ReferenceParams())
                for s in SLOWDOWNS}
        assert all(r == rows[1.0] for r in rows.values()), reference_s
        assert rows[1.0][0][0]["accepted"] is (reference_s < 10.0 * TIMEOUT_MARGIN)
        checks = {s: check_references([_stdio()], _Machine(_needs(reference_s), s)) for s in SLOWDOWNS}
        assert all(c == checks[1.0] for c in checks.values()), reference_s


def test_cpu_judged_copies_only_the_limits():
    p = _stdio()
    q = cpu_judged(p, 3.0)
    assert q.time_limit_s == 30.0 and cpu_judged_slack(q) == MAX_SLOWDOWN and cpu_judged_slack(p) == 0.0
    assert q.tests == p.tests and {k: v for k, v in q.meta.items() if k in p.meta} == p.meta
    with pytest.raises(ValueError, match="slowdown"):
        cpu_judged(p, 3.0, slowdown=0.5)
    with pytest.raises(ValueError, match="factor"):
        cpu_judged(p, 0.0)
