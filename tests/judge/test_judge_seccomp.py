"""The sandbox's seccomp program (``rlvr/judge/sandbox/inside/seccomp.py``), run by a small classic-BPF interpreter
on the host (no sandbox): which syscalls are denied, and that the calls that change a process's inherited state
(issue 43, item 1) are allowed on the caller only, on both architectures."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest

SECCOMP = Path(__file__).resolve().parents[2] / "rlvr" / "judge" / "sandbox" / "inside" / "seccomp.py"
spec = importlib.util.spec_from_file_location("rlvr_inside_seccomp_under_test", SECCOMP)
seccomp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seccomp)

ARCHES = {"x86_64": (seccomp.AUDIT_ARCH_X86_64, 0), "aarch64": (seccomp.AUDIT_ARCH_AARCH64, 1)}
ALLOW, EPERM = seccomp.RET_ALLOW, seccomp.RET_EPERM
_CODE, _N = seccomp.program()
INS = [struct.unpack("HBBI", _CODE[i * 8 : i * 8 + 8]) for i in range(_N)]


def run(arch: int, nr: int, *args: int) -> int:
    """The filter's return value for ``struct seccomp_data`` (nr, arch, ip 0, args: 64-bit, little-endian)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    pc, acc = 0, 0
    for _ in range(len(INS)):  # every jump goes forward: at most that many steps
        op, jt, jf, k = INS[pc]
        if op == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op == 0x15:  # jeq #k
            pc += 1 + (jt if acc == k else jf)
        elif op == 0x35:  # jge #k
            pc += 1 + (jt if acc >= k else jf)
        elif op == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected BPF op {op:#x}")
    raise AssertionError("the program ran off its end")


def nr(name: str, col: int) -> int:
    return (seccomp.DENIED.get(name) or seccomp.SELF_ONLY[name])[col]


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_denied_syscalls_fail_and_others_pass(arch):
    a, col = ARCHES[arch]
    for name in seccomp.DENIED:
        assert run(a, nr(name, col)) == EPERM, name
    getpid = {"x86_64": 39, "aarch64": 172}[arch]
    assert run(a, getpid) == ALLOW
    assert run(0x40000003, getpid) == EPERM  # i386 (int 0x80 from an x86_64 process)
    if arch == "x86_64":
        assert run(a, 0x40000000 + getpid) == EPERM  # x32


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_state_calls_act_on_the_caller_only(arch):
    a, col = ARCHES[arch]
    for name in ("prlimit64", "sched_setparam", "sched_setscheduler", "sched_setattr", "sched_setaffinity",
                 "migrate_pages", "move_pages"):
        assert run(a, nr(name, col), 0, 5, 0x7FFF0000) == ALLOW, name
        for pid in (1, 2, 4242, 0xFFFFFFFF):
            assert run(a, nr(name, col), pid, 5, 0x7FFF0000) == EPERM, (name, pid)
        assert run(a, nr(name, col), 1 << 32, 5, 0x7FFF0000) == ALLOW  # the kernel truncates a pid to an int: 0
    prlimit = nr("prlimit64", col)
    assert run(a, prlimit, 1, 7, 0, 0x7FFF0000) == ALLOW  # another process's limits, read only (new_limit NULL)
    assert run(a, prlimit, 1, 7, 1 << 32, 0x7FFF0000) == EPERM  # a pointer with only its high word set
    setprio, ioprio = nr("setpriority", col), nr("ioprio_set", col)
    assert run(a, setprio, 0, 0, 19) == ALLOW  # PRIO_PROCESS, the caller
    for which, who in ((0, 1), (1, 0), (2, 0), (2, 65534)):  # another pid, the process group, the uid
        assert run(a, setprio, which, who, 19) == EPERM
    assert run(a, ioprio, 1, 0, 3 << 13) == ALLOW  # IOPRIO_WHO_PROCESS, the caller
    for which, who in ((1, 1), (2, 0), (3, 65534)):
        assert run(a, ioprio, which, who, 3 << 13) == EPERM
