"""A warm bubblewrap sandbox: its start, the per-submission channels it opens and closes, its cgroup figures.

One sandbox per worker stays up (a fresh bwrap or ``python`` per submission costs 11–27 ms, far above the per-test
budget); inside it the warden (:mod:`rlvr.judge.sandbox.inside.warden`, PID 1) never receives submission data. Per
submission the host makes two fresh pipes, hands the sandbox ends to the warden over a ``SOCK_SEQPACKET`` control
socket (``socket.send_fds``, SCM_RIGHTS) with a fresh request id, waits for the warden's ``ack`` (leftovers killed,
writable places wiped), then talks to the runner the warden forked on those pipes only
(:class:`rlvr.judge.sandbox.session.Session`). Frames carry the id and are size-capped; the pipes are closed after
the request, so no output can cross requests.

Start: bwrap is launched with an EMPTY environment through ``sh -c 'read; exec bwrap …'`` that waits until the host
has put its pid into the sandbox's cgroup (:mod:`rlvr.judge.sandbox.cgroups`), so bwrap and everything it forks are
charged there. As root, bwrap runs as a host uid of its own (``61000+``, one per sandbox) so ``RLIMIT_NPROC`` counts
one sandbox and nothing in one sandbox shares a uid with another sandbox or the host.

No zombies, whatever the host's PID 1 does: the warden is PID 1 of the sandbox's pid namespace and the only child of
the outer bwrap. Every close SIGKILLs it *first*, so the kernel kills the whole namespace and the outer bwrap, our
child, reaps it and exits; then the outer bwrap is killed and waited for. If the outer one dies first (killed from
outside), the warden is orphaned to the nearest child subreaper
(:func:`~rlvr.judge.sandbox.procs.enable_child_subreaper`, set by ``rlvr sandbox serve`` and the Ray actors), else
PID 1; :meth:`Sandbox.close` reaps the pid it recorded.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from typing import Any

from rlvr.judge.sandbox.bwrap import SandboxError, argv
from rlvr.judge.sandbox.cgroups import SandboxCgroup
from rlvr.judge.sandbox.forkloop import ensure_built, forkloop_enabled
from rlvr.judge.sandbox.procs import children, proc_stat
from rlvr.judge.sandbox.session import Session

__all__ = ["ZYGOTE_MODULES", "Sandbox", "names_zygote_module"]

_UIDS = itertools.count()
_UID_BASE = 61000
_GO = 'read x; exec "$@" </dev/null'  # waits (on stdin, a pipe) until the host has put it into the cgroup


# The modules of the zygote's image (inside/runner.py's PRELOAD) that the lean warden's image lacks: the judge's own
# modules already load re, collections, itertools, functools, operator, array, time, enum, abc and atexit, and math is
# built into the interpreter (docs/devlog/judge-cost.md, tenth and eleventh passes).
ZYGOTE_MODULES = ("cmath", "heapq", "bisect", "string", "typing", "random", "copy", "datetime", "decimal", "fractions",
                  "numbers", "contextlib")
# one of them as a whole name, not an attribute (``x.copy()``, ``m.string``): possessive-free alternation of literals
# after a one-character lookbehind, so each position costs at most the alternatives' total length (linear)
_ZYGOTE_NAME = re.compile(r"(?<![\w.])(?:" + "|".join(ZYGOTE_MODULES) + r")(?!\w)")


def names_zygote_module(*texts: str | None) -> bool:
    """Whether a submission's Python source texts (its code with the dataset's prefix, the dataset's ``test_setup``;
    None skipped) name a module of :data:`ZYGOTE_MODULES` as a whole word that is not an attribute: then the
    sandbox clones its runner from the zygote, whose image has those modules loaded (``{"op": "sub", "heavy": true}``,
    :meth:`Sandbox.open`). An over-approximation (a variable called ``string``, a comment), never an under-
    approximation for an ``import``/``from … import`` statement; a name built at run time (``__import__("ra" +
    "ndom")``) is missed. Either error costs only time: the program imports what it needs itself. Reads submission
    bytes on the host: one regex scan per text, linear in its length, no copy (docs/judge/threat-model.md)."""
    return any(t and _ZYGOTE_NAME.search(t) is not None for t in texts)


class Sandbox:
    """One warm bubblewrap sandbox; not thread-safe (a :class:`~rlvr.judge.core.Judge` hands each sandbox to one
    thread at a time).

    Args:
        tmp_mb: size cap of the private ``/tmp`` tmpfs, MB.
        memory_mb: cgroup memory limit over the whole sandbox (processes + tmpfs/shm), MB (ignored without cgroups).
        pids_max: cgroup process limit of the sandbox.
        forkloop: run stdio tests through the compiled per-test loop (:mod:`rlvr.judge.sandbox.forkloop`; built on
            first start, the Python loop when it cannot be); None: ``RLVR_FORKLOOP``. Whether it is in use is
            ``pong["forkloop"]`` once started.
        preload: the warden imports the modules programs commonly import at its start and starts no zygote (the
            driver sandbox, whose runner forks no test child); otherwise they are in the zygote's image only, for the
            runners of ``heavy`` submissions (:meth:`open`; :func:`rlvr.judge.sandbox.bwrap.argv`).
    """

    def __init__(self, tmp_mb: int = 256, memory_mb: int = 2048, pids_max: int = 256,
                 forkloop: bool | None = None, preload: bool = False) -> None:
        self.tmp_mb, self.memory_mb, self.pids_max = tmp_mb, memory_mb, pids_max
        self.preload = preload
        self.forkloop = forkloop_enabled() if forkloop is None else forkloop
        self._proc: subprocess.Popen[bytes] | None = None
        self._inner: list[tuple[int, int]] = []
        self._cg: SandboxCgroup | None = None
        self._ctl: socket.socket | None = None
        self._cpu_base = 0.0
        self._cpu_last = 0.0
        self._limit_mb = memory_mb
        self.pong: dict[str, Any] = {}
        # distinct per process and sandbox (64 per process: 32 workers with their driver sandboxes), so RLIMIT_NPROC
        # counts one sandbox and no two sandboxes share a host uid
        self.uid = _UID_BASE + (os.getpid() % 250) * 64 + next(_UIDS) % 64
        if self.uid in (65534, 65535):  # the host's nobody/nogroup ids: never share them
            self.uid += 16000
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def _ctl_recv(self, timeout_s: float) -> dict[str, Any]:
        assert self._ctl is not None
        self._ctl.settimeout(timeout_s)
        try:
            data = self._ctl.recv(1 << 16)
        except (TimeoutError, OSError) as exc:
            raise SandboxError(f"no answer from the sandbox warden ({exc}); stderr: {self._stderr_tail()}") from exc
        if not data:
            raise SandboxError(f"the sandbox warden exited; stderr: {self._stderr_tail()}")
        try:
            return json.loads(data)
        except ValueError as exc:
            raise SandboxError("the sandbox warden sent garbage") from exc

    def _start(self) -> None:
        self._errlog = tempfile.TemporaryFile()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        go_r, go_w = os.pipe()
        kwargs: dict[str, Any] = {}
        if os.geteuid() == 0:
            kwargs.update(user=self.uid, group=self.uid, extra_groups=[])
        try:
            self._limit_mb = self.memory_mb
            self._cg = SandboxCgroup(self.memory_mb, self.pids_max)
            cmd = ["/bin/sh", "-c", _GO, "sh", *argv(child.fileno(), self.tmp_mb, self.forkloop and ensure_built(),
                                                 self.preload)]
            self._proc = subprocess.Popen(
                cmd, env={}, stdin=go_r, stdout=subprocess.DEVNULL, stderr=self._errlog,
                pass_fds=(child.fileno(),), start_new_session=True, **kwargs,
            )
            self._cg.attach(self._proc.pid)
            os.write(go_w, b"go\n")
        except (OSError, SandboxError) as exc:
            parent.close()
            if self._proc is not None:
                self._proc.kill()
                self._proc.wait()
                self._proc = None
            if self._cg is not None:
                self._cg.remove()
            raise SandboxError(f"cannot start bubblewrap: {exc}") from exc
        finally:
            child.close()
            os.close(go_r)
            os.close(go_w)
        self._ctl = parent
        self._cpu_base += self._cpu_last
        self._cpu_last = 0.0
        self._ctl.send(b'{"op": "ping"}')
        self.pong = self._ctl_recv(30.0)
        if self.pong.get("t") != "pong":
            raise SandboxError(f"sandbox warden did not answer ping: {self.pong}")
        self._inner = [(pid, st[2]) for pid in children(self._proc.pid) if (st := proc_stat(pid)) is not None]

    def _inner_alive(self) -> list[int]:
        return [pid for pid, start in self._inner if (st := proc_stat(pid)) is not None and st[2] == start]

    def _reap_inner(self, timeout_s: float = 5.0) -> None:
        """Reap recorded inner pids that were reparented to this process (when it is a child subreaper)."""
        deadline = time.monotonic() + timeout_s
        while True:
            ours = [pid for pid in self._inner_alive() if (st := proc_stat(pid)) is not None and st[1] == os.getpid()]
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
        """Kill the sandbox and remove its cgroup (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for pid in self._inner_alive():  # the warden (PID 1 of the namespace) first: the kernel kills the rest
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        try:
            proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pass
        for kill in (lambda: os.killpg(proc.pid, signal.SIGKILL), proc.kill):
            try:
                kill()
            except (ProcessLookupError, PermissionError):
                pass
        proc.wait()
        self._reap_inner()
        if self._cg is not None:
            self._cg.remove()
            self._cg = None
        self._errlog.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stderr_tail(self) -> str:
        try:
            self._errlog.seek(0)
            return self._errlog.read()[-2000:].decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    # ------------------------------------------------------------------ submissions
    def open(self, heavy: bool = False) -> Session:
        """A fresh channel to a fresh runner. Starts (or restarts) the sandbox when needed. ``heavy``: the runner is
        cloned from the sandbox's zygote, whose image holds the modules programs commonly import
        (:func:`names_zygote_module` decides it from the submission's text; the warden never sees that text), else
        forked from the lean warden. Raises :class:`SandboxError` when the sandbox cannot start or its warden does not
        acknowledge (the caller may retry once: the sandbox is then restarted)."""
        if self._proc is None or self._proc.poll() is not None or self._ctl is None:
            self.close()
            self._start()
        assert self._ctl is not None
        rid = uuid.uuid4().hex[:16]
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        try:
            msg = json.dumps({"op": "sub", "id": rid, "heavy": bool(heavy)}).encode()
            socket.send_fds(self._ctl, [msg], [req_r, resp_w])
            ack = self._ctl_recv(30.0)
            if ack != {"t": "ack", "id": rid}:
                raise SandboxError(f"sandbox warden did not acknowledge: {ack}")
        except (OSError, SandboxError) as exc:
            for fd in (req_w, resp_r):
                os.close(fd)
            self.close()
            raise SandboxError(str(exc)) from exc
        finally:
            os.close(req_r)
            os.close(resp_w)
        return Session(rid, req_w, resp_r)

    def finish(self, session: Session, timeout_s: float = 10.0, restart: bool = False) -> str:
        """End ``session``: close its pipes and wait for the warden's word on it. Returns ``"done"`` (the warden
        reaped the runner and every process of the submission, wiped, and sent its CPU figures), ``"ended"`` (the
        warden ended the sandbox because of what the submission left: a place its wipe could not clean, or a changed
        rlimit or scheduling state of the warden; the next :meth:`open` starts a fresh one), ``"lost"`` (no word
        within ``timeout_s`` seconds, or not this session's: the warden is gone, which no submission can cause, or
        hung; the sandbox is closed) or ``"restarted"`` (``restart``: the caller had the sandbox killed, for a runner
        that hung or broke the protocol). Never raises."""
        session.close()
        if restart or self._ctl is None:
            self.close()
            return "restarted"
        try:
            done = self._ctl_recv(timeout_s)
            if done.get("id") != session.rid or done.get("t") not in ("done", "end"):
                raise SandboxError(f"unexpected warden message {done}")
            self._cpu_last = float(done.get("cpu_s", 0.0))
        except (SandboxError, ValueError, TypeError):
            self.close()
            return "lost"
        if done["t"] == "end":
            self.close()
            return "ended"
        return "done"

    def warden_gone(self) -> bool:
        """Whether the warden has exited (its end of the control socket is closed), without waiting: its files are
        closed before the kernel kills the rest of its pid namespace, so a runner that died because the warden was
        killed finds this True, one the submission killed finds it False (the warden is waiting for it, or its
        ``done`` is already there). Never raises; consumes nothing."""
        if self._ctl is None:
            return True
        try:
            self._ctl.settimeout(0.0)
            return not self._ctl.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except OSError:
            return True
        finally:
            self._ctl.settimeout(None)

    def cpu_seconds(self) -> float:
        """CPU seconds of this sandbox's wardens and every process they reaped (runners, tests), since creation,
        as reported after each submission."""
        return self._cpu_base + self._cpu_last

    def limit_memory(self, memory_mb: int) -> None:
        """Set this sandbox's cgroup memory limit for the next submission: ``memory_mb`` MB, at most the sandbox's
        own ``memory_mb`` (no-op without cgroups or when unchanged; a refusal by the kernel keeps the old limit)."""
        mb = max(64, min(int(memory_mb), self.memory_mb))
        if self._cg is None or mb == self._limit_mb:
            return
        try:
            self._cg.set_memory(mb)
            self._limit_mb = mb
        except OSError:
            pass

    def memory_usage_mb(self) -> float:
        """Memory charged to this sandbox's cgroup now, MB (0.0 without cgroups)."""
        return self._cg.memory_usage_mb() if self._cg is not None else 0.0

    def oom_kills(self) -> int:
        """OOM kills in this sandbox's cgroup so far (0 without cgroups)."""
        return self._cg.oom_kills() if self._cg is not None else 0

    @property
    def cgroup_mode(self) -> str:
        """``v2`` / ``v1`` / ``none``."""
        from rlvr.judge.sandbox.cgroups import detect

        return detect().name
