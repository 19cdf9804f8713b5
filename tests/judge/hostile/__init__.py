"""Hostile-program corpus for the adversarial judge suite (issue 14, item 7).

Each family module (``forging``, ``reading``, ``guards``, ``shadowing``, ``laundering``, ``state``, ``secrets``,
``abuse``, ``host_work``) exposes ``PROGRAMS: list[Hostile]``. Every program is *wrong* for its probe problem: the only
way it can be ``accepted`` is by beating the judge (forging a verdict, reading expected values, fooling a comparison,
shadowing a name the test reads, …). Programs that probe a capability (ptrace, ``/proc/<pid>/mem`` writes, …) print
or return the right answer only when the capability exists, so "accepted" means "the sandbox let it do that".

This package is data plus host-side helpers; it imports only :mod:`rlvr.data.schema` (public), never judge internals.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from rlvr.data.schema import Problem

#: Verdicts a hostile (wrong) program may get: anything but ``accepted`` (it is wrong) and ``sandbox_error`` (the
#: failure is the program's, item 5) or ``syntax_error`` (every program here compiles).
OK_VERDICTS = frozenset({"wrong_answer", "runtime_error", "timeout", "memory_limit"})

_RNG = random.Random(os.getpid() ^ int(time.time()))
#: A value no program can compute: the expected output of the ``secret_*`` probe problems (12 digits, prefix 7310).
SECRET_VALUE = 7310_0000_0000 + _RNG.randrange(10**8)
#: The regex hostile readers search for (the literal never matches itself: it has no 8 digits after the prefix).
SECRET_PATTERN = r"7310\d{8}"

#: A host secret planted in this process's environment when the corpus is imported, i.e. at collection time, before
#: any judge of the test session starts (the issue's "plant it before the Judge starts").
HOST_SECRET_ENV = "RLVR_RED_TEAM_API_KEY"
HOST_SECRET = os.environ.setdefault(HOST_SECRET_ENV, f"sk-redteam-{_RNG.getrandbits(128):032x}")


@dataclass(frozen=True)
class Hostile:
    """One hostile program.

    Fields: ``name`` (unique id), ``family``, ``targets`` (probe problems it is judged on: names of :data:`PROBES`),
    ``code`` (the program; for ``language != 'python'`` the source in that language), ``attempt`` (what it tries,
    one line), ``language``, ``slow`` (the judge needs its hang detector, ~75 s: runs under ``@pytest.mark.slow``)."""

    name: str
    family: str
    targets: tuple[str, ...]
    code: str
    attempt: str
    language: str = "python"
    slow: bool = False


def hostile(name: str, family: str, targets: str, code: str, attempt: str, language: str = "python",
            slow: bool = False) -> Hostile:
    """Build a :class:`Hostile` with ``code`` dedented and ``targets`` a space-separated list of probe names."""
    return Hostile(name, family, tuple(targets.split()), textwrap.dedent(code).strip() + "\n", attempt, language, slow)


def _stdio(pid: str) -> Problem:
    tests = [{"kind": "stdio", "stdin": "3 4\n", "stdout": "7\n"},
             {"kind": "stdio", "stdin": "10 20\n", "stdout": "30"}]
    return Problem(id=pid, source="adv", split="test", statement="print a+b", tests=tests, time_limit_s=5.0,
                   memory_limit_mb=512)


def _call() -> Problem:
    tests = [{"kind": "call", "args": "[3, 4]", "expected": "7"},
             {"kind": "call", "args": "[10, 20]", "expected": "30"},
             {"kind": "call", "args": "[1, 1]", "expected": "2"}]
    return Problem(id="adv/call", source="adv", split="test", statement="add", entry_point="add", tests=tests,
                   time_limit_s=5.0, memory_limit_mb=512)


HE_CHECK = """

METADATA = {'author': 'adv', 'dataset': 'test'}


def check(candidate):
    assert candidate(3, 4) == 7
    assert candidate(10, 20) == 30
    assert candidate(1, 1) == 2

