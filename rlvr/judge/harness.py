"""In-sandbox judge harness: a warmed Python interpreter that forks one child per test (or per test batch).

This file runs INSIDE the bubblewrap sandbox under the system ``python3 -I``; it imports only the standard library and
never imports rlvr. The host (:mod:`rlvr.judge.sandbox`) talks to it over two pipes, fd 3 (requests) and fd 4
(responses), with 8-byte big-endian length-prefixed JSON frames.

Why this shape (the issue's cost target, ≤ 6 ms CPU per stdin/stdout test): starting ``python`` costs ~11 ms and a
``bwrap`` spawn ~27 ms, but ``fork()`` of an already-warm interpreter ~4 ms (``../shared/bench/README.md``). So one
sandbox is started per worker and reused; each submission's tests run in forked children, which never share memory
with this (trusted) parent process. After every child, ``kill(-1, SIGKILL)`` removes every other process of the
sandbox's pid namespace, double-forked daemons included.

Trust boundary: the parent never executes submitted code. Children send their per-test records on a pipe created by
the parent, stamped with a per-child random nonce; stdout tricks, early exits, ``atexit``/``excepthook``/``settrace``
handlers and self-inflicted signals therefore read as "no result" (failure), not success. Expected outputs of stdio and
call tests never enter the sandbox: the host compares them. Assert tests (HumanEval/MBPP) run with pristine builtins,
restored module dicts, tracing disabled, and the candidate's return values screened for submission-defined types that
override comparison or arithmetic (``__eq__`` always True, float/str/list subclasses…).

Request ops:
  {"op": "ping"} -> {"ok": true, "pid": …}
  {"op": "stats"} -> {"cpu_s": CPU seconds of this harness and every child it reaped}
  {"op": "batch", "code", "tests": [{"kind": "stdio", "stdin"} | {"kind": "call", "args"} | {"kind": "assert", "code"}],
   "entry_point", "test_setup", "time_limit_s", "memory_limit_mb", "output_limit_mb", "max_timeouts"}
      -> {"compile_error": str} | {"results": [record, …]}
  {"op": "run", "code", "stdin", "timeout_s", "memory_limit_mb", "output_limit_mb", "files": {name: base64}}
      -> {"compile_error": str} | {"result": record}
  Either op may carry "native": {"source", "compile": argv|null, "run": argv, "env", "as_limit", "compile_timeout_s"}
  (a row of rlvr/judge/languages.py): the code is compiled once in /tmp/build and exec'd per test.
A record: {"status": "ok"|"exception"|"timeout"|"signal"|"no_result"|"skipped", "exit_code", "signal", "stdout",
"stderr", "wall_s", "cpu_s", "exc_type", "message", "value"}.
"""

import base64
import builtins
import gc
import io
import json
import os
import resource
import select
import shutil
import signal
import struct
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from literal import parse_literal  # rlvr/judge/literal.py, bound next to this file

if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)  # benchmarks return integers with more than 4,300 digits (HumanEval/139)

REQ_FD, RESP_FD = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (3, 4)
WORKDIR = "/tmp/work"
NPROC_LIMIT = 64  # processes per sandbox uid
REPORT_CAP = 1 << 16  # stderr chars shipped back per test
VALUE_CAP = 16 << 20  # bytes of one call-test return value repr

for _name in (
    "re math cmath collections itertools functools heapq bisect string typing random datetime decimal fractions "
    "statistics operator copy array hashlib time dataclasses enum abc numbers textwrap unicodedata queue threading "
    "contextlib fnmatch pprint calendar base64 binascii secrets zlib atexit traceback linecache tokenize"
).split():
    try:
        __import__(_name)
    except Exception:  # pragma: no cover - a stripped-down interpreter
        pass

import atexit  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402

