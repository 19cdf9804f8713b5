"""The sandbox's zygote (``inside/zygote.py``: :func:`zygote_main`, :class:`Zygote`) and the host's routing bit
(``rlvr/judge/sandbox/host.py``: :func:`names_zygote_module`).

A submission whose text names a module of :data:`ZYGOTE_MODULES` ("heavy") runs in a runner cloned from the zygote,
whose image holds the preload list: it finds those modules loaded before its own imports run. Any other submission
("light") runs in a runner forked from the lean warden and finds none of them. The probes below build the module names
at run time (``"ty" + "ping"``) so that the probe's own text does not route it.
"""

from __future__ import annotations

import pytest

from rlvr.data.schema import Problem
from rlvr.judge import Judge
from rlvr.judge.sandbox.host import ZYGOTE_MODULES, names_zygote_module

# which of typing, heapq, datetime, random, decimal, statistics are loaded when the program starts
PROBE = ("import sys\n"
         "SEEN = [m in sys.modules for m in ('ty' + 'ping', 'he' + 'apq', 'date' + 'time', 'ran' + 'dom', "
         "'deci' + 'mal', 'statis' + 'tics')]\n")
HEAVY = PROBE + "from typing import List\nimport heapq\n"  # statistics is off the list: never preloaded
HEAVY_SEEN = "[True, True, True, True, True, False]"
LIGHT_SEEN = "[False, False, False, False, False, False]"

# a program that SIGSTOPs or SIGKILLs every process it can see but PID 1, its parent and itself: the zygote (and,
# for a call server, nothing else of use)
SIGNAL_OTHERS = ("import os, signal\n"
                 "for n in os.listdir('/proc'):\n"
                 "    if n.isdigit() and int(n) not in (1, os.getpid(), os.getppid()):\n"
                 "        try:\n"
                 "            os.kill(int(n), signal.{sig})\n"
                 "        except OSError:\n"
                 "            pass\n")


def stdio_problem(tests, **kw):
    return Problem(id="t/zygote", source="t", split="test", statement="x", tests=tests, **kw)


def call_problem(seen):
    return Problem(id="t/seen", source="t", split="test", statement="seen", entry_point="seen",
                   tests=[{"kind": "call", "args": "[]", "expected": seen},
                          {"kind": "assert", "code": f"assert seen() == {seen}"}])


@pytest.fixture(scope="module", params=["forkloop", "python_loop"])
def judge1(request):
    """One worker: every submission of a test goes to the same sandbox (and zygote); on both per-test loops (the
    runner's cleanup after each test is in C in one, in Python in the other)."""
    j = Judge(workers=1, forkloop=request.param == "forkloop")
    yield j
    j.close()


def test_routing_names_a_module_as_a_word_not_an_attribute():
    assert names_zygote_module("from typing import List\n")
    assert names_zygote_module("import sys, heapq\n")
    assert names_zygote_module("x = 1\n", "import datetime as dt\n")  # test_setup
    assert names_zygote_module("import collections\nstring = input()\n")  # over-approximation: a variable
    assert not names_zygote_module("import sys, math, collections, itertools, functools, re\n")
    assert not names_zygote_module("b = a.copy()\nprint(m.string, r.random())\n")  # attributes
    assert not names_zygote_module("typings = 1\nmy_random = 2\nheapq2 = 3\n")
    assert not names_zygote_module("", None)


