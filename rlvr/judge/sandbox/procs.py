"""Host-side process helpers for sandbox lifecycles: child subreaper, ``/proc`` reading."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

__all__ = ["children", "enable_child_subreaper", "proc_stat"]

_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>; prctl(2), Linux >= 3.4


def enable_child_subreaper() -> bool:
    """Make this process a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER, 1)``, see prctl(2)) so that sandbox
    processes orphaned when their outer bwrap dies are reparented here, where :meth:`Sandbox.close` reaps them, instead
    of to the host's PID 1 (which, in a container without an init such as tini, never reaps them: zombies).

    Process-wide and inherited by nothing (fork clears it); other orphaned descendants of this process are also
    reparented here, so call it only in a process that runs the judge (``rlvr sandbox serve`` does). Returns True when
    set, False where unsupported (non-Linux, or ``prctl`` refused); never raises."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, starttime in clock ticks) of ``pid`` from ``/proc/<pid>/stat`` (proc(5)); None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[19])


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (``/proc/<pid>/task/<pid>/children``, else a scan of ``/proc``)."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := proc_stat(int(d))) is not None and st[1] == pid:
            out.append(int(d))
    return out
