"""The process state a submission must not change in the warden or its zygote, read back (standard library only).

A process's rlimits, nice value, scheduling policy and parameters, CPU affinity, I/O priority and autogroup nice are
inherited by every process it forks: changed in the warden (PID 1) or the zygote, they would hold for every later
runner of the sandbox, i.e. for every later submission on that worker (issue 43). The seccomp filter
(:mod:`seccomp`, ``SELF_ONLY``) lets no process of a sandbox make these calls on another process; this module is the
second line: the warden takes a :func:`snapshot` of itself at start and compares its own and its zygote's after
every submission (:mod:`warden`), and a difference ends the sandbox (the warden's) or the zygote (the zygote's) as a
failed wipe does. For the autogroup it is the only line: every process of the sandbox is in bwrap's session, hence
its autogroup, whose nice value any member may raise by writing ``/proc/self/autogroup`` once it made itself
dumpable (a path, which seccomp cannot tell apart); giving each runner a session of its own (``setsid``) would keep
submissions out of the warden's autogroup, but creating an autogroup took ~4 ms per call on the loaded 2-vCPU VM,
about what a whole warm one-test submission costs, while the check costs one small read and a restart only for the
submission that did it.

What is read (about 20 syscalls per process, no allocation but the small tuple): ``prlimit64(pid, r, NULL, &old)``
for every ``RLIMIT_*`` of :mod:`resource` (a read, which the filter allows on any pid), ``sched_getattr`` (policy,
flags, nice, real-time priority, deadline parameters, utilisation clamps: ``struct sched_attr``, 56 bytes,
``include/uapi/linux/sched/types.h``), ``sched_getaffinity``, ``ioprio_get(IOPRIO_WHO_PROCESS, pid)``
(``include/uapi/linux/ioprio.h``) and ``/proc/PID/autogroup``'s nice (``kernel/sched/autogroup.c``; absent
without ``CONFIG_SCHED_AUTOGROUP``).
"""

import ctypes
import os
import resource

RLIMITS = tuple(sorted({getattr(resource, n) for n in dir(resource) if n.startswith("RLIMIT_")}))
# (sched_getattr, ioprio_get) numbers: arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h
_NR = {"x86_64": (315, 252), "aarch64": (275, 31)}.get(os.uname().machine)
_SCHED_ATTR_SIZE = 56  # SCHED_ATTR_SIZE_VER1
_IOPRIO_WHO_PROCESS = 1
_syscall = ctypes.CDLL(None, use_errno=True).syscall
_syscall.restype = ctypes.c_long


_BUF = ctypes.create_string_buffer(_SCHED_ATTR_SIZE)  # the warden is single-threaded
_ARGS = tuple(ctypes.c_long(n) for n in _NR) if _NR is not None else None
_SIZE, _ZERO, _WHO = ctypes.c_uint(_SCHED_ATTR_SIZE), ctypes.c_uint(0), ctypes.c_long(_IOPRIO_WHO_PROCESS)


def _autogroup():
    try:
        fd = os.open("/proc/self/autogroup", os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, 256).rsplit(b" ", 1)[-1].strip()
    finally:
        os.close(fd)


def snapshot(pid=0):
    """The inheritable scheduling and resource state of process ``pid`` (0: the caller) as a comparable tuple, or
    None when it cannot be read (the process is gone). The autogroup's nice value is read for the caller only
    (``pid`` 0): the zygote shares the warden's session, hence its autogroup. Never raises. About 40 µs in all
    (15 rlimits)."""
    try:
        limits = tuple([resource.prlimit(pid, r) for r in RLIMITS])
        affinity = frozenset(os.sched_getaffinity(pid))
    except (OSError, ValueError):
        return None
    sched = ioprio = None
    if _ARGS is not None:
        target = ctypes.c_long(pid)
        if _syscall(_ARGS[0], target, _BUF, _SIZE, _ZERO) == 0:
            sched = _BUF.raw
        ioprio = _syscall(_ARGS[1], _WHO, target)
    return limits, affinity, sched, ioprio, _autogroup() if pid == 0 else None
