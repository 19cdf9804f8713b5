"""Verdicts of trusted programs near their time limit (rlvr.judge.settle): a timed-out program is judged again with
CPU limits of 3 x the limits (wall only a backstop) and that verdict is final, so the result does not depend on
whether, or how much, the first run was slowed."""

from __future__ import annotations

import pytest

from rlvr.data.references import ReferenceParams, verify_references
from rlvr.data.schema import CallTest, Problem, StdioTest
from rlvr.judge.check import check_references
from rlvr.judge.settle import cpu_judged, cpu_judged_slack, judge_settled, relaxed, timed_out
from rlvr.judge.verdict import JudgeResult, TestResult


def _problem(pid: str = "p/1", tl: float = 1.0) -> Problem:
    return Problem(id=pid, source="p", split="train", statement="s", time_limit_s=tl, solutions=["print(1)"],
                   tests=[StdioTest(stdin="", stdout="1"), StdioTest(stdin="", stdout="1", time_limit_s=0.5)],
                   meta={"role": "train"})


class _SlowJudge:
    """A program needing ``need_s`` seconds per test, on a machine ``slowdown`` times slower during the first
    ``slow_calls`` judge_many calls (the load going away later)."""

    def __init__(self, need_s: float, slowdown: float = 1.0, slow_calls: int = 1):
        self.need, self.slowdown, self.slow_calls, self.calls = need_s, slowdown, slow_calls, []

    def judge_many(self, items):
        factor = self.slowdown if len(self.calls) < self.slow_calls else 1.0
        self.calls.append([p.time_limit_s for p, _ in items])
        out = []
        for p, _ in items:
            tests = []
            for i, t in enumerate(p.tests):
                tl = t.time_limit_s or p.time_limit_s
                took = self.need * factor
                tests.append(TestResult(index=i, verdict="accepted" if took <= tl else "timeout", time_s=min(took, tl)))
            passed = sum(t.verdict == "accepted" for t in tests)
            verdict = "accepted" if passed == len(tests) else "timeout"
            out.append(JudgeResult(verdict=verdict, passed=passed, total=len(tests),
                                   pass_ratio=passed / len(tests), judge_s=0.0, tests=tests))
        return out


def test_relaxed_scales_the_problem_and_test_limits():
    p = relaxed(_problem(), 2.0)
    assert p.time_limit_s == 2.0 and [t.time_limit_s for t in p.tests] == [None, 1.0]
    with pytest.raises(ValueError, match="factor"):
        relaxed(_problem(), 0)


@pytest.mark.parametrize("slowdown", [1.0, 1.5, 2.5])
def test_a_reference_near_its_limit_gets_one_verdict_idle_or_busy(slowdown):
    # needs 0.45 s on an idle machine against a 0.5 s limit: accepted idle; under load its first run times out,
    # the second (at 1.5 s) accepts it — the same verdict and pass_ratio either way
    judge = _SlowJudge(0.45, slowdown=slowdown, slow_calls=2)
    (r,) = judge_settled(judge, [(_problem(), "x")])
    assert (r.verdict, r.pass_ratio) == ("accepted", 1.0)
    assert len(judge.calls) == (1 if slowdown == 1.0 else 2)


def test_a_reference_over_its_limit_is_judged_at_the_margin():
    judge = _SlowJudge(1.2)  # over 0.5 s, under 3 × 0.5 s
    (r,) = judge_settled(judge, [(_problem(), "x")])
    assert r.verdict == "accepted" and judge.calls == [[1.0], [3.0]]
    (r,) = judge_settled(_SlowJudge(1.6), [(_problem(), "x")])  # over the margin too
    assert r.verdict == "timeout" and timed_out(r)
    (r,) = judge_settled(_SlowJudge(1.2), [(_problem(), "x")], margin=1.0)  # margin 1: no second run
    assert r.verdict == "timeout"


