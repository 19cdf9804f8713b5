"""The warden: PID 1 of a sandbox's pid namespace; a fresh ``python3 -s`` that never receives submission data.

Standard library only; started by bubblewrap (``--as-pid-1``) with an empty environment. It loads the judge's own
modules only (a lean image: every test forks it), makes itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``: no
``/proc/1/mem``, no ptrace attach) and installs the seccomp filter of :mod:`seccomp` on itself, so every later process
of the sandbox inherits it. As PID 1 it cannot be signalled by any process of its namespace (the kernel drops signals
to an init without a handler; it installs none, SIGINT's included: :func:`reset_signals`), so a submission can kill
its runner (or the zygote, below) but never the warden.

Control channel: a ``SOCK_SEQPACKET`` unix socket (fd given as argv[1]) to the host. Messages (JSON):
  ``{"op": "ping"}`` → ``{"t": "pong", "seccomp": bool, "dumpable": int, "forkloop": bool, "zygote": int}``
  (``forkloop``: the runners run stdio tests through the compiled loop, :func:`forkloop.load`; asked for with
  ``--forkloop``; ``zygote``: the zygote's pid, 0 when there is none)
  ``{"op": "sub", "id", "heavy"}`` with two fds (SCM_RIGHTS: the runner's request read end and response write end) →
  ``{"t": "ack", "id"}`` once no other process is left; a ``heavy`` runner (the host's bit: the submission names a
  module of the preload list) is cloned by the zygote before the ``ack``, any other forked by the warden after it
  (:mod:`runner`, which owns the fds); the warden reaps it and every orphan, kills every process left and answers
  ``{"t": "done", "id", "cpu_s"}``
  (``cpu_s``: CPU seconds of the warden and every process it reaped so far, which includes the runner's waited-for
  children), or ``{"t": "end", "id", "why", "cpu_s"}`` when it ends after that submission (:func:`end`).
  The first submission finds the sandbox as bwrap made it; every later one finds it wiped.
Every writable place (``/tmp`` with the build and work dirs, ``/dev/shm``, ``/dev/mqueue``, SysV IPC objects) is
wiped by the runner itself as it ends (:mod:`wipe`), or, when the submission killed its runner first, by a child the
warden forks for it: the warden never lists a name a submission created, so none of it can linger in the heap the
next runner inherits. A failed wipe ends the warden (hence the sandbox): a place it cannot clean is never handed to the
next submission. The same holds for the warden's and zygote's inheritable process state (rlimits, nice, scheduling
policy, affinity, I/O priority, autogroup nice: :mod:`pstate`), which the seccomp filter lets no other process change:
after every submission the warden compares both with its own at start, ends itself (hence the sandbox) when its own
changed and replaces the zygote when the zygote's did.

The zygote (:mod:`zygote`): a child forked after the warden's setup (seccomp, non-dumpable, ``gc.freeze()``), which
imports :data:`runner.PRELOAD` and clones runners for heavy submissions with
``clone(CLONE_PARENT)``, so that they are the warden's children (reaped here, their CPU in ``cpu_s`` as a forked
runner's). A runner spares it: it sends ``kill(-1)`` only when a process of its submission is left
(:func:`proc.kill_all`); a zygote that a submission stopped or killed is replaced before the next heavy submission,
and the warden forks the runner itself when the zygote fails. ``--preload``: the list in the warden and no zygote
(the driver sandbox).
"""

import _socket
import ctypes
import gc
import json
import marshal
import os
import resource
import signal
import sys
import types

DIRS = ["/judge/inside", "/judge"]  # where bwrap binds the judge's in-sandbox code (bwrap.py)
sys.path[:0] = DIRS

# The judge's own modules, in dependency order (each only imports standard modules or earlier ones).
OWN = ("wire", "literal_scan", "literal", "proc", "forkloop", "seccomp", "pstate", "wipe", "build", "callserver",
       "calls", "driver", "runner", "zygote")