PRISTINE_BUILTINS = dict(builtins.__dict__)
SNAPSHOT = []  # [(module, its dict as it was)], taken in main() once every harness function exists
TRUSTED_TYPES = set()  # ids of the classes that existed before any submission ran
VALUE_TYPES = (int, float, complex, str, bytes, bool, list, tuple, dict, set, frozenset, bytearray)
GUARDED_DUNDERS = frozenset(
    "__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__ __len__ __abs__ __add__ __radd__ __sub__ __rsub__ "
    "__mul__ __rmul__ __truediv__ __floordiv__ __mod__ __pow__ __neg__ __round__ __contains__ __iter__ __getitem__ "
    "__getattr__ __getattribute__ __float__ __int__ __index__ __str__ __repr__ __format__ __instancecheck__".split()
)
_HEAPTYPE = 1 << 9


class GuardViolation(Exception):
    """A value returned by the candidate could fool the test's comparison (submission-defined dunder)."""


# --------------------------------------------------------------------------------------------------- framing
def _read_exact(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv():
    head = _read_exact(REQ_FD, 8)
    if head is None:
        return None
    body = _read_exact(REQ_FD, struct.unpack(">Q", head)[0])
    return None if body is None else json.loads(body)


def send(obj):
    data = json.dumps(obj).encode()
    data = struct.pack(">Q", len(data)) + data
    view = memoryview(data)
    while view:
        view = view[os.write(RESP_FD, view) :]


# --------------------------------------------------------------------------------------------------- literals
def safe_repr(x, _type=type, _repr=repr, _id=id, _len=len, _isinst=isinstance, _sorted=sorted, depth=0):
    """``repr`` of a value made only of exact builtin value types; raises GuardViolation for anything else.

    Built from references captured at import time, so a submission that rebinds ``builtins.repr`` / ``type`` cannot
    change what is reported."""
    if depth > 200:
        raise GuardViolation("value nested too deeply")
    t = _type(x)
    if x is None or t in (int, float, complex, str, bytes, bool):
        return _repr(x)
    if t is list or t is tuple:
        inner = ", ".join(safe_repr(v, depth=depth + 1) for v in x)
        if t is tuple:
            return "(" + inner + ("," if _len(x) == 1 else "") + ")"
        return "[" + inner + "]"
    if t is dict:
        return (
            "{"
            + ", ".join(safe_repr(k, depth=depth + 1) + ": " + safe_repr(v, depth=depth + 1) for k, v in x.items())
            + "}"
        )
    if t is not dict and isinstance(x, dict) and id(t) in TRUSTED_TYPES:
        # stdlib dict subclasses (Counter, OrderedDict, defaultdict) read back as plain dicts: EvalPlus compares
        # them with ``==``, under which they equal the dict (Mbpp/88 returns a Counter)
        return safe_repr(dict(x), depth=depth + 1)
    if t is set or t is frozenset:
        if not x:
            return "set()" if t is set else "frozenset()"
        inner = "{" + ", ".join(safe_repr(v, depth=depth + 1) for v in x) + "}"
        return inner if t is set else "frozenset(" + inner + ")"
    raise GuardViolation(f"return value of type {t.__name__} is not a plain builtin value")


def screen(x, _type=type, _vars=vars, depth=0):
    """Reject values whose type the submission defined with comparison/arithmetic dunders or as a subclass of a
    builtin value type; recurse into builtin containers. Dataset-provided helper classes (ListNode, TreeNode) pass."""
    if depth > 200:
        return
    t = _type(x)
    if t in (list, tuple, set, frozenset):
        for v in x:
            screen(v, depth=depth + 1)
        return
    if t is dict:
        for k, v in x.items():
            screen(k, depth=depth + 1)
            screen(v, depth=depth + 1)
        return
    if not (t.__flags__ & _HEAPTYPE) or id(t) in TRUSTED_TYPES:
        return
    for klass in t.__mro__:
        if id(klass) in TRUSTED_TYPES or not (klass.__flags__ & _HEAPTYPE):
            continue
        bad = GUARDED_DUNDERS.intersection(_vars(klass))
        if bad:
            raise GuardViolation(f"{t.__name__} defines {sorted(bad)[0]}")
    if issubclass(t, VALUE_TYPES):
        raise GuardViolation(f"{t.__name__} subclasses a builtin value type")


def restore_world():
    """Undo a submission's monkeypatching of stdlib modules and builtins (tracing cannot be switched on once the
    audit hook is armed, see :func:`arm_audit`)."""
    for mod, saved in SNAPSHOT:
        d = vars(mod)
        if mod is builtins:
            for k in [k for k in d if k not in saved]:
                d.pop(k, None)
        d.update(saved)


_BLOCKED_ATTRS = frozenset(
    "tb_frame f_code gi_frame gi_code cr_frame cr_code ag_frame ag_code f_back f_locals f_globals".split()
)
_BLOCKED_EVENTS = frozenset(
    "sys._current_frames gc.get_objects gc.get_referrers gc.get_referents sys.settrace sys.setprofile "
    "sys._getframemodulename".split()
)


def arm_audit():
    """Install a PEP 578 audit hook (permanent for this child) that stops frame and memory introspection.

    Assert tests necessarily run in the submission's process with their expected values in the test's code
    constants or locals; a candidate that could reach its caller's frame (``sys._getframe(1)``, a traceback's
    ``tb_frame``, ``inspect.stack()``, ``gc.get_referrers``, ``ctypes``, ``/proc/self/mem``) could read them. Every
    way to obtain a frame raises an audit event, so refusing those events closes the path (a function's ``__code__``
    stays readable: ``dataclasses`` needs it, and the test's own functions are unreachable without frames). Only the
    three stdlib callers that read ``sys._getframe(n).f_globals['__name__']`` to name a new class (``namedtuple``,
    ``typing``'s NamedTuple/TypedDict/NewType, the functional ``Enum`` API) are allowed, by code-object identity."""
    import collections
    import enum
    import typing

    allowed = frozenset(
        id(c)
        for c in (
            collections.namedtuple.__code__,
            getattr(typing, "_caller", None).__code__ if hasattr(typing, "_caller") else None,
            enum.EnumType._create_.__code__ if hasattr(enum, "EnumType") else None,
        )
        if c is not None
    )
    busy = [False]
    getframe = sys._getframe

    def hook(event, args, _err=RuntimeError, _str=str, _isinst=isinstance):
        if busy[0]:
            return
        if event == "sys._getframe":
            busy[0] = True
            try:
                ok = id(getframe(1).f_code) in allowed
            finally:
                busy[0] = False
            if ok:
                return
            raise _err("frame introspection is disabled in the judge")
        if event == "object.__getattr__":
            if args[1] in _BLOCKED_ATTRS:
                raise _err(f"reading {args[1]} is disabled in the judge")
            return
        if event in _BLOCKED_EVENTS or (event.startswith("ctypes.") and event != "ctypes.dlopen"):
            # ctypes may load libraries (numpy does on import) but not read raw memory or call foreign functions
            raise _err(f"{event} is disabled in the judge")
        if event == "open" and args and _isinst(args[0], (str, bytes)):
            path = args[0].decode() if _isinst(args[0], bytes) else args[0]
            if path.startswith("/proc") or path.startswith("/dev/mem"):
                raise _err("reading /proc is disabled in the judge")

    sys.addaudithook(hook)


# --------------------------------------------------------------------------------------------------- children
def _memfd(name, data=b""):
    fd = os.memfd_create(name, 0)
    if data:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_fd(fd, cap):
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, cap) if cap else b""


