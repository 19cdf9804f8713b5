"""One submission across runners (``rlvr/judge/submit.py``, the runner's frames in ``inside/runner.py``), with the
real embedded judge: a runner that the submission kills is that submission's verdict, not a second attempt (issue 43,
item 5): every test without a record fails and none runs again; records that arrived are kept; only a sandbox lost
under the submission (killed from the host here) reruns the remaining tests, counted in ``retries``; large records
never break the frame cap the host enforces."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from rlvr.data.schema import Problem
from rlvr.judge import Judge
from rlvr.judge.sandbox.session import FRAME_CAP

# the runner is killed by the submission itself during the test whose input is "kill" / 99
KILL_STDIO = (
    "import os, signal\n"
    "s = input()\n"
    "if s == 'kill':\n"
    "    os.kill(os.getppid(), signal.SIGKILL)\n"
    "print(int(s) * 2)\n"
)
KILL_CALL = (
    "import os, signal\n"
    "def f(x):\n"
    "    if x == 99:\n"
    "        os.kill(os.getppid(), signal.SIGKILL)\n"  # the call server's parent is the runner
    "    return x * 2\n"
)


def stdio_problem(stdins: list[str], time_limit_s: float = 5.0) -> Problem:
    tests = [{"kind": "stdio", "stdin": s, "stdout": str(int(s) * 2) if s.isdigit() else "?"} for s in stdins]
    return Problem(id="t/kill", source="t", split="test", statement="", time_limit_s=time_limit_s, tests=tests)


def call_problem(xs: list[int], extra: list[dict] | None = None) -> Problem:
    tests = [{"kind": "call", "args": f"[{x}]", "expected": repr(x * 2)} for x in xs]
    return Problem(id="t/killf", source="t", split="test", statement="", entry_point="f",
                   tests=tests + (extra or []))


def verdicts(res) -> list[str]:
    return [t.verdict for t in res.tests]


def test_runner_killed_late_in_a_stdio_batch_runs_no_test_again(judge):
    # the records of the tests it ran before were still in the runner (one frame per megabyte): they fail with it,
    # and neither they nor the tests after it run again in a fresh runner (that would be a second attempt)
    res = judge.judge(stdio_problem(["1", "2", "3", "kill", "5", "6"]), KILL_STDIO)
    assert verdicts(res) == ["runtime_error"] * 6, res.message
    assert res.retries == 0
    assert judge.judge(stdio_problem(["1", "2"]), KILL_STDIO).verdict == "accepted"  # the worker is fine after it


def test_runner_killed_on_the_last_test_gets_no_second_attempt_at_the_others(judge):
    res = judge.judge(stdio_problem(["1", "2", "3", "kill"]), KILL_STDIO)
    assert verdicts(res) == ["runtime_error"] * 4 and res.pass_ratio == 0.0, res.message


def test_runner_killed_late_in_a_call_batch_runs_no_test_again(judge):
    res = judge.judge(call_problem([1, 2, 3, 99, 5, 6]), KILL_CALL)
    assert verdicts(res) == ["runtime_error"] * 6, res.message
    outs = judge.call_outputs(call_problem([1, 2, 99, 4]), KILL_CALL)
    assert outs == [None] * 4  # an oracle that kills its runner gives no output at all


def test_runner_killed_before_the_driver_relay_fails_the_assert_tests(judge):
    # ``assert f(2) + 1 == 5`` is not of the ``f(x) == literal`` shape: it runs in the driver sandbox, relayed to a
    # runner, which the submission killed before
    p = call_problem([1, 99, 3], [{"kind": "assert", "code": "assert f(2) + 1 == 5"}])
    assert verdicts(judge.judge(p, KILL_CALL)) == ["runtime_error"] * 4


def test_runner_killed_during_the_driver_relay_fails_the_assert_tests_from_there(judge):
    # the runner dies inside the relay (while the driver runs the second assert test): that test and every later one
    # fail (no fresh runner), the call tests' records from before the relay and the first assert test's are kept
    asserts = [{"kind": "assert", "code": f"assert f({x}) + 1 == {2 * x + 1}"} for x in (2, 99, 3, 4)]
    res = judge.judge(call_problem([1], asserts), KILL_CALL)
    assert verdicts(res) == ["accepted", "accepted", "runtime_error", "runtime_error", "runtime_error"], res.message
    assert res.retries == 0
    assert judge.judge(call_problem([1, 2]), KILL_CALL).verdict == "accepted"  # the worker is fine after it


def test_a_submission_that_kills_every_runner_in_the_relay_fails_those_tests_and_ends(judge):
    code = "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n"
    asserts = [{"kind": "assert", "code": f"assert f({x}) + 1 == {2 * x + 1}"} for x in range(8)]
    res = judge.judge(call_problem([], asserts), code)
    assert verdicts(res) == ["runtime_error"] * 8


def test_a_submission_that_kills_every_runner_fails_every_test_and_ends(judge):
    code = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint(2)\n"
    res = judge.judge(stdio_problem(["1"] * 8), code)
    assert verdicts(res) == ["runtime_error"] * 8
    assert judge.judge(stdio_problem(["1"]), "print(2)").verdict == "accepted"


def test_timeouts_before_a_runner_death_run_no_second_time(judge):
    code = "import time\ns = input()\nif s == 'kill':\n    import os; os.kill(os.getppid(), 9)\ntime.sleep(5)\n"
    res = judge.judge(stdio_problem(["1", "2", "kill", "4", "5", "6"], time_limit_s=0.5), code)
    assert verdicts(res) == ["runtime_error"] * 6


def test_call_values_larger_than_a_frame_in_total_all_arrive(judge):
    # 26 returns of 3 M characters: 78 MB of records, more than one frame may hold (HumanEval+/15 and /130: 147 and
    # 124 MB); each must reach the host
    n = 26
    assert n * 3_000_000 > FRAME_CAP
    big = repr("x" * 3_000_000)
    p = Problem(id="t/big", source="t", split="test", statement="", entry_point="f",
                tests=[{"kind": "call", "args": f"[{i}]", "expected": big} for i in range(n)])
    res = judge.judge(p, "def f(i):\n    return 'x' * 3_000_000\n")
    assert verdicts(res) == ["accepted"] * n, res.message


def test_one_stdio_record_over_the_frame_cap_fails_that_test_alone(judge):
    # 12 MB of undecodable bytes on stdout (under the 16 MB output limit) are 72 MB as JSON (``\udcff``: 6 bytes per
    # byte), over the frame cap. (A call's value cannot get there: the call server's own record cap is 16 MiB of JSON.)
    code = ("import sys\ns = input()\nif s == '2':\n    sys.stdout.buffer.write(b'\\xff' * 12_000_000)\n"
            "else:\n    print(int(s) * 2)\n")
    res = judge.judge(stdio_problem(["1", "2", "3"]), code)
    assert verdicts(res) == ["accepted", "runtime_error", "accepted"], res.message
    assert "frame cap" in res.tests[1].message


def test_a_call_server_that_dies_after_loading_costs_only_that_call(judge):
    code = ("import os, signal\ndef f(x):\n    if x == 99:\n        os.kill(os.getpid(), signal.SIGSEGV)\n"
            "    return x * 2\n")
    res = judge.judge(call_problem([1, 99, 3, 4]), code)
    assert verdicts(res) == ["accepted", "runtime_error", "accepted", "accepted"], res.message
    assert "SIGSEGV" in res.tests[1].message


# the runner gets a KeyboardInterrupt from the submission during the test whose input is "int": its own exception,
# reported on an ``error`` frame
INTERRUPT_STDIO = (
    "import os, signal, time\n"
    "s = input()\n"
    "if s == 'int':\n"
    "    os.kill(os.getppid(), signal.SIGINT)\n"
    "    time.sleep(1)\n"
    "print(int(s) * 2)\n"
)


def test_a_runner_exception_is_a_death_and_is_logged(judge, caplog):
    with caplog.at_level("WARNING", logger="rlvr.judge.submit"):
        res = judge.judge(stdio_problem(["1", "int", "3", "4"]), INTERRUPT_STDIO)
    assert verdicts(res) == ["runtime_error"] * 4
    assert any("KeyboardInterrupt" in r.getMessage() for r in caplog.records)


@pytest.fixture
def judge_started_ignoring_sigint():
    """A fresh one-worker judge started while this process ignores SIGINT, SIGQUIT and SIGHUP, as a judge started as
    a background job of a non-interactive shell (``pytest … &``) or under ``nohup`` does: ignored dispositions
    survive ``exec``, so its sandboxes inherit them. The host's handlers are restored once its sandboxes started."""
    sigs = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
    before = {s: signal.signal(s, signal.SIG_IGN) for s in sigs}
    try:
        j = Judge(workers=1)
        j.run_code("pass")  # starts the sandbox now, under the ignored signals
    finally:
        for s, h in before.items():
            signal.signal(s, h)
    yield j
    j.close()