def load_own():
    """Import :data:`OWN` from code objects compiled in a short-lived child. Compiled here, from source (the
    sandbox has no writable bytecode cache), they would leave ~1 MB of freed but resident compiler memory in this
    process, which every test's ``fork()`` then copies and every test's exit unmaps again. When the child fails,
    the plain imports that follow compile them here."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            out = []
            for name in OWN:
                path = next(p for d in DIRS if os.path.exists(p := f"{d}/{name}.py"))
                with open(path, "rb") as fh:
                    out.append((name, path, compile(fh.read(), path, "exec", dont_inherit=True)))
            view = memoryview(marshal.dumps(out))
            while view:
                view = view[os.write(w, view) :]
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        return
    for name, path, code in marshal.loads(b"".join(chunks)):
        module = types.ModuleType(name)
        module.__file__ = path
        sys.modules[name] = module
        exec(code, module.__dict__)


load_own()

import driver  # noqa: E402,F401 - the runner imports it for a ``drive`` op only: in the image, as the rest
import forkloop  # noqa: E402
import proc  # noqa: E402
import pstate  # noqa: E402
import runner  # noqa: E402
import seccomp  # noqa: E402
import wipe  # noqa: E402
from zygote import SYS_CLONE, Zygote, reap_all, reap_zombies, recv_fds, vm_base  # noqa: E402

# Nothing more in this image: every module here is in the image each test's fork() copies and its exit unmaps (~0.1 ms
# per MB per test on the 2-vCPU VM of bench/judge). What programs commonly import (runner.PRELOAD: ~1.2 MB, most of it
# typing, datetime, copy, decimal, random) is the zygote's (:func:`zygote_main`), a second warm image forked from this
# one, from which the runners of the submissions the host marks ``heavy`` are cloned; of that list, the judge's own
# modules already pull in re, collections, itertools, functools, operator, array, time, enum, abc and atexit. Not
# traceback, ast, base64 (literal parses through _ast, a program's uncaught exception is printed by
# sys.__excepthook__, the runner imports traceback on its error paths only). ``--preload``: the whole list here and
# no zygote, for the driver sandbox, whose runner forks no test child and whose trusted prelude imports the list for
# every submission.
PRELOAD_HERE = "--preload" in sys.argv[2:]
if PRELOAD_HERE:
    for _name in runner.PRELOAD:
        try:
            __import__(_name)
        except ImportError:  # pragma: no cover - a stripped-down interpreter
            pass

LIBC = ctypes.CDLL(None, use_errno=True)


def cpu_seconds():
    """CPU seconds of the warden and of every process it reaped so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def reset_signals():
    """Give the sandbox a signal state that does not depend on the one the judge's host process inherited.

    Ignored signals and the blocked mask survive ``exec``, so bwrap hands the warden, and through ``fork`` every
    runner and program, whatever the judge's host process inherited: a process started as a background job of a
    non-interactive shell (``cmd &``: a script, a CI job, an agent) has SIGINT and SIGQUIT ignored, one under
    ``nohup`` SIGHUP, and a ``python3`` that starts with SIGINT ignored installs no ``KeyboardInterrupt`` handler. A
    program's behaviour then depended on how the judge was started (``os.kill(os.getpid(), signal.SIGINT)`` did
    nothing instead of raising ``KeyboardInterrupt``), and so did the runner's: the ``KeyboardInterrupt`` a
    submission sends it was never raised, so never reported. Here: nothing blocked; every signal at its default, but
    SIGPIPE and SIGXFSZ, which the interpreter ignores itself (a write past RLIMIT_FSIZE fails with ``EFBIG``).
    SIGINT too: the handler Python installs at start would be the warden's one handler, and PID 1 can be signalled
    from its namespace exactly for the signals it handles (a submission's ``os.kill(1, signal.SIGINT)`` ended the
    sandbox); the runner installs Python's ``KeyboardInterrupt`` handler for itself and the programs
    (:func:`runner.main`)."""
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    keep = {signal.SIGKILL, signal.SIGSTOP, signal.SIGPIPE, signal.SIGXFSZ}
    for sig in signal.valid_signals():
        if sig not in keep and (sig == signal.SIGINT or signal.getsignal(sig) == signal.SIG_IGN):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):  # pragma: no cover - a signal the C library reserves
                pass


def end(ctl, rid, why):
    """Tell the host that this warden ends (hence the sandbox) after submission ``rid`` because of what it left
    (``why``: ``wipe``, a place the wipe could not clean; ``state``, a changed process state): ``{"t": "end", "id",
    "why", "cpu_s"}``, so that the host counts it as the submission's doing, not as an infrastructure failure."""
    try:
        ctl.send(json.dumps({"t": "end", "id": rid, "why": why, "cpu_s": cpu_seconds()}).encode())
    except OSError:
        pass


