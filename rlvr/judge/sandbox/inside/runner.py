"""The runner: one process per submission, forked by the warden, owning that submission's fresh channel.

Standard library only (inside the sandbox). It reads ONE request frame from the host on its request pipe and answers
with frames on its response pipe, each carrying the request id; it never sees expected outputs. It compiles the
code or builds a native program (:mod:`build`) and runs every test in a child of its own (:mod:`proc`, :mod:`calls`;
stdio tests up to :data:`BATCH` at a time through the compiled loop when it is loaded,
:func:`run_stdio_tests`). Its heap is the warden's, which never held submission data, so nothing of an earlier
submission is in it; as it ends it kills every other process and wipes every writable place (:mod:`wipe`).

Ops (request ``op``):
  ``batch``: ``{"code", "native", "tests": [{"kind": "stdio", "stdin", "tl"} | {"kind": "call", "args", "kwargs",
  "tl"}] (each with an optional ``"cpu"``: a CPU limit, seconds, apart from the wall limit ``tl``), "entry_point",
  "test_setup", "memory_limit_mb", "output_limit_mb", "max_timeouts", "interactive",
  "call_cpu_s", "flush_each"}`` → ``{"t": "compile_error", "msg"}`` | ``{"t": "recs", "recs": [{"i", "rec"}, …]}``
  frames in test order (one per ~1 MB of records, a larger record alone, the rest at the end; one per test with
  ``flush_each``; every frame under :data:`wire.FRAME_CAP`, see :func:`record_cost`); then, when
  ``interactive``, ``{"t": "ready"}`` and one ``{"t": "ret", "k", "rec"}`` per ``{"t": "call", "k", "budget_s", …}``
  frame until ``{"t": "end"}``; finally ``{"t": "done"}``.
  ``run``: ``{"code", "native", "stdin", "timeout_s", "memory_limit_mb", "output_limit_mb", "files"}`` →
  ``{"t": "compile_error", "msg"}`` | ``{"t": "result", "rec"}``, then ``{"t": "done"}``.
  ``drive``: the assert-test driver (:mod:`driver`; used in the separate driver sandbox only).
Records: see :mod:`proc` and :mod:`calls`.
"""

import _signal
import atexit
import binascii
import builtins
import json
import os
import signal
import sys
import time

import build
import calls
import forkloop
import proc
import wipe
import wire

FLUSH_BYTES = 1 << 20
BATCH = 64  # stdio tests per call of the compiled loop (each keeps 3 fds open until its record is built)
# one record's JSON must fit the host's frame cap (wire.FRAME_CAP, the host's FRAME_CAP) with the frame's own fields;
# json.dumps writes one character as at most 12 bytes (a non-BMP character as two 6-byte \u escapes), so a record of
# fewer characters than RECORD_CAP // 12 fits without measuring
RECORD_CAP = wire.FRAME_CAP - (1 << 16)
# What programs commonly import: the zygote's image (zygote.zygote_main) holds these standard modules, loaded before
# any submission; the runners of the submissions the host marks ``heavy`` (their code names one of the modules the
# lean warden lacks: rlvr.judge.sandbox.host.ZYGOTE_MODULES) are cloned from it, every other runner is forked from the
# lean warden. Not in the warden's image: every test's fork() and exit pay for every page there (~1.2 MB for this
# list, most of it typing, datetime, copy, decimal, random), while most programs import none of it. The driver
# sandbox's warden imports the whole list itself (``--preload``) and has no zygote.
PRELOAD = (
    "re math cmath collections itertools functools heapq bisect string typing random operator copy array time "
    "datetime decimal fractions enum abc numbers contextlib atexit"
).split()


def _stdio_child(code_obj, chan):
    ns = {"__name__": "__main__", "__builtins__": builtins}
    code = 0
    try:
        exec(code_obj, ns)
    except SystemExit as exc:
        code = proc.exit_code(exc)
    except BaseException as exc:  # the program's own failure
        try:  # what Python prints for an uncaught exception (in C: no traceback module), from the program's frame on
            tb = exc.__traceback__.tb_next
            sys.__excepthook__(type(exc), BaseException.with_traceback(exc, tb), tb)
        except BaseException:  # the program's own stderr, broken by the program
            pass
        kind, msg = proc.describe(exc)
        proc.flush()
        chan.put(e=kind, m=msg)
        os._exit(1)
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    proc.flush()
    chan.ok(code)
    os._exit(code)


