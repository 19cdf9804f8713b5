"""Process state that outlives a submission (issue 43, item 1): every call that changes another process's rlimits,
priority, scheduling policy, CPU affinity or I/O priority, made against the sandbox's PID 1 (the warden) and its
zygote, from each kind of submission process: a stdio test child, the call server, and assert-test code in the driver
sandbox.

Each :class:`StateCase` is a probe of a capability: the program (or the test code) prints the right answer / returns
the right value / passes its assertion only when the call succeeded, so ``accepted`` means "the sandbox let it do
that". The warden and zygote inherit what is changed into every later runner, so the suite follows each case with a
correct submission that must still be ``accepted``.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

#: Finds the attack's targets: ``ZYGOTE()`` is the pid of the other child of PID 1 (not this process's runner: its
#: parent, or itself in the driver), None when there is none; ``TARGET(name)`` is 1 for "warden", that pid for
#: "zygote". ``SYSCALL`` is libc's ``syscall`` for the calls Python does not wrap.
PRELUDE = """
import ctypes, os, resource
SYSCALL = ctypes.CDLL(None, use_errno=True).syscall
NR = {"x86_64": {"ioprio_set": 251, "sched_setattr": 314}, "aarch64": {"ioprio_set": 30, "sched_setattr": 274}}[
    os.uname().machine]


def ZYGOTE():
    mine = {os.getpid(), os.getppid(), 1}
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) not in mine:
            try:
                with open(f"/proc/{d}/stat") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[1] == "1":
                        return int(d)
            except (OSError, IndexError):
                pass
    return None


def TARGET(name):
    return 1 if name == "warden" else ZYGOTE()


def RAW(name, *args):
    if SYSCALL(NR[name], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args]) != 0:
        raise OSError(ctypes.get_errno(), name)


def ATTACK(pid):
    if pid is None:
        raise OSError("no target")
    {CALL}
"""

#: One statement each, run on ``pid`` (a target's pid): the call that changes that process's inherited state.
CALLS = {
    "prlimit_nproc": "resource.prlimit(pid, resource.RLIMIT_NPROC, (4, 4))",
    "prlimit_nofile": "resource.prlimit(pid, resource.RLIMIT_NOFILE, (8, 8))",
    "prlimit_cpu": "resource.prlimit(pid, resource.RLIMIT_CPU, (1, 1))",
    "setpriority": "os.setpriority(os.PRIO_PROCESS, pid, 19)",
    "sched_idle": "os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))",
    "sched_batch": "os.sched_setscheduler(pid, os.SCHED_BATCH, os.sched_param(0))",
    "sched_setattr": "RAW('sched_setattr', pid, (ctypes.c_uint32 * 14)(56, 5, 0, 0, 19), 0)",  # SCHED_IDLE, nice 19
    "affinity": "os.sched_setaffinity(pid, {min(os.sched_getaffinity(0))})",
    "ioprio": "RAW('ioprio_set', 1, pid, 3 << 13)",  # IOPRIO_WHO_PROCESS, class IDLE
}
#: Calls whose target is a group of processes (``pid`` unused): the caller's process group, the caller's uid, which
#: PID 1 and the zygote share.
GROUP_CALLS = {
    "setpriority_user": "os.setpriority(os.PRIO_USER, 0, 19)",
    "setpriority_pgrp": "os.setpriority(os.PRIO_PGRP, 0, 19)",
    "ioprio_user": "RAW('ioprio_set', 3, os.getuid(), 3 << 13)",  # IOPRIO_WHO_USER, class IDLE
}

#: Raise the nice value of the autogroup every process of the sandbox shares (bwrap's session): a write to
#: ``/proc/self/autogroup`` after ``prctl(PR_SET_DUMPABLE, 1)``, which the kernel allows (raising needs no
#: capability) and seccomp cannot tell apart from any other write. ``NICE()`` is PID 1's autogroup nice value.
AUTOGROUP = """
import ctypes


def NICE():
    with open("/proc/1/autogroup") as fh:
        return fh.read().split()[-1]


def RAISE():
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)
    try:
        with open("/proc/self/autogroup", "w") as fh:
            fh.write("19")
    except OSError:
        pass
    return NICE()
"""
#: The autogroup attack from each kind of process, as a wrong program (or wrong test code): its verdict is not the
#: point, the next submission's autogroup is (``NICE()`` must be back at ``"0"``).
AUTOGROUP_CASES = {
    "stdio": AUTOGROUP + "RAISE()\nprint(-1)\n",
    "call": AUTOGROUP + "def add(a, b):\n    RAISE()\n    return a + b + 1\n",
    "assert": AUTOGROUP + "RAISE()\nassert add(3, 4) == 8\n",
}


@dataclass(frozen=True)
class StateCase:
    """One probe: ``kind`` is ``stdio`` (a test child), ``call`` (the call server) or ``assert`` (dataset test code in
    the driver sandbox; then ``code`` is the test code and the submission is a correct ``add``); ``code`` succeeds
    (right answer / right value / passing assertion) only when the call did."""

    name: str
    kind: str
    code: str
    attempt: str


def _attack(call: str, target: str) -> str:
    body = PRELUDE.replace("{CALL}", call)
    return body + textwrap.dedent(f"""
        def HIT():
            try:
                ATTACK(TARGET({target!r}))
                return True
            except (OSError, ValueError, TypeError):
                return False
        """)


def _case(kind: str, call_name: str, call: str, target: str) -> StateCase:
    attack = _attack(call, target)
    if kind == "stdio":
        code = attack + "a, b = map(int, input().split())\nprint(a + b if HIT() else a + b + 1)\n"
    elif kind == "call":
        code = attack + "def add(a, b):\n    return a + b if HIT() else a + b + 1\n"
    else:
        code = attack + "assert HIT() and add(3, 4) == 7\n"
    where = {"stdio": "a test child", "call": "the call server", "assert": "driver test code"}[kind]
    return StateCase(f"{call_name}@{target}@{kind}", kind, code, f"{call_name} on the {target} from {where}")


def _build() -> list[StateCase]:
    out = []
    for kind, targets in (("stdio", ("warden", "zygote")), ("call", ("warden", "zygote")), ("assert", ("warden",))):
        for name, call in CALLS.items():
            for target in targets:
                out.append(_case(kind, name, call, target))
        for name, call in GROUP_CALLS.items():
            out.append(_case(kind, name, call, "warden"))
    return out


CASES = _build()
