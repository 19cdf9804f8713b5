"""The runner's side of the call server (:mod:`callserver`): start it, send one call, wait for its answer within a
wall-clock budget, restart it after a timeout or a crash (inside the sandbox; standard library only).

:meth:`CallServer.call` returns a record: ``{"status": "ok", "value": literal}``, ``{"status": "handle", "h": n}``,
``{"status": "callable"}``, ``{"status": "exception", "exc_type", "message"}``, ``{"status": "unserialisable",
"message"}``, ``{"status": "timeout"}``, or — the process died or failed to load — ``{"status": "signal" |
"no_result" | "exception", "fatal": true, …}`` (with ``"loaded": true`` when it died after loading the submission:
the next call starts a fresh server). Each carries ``wall_s`` (seconds, this call).

A call given a CPU budget (``cpu_s``: the judge's CPU-judged limits, :mod:`rlvr.judge.settle`) also ends as
``timeout`` once the server has used that many CPU seconds (user + system, from ``/proc/<pid>/stat``) since the call
began, whatever the wall time; its wall budget is then only a backstop for a program that blocks without computing.
"""

import json
import os
import select
import signal
import struct
import time

import callserver
import proc

_TICK = os.sysconf("SC_CLK_TCK")
_CPU_POLL_S = 0.05  # shortest wait between two CPU readings of a call with a CPU budget