def _stdio_setup(code_obj, stdin, time_limit, memory_mb, output_mb, base_vm, native, add_newline, cpu_limit=None):
    """(stdin bytes, limits, base_vm, target(chan)) of one stdio test. RLIMIT_CPU: ``cpu_limit`` (seconds; default
    the wall ``time_limit``) + 1 s."""
    if add_newline and stdin and not stdin.endswith("\n"):
        stdin += "\n"
    cpu = time_limit if cpu_limit is None else cpu_limit
    limits = {"memory_limit_mb": memory_mb, "cpu_s": cpu + 1, "output_limit_mb": output_mb}
    if native is None:
        target = lambda chan: _stdio_child(code_obj, chan)  # noqa: E731
    else:
        limits["as_limit"] = native["as_limit"]
        base_vm = 16 << 20
        target = lambda chan: build.native_child(native["argv"], native["env"])  # noqa: E731
    return stdin.encode("utf-8", "surrogateescape"), limits, base_vm, target


def _stdio_record(timed_out, status, cpu_s, wall_s, out_fd, err_fd, got, output_mb, native):
    """The record of a finished stdio child from its wait status, CPU/wall seconds, output memfds (closed here) and
    the nonce-checked records ``got`` it sent."""
    rec = proc.base_record(status, cpu_s, wall_s, out_fd, err_fd, output_mb << 20)
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


def run_stdio(code_obj, stdin, time_limit, memory_mb, output_mb, base_vm, native=None, add_newline=True,
              cpu_limit=None):
    """Run the program once on ``stdin`` (str) in a child; return a record (wall ``time_limit`` seconds, CPU
    ``cpu_limit`` + 1 s: :func:`_stdio_setup`)."""
    data, limits, base_vm, target = _stdio_setup(code_obj, stdin, time_limit, memory_mb, output_mb, base_vm, native,
                                                 add_newline, cpu_limit)
    pid, rfd, out_fd, err_fd, t0, nonce = proc.spawn(target, data, limits, base_vm)
    got = {}
    timed_out, status, rusage = proc.collect(pid, rfd, nonce, t0 + time_limit, got.update)
    return _stdio_record(timed_out, status, rusage.ru_utime + rusage.ru_stime, time.monotonic() - t0, out_fd,
                         err_fd, got, output_mb, native)


def run_stdio_tests(code_obj, tests, memory_mb, output_mb, base_vm, native, max_timeouts, timeouts):
    """Run consecutive stdio ``tests`` (dicts with ``stdin``, ``tl``, optional ``cpu``) through the compiled loop
    (:func:`forkloop.run`); returns their records in order: fewer than ``tests`` when ``max_timeouts`` was reached
    (``timeouts``: those counted so far) or when the work dir had to be cleaned after the last one returned (it is
    cleaned here)."""
    data, targets, tls, cpus, limits, vm = [], [], [], [], None, base_vm
    for t in tests:
        tls.append(float(t["tl"]))
        d, limits, vm, target = _stdio_setup(code_obj, t.get("stdin", ""), tls[-1], memory_mb, output_mb, base_vm,
                                             native, True, t.get("cpu"))
        data.append(d)
        targets.append(target)
        cpus.append(limits["cpu_s"])
    recs = []

    def on_test(i, timed_out, status, cpu_s, wall_s, rfd, out_fd, err_fd, nonce):
        got = {}
        proc.read_records(rfd, nonce, got.update)
        recs.append(_stdio_record(timed_out, status, cpu_s, wall_s, out_fd, err_fd, got, output_mb, native))

    _, dirty = forkloop.run(targets, data, tls, cpus, limits, vm, max_timeouts, timeouts, on_test)
    if dirty:
        _clean_workdir()
    return recs