def _fd_size(fd):
    return os.fstat(fd).st_size


def _limits(memory_limit_mb, cpu_s, output_limit_mb, base_vm, as_limit=True):
    mb = 1 << 20
    if as_limit:
        resource.setrlimit(resource.RLIMIT_AS, (base_vm + memory_limit_mb * mb,) * 2)
    cpu = max(1, int(cpu_s + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (output_limit_mb * mb,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Processes of this sandbox's host uid (bwrap and the harness included): stops fork bombs. Effective because
    # bwrap runs as a dedicated unprivileged uid per worker (see sandbox.py); root would be exempt.
    resource.setrlimit(resource.RLIMIT_NPROC, (NPROC_LIMIT, NPROC_LIMIT))


def _child_stdio(stdin_fd, out_fd, err_fd):
    for fd in (REQ_FD, RESP_FD):
        os.close(fd)
    os.dup2(stdin_fd, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8"
    )
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    # as the interpreter's own std streams have them (open() sets ``mode``; the raw files are named "<stdin>", ...):
    # the common competitive-programming FastIO template reads ``sys.stdout.mode``
    std = ((sys.stdin, "r", "<stdin>"), (sys.stdout, "w", "<stdout>"), (sys.stderr, "w", "<stderr>"))
    for stream, mode, name in std:
        stream.mode = mode
        stream.buffer.raw.name = name
    os.chdir(WORKDIR)


def _exit_code(exc):
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


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


class _Channel:
    """The child's end of the result pipe; every record carries the parent's nonce."""

    def __init__(self, fd, nonce, _write=os.write, _dumps=json.dumps, _pack=struct.pack):
        self._fd, self._nonce, self._write, self._dumps, self._pack = fd, nonce, _write, _dumps, _pack

    def put(self, **rec):
        rec["n"] = self._nonce
        data = self._dumps(rec).encode()
        data = self._pack(">I", len(data)) + data
        view = memoryview(data)
        while view:
            view = view[self._write(self._fd, view) :]


def _describe(exc):
    """(type name, one-line message) of an exception, without touching its traceback (frames are off-limits
    once the audit hook is armed) and surviving a hostile ``__str__``."""
    kind = type(exc).__name__
    try:
        text = str(exc)
    except BaseException:
        text = ""
    return kind, (f"{kind}: {text}" if text else kind)[:500]


def _run_stdio_child(code_obj, chan):
    ns = {"__name__": "__main__", "__builtins__": builtins}
    exit_code = 0
    try:
        exec(code_obj, ns)
    except SystemExit as exc:
        exit_code = _exit_code(exc)
    except BaseException as exc:  # the program's own failure
        traceback.print_exc()
        kind, msg = _describe(exc)
        _flush()
        chan.put(e=kind, m=msg)
        os._exit(1)
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    _flush()
    chan.put(ok=True, x=exit_code)
    os._exit(exit_code)


def _run_native_child(argv, env):
    """Exec a compiled program (or a language runtime); the result pipe is close-on-exec, so it reports nothing."""
    try:
        os.execve(argv[0], argv, env)
    except OSError as exc:
        os.write(2, f"cannot exec {argv[0]}: {exc}\n".encode())
    os._exit(127)


def _wrap(fn, _screen=screen):
    def guarded(*args, **kwargs):
        out = fn(*args, **kwargs)
        _screen(out)
        return out

    guarded.__name__ = getattr(fn, "__name__", "candidate")
    guarded.__wrapped__ = fn
    return guarded


def _run_calls_child(code_obj, setup_obj, entry, tests, start, chan, _restore=restore_world, _repr=safe_repr):
    sys.settrace(None)
    sys.setprofile(None)
    threading.settrace(None)
    arm_audit()
    ns = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(code_obj, ns)
        if setup_obj is not None:
            exec(setup_obj, ns)
        fn = eval(entry, ns) if entry else None
    except BaseException as exc:
        kind, msg = _describe(exc)
        chan.put(i=start, e=kind, m=msg, fatal=True)
        _flush()
        os._exit(1)
    chan.put(loaded=True)
    test_ns = None
    for i in range(start, len(tests)):
        t = tests[i]
        try:
            if t["kind"] == "call":
                # No restore needed: the value is compared on the host and the expected one never enters the sandbox,
                # so a forged record could only report a value the submission could have returned honestly.
                args = t["_args"]
                value = fn(*args) if isinstance(args, (list, tuple)) else fn(args)
                chan.put(i=i, ok=True, v=_repr(value))
            else:
                _restore()
                if test_ns is None:
                    test_ns = {
                        k: (_wrap(v) if isinstance(v, types.FunctionType) and v.__module__ == "__main__" else v)
                        for k, v in ns.items()
                    }
                    test_ns["__builtins__"] = dict(PRISTINE_BUILTINS)
                    if fn is not None:
                        test_ns["candidate"] = _wrap(fn)
                exec(t["_obj"], test_ns)
                _restore()
                chan.put(i=i, ok=True)
        except BaseException as exc:
            _restore()
            kind, msg = _describe(exc)
            chan.put(i=i, e=kind, m=msg)
    _flush()
    os._exit(0)


def _spawn(target, stdin_data, limits, base_vm):
    """Fork a child running ``target(chan)``; return (pid, read-end of result pipe, stdout fd, stderr fd, t0)."""
    in_fd = _memfd("stdin", stdin_data)
    out_fd, err_fd = _memfd("stdout"), _memfd("stderr")
    rfd, wfd = os.pipe()
    nonce = base64.b16encode(os.urandom(16)).decode()
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(rfd)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            _child_stdio(in_fd, out_fd, err_fd)
            for fd in (in_fd, out_fd, err_fd):
                os.close(fd)
            _limits(base_vm=base_vm, **limits)
            chan = _Channel(wfd, nonce)
            del nonce
            target(chan)
        finally:
            os._exit(1)
    os.close(wfd)
    os.close(in_fd)
    return pid, rfd, out_fd, err_fd, t0, nonce


def _collect(pid, rfd, nonce, deadline_fn, on_record):
    """Stream nonce-checked records from the child until it exits or a deadline passes.

    ``deadline_fn()`` returns the current absolute deadline (monotonic seconds). Once the child has exited, every
    other process of the sandbox is killed (so no grandchild keeps the pipe open) and the pipe is drained. Returns
    (timed_out, wait_status, rusage)."""
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(rfd, select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    buf = bytearray()
    timed_out = pipe_closed = exited = False
    try:
        while not (exited and pipe_closed):
            if exited:
                wait_ms = 500
            else:
                remaining = deadline_fn() - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                wait_ms = int(remaining * 1000) + 1
            events = poller.poll(wait_ms)
            if not events and exited:
                break
            for fd, _ev in events:
                if fd == pidfd:
                    exited = True
                    poller.unregister(pidfd)
                    _kill_all()
                    continue
                chunk = os.read(rfd, 1 << 20)
                if not chunk:
                    pipe_closed = True
                    poller.unregister(rfd)
                    continue
                buf += chunk
                while len(buf) >= 4:
                    size = struct.unpack(">I", buf[:4])[0]
                    if len(buf) < 4 + size:
                        break
                    try:
                        rec = json.loads(bytes(buf[4 : 4 + size]))
                    except ValueError:
                        rec = None
                    del buf[: 4 + size]
                    if isinstance(rec, dict) and rec.pop("n", None) == nonce:
                        on_record(rec)
                if len(buf) > VALUE_CAP + 4096:  # an oversized frame: stop listening to this child
                    pipe_closed = True
                    poller.unregister(rfd)
                    if not exited:
                        os.kill(pid, signal.SIGKILL)
    finally:
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        _, status, rusage = os.wait4(pid, 0)
        _kill_all()
        os.close(pidfd)
        os.close(rfd)
    return timed_out, status, rusage


def _kill_all():
    """SIGKILL every process of this pid namespace except this harness and the namespace's init (bwrap)."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _base_record(status, rusage, t0, out_fd, err_fd, output_cap):
    size = _fd_size(out_fd)
    rec = {
        "exit_code": os.waitstatus_to_exitcode(status) if status is not None else None,
        "wall_s": round(time.monotonic() - t0, 6),
        "cpu_s": round(rusage.ru_utime + rusage.ru_stime, 6),
        "stdout": _read_fd(out_fd, min(size, output_cap)).decode("utf-8", "surrogateescape"),
        "stdout_truncated": size > output_cap,
        "stderr": _read_fd(err_fd, REPORT_CAP).decode("utf-8", "replace"),
    }
    os.close(out_fd)
    os.close(err_fd)
    code = rec["exit_code"]
    rec["signal"] = -code if code is not None and code < 0 else None
    return rec


def run_stdio(code_obj, stdin, time_limit, memory_mb, output_mb, base_vm, native=None, add_newline=True):
    """Run the program once on ``stdin`` (str) in a forked child; return a record (see module docstring).

    ``native``: None for Python (``code_obj`` runs in the forked interpreter), else {"argv", "env", "as_limit"} of a
    compiled program to exec. ``add_newline``: end a non-empty stdin with a newline (judge tests: CodeContests files
    lack it; plain runs keep stdin byte-exact, as SandboxFusion does)."""
    if add_newline and stdin and not stdin.endswith("\n"):
        stdin += "\n"
    limits = {"memory_limit_mb": memory_mb, "cpu_s": time_limit + 1, "output_limit_mb": output_mb}
    if native is None:

        def target(chan):
            _run_stdio_child(code_obj, chan)

    else:
        limits["as_limit"] = native["as_limit"]
        base_vm = 16 << 20

        def target(chan):
            _run_native_child(native["argv"], native["env"])

    pid, rfd, out_fd, err_fd, t0, nonce = _spawn(target, stdin.encode("utf-8", "surrogateescape"), limits, base_vm)
    got = {}
    deadline = t0 + time_limit
    timed_out, status, rusage = _collect(pid, rfd, nonce, lambda: deadline, got.update)
    rec = _base_record(status, rusage, t0, out_fd, err_fd, output_mb << 20)
    if timed_out:
        rec["status"] = "timeout"
    elif "e" in got:
        rec.update(status="exception", exc_type=got["e"], message=got.get("m", ""))
    elif got.get("ok") or native is not None:
        rec["status"] = "ok" if rec["signal"] is None else "signal"
        if native is not None and rec["signal"] is not None and "bad_alloc" in rec["stderr"]:
            rec.update(status="exception", exc_type="MemoryError", message="std::bad_alloc")
    else:
        rec["status"] = "signal" if rec["signal"] is not None else "no_result"
    if rec["status"] == "signal" and rec["signal"] == signal.SIGXCPU:
        rec["status"] = "timeout"
    if rec["signal"] == signal.SIGXFSZ:
        rec.update(status="exception", exc_type="OutputLimitExceeded", message=f"output exceeded {output_mb} MB")
    return rec


def run_calls(code_obj, setup_obj, entry, tests, idx, time_limit, memory_mb, output_mb, base_vm, max_timeouts):
    """Run call/assert tests ``idx`` (indices into ``tests``) in as few children as possible.

    A child runs the remaining tests in order, streaming one record per test; when it dies or a test exceeds its
    ``time_limit`` (seconds, wall), that test is charged and a fresh child resumes at the next one. After
    ``max_timeouts`` timeouts the rest are marked ``skipped`` (verdict timeout) so one slow submission cannot hold a
    worker for tests × limit seconds."""
    sub = [tests[i] for i in idx]
    out = {}
    pos = 0
    timeouts = 0
    while pos < len(sub):
        if max_timeouts and timeouts >= max_timeouts:
            for j in range(pos, len(sub)):
                out[idx[j]] = {"status": "skipped", "message": "not run after repeated timeouts", "wall_s": 0.0}
            break
        limits = {
            "memory_limit_mb": memory_mb,
            "cpu_s": time_limit * (len(sub) - pos) + 1,
            "output_limit_mb": output_mb,
        }
        start = pos
        pid, rfd, out_fd, err_fd, t0, nonce = _spawn(
            lambda chan, s=start: _run_calls_child(code_obj, setup_obj, entry, sub, s, chan), b"", limits, base_vm
        )
        state = {"last": t0, "next": start, "fatal": None, "loaded": False}

        def on_record(rec, state=state):
            if rec.get("loaded"):
                state["loaded"] = True
                return
            i = rec.get("i")
            if not isinstance(i, int) or i != state["next"]:
                return  # out-of-order or forged index: ignore
            now = time.monotonic()
            r = {"wall_s": round(now - state["last"], 6)}
            if rec.get("ok"):
                r["status"] = "ok"
                if "v" in rec:
                    r["value"] = rec["v"]
            else:
                r.update(status="exception", exc_type=str(rec.get("e")), message=str(rec.get("m", ""))[:1000])
                if rec.get("fatal"):
                    state["fatal"] = r
            out[idx[i]] = r
            state["last"] = now
            state["next"] = i + 1

        timed_out, status, rusage = _collect(pid, rfd, nonce, lambda st=state: st["last"] + time_limit, on_record)
        base = _base_record(status, rusage, t0, out_fd, err_fd, 1 << 16)
        pos = state["next"]
        if state["fatal"] is None and not state["loaded"] and not timed_out:
            # the child died while loading the solution: that fails the same way for every remaining test
            state["fatal"] = {
                "status": "signal" if base["signal"] else "no_result",
                "signal": base["signal"],
                "exit_code": base["exit_code"],
                "message": "the process ended before reporting any test result",
            }
        if state["fatal"] is not None:  # the solution itself failed to load: every remaining test fails the same way
            for j in range(pos, len(sub)):
                out[idx[j]] = dict(state["fatal"], stderr=base["stderr"])
            break
        if pos < len(sub):
            if timed_out or (base["signal"] == signal.SIGXCPU):
                out[idx[pos]] = {"status": "timeout", "wall_s": round(time.monotonic() - state["last"], 6)}
                timeouts += 1
            elif base["signal"] == signal.SIGXFSZ:
                out[idx[pos]] = {"status": "exception", "exc_type": "OutputLimitExceeded", "message": "output limit"}
            else:
                out[idx[pos]] = {
                    "status": "signal" if base["signal"] else "no_result",
                    "signal": base["signal"],
                    "exit_code": base["exit_code"],
                    "stderr": base["stderr"],
                    "message": "the process ended before reporting this test's result",
                }
            pos += 1
        if pos >= len(sub) and base["stderr"] and sub:
            last = out.get(idx[-1])
            if last is not None:
                last.setdefault("stderr", base["stderr"])
    return out


def _compile(code, name):
    try:
        return compile(code, name, "exec", dont_inherit=True), None
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as exc:
        return None, "".join(traceback.format_exception_only(type(exc), exc)).strip()


BUILD = "/tmp/build"


def _build_native(req):
    """Write the source and compile it once (compile errors are the program's fault). Returns (native, error)."""
    import subprocess

    lang = req["native"]
    shutil.rmtree(BUILD, ignore_errors=True)
    os.makedirs(BUILD)
    with open(os.path.join(BUILD, lang["source"]), "w", encoding="utf-8") as fh:
        fh.write(req["code"])
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8", **lang.get("env", {})}
    if lang.get("compile"):

        def _compile_limits():
            resource.setrlimit(resource.RLIMIT_AS, (4 << 30,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20,) * 2)

        try:
            proc = subprocess.run(
                lang["compile"],
                cwd=BUILD,
                env=env,
                capture_output=True,
                timeout=float(lang.get("compile_timeout_s", 30)),
                preexec_fn=_compile_limits,
            )
        except subprocess.TimeoutExpired:
            return None, "compilation timed out"
        except OSError as exc:
            return None, f"compiler not runnable: {exc}"
        finally:
            _kill_all()
        if proc.returncode != 0:
            return None, (proc.stderr or proc.stdout).decode("utf-8", "replace")[-4000:] or "compilation failed"
    mem = int(req.get("memory_limit_mb") or 1024)
    argv = [a.replace("{mem}", str(mem)).replace("{build}", BUILD) for a in lang["run"]]
    argv[0] = os.path.join(BUILD, argv[0][2:]) if argv[0].startswith("./") else shutil.which(argv[0], path=env["PATH"])
    return {"argv": argv, "env": env, "as_limit": bool(lang.get("as_limit", True))}, None


def _clean_workdir():
    shutil.rmtree(WORKDIR, ignore_errors=True)
    os.makedirs(WORKDIR, exist_ok=True)


def handle_batch(req, base_vm):
    native = None
    if req.get("native"):
        if any(t["kind"] != "stdio" for t in req["tests"]):
            return {"harness_error": "only stdin/stdout tests are supported for compiled languages"}
        native, err = _build_native(req)
        code_obj = None
    else:
        code_obj, err = _compile(req["code"], "<solution>")
    if err is not None:
        return {"compile_error": err}
    setup_obj = None
    if req.get("test_setup"):
        setup_obj, err = _compile(req["test_setup"], "<test_setup>")
        if err is not None:
            return {"harness_error": f"test_setup does not compile: {err}"}
    tests = req["tests"]
    for t in tests:
        if t["kind"] == "call":
            try:
                t["_args"] = parse_literal(t["args"])
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
                return {"harness_error": f"call test args are not a Python literal: {exc}"}
        if t["kind"] == "assert":
            t["_obj"], err = _compile(t["code"], "<test>")
            if err is not None:
                return {"harness_error": f"test code does not compile: {err}"}
    tl, mem, outmb = float(req["time_limit_s"]), int(req["memory_limit_mb"]), int(req.get("output_limit_mb", 16))
    results = [None] * len(tests)
    timeouts = 0
    max_timeouts = int(req.get("max_timeouts", 0))
    for i, t in enumerate(tests):
        if t["kind"] != "stdio":
            continue
        if max_timeouts and timeouts >= max_timeouts:
            results[i] = {"status": "skipped", "message": "not run after repeated timeouts", "wall_s": 0.0}
            continue
        results[i] = run_stdio(code_obj, t.get("stdin", ""), tl, mem, outmb, base_vm, native)
        timeouts += results[i]["status"] == "timeout"
        _clean_workdir()
    idx = [i for i, t in enumerate(tests) if t["kind"] != "stdio"]
    if idx:
        got = run_calls(code_obj, setup_obj, req.get("entry_point"), tests, idx, tl, mem, outmb, base_vm, max_timeouts)
        for i in idx:
            results[i] = got.get(i) or {"status": "no_result", "message": "no record"}
        _clean_workdir()
    return {"results": results}


def handle_run(req, base_vm):
    _clean_workdir()
    for name, b64 in (req.get("files") or {}).items():
        path = os.path.normpath(os.path.join(WORKDIR, name))
        if not path.startswith(WORKDIR + "/"):
            return {"harness_error": f"file name escapes the work dir: {name}"}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(b64))
    native = None
    if req.get("native"):
        native, err = _build_native(req)
        if err is not None:
            return {"compile_error": err}
        code_obj = None
    else:
        code_obj, err = _compile(req["code"], "<string>")
        if err is not None:
            return {
                "result": {"status": "ok", "exit_code": 1, "stdout": "", "stderr": err, "wall_s": 0.0, "cpu_s": 0.0}
            }
    rec = run_stdio(
        code_obj,
        req.get("stdin", ""),
        float(req["timeout_s"]),
        int(req["memory_limit_mb"]),
        int(req.get("output_limit_mb", 16)),
        base_vm,
        native,
        add_newline=False,
    )
    _clean_workdir()
    return {"result": rec}


def _vm_bytes():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def main():
    os.makedirs(WORKDIR, exist_ok=True)
    SNAPSHOT[:] = [(m, dict(vars(m))) for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)]
    TRUSTED_TYPES.update(id(v) for _, d in SNAPSHOT for v in d.values() if isinstance(v, type))
    gc.collect()
    gc.freeze()  # keep warm objects out of the children's copy-on-write path
    base_vm = _vm_bytes() + (64 << 20)
    while True:
        req = recv()
        if req is None:
            return
        try:
            op = req.get("op")
            if op == "ping":
                resp = {"ok": True, "pid": os.getpid(), "uid": os.getuid()}
            elif op == "stats":
                me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
                resp = {"cpu_s": me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime}
            elif op == "batch":
                resp = handle_batch(req, base_vm)
            elif op == "run":
                resp = handle_run(req, base_vm)
            else:
                resp = {"harness_error": f"unknown op {op!r}"}
        except Exception as exc:  # a harness bug must surface as sandbox_error, never as the program's fault
            resp = {"harness_error": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2000:]}
        send(resp)


if __name__ == "__main__":
    main()