def test_only_the_timed_out_programs_are_judged_again():
    judge = _SlowJudge(0.45, slowdown=1.5)
    items = [(_problem("p/1"), "x"), (_problem("p/2", tl=5.0).model_copy(update={"tests": [StdioTest(
        stdin="", stdout="1")]}), "y")]
    rs = judge_settled(judge, items)
    assert [r.verdict for r in rs] == ["accepted", "accepted"] and judge.calls == [[1.0, 5.0], [3.0]]


def test_reference_rows_and_judge_check_do_not_follow_the_load():
    rows = {}
    for slowdown in (1.0, 2.8):
        r, rep = verify_references([_problem()], _SlowJudge(0.45, slowdown=slowdown), ReferenceParams())
        rows[slowdown] = (r, rep)
    assert rows[1.0] == rows[2.8] and rows[1.0][0][0]["accepted"] is True
    idle = check_references([_problem()], _SlowJudge(0.45))
    busy = check_references([_problem()], _SlowJudge(0.45, slowdown=2.8))
    assert idle["accepted"] == busy["accepted"] == 1 and idle["verdicts"] == busy["verdicts"]


def test_real_judge_rejudges_a_program_just_over_its_limit(judge):
    # sleeping is wall time, not CPU: 0.7 s against 0.5 s times out; the second run limits CPU (1.5 s, wall only a
    # backstop of MAX_SLOWDOWN x 1.5 s), so even a 2.5 s sleeper is accepted there
    p = Problem(id="s/1", source="s", split="train", statement="s", time_limit_s=0.5, tests=[StdioTest(
        stdin="", stdout="1")])
    slow, fast = "import time\ntime.sleep(0.7)\nprint(1)", "print(1)"
    assert judge.judge(p, slow).verdict == "timeout"
    assert [r.verdict for r in judge_settled(judge, [(p, slow), (p, fast)])] == ["accepted", "accepted"]
    assert judge_settled(judge, [(p, "import time\ntime.sleep(2.5)\nprint(1)")])[0].verdict == "accepted"


@pytest.mark.slow  # CPU-bound loops run to their CPU limits: ~10 s idle, more under load
def test_real_judge_cpu_judged_limits_count_cpu_seconds(judge):
    # a CPU-judged copy's limit is on CPU seconds (stdio: RLIMIT_CPU; call: the call server's CPU from /proc), so a
    # program sleeping past it passes and a CPU-bound loop is stopped by it: what load cannot change
    stdio = Problem(id="s/2", source="s", split="train", statement="s", time_limit_s=1.0,
                    tests=[StdioTest(stdin="", stdout="1")])
    call = Problem(id="c/2", source="c", split="train", statement="s", time_limit_s=1.0, entry_point="f",
                   tests=[CallTest(args="[]", expected="1")])
    sleep_stdio, spin_stdio = "import time\ntime.sleep(2)\nprint(1)", "while True:\n    pass"
    sleep_call = "import time\ndef f():\n    time.sleep(2)\n    return 1"
    spin_call = "def f():\n    while True:\n        pass"
    assert judge.judge(stdio, sleep_stdio).verdict == "timeout"
    assert [judge.judge(cpu_judged(stdio, 1.0), c).verdict for c in (sleep_stdio, spin_stdio)] == [
        "accepted", "timeout"]
    assert judge.call_outputs(call, sleep_call) == [None]
    assert judge.call_outputs(cpu_judged(call, 1.0), sleep_call) == ["1"]
    assert judge.call_outputs(cpu_judged(call, 1.0), spin_call) == [None]


def test_the_server_judges_a_request_at_its_wall_limits():
    # CPU-judged limits stretch the wall limit MAX_SLOWDOWN x: the pipeline's own, never a client's to ask for
    from rlvr.judge.api.native import JudgeRequest

    p = cpu_judged(_problem(), 3.0)
    got = JudgeRequest(problem=p, solution="print(1)").to_problem()
    assert cpu_judged_slack(got) == 0.0 and got.meta == {"role": "train"} and got.time_limit_s == 3.0
