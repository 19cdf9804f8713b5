"""One memory + process-count limit over a whole sandbox: cgroup v2, else cgroup v1, else rlimits only.

A sandbox's bubblewrap enters its cgroup before it forks (:mod:`rlvr.judge.sandbox.host` starts it through a tiny
``sh`` that waits until the host has written its pid to ``cgroup.procs``), so every process of the sandbox, the
pages of its private tmpfs (``/tmp``) and of ``/dev/shm`` are charged to it: the kernel memory controller charges
tmpfs/shmem pages to the cgroup of the process that wrote them (Documentation/admin-guide/cgroup-v2.rst, "Memory
Ownership"; cgroup-v1/memory.rst §2.3).

Modes (:func:`detect`, first that works):

* ``v2``: the unified hierarchy with ``memory`` and ``pids`` available to this process's cgroup. When they are not yet
  enabled for its children, this process moves itself into a leaf ``rlvr-judge`` child and enables them (the "no
  internal processes" rule); where that is refused (other processes share the cgroup, no delegation) v2 is not used.
  Per sandbox: ``memory.max``, ``memory.swap.max = 0``, ``pids.max``.
* ``v1``: the ``memory`` and ``pids`` v1 hierarchies mounted writable (root, or delegated): per sandbox a child of
  this process's own cgroup in each, with ``memory.limit_in_bytes`` (+ ``memory.memsw.limit_in_bytes`` = same, no
  swap, where swap accounting exists) and ``pids.max``.
* ``none``: no cgroup; the documented fallback is per-process ``RLIMIT_AS``, per-uid ``RLIMIT_NPROC`` (each sandbox
  has its own host uid when the judge runs as root) and the tmpfs size cap — several processes together, or
  ``/dev/shm``, can then exceed the per-sandbox figure.
The cgroup is removed when the sandbox closes (after its processes are gone); empty ones left by a judge process that
died first are removed by the next judge process that detects the mode.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CgroupMode", "SandboxCgroup", "detect"]

_SEQ = itertools.count()
_MODE: CgroupMode | None = None


@dataclass(frozen=True)
class CgroupMode:
    """The active mode: ``name`` (``v2`` | ``v1`` | ``none``), the parent directories used (controller -> path) and
    ``reason`` (why a better mode was not used)."""

    name: str
    parents: dict[str, str]
    reason: str = ""


def _own(controller: str) -> str | None:
    """This process's cgroup path in the hierarchy of ``controller`` (``""`` = the v2 line), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if (controller == "" and ctrls == "") or controller in ctrls.split(","):
            return path
    return None


def _mount_of(fstype: str, option: str | None = None) -> str | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == fstype and (option is None or option in parts[3].split(",")):
            return parts[1]
    return None


def _try_v2() -> CgroupMode | str:
    root = _mount_of("cgroup2")
    own = _own("")
    if root is None or own is None:
        return "no cgroup2 mount"
    parent = Path(root) / own.lstrip("/")
    try:
        if not {"memory", "pids"} <= set((parent / "cgroup.controllers").read_text().split()):
            return f"cgroup2 {parent}: memory/pids controllers not available"
        if not {"memory", "pids"} <= set((parent / "cgroup.subtree_control").read_text().split()):
            leaf = parent / "rlvr-judge"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            try:
                (parent / "cgroup.subtree_control").write_text("+memory +pids")
            except OSError as exc:
                (parent / "cgroup.procs").write_text(str(os.getpid()))
                leaf.rmdir()
                return f"cgroup2 {parent}: cannot enable memory/pids for children ({exc.strerror})"
        probe = parent / f"rlvr-probe-{os.getpid()}"
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return f"cgroup2 {parent}: {exc.strerror}"
    return CgroupMode("v2", {"memory": str(parent), "pids": str(parent)})


def _try_v1() -> CgroupMode | str:
    parents = {}
    for ctrl in ("memory", "pids"):
        mnt, own = _mount_of("cgroup", ctrl), _own(ctrl)
        if mnt is None or own is None:
            return f"no cgroup v1 {ctrl} hierarchy"
        parent = Path(mnt) / own.lstrip("/")
        probe = parent / f"rlvr-probe-{os.getpid()}"
        try:
            probe.mkdir()
            probe.rmdir()
        except OSError as exc:
            return f"cgroup v1 {parent}: {exc.strerror}"
        parents[ctrl] = str(parent)
    return CgroupMode("v1", parents)


def detect() -> CgroupMode:
    """The best available mode (computed once per process; ``RLVR_SANDBOX_CGROUP=none`` forces the fallback)."""
    global _MODE
    if _MODE is None:
        if os.environ.get("RLVR_SANDBOX_CGROUP", "").lower() == "none":
            _MODE = CgroupMode("none", {}, "disabled by RLVR_SANDBOX_CGROUP=none")
        else:
            reasons = []
            for attempt in (_try_v2, _try_v1):
                got = attempt()
                if isinstance(got, CgroupMode):
                    _MODE = CgroupMode(got.name, got.parents, "; ".join(reasons))
                    break
                reasons.append(got)
            else:
                _MODE = CgroupMode("none", {}, "; ".join(reasons))
            _sweep(_MODE)
    return _MODE


