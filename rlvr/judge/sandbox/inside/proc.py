"""Test processes of one submission: fork, limits, std streams, result channel, collection (inside the sandbox).

Standard library only. The runner (:mod:`runner`) forks one child per test (or one call server per submission, see
:mod:`callserver`); the child gets its stdin from a memfd, writes stdout/stderr to memfds (read back after it exits),
runs under ``RLIMIT_AS`` (memory), ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` (output cap), ``RLIMIT_NPROC`` and no core files,
and reports on a pipe whose records carry a per-child nonce (:func:`next_nonce`), so stdout tricks, early exits and
``atexit`` handlers read as "no result", never as success. After every child, ``kill(-1, SIGKILL)`` removes every
other process of the sandbox except the runner itself and the warden (PID 1 of the pid namespace, which the kernel
protects). Each ``fork()`` here is paid per test, with copy-on-write faults on every page parent or child writes
afterwards: the child's path is kept short and free of Python-level setup (:func:`prepare`; docs/judge/suite.md).
For stdio tests the same loop runs in C when the warden loaded it (:mod:`forkloop`), so that the runner writes no page
between two forks; :func:`spawn` + :func:`collect` are the Python loop it falls back to, with the same semantics.
"""

import _signal
import io
import json
import os
import resource
import select
import signal
import struct
import sys
import time

WORKDIR = "/tmp/work"
NPROC_LIMIT = 64  # processes per sandbox host uid (RLIMIT_NPROC)
REPORT_CAP = 1 << 16  # stderr bytes shipped back per test
RECORD_CAP = (16 << 20) + 4096  # one child record (a return value literal plus its envelope)
PRIVATE_FDS = []  # the runner's own channel fds: closed in every child


def memfd(name, data=b""):
    """An anonymous in-memory file holding ``data``, positioned at 0 (a test's stdin/stdout/stderr)."""
    fd = os.memfd_create(name, 0)
    view = memoryview(data)
    while view:
        view = view[os.pwrite(fd, view, len(data) - len(view)) :]
    return fd


