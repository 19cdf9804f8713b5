"""A bubblewrap sandbox holding one warm judge harness (:mod:`rlvr.judge.harness`), reused across submissions.

Isolation (bubblewrap 0.8 flags; see ``bwrap --help``):

* ``--unshare-all``: new network (no interfaces but loopback: the host's 127.0.0.1 listeners are unreachable), pid
  (own ``/proc``, sees only its own processes), ipc, uts and user namespaces; ``--disable-userns`` stops nesting.
* read-only system: only ``/usr`` (and the interpreter's prefix) are bound, read-only; ``/tmp`` is a private,
  size-capped tmpfs discarded with the sandbox (the host's files are neither visible nor writable).
* unprivileged: uid/gid 65534 inside; when the host process is root, bwrap itself runs as a dedicated unprivileged
  host uid per worker (``61000+``) so ``RLIMIT_NPROC`` (fork bombs) is enforced and counted per worker.
* ``--die-with-parent`` + ``--new-session``: the sandbox dies with the judge; no terminal injection.
* No zombies, whatever the host's PID 1 does: bwrap forks an inner bwrap that is PID 1 of the sandbox's pid namespace.
  Every close or restart (hang detector, fork bomb, ``max_uses``, shutdown) SIGKILLs that inner init *first*, so the
  kernel kills the whole namespace and the outer bwrap (our child) reaps it and exits; then the outer bwrap is killed
  and waited for. When the inner bwrap exits by itself (harness exit or crash) or the outer one dies first (killed
  from outside), the inner one is orphaned to the nearest child subreaper, else PID 1: :func:`enable_child_subreaper`
  (called by ``rlvr sandbox serve`` and the Ray judge actors) makes the judge process that subreaper, and
  :meth:`Sandbox.close` reaps the inner pid it recorded. An embedded judge in a process that is not a subreaper can
  still leave such a zombie to a non-reaping PID 1 after a harness crash.
* Per child (set by the harness): ``RLIMIT_AS`` (memory_limit_mb), ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (output cap),
  no core files; wall-clock deadline, after which the child and every other process of the sandbox are SIGKILLed.

What it does not protect against: kernel exploits (no seccomp filter beyond bwrap's defaults), CPU/memory-bandwidth
interference between concurrent sandboxes, and reading files that are world-readable under ``/usr``.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rlvr.config import RuntimeSettings
from rlvr.judge.languages import LANGUAGES

__all__ = ["Sandbox", "SandboxError", "bwrap_path", "enable_child_subreaper", "sandbox_python"]

HARNESS = Path(__file__).with_name("harness.py")
LITERAL = Path(__file__).with_name("literal.py")
_UIDS = itertools.count()
_UID_BASE = 61000
_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>; prctl(2), Linux >= 3.4


class SandboxError(RuntimeError):
    """The sandbox itself failed (bubblewrap missing, harness crashed, protocol broken): infrastructure, never the
    program's fault; the judge reports it as verdict ``sandbox_error``."""


def bwrap_path() -> str:
    """Path of the bubblewrap binary (``RLVR_BWRAP`` or ``bwrap`` on PATH).

    Raises :class:`SandboxError` with install instructions when it is missing."""
    configured = RuntimeSettings().bwrap
    path = configured or shutil.which("bwrap")
    if not path or not os.access(path, os.X_OK):
        raise SandboxError(
            "bubblewrap (bwrap) not found: install it (Debian/Ubuntu: `apt-get install bubblewrap`; `make` does this "
            "when run as root) or set RLVR_BWRAP to its path"
        )
    return path


def sandbox_python() -> str:
    """Interpreter run inside the sandbox: ``RLVR_SANDBOX_PYTHON``, else ``/usr/bin/python3`` when running as root
    (the dropped uid cannot read root's home), else the real path of the current interpreter."""
    env = os.environ.get("RLVR_SANDBOX_PYTHON")
    if env:
        return env
    if os.geteuid() == 0 and os.path.exists("/usr/bin/python3"):
        return "/usr/bin/python3"
    return os.path.realpath(sys.executable)


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


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, starttime in clock ticks) of ``pid`` from ``/proc/<pid>/stat`` (proc(5)); None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1]), int(fields[19])


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (``/proc/<pid>/task/<pid>/children``, else a scan of ``/proc``)."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and (st := _proc_stat(int(d))) is not None and st[1] == pid:
            out.append(int(d))
    return out