def _sweep(mode: CgroupMode) -> None:
    """Remove empty sandbox cgroups left by judge processes that died before removing theirs (never raises)."""
    for parent in set(mode.parents.values()):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if len(parts) == 4 and parts[:2] == ["rlvr", "sb"] and parts[2].isdigit():
                if not os.path.exists(f"/proc/{parts[2]}"):
                    try:
                        os.rmdir(os.path.join(parent, name))
                    except OSError:
                        pass


class SandboxCgroup:
    """The cgroup(s) of one sandbox: ``memory_mb`` (MB, all processes + tmpfs/shm) and ``pids_max`` processes.

    Raises ``OSError`` when the cgroup cannot be created in the detected mode."""

    def __init__(self, memory_mb: int, pids_max: int, mode: CgroupMode | None = None) -> None:
        self.mode = mode or detect()
        self.dirs: list[Path] = []
        self._fds: dict[str, int] = {}
        if self.mode.name == "none":
            return
        name = f"rlvr-sb-{os.getpid()}-{next(_SEQ)}"
        limit = str(memory_mb << 20)
        if self.mode.name == "v2":
            d = Path(self.mode.parents["memory"]) / name
            d.mkdir()
            self.dirs = [d]
            (d / "memory.max").write_text(limit)
            if (d / "memory.swap.max").exists():
                (d / "memory.swap.max").write_text("0")
            (d / "pids.max").write_text(str(pids_max))
        else:
            mem, pids = Path(self.mode.parents["memory"]) / name, Path(self.mode.parents["pids"]) / name
            mem.mkdir()
            self.dirs = [mem]
            pids.mkdir()
            self.dirs.append(pids)
            (mem / "memory.limit_in_bytes").write_text(limit)
            if (mem / "memory.memsw.limit_in_bytes").exists():
                (mem / "memory.memsw.limit_in_bytes").write_text(limit)
            (pids / "pids.max").write_text(str(pids_max))

    def set_memory(self, memory_mb: int) -> None:
        """Change the memory limit (MB) of a live cgroup (v1: memory and memory+swap in the order the kernel accepts).
        Raises ``OSError`` when the kernel refuses it (usage above the new limit that cannot be reclaimed)."""
        if not self.dirs:
            return
        limit = str(memory_mb << 20)
        d = self.dirs[0]
        if self.mode.name == "v2":
            (d / "memory.max").write_text(limit)
            return
        memsw = d / "memory.memsw.limit_in_bytes"
        lowering = memory_mb << 20 < int((d / "memory.limit_in_bytes").read_text())
        order = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
        for name in order if lowering else order[::-1]:
            if name == "memory.memsw.limit_in_bytes" and not memsw.exists():
                continue
            (d / name).write_text(limit)

    def attach(self, pid: int) -> None:
        """Move process ``pid`` (and so everything it forks later) into the cgroup(s)."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(pid))

    def _read(self, name: str) -> bytes:
        """The current contents of the memory controller's file ``name`` (at most 4 KB), through an fd kept open
        until :meth:`remove`: read twice per submission, a fresh ``open`` each time cost the host ~0.1 ms. A cgroup
        file re-reads the kernel's current values at every read from offset 0. Raises ``OSError``."""
        fd = self._fds.get(name)
        if fd is None:
            fd = self._fds[name] = os.open(self.dirs[0] / name, os.O_RDONLY | os.O_CLOEXEC)
        return os.pread(fd, 4096, 0)

    def oom_kills(self) -> int:
        """OOM kills in this cgroup so far (``memory.events`` / ``memory.oom_control`` ``oom_kill``; 0 if unknown)."""
        if not self.dirs:
            return 0
        try:
            for line in self._read("memory.events" if self.mode.name == "v2" else "memory.oom_control").splitlines():
                key, _, val = line.partition(b" ")
                if key == b"oom_kill":
                    return int(val)
        except (OSError, ValueError):
            pass
        return 0

    def memory_usage_mb(self) -> float:
        """Memory charged to the sandbox now (processes + tmpfs/shm), MB; 0.0 without cgroups."""
        if not self.dirs:
            return 0.0
        try:
            return int(self._read("memory.current" if self.mode.name == "v2" else "memory.usage_in_bytes")) / (1 << 20)
        except (OSError, ValueError):
            return 0.0

    def remove(self, timeout_s: float = 5.0) -> None:
        """Remove the cgroup(s) once their processes are gone (polls up to ``timeout_s``; never raises)."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        deadline = time.monotonic() + timeout_s
        for d in self.dirs:
            while True:
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
        self.dirs = []