def test_heavy_runners_find_the_preload_list_loaded_light_ones_none_of_it(judge):
    p = stdio_problem([{"kind": "stdio", "stdin": str(i), "stdout": HEAVY_SEEN} for i in range(3)])
    res = judge.judge(p, HEAVY + "input()\nprint(SEEN)\n")
    assert res.verdict == "accepted", [t.stdout for t in res.tests]
    p = stdio_problem([{"kind": "stdio", "stdin": str(i), "stdout": LIGHT_SEEN} for i in range(3)])
    res = judge.judge(p, PROBE + "input()\nprint(SEEN)\n")
    assert res.verdict == "accepted", [t.stdout for t in res.tests]
    # call tests and converted asserts (the call server), both kinds
    res = judge.judge(call_problem(HEAVY_SEEN), HEAVY + "def seen():\n    return SEEN\n")
    assert res.verdict == "accepted", res.message
    res = judge.judge(call_problem(LIGHT_SEEN), PROBE + "def seen():\n    return SEEN\n")
    assert res.verdict == "accepted", res.message
    # the run op
    assert judge.run_code(HEAVY + "print(SEEN)").stdout == HEAVY_SEEN + "\n"
    assert judge.run_code(PROBE + "print(SEEN)").stdout == LIGHT_SEEN + "\n"


def test_every_module_of_the_routing_list_is_in_the_zygote_and_none_in_the_lean_warden(judge1):
    """The host's list is what the lean image lacks and the zygote's has (each name spelt in two parts)."""
    probe = ("import sys\nNAMES = [" + ", ".join(f"'{m[:2]}' + '{m[2:]}'" for m in ZYGOTE_MODULES) + "]\n"
             "print(sum(m in sys.modules for m in NAMES), len(NAMES))\n")
    n = len(ZYGOTE_MODULES)
    assert judge1.run_code(probe + "import typing\n").stdout == f"{n} {n}\n"
    assert judge1.run_code(probe).stdout == f"0 {n}\n"


def test_heavy_and_light_runners_report_the_same_cpu(judge1):
    """A heavy runner is the warden's child (clone(CLONE_PARENT)): its CPU and its tests' land in the warden's
    RUSAGE_CHILDREN as a forked runner's do, in the sandbox's ``cpu_s``, and only once.

    Each runner's two figures are compared with each other, never with the other runner's: the same loop's CPU
    seconds differ between two submissions with the machine's load (CI measured 0.95 s and 0.54 s), but within one
    submission the sandbox's count is the tests' count plus the runner's own overhead (about 0.01 s)."""
    p = stdio_problem([{"kind": "stdio", "stdin": str(i), "stdout": str(i)} for i in range(2)])
    busy = "x = 0\nfor i in range(6 * 10**6):\n    x += i\nprint(input())\n"
    spent = {}
    for name, code in (("light", busy), ("heavy", "import random\n" + busy)):
        c0 = judge1.sandbox_cpu_seconds()
        res = judge1.judge(p, code)
        assert res.verdict == "accepted"
        spent[name] = (judge1.sandbox_cpu_seconds() - c0, sum(t.cpu_s for t in res.tests))
    for sandbox_s, tests_s in spent.values():
        assert tests_s > 0.3, spent  # the loop ran and was measured
        # counted (not lost outside the warden's children), and not twice (a double count adds tests_s again)
        assert tests_s <= sandbox_s < 1.5 * tests_s, spent


def zygote_pid(judge):
    """The pid of the zygote of ``judge``'s one sandbox (0: none), from a ping on the idle control socket."""
    sb = judge._all[0].runner
    sb._ctl.send(b'{"op": "ping"}')
    return sb._ctl_recv(10.0)["zygote"]