def record_cost(rec, json_dumps=json.dumps):
    """``(rec, cost)``: the record to send and its size in characters for the flush accounting (its JSON size in
    bytes when it may be large). A record whose JSON exceeds :data:`RECORD_CAP` (a return value or an output written
    with many escaped characters) cannot cross the frame cap: it is replaced by a small record that fails that test
    alone (``unserialisable`` for a call, ``OutputLimitExceeded`` for a stdio test)."""
    cost = 256
    for key in ("value", "stdout", "stderr", "message"):
        v = rec.get(key)
        if v:
            cost += len(v)
    if cost * 12 <= RECORD_CAP:
        return rec, cost
    cost = len(json_dumps(rec))
    if cost <= RECORD_CAP:
        return rec, cost
    small = {k: rec[k] for k in ("wall_s", "cpu_s", "exit_code") if k in rec}
    msg = f"record of {cost} bytes exceeds the frame cap of {RECORD_CAP} bytes"
    if "value" in rec:
        small.update(status="unserialisable", message=f"return value too large: {msg}")
    else:
        small.update(status="exception", exc_type="OutputLimitExceeded", message=f"output too large: {msg}")
    return small, 256


def _done(fn, *args):
    """Whether ``fn(*args)`` completed; ``OSError``, ``RuntimeError`` and ``RecursionError`` count as not."""
    try:
        fn(*args)
    except (OSError, RuntimeError, RecursionError):
        return False
    return True


def _clean_workdir():
    """Leave a fresh empty work dir for the next test. Common case, two syscalls: ``rmdir`` (which refuses anything
    but an empty directory: a non-empty one, a file, a link) and ``mkdir``. Otherwise whatever is there is removed
    first (made writable first: a 000 directory cannot keep its contents); what cannot be removed is tried again
    after the next test. When the dir cannot be made (the test exhausted /tmp), the next test's child fails to enter
    it, which is that program's failure; the wipe at the end of the submission removes everything."""
    if _done(os.rmdir, proc.WORKDIR) and _done(os.mkdir, proc.WORKDIR):
        return
    if _done(wipe.chmod_tree, proc.WORKDIR):
        _done(wipe.remove_tree, proc.WORKDIR)
    _done(os.makedirs, proc.WORKDIR, 0o777, True)


def handle_batch(req, send, recv, base_vm):
    """The ``batch`` op (module docstring): stream one record per test, then serve relayed calls if interactive."""
    native = None
    if req.get("native"):
        if any(t["kind"] != "stdio" for t in req["tests"]) or req.get("interactive"):
            send({"t": "compile_error", "msg": "only stdin/stdout tests are supported for compiled languages"})
            return
        native, err = build.build_native(req)
        code_obj = None
    else:
        code_obj, err = build.compile_code(req["code"], "<solution>")
    if err is not None:
        send({"t": "compile_error", "msg": err})
        return
    setup_obj = None
    if req.get("test_setup"):
        setup_obj, err = build.compile_code(req["test_setup"], "<test_setup>")
        if err is not None:
            setup_obj = None
    mem, outmb = int(req["memory_limit_mb"]), int(req.get("output_limit_mb", 16))
    max_timeouts = int(req.get("max_timeouts", 0))
    flush_each = bool(req.get("flush_each"))
    limits = {"memory_limit_mb": mem, "cpu_s": float(req.get("call_cpu_s", 60.0)), "output_limit_mb": outmb}
    server = calls.CallServer(code_obj, setup_obj, req.get("entry_point"), limits, base_vm)
    timeouts = size = 0
    pending = []
    ready = {}  # stdio records already run through the compiled loop, by test index
    fatal = None
    try:
        for i, t in enumerate(req["tests"]):
            tl = float(t["tl"])
            if max_timeouts and timeouts >= max_timeouts:
                rec = {"status": "skipped", "message": "not run after repeated timeouts", "wall_s": 0.0}
            elif t["kind"] == "stdio":
                server.stop()  # each stdio child ends with kill_all(): the call server would not survive it
                if forkloop.RUN is not None and i not in ready:
                    chunk = []
                    for u in req["tests"][i : i + (1 if flush_each else BATCH)]:
                        if u["kind"] != "stdio":
                            break
                        chunk.append(u)
                    for k, r in enumerate(run_stdio_tests(code_obj, chunk, mem, outmb, base_vm, native,
                                                          max_timeouts, timeouts)):
                        ready[i + k] = r
                rec = ready.pop(i, None)
                if rec is None:  # the Python loop (no compiled loop, or it ran none of this chunk)
                    rec = run_stdio(code_obj, t.get("stdin", ""), tl, mem, outmb, base_vm, native,
                                    cpu_limit=t.get("cpu"))
                    _clean_workdir()
            elif fatal is not None:
                rec = fatal
            else:
                rec = server.call({"target": None, "args": t["args"], "kwargs": t.get("kwargs") or "{}"}, tl,
                                  t.get("cpu"))
                if rec.get("fatal") and rec["status"] != "timeout" and not rec.get("loaded"):
                    fatal = rec  # it cannot load: every later call test fails the same way (a death after loading
                    # costs that call only: the next one starts a fresh server)
            timeouts += rec["status"] == "timeout"
            # records go out in frames of about FLUSH_BYTES (one host wake-up per frame, not per test; a record
            # larger than that goes alone), or one per test with ``flush_each`` (the host asks for it after a runner
            # died mid-batch: the first test without a record is then the one during which it died)
            rec, cost = record_cost(rec)
            if pending and size + cost > FLUSH_BYTES:
                send({"t": "recs", "recs": pending})
                pending, size = [], 0
            pending.append({"i": i, "rec": rec})
            size += cost
            if size > FLUSH_BYTES or flush_each:
                send({"t": "recs", "recs": pending})
                pending, size = [], 0
        if pending:
            send({"t": "recs", "recs": pending})
        if req.get("interactive"):
            send({"t": "ready"})
            while True:
                msg = recv()
                if msg is None or msg.get("t") != "call":
                    break
                call = {k: msg[k] for k in ("target", "args", "kwargs", "getattr") if k in msg}
                send({"t": "ret", "k": msg.get("k"), "rec": server.call(call, float(msg.get("budget_s", 0.0)))})
    finally:
        server.stop()
        _clean_workdir()