def test_the_sandbox_signal_state_does_not_depend_on_how_the_host_was_started(judge_started_ignoring_sigint, caplog):
    # both parametrisations of the runner exception test failed whenever the suite ran as a background job: the
    # sandbox inherited SIGINT ignored, the runner never raised the KeyboardInterrupt, nothing was logged
    code = ("import signal\nprint(signal.getsignal(signal.SIGINT) is signal.default_int_handler,"
            " signal.getsignal(signal.SIGQUIT).name, signal.getsignal(signal.SIGHUP).name)\n")
    assert judge_started_ignoring_sigint.run_code(code).stdout == "True SIG_DFL SIG_DFL\n"
    with caplog.at_level("WARNING", logger="rlvr.judge.submit"):
        res = judge_started_ignoring_sigint.judge(stdio_problem(["1", "int", "3", "4"]), INTERRUPT_STDIO)
    assert verdicts(res) == ["runtime_error"] * 4
    assert any("KeyboardInterrupt" in r.getMessage() for r in caplog.records)



@pytest.fixture
def judge1():
    """A fresh one-worker judge: the host knows which sandbox a submission runs in."""
    j = Judge(workers=1)
    yield j
    j.close()


SLOW_STDIO = "import time\ntime.sleep(0.4)\nprint(int(input()) * 2)\n"