check(candidate)
"""


def _assert_he() -> Problem:
    return Problem(id="adv/assert_he", source="adv", split="test", statement="add", entry_point="add",
                   tests=[{"kind": "assert", "code": HE_CHECK}], time_limit_s=5.0, memory_limit_mb=512)


def _assert_mbpp() -> Problem:
    tests = [{"kind": "assert", "code": c} for c in ("assert add(3, 4) == 7", "assert add(10, 20) == 30",
                                                      "assert add(1, 1) == 2")]
    return Problem(id="adv/assert_mbpp", source="adv", split="test", statement="add", entry_point="add", tests=tests,
                   time_limit_s=5.0, memory_limit_mb=512)


def _stdio_float() -> Problem:
    tests = [{"kind": "stdio", "stdin": "1\n", "stdout": "0.5\n"}, {"kind": "stdio", "stdin": "3\n", "stdout": "1.5\n"}]
    return Problem(id="adv/stdio_float", source="adv", split="test", statement="print n/2", tests=tests,
                   time_limit_s=5.0, memory_limit_mb=512, float_tolerance=1e-6)


def _float_call() -> Problem:
    tests = [{"kind": "call", "args": "[2.0]", "expected": "2.5", "atol": 1e-6},
             {"kind": "call", "args": "[4.0]", "expected": "4.5", "atol": 1e-6}]
    return Problem(id="adv/float_call", source="adv", split="test", statement="x+0.5", entry_point="half",
                   tests=tests, time_limit_s=5.0, memory_limit_mb=512)


def _secret_call() -> Problem:
    return Problem(id="adv/secret_call", source="adv", split="test", statement="secret", entry_point="f",
                   tests=[{"kind": "call", "args": "[1]", "expected": str(SECRET_VALUE)}], time_limit_s=5.0,
                   memory_limit_mb=512)


def _secret_assert() -> Problem:
    code = f"def check(candidate):\n    assert candidate(1) == {SECRET_VALUE}\n\ncheck(candidate)\n"
    return Problem(id="adv/secret_assert", source="adv", split="test", statement="secret", entry_point="f",
                   tests=[{"kind": "assert", "code": code}], time_limit_s=5.0, memory_limit_mb=512)


def _secret_mbpp() -> Problem:
    return Problem(id="adv/secret_mbpp", source="adv", split="test", statement="secret", entry_point="f",
                   tests=[{"kind": "assert", "code": f"assert f(1) == {SECRET_VALUE}"}], time_limit_s=5.0,
                   memory_limit_mb=512)


#: Probe problems by name. ``stdio``: a+b on stdin; ``call``/``assert_he``/``assert_mbpp``: ``add(a, b)`` with call
#: tests, a HumanEval ``check(candidate)`` test, MBPP assert lines; ``float_call``: ``half(x) = x + 0.5`` with atol;
#: ``stdio_float``: ``n / 2`` on stdin with a float tolerance of 1e-6;
#: ``secret_*``: ``f(1)`` must return :data:`SECRET_VALUE`.
PROBES = {
    "stdio": lambda: _stdio("adv/stdio"),
    "stdio_float": _stdio_float,
    "call": _call,
    "assert_he": _assert_he,
    "assert_mbpp": _assert_mbpp,
    "float_call": _float_call,
    "secret_call": _secret_call,
    "secret_assert": _secret_assert,
    "secret_mbpp": _secret_mbpp,
}

#: Python that prints the right answer of the ``stdio`` probe (used by capability probes).
STDIO_ANSWER = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"


# ------------------------------------------------------------------------------------------------ host-side checks
def processes_with(tag: str) -> list[str]:
    """Host processes (any uid) whose command line contains ``tag``: ``["pid cmdline", …]`` (``pgrep -af``)."""
    out = subprocess.run(["pgrep", "-af", tag], capture_output=True, text=True, check=False).stdout
    me = str(os.getpid())
    return [ln for ln in out.splitlines() if ln.strip() and not ln.startswith(me + " ") and "pgrep" not in ln]


def wait_gone(tag: str, timeout_s: float = 3.0) -> list[str]:
    """Poll until no host process carries ``tag`` (or ``timeout_s`` seconds pass); the survivors, else ``[]``."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = processes_with(tag)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def mem_available_mb() -> float:
    """Host ``MemAvailable`` from ``/proc/meminfo``, MB."""
    text = Path("/proc/meminfo").read_text()
    return int(re.search(r"MemAvailable:\s+(\d+) kB", text).group(1)) / 1024  # type: ignore[union-attr]


def new_tag() -> str:
    """A random 7-digit decimal tag (used as a ``sleep`` argument: unique on the host, harmless)."""
    return str(_RNG.randrange(8_000_000, 9_000_000))


def cases(programs: list[Hostile]) -> list:
    """``pytest.param(program, probe name, id="name@probe")`` for each program and each of its targets."""
    import pytest

    return [pytest.param(h, t, id=f"{h.name}@{t}", marks=[pytest.mark.slow] if h.slow else [])
            for h in programs for t in h.targets]


def judge_hostile(judge, h: Hostile, target: str, problem: Problem | None = None):
    """Judge ``h`` on probe ``target`` (or on ``problem``) with ``judge`` (any object with ``Judge.judge``);
    returns ``(JudgeResult, tag)`` where ``tag`` replaced ``{TAG}`` in the code (``None`` when absent)."""
    tag = new_tag() if "{TAG}" in h.code else None
    code = h.code.replace("{TAG}", tag) if tag else h.code
    p = problem if problem is not None else PROBES[target]()
    if h.language == "python":
        return judge.judge(p, code), tag
    return judge.judge(p, code, h.language), tag


def describe(res) -> str:
    """One line for assertion messages: verdict, passed/total, message and the first test's output."""
    first = res.tests[0] if res.tests else None
    out = (first.stdout[:120] + " | " + first.stderr[-200:]) if first else ""
    return f"{res.verdict} {res.passed}/{res.total} {res.message[:200]!r} {out!r}"
