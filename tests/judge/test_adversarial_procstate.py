"""Adversarial suite, process state that outlives a submission (issue 43, items 1 and 6).

Each case of :mod:`hostile.procstate` tries to change the rlimits, priority, scheduling, affinity or I/O priority of
the sandbox's warden or zygote (or of every process of its uid, process group or autogroup) from a test child, the
call server or the driver's test code; it must not be ``accepted`` (the call was refused), and a correct submission
judged right after it on the same worker must be ``accepted`` (nothing it changed was inherited). The autogroup's nice
value (shared by every process of a sandbox) cannot be refused by seccomp: a raised one must be gone by the next
submission, in the submission sandbox and in the driver's. The second line,
the warden's own check after each submission, is driven from the host (root changes the warden's or zygote's nice
value from outside, which no submission can do): the next submission finds a fresh sandbox, or a fresh zygote.
"""

from __future__ import annotations

import os

import pytest
from hostile import OK_VERDICTS, PROBES, describe
from hostile.procstate import AUTOGROUP, AUTOGROUP_CASES, CASES, StateCase

from rlvr.data.schema import Problem
from rlvr.judge import Judge
from rlvr.judge.sandbox.procs import children

CORRECT_STDIO = "a, b = map(int, input().split())\nprint(a + b)\n"
CORRECT_ADD = "def add(a, b):\n    return a + b\n"
# not a plain ``assert add(...) == literal``: runs in the driver sandbox, as the hostile test code does
DRIVER_CHECK = "r = add(3, 4)\nassert r == 7\nassert add(1, 1) == 2\n"


def _assert_problem(code: str) -> Problem:
    return Problem(id="adv/procstate", source="adv", split="test", statement="add", entry_point="add",
                   tests=[{"kind": "assert", "code": code}], time_limit_s=5.0, memory_limit_mb=512)


@pytest.fixture(scope="module")
def judge1():
    """One worker, so every follow-up lands in the sandbox (and zygote, and driver sandbox) the case ran in."""
    j = Judge(workers=1)
    yield j
    j.close()


def _correct_after(judge1: Judge) -> list[str]:
    """Verdicts of a correct stdio program (a forked runner), a correct heavy one (cloned by the zygote), a correct
    call program and a correct program judged by driver test code."""
    return [judge1.judge(PROBES["stdio"](), CORRECT_STDIO).verdict,
            judge1.judge(PROBES["stdio"](), "import heapq\n" + CORRECT_STDIO).verdict,
            judge1.judge(PROBES["call"](), CORRECT_ADD).verdict,
            judge1.judge(_assert_problem(DRIVER_CHECK), CORRECT_ADD).verdict]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_process_state_is_not_the_submissions(judge1, case: StateCase):
    if case.kind == "stdio":
        res = judge1.judge(PROBES["stdio"](), case.code)
    elif case.kind == "call":
        res = judge1.judge(PROBES["call"](), case.code)
    else:
        res = judge1.judge(_assert_problem(case.code), CORRECT_ADD)
    assert res.verdict in OK_VERDICTS, f"{case.name} ({case.attempt}): {describe(res)}"
    assert _correct_after(judge1) == ["accepted"] * 4, f"the worker is broken after {case.name}"


def test_the_autogroup_attack_is_real(judge1):
    # the vector the autogroup cases close: the write succeeds (only the warden's check repairs it)
    rr = judge1.run_code(AUTOGROUP + "print(RAISE())\n")
    assert rr.stdout == "19\n", rr


@pytest.mark.parametrize("kind", sorted(AUTOGROUP_CASES))
def test_a_raised_autogroup_nice_value_does_not_outlive_its_submission(judge1, kind):
    code = AUTOGROUP_CASES[kind]
    if kind == "stdio":
        res = judge1.judge(PROBES["stdio"](), code)
    elif kind == "call":
        res = judge1.judge(PROBES["call"](), code)
    else:
        res = judge1.judge(_assert_problem(code), CORRECT_ADD)
    assert res.verdict in OK_VERDICTS, describe(res)
    assert judge1.run_code(AUTOGROUP + "print(NICE())\n").stdout == "0\n"  # the submission sandbox
    check = _assert_problem(AUTOGROUP + "assert NICE() == '0'\nassert add(3, 4) == 7\n")  # the driver sandbox
    assert judge1.judge(check, CORRECT_ADD).verdict == "accepted"
    assert _correct_after(judge1) == ["accepted"] * 4


def _warden(judge1: Judge) -> int:
    return judge1._all[0].runner._inner[0][0]  # the host pid of the sandbox's PID 1


def test_warden_restarts_its_sandbox_when_its_state_changed(judge1):
    assert judge1.judge(PROBES["stdio"](), CORRECT_STDIO).verdict == "accepted"  # a started sandbox
    warden = _warden(judge1)
    nice = os.getpriority(os.PRIO_PROCESS, warden)
    os.setpriority(os.PRIO_PROCESS, warden, 19)  # root, from outside: what no submission can do
    assert judge1.judge(PROBES["stdio"](), CORRECT_STDIO).verdict == "accepted"  # the warden notices after this one
    assert judge1.judge(PROBES["stdio"](), CORRECT_STDIO).verdict == "accepted"
    fresh = _warden(judge1)
    assert fresh != warden, "the warden kept running with a changed nice value"
    assert os.getpriority(os.PRIO_PROCESS, fresh) == nice


def test_warden_replaces_a_zygote_whose_state_changed(judge1):
    assert judge1.judge(PROBES["stdio"](), "import heapq\n" + CORRECT_STDIO).verdict == "accepted"
    warden = _warden(judge1)
    zygotes = children(warden)
    assert len(zygotes) == 1, zygotes
    os.setpriority(os.PRIO_PROCESS, zygotes[0], 15)  # root, from outside
    assert judge1.judge(PROBES["stdio"](), CORRECT_STDIO).verdict == "accepted"  # the warden notices after this one
    assert judge1.judge(PROBES["stdio"](), "import heapq\n" + CORRECT_STDIO).verdict == "accepted"
    assert _warden(judge1) == warden, "a zygote's change needs no sandbox restart"
    now = children(warden)
    assert len(now) == 1 and now != zygotes, "the zygote with a changed nice value was kept"
    assert os.getpriority(os.PRIO_PROCESS, now[0]) == os.getpriority(os.PRIO_PROCESS, warden)


SELF_CALLS = """
import os, resource
os.nice(1)
os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + 1)  # raising one's own nice is allowed
os.sched_setaffinity(0, os.sched_getaffinity(0))
os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (soft // 2, hard))
resource.prlimit(0, resource.RLIMIT_NOFILE, (soft // 4, hard))
assert resource.prlimit(1, resource.RLIMIT_NOFILE)[0] > 0  # reading another process's limits is allowed
"""


def test_a_program_may_still_change_its_own_state(judge1):
    # the seccomp checks refuse another process as the target, never the caller itself (pid 0)
    res = judge1.judge(PROBES["stdio"](), SELF_CALLS + CORRECT_STDIO)
    assert res.verdict == "accepted", describe(res)
    res = judge1.judge(PROBES["call"](), SELF_CALLS + CORRECT_ADD)
    assert res.verdict == "accepted", describe(res)
    assert _correct_after(judge1) == ["accepted"] * 4