def _kill_warden_after(judge1: Judge, delay_s: float) -> threading.Thread:
    """SIGKILL the sandbox's warden (its host pid) from the host after ``delay_s`` seconds: infrastructure, what no
    submission can do."""
    warden = judge1._all[0].runner._inner[0][0]

    def kill():
        time.sleep(delay_s)
        os.kill(warden, signal.SIGKILL)

    t = threading.Thread(target=kill)
    t.start()
    return t


def test_a_sandbox_lost_under_a_submission_is_retried_and_counted(judge1):
    assert judge1.judge(stdio_problem(["1"]), "print(2)").verdict == "accepted"  # a started sandbox
    killer = _kill_warden_after(judge1, 0.6)
    res = judge1.judge(stdio_problem(["1", "2", "3", "4"]), SLOW_STDIO)
    killer.join()
    assert verdicts(res) == ["accepted"] * 4, res.message
    assert res.retries == 1
    assert judge1.judge(stdio_problem(["1"]), "print(2)").retries == 0


def test_a_sandbox_lost_during_the_driver_relay_sends_that_call_again(judge1):
    code = "import time\ndef f(x):\n    time.sleep(0.4)\n    return x * 2\n"
    asserts = [{"kind": "assert", "code": f"assert f({x}) + 1 == {2 * x + 1}"} for x in (2, 3, 4, 5)]
    assert judge1.judge(call_problem([1]), code).verdict == "accepted"
    killer = _kill_warden_after(judge1, 1.0)
    res = judge1.judge(call_problem([1], asserts), code)
    killer.join()
    assert verdicts(res) == ["accepted"] * 5, res.message
    assert res.retries == 1


def test_a_run_code_lost_sandbox_is_retried_and_counted(judge1):
    judge1.run_code("pass")
    killer = _kill_warden_after(judge1, 0.3)
    rr = judge1.run_code("import time\ntime.sleep(0.8)\nprint('ok')\n")
    killer.join()
    assert (rr.verdict, rr.stdout, rr.retries) == ("accepted", "ok\n", 1)