def cpu_seconds_of(pid):
    """CPU seconds (user + system of all its threads, and of its reaped children) process ``pid`` has used, from
    ``/proc/<pid>/stat`` (fields 14–17, clock ticks; proc(5)); None when it cannot be read (the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return sum(int(x) for x in fields[11:15]) / _TICK
    except (ValueError, IndexError):
        return None


class CallServer:
    """One submission's call server. ``limits``: rlimits of :func:`proc.set_limits` (``cpu_s`` is the whole
    server's CPU budget, seconds); ``base_vm``: the interpreter's own address space, bytes."""

    def __init__(self, code_obj, setup_obj, entry, limits, base_vm):
        self.args = (code_obj, setup_obj, entry)
        self.limits, self.base_vm = limits, base_vm
        self.pid = None
        self.seq = 0
        self.stderr = ""

    def _start(self):
        cmd_r, cmd_w = os.pipe()
        code_obj, setup_obj, entry = self.args
        pid, rfd, out_fd, err_fd, t0, nonce = proc.spawn(
            lambda chan: callserver.serve(code_obj, setup_obj, entry, cmd_r, chan),
            b"",
            self.limits,
            self.base_vm,
            close_in_child=(cmd_w,),
        )
        os.close(cmd_r)
        os.set_blocking(cmd_w, False)
        self.pid, self.rfd, self.cmd_w, self.out_fd, self.err_fd, self.t0 = pid, rfd, cmd_w, out_fd, err_fd, t0
        self.pidfd = os.pidfd_open(pid)
        self.parser = proc.Records(nonce)
        self.pending = []
        self.loaded = False  # the submission loaded: a later death is that call's failure, not every call's

    def stop(self):
        """Kill the server (if running) and every other process but the runner; returns its final record fields."""
        if self.pid is None:
            return {}
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status, rusage = os.wait4(self.pid, 0)
        proc.kill_all()
        base = proc.base_record(status, rusage.ru_utime + rusage.ru_stime, time.monotonic() - self.t0, self.out_fd,
                                 self.err_fd, 1 << 16)
        for fd in (self.rfd, self.cmd_w, self.pidfd):
            os.close(fd)
        self.pid = None
        self.stderr = base["stderr"]
        return base

    def _write(self, data, deadline):
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [self.cmd_w], [], remaining)[1]:
                return False
            try:
                view = view[os.write(self.cmd_w, view) :]
            except BrokenPipeError:
                return True  # the process died: the answer loop reports how
        return True

    def _feed(self, chunk):
        recs = self.parser.feed(chunk) if chunk else []
        if recs and not self.loaded:
            self.loaded = any(r.get("loaded") for r in recs)
        self.pending += recs

    def _died(self, t0):
        base = self.stop()
        sig = base.get("signal")
        if sig == signal.SIGXCPU:
            return {"status": "timeout", "wall_s": round(time.monotonic() - t0, 6)}
        if sig == signal.SIGXFSZ:
            return {"status": "exception", "exc_type": "OutputLimitExceeded", "message": "output limit", "fatal": True,
                    "loaded": self.loaded}
        return {
            "status": "signal" if sig else "no_result",
            "signal": sig,
            "exit_code": base.get("exit_code"),
            "stderr": base.get("stderr", ""),
            "message": "the process ended before answering",
            "fatal": True,
            "loaded": self.loaded,
        }

    def call(self, msg, budget_s, cpu_s=None):
        """Send ``msg`` (target/args/kwargs/getattr) and wait at most ``budget_s`` wall seconds (loading the
        submission, when the server has to start, counts against the same budget); with ``cpu_s`` (seconds), also
        at most that much CPU of the server (module docstring)."""
        t0 = time.monotonic()
        deadline = t0 + max(0.0, budget_s)
        if self.pid is None:
            self._start()
        cpu0 = cpu_seconds_of(self.pid) if cpu_s is not None else None
        self.seq += 1
        k = self.seq
        body = json.dumps({**msg, "k": k}).encode()
        if not self._write(struct.pack(">Q", len(body)) + body, deadline):
            self.stop()
            return {"status": "timeout", "wall_s": round(time.monotonic() - t0, 6)}
        poller = select.poll()
        poller.register(self.rfd, select.POLLIN)
        poller.register(self.pidfd, select.POLLIN)
        while True:
            for rec in self.pending:
                if rec.get("k") == k or rec.get("fatal"):
                    if rec.get("fatal"):
                        self.stop()
                    self.pending = []
                    return _answer(rec, t0)
            self.pending = [r for r in self.pending if r.get("k") is not None and r.get("k") > k]
            remaining = deadline - time.monotonic()
            if cpu0 is not None:
                used = cpu_seconds_of(self.pid)
                if used is not None and used - cpu0 >= cpu_s:
                    remaining = 0.0
                elif used is not None:  # CPU accrues at most as fast as wall time per thread: wake up to re-read it
                    remaining = min(remaining, max(_CPU_POLL_S, cpu_s - (used - cpu0)))
            if remaining <= 0:
                self.stop()
                return {"status": "timeout", "wall_s": round(time.monotonic() - t0, 6)}
            events = poller.poll(int(remaining * 1000) + 1)
            for fd, _ev in events:
                if fd == self.pidfd:
                    chunk = True
                    while chunk:  # drain what it wrote before dying
                        chunk = os.read(self.rfd, 1 << 20) if select.select([self.rfd], [], [], 0)[0] else b""
                        self._feed(chunk)
                    for rec in self.pending:
                        if rec.get("k") == k or rec.get("fatal"):
                            self.stop()
                            return _answer(rec, t0)
                    return self._died(t0)
                chunk = os.read(self.rfd, 1 << 20)
                if chunk:
                    self._feed(chunk)
                if self.parser.overflow:
                    self.stop()
                    return {"status": "unserialisable", "message": "answer larger than the value cap",
                            "wall_s": round(time.monotonic() - t0, 6)}


def _answer(rec, t0):
    out = {"wall_s": round(time.monotonic() - t0, 6)}
    if rec.get("fatal"):
        out.update(status="exception", exc_type=str(rec.get("e")), message=str(rec.get("m", "")), fatal=True)
    elif rec.get("ok"):
        out.update(status="ok", value=str(rec.get("v", "")))
    elif "h" in rec:
        out.update(status="handle", h=rec["h"])
        if "unser" in rec:  # a returned value that is not plain: remote object for the driver, wrong for a call test
            out.update(truth=rec.get("truth"), message=f"{rec['unser']}"[:300])
    elif rec.get("callable"):
        out.update(status="callable")
    elif "unser" in rec:
        out.update(status="unserialisable", message=str(rec["unser"])[:300])
    else:
        out.update(status="exception", exc_type=str(rec.get("e")), message=str(rec.get("m", ""))[:1000])
    return out