def _bwrap_argv(req_fd: int, resp_fd: int, tmp_mb: int) -> list[str]:
    python = sandbox_python()
    argv = [
        bwrap_path(),
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib64", "/lib32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    prefix = str(Path(os.path.realpath(python)).parent.parent)
    if not prefix.startswith("/usr"):
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--ro-bind", str(HARNESS), "/judge/harness.py", "--ro-bind", str(LITERAL), "/judge/literal.py"]
    # Debian resolves shared libraries (BLAS for numpy) and toolchains through /etc/alternatives symlinks
    binds = {"/etc/alternatives", "/etc/ld.so.cache"} | {b for lang in LANGUAGES.values() for b in lang.extra_binds}
    for extra in sorted(binds):
        if os.path.exists(extra):
            argv += ["--ro-bind", extra, extra]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_mb << 20), "--tmpfs", "/tmp"]
    argv += ["--uid", "65534", "--gid", "65534", "--hostname", "sandbox", "--chdir", "/tmp", "--clearenv"]
    argv += ["--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8"]
    argv += ["--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "PYTHONHASHSEED", "0"]
    argv += [python, "-I", "-B", "/judge/harness.py", str(req_fd), str(resp_fd)]
    return argv


class Sandbox:
    """One bubblewrap sandbox with a warm harness; not thread-safe (the :class:`~rlvr.judge.core.Judge` pool hands
    each sandbox to one thread at a time).

    Args:
        max_uses: requests served before the sandbox is restarted (bounds state a submission could leave behind).
        tmp_mb: size cap of the sandbox's private ``/tmp`` tmpfs, MB.
    Raises :class:`SandboxError` from :meth:`request` on any infrastructure failure (after which it restarts).
    """

    def __init__(self, max_uses: int = 500, tmp_mb: int = 256) -> None:
        self.max_uses = max_uses
        self.tmp_mb = tmp_mb
        self._proc: subprocess.Popen[bytes] | None = None
        self._inner: list[tuple[int, int]] = []  # (pid, starttime) of the outer bwrap's children (the inner init)
        self._uses = 0
        # distinct per process and worker, so RLIMIT_NPROC counts one sandbox's processes only
        self._uid = _UID_BASE + (os.getpid() % 500) * 16 + next(_UIDS) % 16
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        self._errlog = tempfile.TemporaryFile()
        kwargs: dict[str, Any] = {}
        if os.geteuid() == 0:
            kwargs.update(user=self._uid, group=self._uid, extra_groups=[])
        try:
            self._proc = subprocess.Popen(
                _bwrap_argv(req_r, resp_w, self.tmp_mb),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._errlog,
                pass_fds=(req_r, resp_w),
                start_new_session=True,
                **kwargs,
            )
        except OSError as exc:
            for fd in (req_r, req_w, resp_r, resp_w):
                os.close(fd)
            raise SandboxError(f"cannot start bubblewrap: {exc}") from exc
        os.close(req_r)
        os.close(resp_w)
        self._w, self._r = req_w, resp_r
        self._uses = 0
        pong = self._roundtrip({"op": "ping"}, timeout_s=30.0)
        if not pong.get("ok"):
            raise SandboxError(f"sandbox did not answer ping: {pong}")
        # the harness answered, so the inner bwrap (PID 1 of the sandbox's pid namespace) exists now
        self._inner = [(pid, st[2]) for pid in _children(self._proc.pid) if (st := _proc_stat(pid)) is not None]

    def _inner_alive(self) -> list[int]:
        """Recorded inner pids that are still the same process (pid and start time match) and not yet reaped."""
        return [pid for pid, start in self._inner if (st := _proc_stat(pid)) is not None and st[2] == start]

    def _reap_inner(self, timeout_s: float = 5.0) -> None:
        """Reap recorded inner pids that were reparented to this process (when it is a child subreaper); pids whose
        parent is another process are that parent's business. Polls until none is left as our child, ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            ours = [pid for pid in self._inner_alive() if (st := _proc_stat(pid)) is not None and st[1] == os.getpid()]
            for pid in ours:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            if not ours or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        self._inner = []

    def close(self) -> None:
        """Kill the sandbox (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # Kill the namespace's init (the inner bwrap) first, even on a normal close: the kernel then kills every
        # process of the sandbox and the outer bwrap, our child, reaps the inner one and exits. Letting the harness
        # exit by itself instead (observed with bubblewrap 0.8: the outer bwrap exits before the inner one is
        # reaped), or killing the outer bwrap first, orphans the inner one to PID 1: a zombie where PID 1 does not
        # reap (tests/judge/test_judge_zombies.py). The sandbox keeps nothing (its /tmp is a tmpfs): SIGKILL is safe.
        # Before closing the pipes: EOF on its request pipe would let the harness exit by itself first (see above).
        for pid in self._inner_alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:  # the outer bwrap reaps the killed init and exits by itself (at once, unless the machine is overloaded)
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.kill()
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        self._reap_inner()
        self._errlog.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ protocol
    def _stderr_tail(self) -> str:
        try:
            self._errlog.seek(0)
            return self._errlog.read()[-2000:].decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def _roundtrip(self, obj: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        data = json.dumps(obj).encode()
        try:
            os.write(self._w, struct.pack(">Q", len(data)))
            view = memoryview(data)
            while view:
                view = view[os.write(self._w, view) :]
        except OSError as exc:
            raise SandboxError(f"sandbox harness is gone ({exc}); stderr: {self._stderr_tail()}") from exc
        head = self._read_exact(8, time.monotonic() + timeout_s)
        body = self._read_exact(struct.unpack(">Q", head)[0], time.monotonic() + timeout_s)
        return json.loads(body)

    def _read_exact(self, n: int, deadline: float) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._r], [], [], remaining)[0]:
                raise SandboxError("sandbox harness did not answer in time")
            chunk = os.read(self._r, min(n - len(buf), 1 << 20))
            if not chunk:
                raise SandboxError(f"sandbox harness exited; stderr: {self._stderr_tail()}")
            buf += chunk
        return bytes(buf)

    def cpu_seconds(self) -> float:
        """CPU seconds used so far by this sandbox's harness and all its (reaped) test processes; 0 if not running."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                return 0.0
            try:
                return float(self._roundtrip({"op": "stats"}, timeout_s=10.0)["cpu_s"])
            except (SandboxError, ValueError, KeyError):
                return 0.0

    def request(self, obj: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send one request to the harness and return its response (dict).

        ``timeout_s`` (seconds) is a hang detector for the whole request; per-test limits are enforced inside.
        Raises :class:`SandboxError` on failure; the sandbox is then restarted on the next request."""
        with self._lock:
            if self._proc is None or self._uses >= self.max_uses or self._proc.poll() is not None:
                self.close()
                self._start()
            self._uses += 1
            try:
                resp = self._roundtrip(obj, timeout_s)
            except (SandboxError, ValueError, struct.error) as exc:
                self.close()
                raise SandboxError(str(exc)) from exc
            if "harness_error" in resp:
                raise SandboxError(f"harness error: {resp['harness_error']}")
            return resp
