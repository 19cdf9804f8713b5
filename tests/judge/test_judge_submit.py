"""One submission across runners (``rlvr/judge/submit.py``, the runner's frames in ``inside/runner.py``), with the
real embedded judge: a runner that dies mid-batch costs only the test it was running; records of the tests before it
are kept and the tests after it still run; large records never break the frame cap the host enforces."""

from __future__ import annotations

import signal

import pytest

from rlvr.data.schema import Problem
from rlvr.judge import Judge
from rlvr.judge.sandbox.host import FRAME_CAP

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


def test_runner_killed_late_in_a_stdio_batch_costs_only_that_test(judge):
    res = judge.judge(stdio_problem(["1", "2", "3", "kill", "5", "6"]), KILL_STDIO)
    assert verdicts(res) == ["accepted"] * 3 + ["runtime_error"] + ["accepted"] * 2, res.message
    assert judge.judge(stdio_problem(["1", "2"]), KILL_STDIO).verdict == "accepted"  # the worker is fine after it


def test_runner_killed_late_in_a_call_batch_costs_only_that_test(judge):
    res = judge.judge(call_problem([1, 2, 3, 99, 5, 6]), KILL_CALL)
    assert verdicts(res) == ["accepted"] * 3 + ["runtime_error"] + ["accepted"] * 2, res.message
    outs = judge.call_outputs(call_problem([1, 2, 99, 4]), KILL_CALL)
    assert outs == ["2", "4", None, "8"]  # an oracle loses the killing input only


def test_runner_killed_before_the_driver_relay_still_runs_the_assert_tests(judge):
    # ``assert f(2) + 1 == 5`` is not of the ``f(x) == literal`` shape: it runs in the driver sandbox, relayed to a
    # runner that must be a live one
    p = call_problem([1, 99, 3], [{"kind": "assert", "code": "assert f(2) + 1 == 5"}])
    assert verdicts(judge.judge(p, KILL_CALL)) == ["accepted", "runtime_error", "accepted", "accepted"]


def test_runner_killed_during_the_driver_relay_costs_only_that_assert_test(judge):
    # the runner dies inside the relay (while the driver runs the second assert test): that test fails, a fresh
    # runner serves the assert tests after it, and the call tests' records from before the relay are kept
    asserts = [{"kind": "assert", "code": f"assert f({x}) + 1 == {2 * x + 1}"} for x in (2, 99, 3, 4)]
    res = judge.judge(call_problem([1], asserts), KILL_CALL)
    assert verdicts(res) == ["accepted", "accepted", "runtime_error", "accepted", "accepted"], res.message
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


def test_timeouts_before_a_runner_death_still_count_towards_max_timeouts(judge):
    code = "import time\ns = input()\nif s == 'kill':\n    import os; os.kill(os.getppid(), 9)\ntime.sleep(5)\n"
    res = judge.judge(stdio_problem(["1", "2", "kill", "4", "5", "6"], time_limit_s=0.5), code)
    assert verdicts(res) == ["timeout", "timeout", "runtime_error", "timeout", "timeout", "timeout"]
    assert "not run" in res.tests[4].message and "not run" in res.tests[5].message  # max_timeouts = 3 reached


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


def test_a_runner_exception_costs_only_that_test_and_is_logged(judge, caplog):
    with caplog.at_level("WARNING", logger="rlvr.judge.submit"):
        res = judge.judge(stdio_problem(["1", "int", "3", "4"]), INTERRUPT_STDIO)
    assert verdicts(res) == ["accepted", "runtime_error", "accepted", "accepted"]
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
    assert verdicts(res) == ["accepted", "runtime_error", "accepted", "accepted"]
    assert any("KeyboardInterrupt" in r.getMessage() for r in caplog.records)