@pytest.mark.parametrize("sig", ["SIGSTOP", "SIGKILL"])
@pytest.mark.parametrize("culprit", ["light", "heavy"])
def test_a_submission_that_stops_or_kills_the_zygote_breaks_no_later_one(judge1, sig, culprit):
    p = stdio_problem([{"kind": "stdio", "stdin": str(i), "stdout": str(i)} for i in range(3)])
    code = ("import random\n" if culprit == "heavy" else "") + SIGNAL_OTHERS.format(sig=sig) + "print(input())\n"
    assert judge1.judge(p, "import random\nprint(input())\n").verdict == "accepted"
    before = zygote_pid(judge1)
    assert before > 1
    assert judge1.judge(p, code).verdict == "accepted"
    assert zygote_pid(judge1) == 0  # noticed and killed (a stopped one) or reaped
    for _ in range(2):
        seen = stdio_problem([{"kind": "stdio", "stdin": "", "stdout": HEAVY_SEEN}] * 2)
        res = judge1.judge(seen, HEAVY + "print(SEEN)\n")
        assert res.verdict == "accepted", [t.stdout for t in res.tests]
        assert judge1.run_code(PROBE + "print(SEEN)").stdout == LIGHT_SEEN + "\n"
        assert judge1.judge(p, "import heapq\nprint(input())\n").verdict == "accepted"
        assert judge1.judge(p, "print(input())\n").verdict == "accepted"
        assert zygote_pid(judge1) not in (0, before)  # started again for the heavy submission
    # a call server's program that does the same
    code = HEAVY + SIGNAL_OTHERS.format(sig=sig) + "def seen():\n    return SEEN\n"
    res = judge1.judge(call_problem(HEAVY_SEEN), code)
    assert res.verdict == "accepted", res.message
    assert judge1.run_code(HEAVY + "print(SEEN)").stdout == HEAVY_SEEN + "\n"


def test_a_program_that_leaves_a_process_behind_is_still_cleaned_up(judge1):
    """The runner spares kill(-1) only when no process of the submission is left; a daemon forces it (and takes the
    zygote with it, which the next heavy submission finds replaced)."""
    p = stdio_problem([{"kind": "stdio", "stdin": str(i), "stdout": "1"} for i in range(3)])
    daemon = ("import os, time\n"
              "def kids(ppid):\n"
              "    out = 0\n"
              "    for n in os.listdir('/proc'):\n"
              "        if n.isdigit() and int(n) != os.getpid():\n"
              "            try:\n"
              "                with open(f'/proc/{n}/stat') as f:\n"
              "                    st = f.read().rsplit(')', 1)[1].split()\n"
              "            except OSError:\n"
              "                continue\n"
              "            out += int(st[1]) == ppid and st[0] not in 'ZX'\n"
              "    return out\n"
              "if os.fork() == 0:\n"
              "    if os.fork() == 0:\n"
              "        time.sleep(30)\n"
              "    os._exit(0)\n"
              "time.sleep(0.05)\n"
              "print(kids(os.getppid()))\n")  # its own daemon, reparented to the runner; none of an earlier test's
    for head in ("", "import random\n"):
        res = judge1.judge(p, head + daemon)
        assert res.verdict == "accepted", [t.stdout for t in res.tests]
    seen = stdio_problem([{"kind": "stdio", "stdin": "", "stdout": HEAVY_SEEN}])
    assert judge1.judge(seen, HEAVY + "print(SEEN)\n").verdict == "accepted"


def test_the_zygote_outlives_submissions_that_leave_no_process(judge1):
    """A runner with no process of its submission left sends no kill(-1) (proc.kill_all, forkloop.c, wipe): the same
    zygote serves every heavy submission, through both kinds of runner, stdio and call tests and ``run``."""
    p = stdio_problem([{"kind": "stdio", "stdin": str(i), "stdout": str(i)} for i in range(3)])
    assert judge1.judge(p, "import random\nprint(input())\n").verdict == "accepted"
    pid = zygote_pid(judge1)
    assert pid > 1
    for code in ("import random\nprint(input())\n", "print(input())\n", "import os\nos._exit(3)\n",
                 "import typing\nwhile True: pass\n"):
        judge1.judge(p.model_copy(update={"time_limit_s": 0.5}) if "while" in code else p, code)
    assert judge1.judge(call_problem(HEAVY_SEEN), HEAVY + "def seen():\n    return SEEN\n").verdict == "accepted"
    assert judge1.run_code(HEAVY + "print(SEEN)").stdout == HEAVY_SEEN + "\n"
    assert zygote_pid(judge1) == pid