def main():
    """Serve the control socket until the host closes it (module docstring)."""
    reset_signals()
    ctl = _socket.socket(fileno=int(sys.argv[1]))
    loaded = "--forkloop" in sys.argv[2:] and forkloop.load()
    LIBC.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    filtered = seccomp.install()
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    os.makedirs(proc.WORKDIR, exist_ok=True)
    proc.prepare()
    gc.collect()
    gc.freeze()  # keep warm objects out of the runners' copy-on-write path
    base_vm = vm_base()
    baseline = pstate.snapshot()  # what this warden and every zygote it forks must still have after a submission
    zygote_state = baseline and (*baseline[:-1], None)  # snapshot(pid) leaves the autogroup (the warden's) out
    zygote = Zygote(enabled=not PRELOAD_HERE and SYS_CLONE is not None)
    if zygote.enabled:
        zygote.spawn(ctl)
    while True:
        try:
            data, fds = recv_fds(ctl, 1 << 16, 4)
        except OSError:
            return
        if not data:
            return
        msg = json.loads(data)
        if msg.get("op") == "ping":
            for fd in fds:
                os.close(fd)
            zygote.check()
            ctl.send(json.dumps({"t": "pong", "seccomp": filtered, "dumpable": LIBC.prctl(3, 0, 0, 0, 0),
                                "forkloop": loaded, "zygote": zygote.pid}).encode())
            continue
        if msg.get("op") != "sub" or len(fds) != 2:
            return
        rid = str(msg["id"])
        if zygote.pid:  # the last runner ended clean (else reap_all below killed the zygote): nothing else is left
            reap_zombies(zygote)
        else:
            reap_all()  # nothing should be left (the previous runner's leftovers were removed after it): cheap check
        pid = zygote.runner_for(ctl, rid, fds) if zygote.enabled and msg.get("heavy") is True else 0
        ctl.send(json.dumps({"t": "ack", "id": rid}).encode())  # a heavy runner's pid is known before it can read
        if not pid:
            pid = os.fork()
            if pid == 0:
                try:
                    ctl.close()
                    if zygote.sock is not None:
                        zygote.sock.close()
                    runner.main(rid, fds[0], fds[1], base_vm)
                finally:
                    os._exit(1)
        for fd in fds:
            os.close(fd)
        clean = False
        while True:  # reap orphans too, until the runner itself is gone
            try:
                done, status, _ru = os.wait4(-1, os.WUNTRACED)
            except InterruptedError:
                continue
            except ChildProcessError:
                break
            if done == zygote.pid:  # a submission stopped or killed it: another one before the next heavy runner
                zygote.lost(reaped=not os.WIFSTOPPED(status))
                continue
            if os.WIFSTOPPED(status):
                if done == pid:  # nothing but the submission stops its runner: end it now (runtime_error on the
                    os.kill(pid, signal.SIGKILL)  # host) instead of holding the worker until the hang detector
                continue
            if done == pid:
                clean = os.waitstatus_to_exitcode(status) == wipe.CLEAN_EXIT
                break
        if clean and zygote.pid:
            reap_zombies(zygote)  # a clean runner left no process of its submission (proc.kill_all, wipe)
        else:
            reap_all()
            zygote.lost(reaped=True)  # kill(-1) reached it, and it was reaped
        if not clean:  # the runner was killed before it could wipe: a child of ours does it
            wiper = os.fork()
            if wiper == 0:
                os._exit(wipe.wipe_all())
            if os.waitstatus_to_exitcode(os.waitpid(wiper, 0)[1]) != wipe.CLEAN_EXIT:
                return end(ctl, rid, "wipe")  # a place that cannot be cleaned is never handed to another submission
        if pstate.snapshot() != baseline:
            return end(ctl, rid, "state")  # limits or scheduling changed: every later runner would inherit them
        if zygote.pid and pstate.snapshot(zygote.pid) != zygote_state:
            zygote.lost()  # the same for the zygote's runners: another one before the next heavy submission
        ctl.send(json.dumps({"t": "done", "id": rid, "cpu_s": cpu_seconds()}).encode())

if __name__ == "__main__":
    main()