def handle_run(req, send, base_vm):
    """The ``run`` op: write ``files`` into the work dir, run the program once, send its record (through the Python
    loop: one test, nothing for the compiled loop to save)."""
    _clean_workdir()
    for name, b64 in (req.get("files") or {}).items():
        path = os.path.normpath(os.path.join(proc.WORKDIR, name))
        if not path.startswith(proc.WORKDIR + "/"):
            send({"t": "compile_error", "msg": f"file name escapes the work dir: {name}"})
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(binascii.a2b_base64(b64))
    native = None
    if req.get("native"):
        native, err = build.build_native(req)
        if err is not None:
            send({"t": "compile_error", "msg": err})
            return
        code_obj = None
    else:
        code_obj, err = build.compile_code(req["code"], "<string>")
        if err is not None:
            rec = {"status": "ok", "exit_code": 1, "stdout": "", "stderr": err, "wall_s": 0.0, "cpu_s": 0.0}
            send({"t": "result", "rec": rec})
            return
    rec = run_stdio(
        code_obj, req.get("stdin", ""), float(req["timeout_s"]), int(req["memory_limit_mb"]),
        int(req.get("output_limit_mb", 16)), base_vm, native, add_newline=False,
    )
    send({"t": "result", "rec": record_cost(rec)[0]})


def main(rid, req_fd, resp_fd, base_vm):
    """Serve one submission on (req_fd, resp_fd); every response frame carries ``rid``. Never returns."""
    # a plain interpreter's KeyboardInterrupt, for the runner and the programs it forks (the warden has no handler)
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    proc.PRIVATE_FDS[:] = [req_fd, resp_fd]
    proc.become_subreaper()
    try:  # /tmp is there (bwrap's tmpfs); os.makedirs' Python code would copy ~20 more pages of this fresh process
        os.mkdir(proc.WORKDIR)
    except FileExistsError:
        pass

    def send(obj):
        obj["id"] = rid
        wire.send(resp_fd, obj)

    def recv():
        msg = wire.recv(req_fd)
        return msg if msg is not None and msg.get("id") == rid else None

    code = 1
    try:
        req = recv()
        if req is not None:
            op = req.get("op")
            if op == "batch":
                handle_batch(req, send, recv, base_vm)
            elif op == "run":
                handle_run(req, send, base_vm)
            elif op == "drive":
                import driver

                driver.drive(req, send, recv)
            else:
                send({"t": "error", "msg": f"unknown op {op!r}"})
            send({"t": "done"})
    except BrokenPipeError:
        pass
    except BaseException as exc:  # a runner bug: reported, the host treats it as infrastructure
        try:
            import traceback

            send({"t": "error", "msg": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2000:]})
        except OSError:
            pass
    finally:
        code = wipe.wipe_all()  # exit code CLEAN_EXIT tells the warden that nothing of this submission is left
    os._exit(code)