def read_fd(fd, cap):
    """Up to ``cap`` bytes of ``fd`` from its start (positional reads: the file offset is neither used nor moved)."""
    parts, got = [], 0
    while got < cap:
        chunk = os.pread(fd, cap - got, got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def set_limits(memory_limit_mb, cpu_s, output_limit_mb, base_vm, as_limit=True):
    """rlimits of a test child: address space ``base_vm`` + ``memory_limit_mb`` MB (when ``as_limit``), CPU
    seconds, file size ``output_limit_mb`` MB, no core, ``NPROC_LIMIT`` processes for the sandbox's uid."""
    mb = 1 << 20
    if as_limit:
        resource.setrlimit(resource.RLIMIT_AS, (base_vm + memory_limit_mb * mb,) * 2)
    cpu = max(1, int(cpu_s + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output_limit_mb * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (NPROC_LIMIT, NPROC_LIMIT))


def _std_streams():
    """Fresh ``(stdin, stdout, stderr)`` text streams over fds 0/1/2, as the interpreter's own std streams are
    (modes, names; stderr line-buffered with ``backslashreplace``)."""
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    # as the interpreter's own std streams have them: competitive-programming FastIO templates read sys.stdout.mode
    for stream, mode, name in ((stdin, "r", "<stdin>"), (stdout, "w", "<stdout>"), (stderr, "w", "<stderr>")):
        stream.mode = mode
        stream.buffer.raw.name = name
    return stdin, stdout, stderr


def prepare():
    """Build, once in the warden, what every test child needs and never modifies in its parent: unused std stream
    objects over fds 0/1/2 (a child points those fds at its own files first, then takes its copy-on-write copy of
    these objects) and the program's ``sys.path``. Constructing them in each child cost ~100 page copies per test
    (measured, docs/judge/suite.md); no process but a test child ever reads or writes through them, so each child
    gets them exactly as built. They are built while fds 0/1/2 are an empty memfd, so what they cache at
    construction (position 0, seekable, block size) is what a child's own memfds give; the warden's fds are put
    back afterwards."""
    global _PREPARED
    saved = []
    for fd in (0, 1, 2):
        try:
            saved.append(os.dup(fd))
        except OSError:
            saved.append(None)
    scratch = os.memfd_create("prepare", 0)
    try:
        for fd in (0, 1, 2):
            os.dup2(scratch, fd)
        streams = _std_streams()
    finally:
        for fd, old in zip((0, 1, 2), saved, strict=True):
            if old is None:
                os.close(fd)
            else:
                os.dup2(old, fd)
                os.close(old)
        os.close(scratch)
    # the interpreter's own streams are kept referenced here: replaced in a child, they would otherwise be finalised
    # there (their close/flush machinery copies ~70 more pages per test)
    keep = (sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__, sys.path)
    _PREPARED = (streams, [p for p in sys.path if not p.startswith("/judge")], keep)


_PREPARED = None


def child_stdio(stdin_fd, out_fd, err_fd):
    """In a test child: close the runner's channel, make fds 0/1/2 and ``sys.std*`` the test's files (the std stream
    objects of :func:`prepare`, else new ones), cd to the work dir, drop the judge from ``sys.path``."""
    for fd in PRIVATE_FDS:
        try:
            os.close(fd)
        except OSError:
            pass
    os.dup2(stdin_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.chdir(WORKDIR)
    take_prepared()


def take_prepared():
    """In a test child whose fds 0/1/2 are its files: make ``sys.std*`` the std stream objects of :func:`prepare`
    (built now if the warden did not) and drop the judge from ``sys.path``."""
    if _PREPARED is None:
        prepare()
    (sys.stdin, sys.stdout, sys.stderr), path, _keep = _PREPARED
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.path = path  # the program sees a plain interpreter's path (the warden's list stays referenced in _keep)


def exit_code(exc):
    """The process exit code ``SystemExit`` ``exc`` stands for (a non-int code is printed to stderr, exit 1)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def flush():
    """Flush ``sys.stdout``/``sys.stderr``, ignoring errors."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def describe(exc):
    """(type name, one-line message) of an exception, surviving a hostile ``__str__``."""
    kind = type(exc).__name__[:200]
    try:
        text = str(exc)
    except BaseException:
        text = ""
    return kind, (f"{kind}: {text}" if text else kind)[:500]


class Channel:
    """The child's end of the result pipe; every record carries the runner's nonce."""

    def __init__(self, fd, nonce, _write=os.write, _dumps=json.dumps, _pack=struct.pack):
        self._fd, self._nonce, self._write, self._dumps, self._pack = fd, nonce, _write, _dumps, _pack

    def put(self, **rec):
        """Send one record (a JSON object, 4-byte length prefix)."""
        rec["n"] = self._nonce
        self._send(self._dumps(rec).encode())

    def ok(self, code):
        """Send ``{"ok": true, "x": code}`` (``code``: int exit status) without the json module's Python code."""
        self._send(b'{"ok": true, "x": %d, "n": "%s"}' % (code, self._nonce.encode()))

    def _send(self, data):
        view = memoryview(self._pack(">I", len(data)) + data)
        while view:
            view = view[self._write(self._fd, view) :]


_NONCE = ["", 0, 0]  # key, owner pid, counter


def next_nonce():
    """A nonce no other child of this process got: a random key drawn once per process (the runner) plus a counter.
    A record only counts with its child's nonce; the nonce needs to differ between children, not to be secret from
    them (a child can read its own), so one ``getrandom`` per runner is enough."""
    pid = os.getpid()
    if _NONCE[1] != pid:
        _NONCE[:] = [os.urandom(12).hex(), pid, 0]
    _NONCE[2] += 1
    return f"{_NONCE[0]}{_NONCE[2]}"


def spawn(target, stdin_data, limits, base_vm, close_in_child=()):
    """Fork a child running ``target(chan)``. Returns (pid, result-pipe read end, stdout fd, stderr fd, t0, nonce).
    ``close_in_child``: runner fds the child must not keep (besides :data:`PRIVATE_FDS`)."""
    in_fd = memfd("stdin", stdin_data)
    out_fd, err_fd = memfd("stdout"), memfd("stderr")
    rfd, wfd = os.pipe()
    nonce = next_nonce()
    flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            for fd in (rfd, *close_in_child):
                os.close(fd)
            _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)  # the C call: signal.signal's enum code copies pages
            child_stdio(in_fd, out_fd, err_fd)
            for fd in (in_fd, out_fd, err_fd):
                os.close(fd)
            set_limits(base_vm=base_vm, **limits)
            target(Channel(wfd, nonce))
        finally:
            os._exit(1)
    os.close(wfd)
    os.close(in_fd)
    return pid, rfd, out_fd, err_fd, t0, nonce


class Records:
    """Incremental parser of a child's nonce-checked records."""

    def __init__(self, nonce):
        self.nonce, self.buf, self.overflow = nonce, bytearray(), False
        self._ok_tail = b', "n": "%s"}' % nonce.encode()

    def feed(self, chunk):
        """Add ``chunk`` (bytes); return the complete records with the right nonce (others are dropped)."""
        self.buf += chunk
        out = []
        while len(self.buf) >= 4:
            size = struct.unpack(">I", self.buf[:4])[0]
            if size > RECORD_CAP:
                self.overflow = True
                self.buf.clear()
                break
            if len(self.buf) < 4 + size:
                break
            body = bytes(self.buf[4 : 4 + size])
            del self.buf[: 4 + size]
            # Channel.ok's exact form, read without the json module (its Python code costs page copies per test)
            if body.startswith(b'{"ok": true, "x": ') and body.endswith(self._ok_tail):
                code = body[18 : -len(self._ok_tail)]
                if code.isdigit() and len(code) < 4:
                    out.append({"ok": True, "x": int(code)})
                    continue
            try:
                rec = json.loads(body)
            except ValueError:
                rec = None
            if isinstance(rec, dict) and rec.pop("n", None) == self.nonce:
                out.append(rec)
        return out


def collect(pid, rfd, nonce, deadline, on_record):
    """Wait until the child exits or ``deadline`` (absolute monotonic seconds) passes (then it is killed); reap it,
    kill every other process, and pass the nonce-checked records it left in the result pipe to ``on_record``.
    Returns (timed_out, wait status, rusage).

    The runner sleeps on the child's pidfd alone and reads the pipe once, after the exit: one wake-up per test, and
    no Python work of the runner while the child runs (every page the runner writes meanwhile is a copy-on-write
    copy; docs/judge/suite.md). A stdio child's records are small (:func:`describe` bounds them) and fit the pipe,
    so it never waits for the runner; a program that floods the inherited pipe blocks itself until its time limit.
    Everything the child wrote before it exited is in the pipe when it is read; what is read is capped at
    :data:`RECORD_CAP` plus a frame header."""
    pidfd = os.pidfd_open(pid)
    timed_out = False
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            if poller.poll(int(remaining * 1000) + 1):
                break
    finally:
        _, status, rusage = os.wait4(pid, 0)
        kill_all()  # after the child's exit nothing but the runner can fork: this reaches every other process
        os.close(pidfd)
    read_records(rfd, nonce, on_record)
    return timed_out, status, rusage


def read_records(rfd, nonce, on_record):
    """Pass the nonce-checked records in the result pipe ``rfd`` to ``on_record``, then close it. Read without
    blocking (a killed process may still hold the write end: nothing more is coming), at most :data:`RECORD_CAP`
    plus a frame header."""
    try:
        os.set_blocking(rfd, False)
        parser, got = Records(nonce), 0
        while got < RECORD_CAP + 4:
            try:
                chunk = os.read(rfd, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            got += len(chunk)
            for rec in parser.feed(chunk):
                on_record(rec)
            if parser.overflow:
                break
    finally:
        os.close(rfd)


def become_subreaper():
    """Make the calling runner a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): every process a submission
    starts stays its descendant, orphans included, so that "no child left" (:func:`children_left`) means "no process
    of the submission left". Sets :data:`SUBREAPER`; a refusal (never seen) leaves it False, and :func:`kill_all`
    then always kills."""
    import ctypes

    global SUBREAPER
    SUBREAPER = ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER


SUBREAPER = False  # the caller is a child subreaper (the runner, :func:`become_subreaper`)


def children_left():
    """Reap every zombie child of the caller (their CPU joins its ``RUSAGE_CHILDREN``); True when a live child is
    left, False when it has none. Only meaningful for a subreaper (:data:`SUBREAPER`)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        except InterruptedError:
            continue
        if pid == 0:
            return True


def kill_all():
    """SIGKILL every process of this pid namespace except the caller and PID 1 (the warden), when there may be one of
    the submission's: a subreaper runner (:data:`SUBREAPER`) with no child left (:func:`children_left`) has none, and
    sends nothing, so that the warden's zygote (a sibling, not a descendant) lives on; otherwise ``kill(-1)``, which
    kills the zygote too (the warden notices and starts another when needed)."""
    if SUBREAPER and not children_left():
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def base_record(status, cpu_s, wall_s, out_fd, err_fd, output_cap):
    """The common fields of a finished child's record (``cpu_s``, ``wall_s``: seconds); closes its stdout/stderr
    memfds."""
    size = os.fstat(out_fd).st_size
    rec = {
        "exit_code": os.waitstatus_to_exitcode(status) if status is not None else None,
        "wall_s": round(wall_s, 6),
        "cpu_s": round(cpu_s, 6),
        "stdout": read_fd(out_fd, min(size, output_cap)).decode("utf-8", "surrogateescape"),
        "stdout_truncated": size > output_cap,
        "stderr": read_fd(err_fd, min(os.fstat(err_fd).st_size, REPORT_CAP)).decode("utf-8", "replace"),
    }
    os.close(out_fd)
    os.close(err_fd)
    code = rec["exit_code"]
    rec["signal"] = -code if code is not None and code < 0 else None
    return rec
