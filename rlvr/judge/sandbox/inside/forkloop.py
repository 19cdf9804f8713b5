"""The runner's compiled per-test loop for stdin/stdout tests (inside the sandbox): the ctypes binding of
``forkloop.c``, which the host builds next to this file with ``wipe.c`` into one library
(``rlvr/judge/sandbox/forkloop.py``); :data:`WIPE` binds the latter's end-of-submission wipe for :mod:`wipe`.

Standard library only. The warden calls :func:`load` when the host asks for the loop (``--forkloop``); the runner
then runs stdio tests through :func:`run`, which does in C what :func:`proc.spawn` + :func:`proc.collect` + the
work-dir renewal do in Python, test after test, so that the runner writes no page between two forks (every page it
writes after a ``fork()`` is a copy-on-write fault; docs/judge/suite.md). The child's side (std streams, the
program, its record) stays the Python code of :mod:`proc` and :mod:`runner`.
"""

import _signal
import ctypes
import os

import proc


class _Test(ctypes.Structure):
    _fields_ = [("stdin_buf", ctypes.c_char_p), ("stdin_len", ctypes.c_longlong), ("time_limit", ctypes.c_double),
                ("cpu_limit", ctypes.c_longlong),
                ("rfd", ctypes.c_int), ("out_fd", ctypes.c_int), ("err_fd", ctypes.c_int), ("status", ctypes.c_int),
                ("timed_out", ctypes.c_int), ("cpu_s", ctypes.c_double), ("wall_s", ctypes.c_double)]


class _Batch(ctypes.Structure):
    _fields_ = [("tests", ctypes.POINTER(_Test)), ("n", ctypes.c_int), ("next", ctypes.c_int),
                ("workdir", ctypes.c_char_p), ("max_timeouts", ctypes.c_int), ("timeouts", ctypes.c_int),
                ("private_fds", ctypes.POINTER(ctypes.c_int)), ("n_private", ctypes.c_int),
                ("as_limit", ctypes.c_longlong), ("fsize", ctypes.c_longlong), ("nproc", ctypes.c_longlong),
                ("child", ctypes.c_int), ("child_wfd", ctypes.c_int), ("dirty", ctypes.c_int), ("err", ctypes.c_int)]


def load(path="/judge/inside/_forkloop.so"):
    """Load the compiled library into :data:`RUN` (forkloop.c's loop) and :data:`WIPE` (wipe.c's
    ``fl_wipe_all(tops, n, workdir, kill_timeout_s)``); returns whether it is usable: the library loads, has both,
    and its struct sizes match this module's ctypes layout (a stale build is never called)."""
    global RUN, WIPE
    try:
        lib = ctypes.PyDLL(path)
        lib.fl_sizes.restype = ctypes.c_longlong
        if lib.fl_sizes() != ctypes.sizeof(_Batch) * 10000 + ctypes.sizeof(_Test):
            return False
        lib.fl_run.argtypes = [ctypes.POINTER(_Batch)]
        lib.fl_run.restype = ctypes.c_int
        lib.fl_wipe_all.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_char_p, ctypes.c_double]
        lib.fl_wipe_all.restype = ctypes.c_int
    except (OSError, AttributeError):
        return False
    RUN, WIPE = lib.fl_run, lib.fl_wipe_all
    return True


RUN = None  # fl_run of forkloop.c once :func:`load` succeeded (None: the Python loop of proc.spawn/collect)
WIPE = None  # fl_wipe_all of wipe.c once :func:`load` succeeded (None: wipe.py's Python wipe)


def run(targets, stdins, time_limits, cpu_limits, limits, base_vm, max_timeouts, timeouts, on_test):
    """Run one stdio test per entry of ``stdins`` (bytes; wall limits ``time_limits`` and RLIMIT_CPU
    ``cpu_limits``, seconds) with :data:`RUN`: fork, wait, reap and ``kill(-1)`` in C, then, after the last
    fork, hand each finished test to ``on_test(i, timed_out, status, cpu_s, wall_s, rfd, out_fd, err_fd, nonce)``
    (which owns and closes the three fds). ``targets[i](chan)`` runs in test ``i``'s child; ``limits``: the
    ``memory_limit_mb``, ``output_limit_mb`` and ``as_limit`` of :func:`proc.set_limits`. Stops early when ``timeouts``
    (counted on) reaches ``max_timeouts`` (> 0), or when the work dir could not be renewed after a test. Returns
    ``(tests run, work dir left dirty)``. Raises ``OSError`` when a syscall failed."""
    n = len(stdins)
    tests = (_Test * n)()
    for t, data, tl, cpu in zip(tests, stdins, time_limits, cpu_limits, strict=True):
        t.stdin_buf, t.stdin_len, t.time_limit, t.cpu_limit = data, len(data), tl, max(1, int(cpu + 0.999))
    private = (ctypes.c_int * max(1, len(proc.PRIVATE_FDS)))(*proc.PRIVATE_FDS)
    mb = 1 << 20
    b = _Batch(tests=tests, n=n, next=0, workdir=proc.WORKDIR.encode(), max_timeouts=max_timeouts, timeouts=timeouts,
               private_fds=private, n_private=len(proc.PRIVATE_FDS),
               as_limit=base_vm + limits["memory_limit_mb"] * mb if limits.get("as_limit", True) else 0,
               fsize=limits["output_limit_mb"] * mb, nproc=proc.NPROC_LIMIT)
    nonces = [proc.next_nonce() for _ in range(n)]
    proc.flush()
    rc = RUN(ctypes.byref(b))
    if rc == 1:
        try:
            _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)  # the C call: signal.signal's enum code copies pages
            proc.take_prepared()
            targets[b.child](proc.Channel(b.child_wfd, nonces[b.child]))
        finally:
            os._exit(1)
    for i in range(b.next):
        t = tests[i]
        on_test(i, bool(t.timed_out), t.status, t.cpu_s, t.wall_s, t.rfd, t.out_fd, t.err_fd, nonces[i])
    if rc < 0:
        raise OSError(b.err, f"forkloop: {os.strerror(b.err)}")
    return b.next, bool(b.dirty)
