"""One submission through a worker's sandboxes: the runner's fresh channel, and the driver relay for assert tests.

Failure accounting (the issue's "honest failure accounting"): a runner that dies or breaks the protocol mid-batch
(only the submission can kill it) costs the test it was running, not the others. A runner that reports its own
exception (an ``error`` frame: a ``KeyboardInterrupt`` the submission sent it, or a bug in the runner) counts as such
a death; its traceback is logged as a warning, so a bug in the judge's own code does not pass silently as
``runtime_error``s. The sandbox is restarted and the tests without a record go to a fresh runner that sends one
frame per test (``flush_each``), so its first test without a record is the one during which it died: that test gets
``no_result`` (→ ``runtime_error``; ``memory_limit`` when the sandbox's cgroup OOM-killed something meanwhile) and
the rest go to the next fresh runner. A runner that dies during the driver relay costs the assert test it was
serving; the next assert test starts with a fresh runner. Records that arrived are kept (each frame is id-checked,
each index bounds-checked against the runner's own test list). After :data:`MAX_RUNNER_DEATHS` such deaths, or past
the hang detector (one deadline for all runners of the submission), every test still without a record gets
``no_result``. Only a sandbox that cannot start, or a fresh warden that does not
acknowledge, is infrastructure: the submission is retried once in a fresh sandbox, then :class:`SandboxError`
(→ ``sandbox_error``). Nothing the submission does can produce that: it never reaches the warden.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlvr.judge.sandbox import Sandbox, SandboxError, Session, SessionTimeout
from rlvr.judge.sandbox.host import names_zygote_module

__all__ = ["Outcome", "Worker", "run_batch"]

log = logging.getLogger(__name__)
_DIED = {"status": "no_result", "message": "the submission's process ended before reporting this test"}
_OOM_KILLED = {"status": "signal", "signal": 9, "message": "the submission's runner was OOM-killed during this test"}
MAX_RUNNER_DEATHS = 3  # replacement runners that may die (each costs its test) before the rest count as _DIED
_DRIVER_GRACE_S = 5.0
SLACK_MB = 128  # cgroup memory above the problem's limit: warden, runner, interpreter baseline, page cache
SLACK_JVM_MB = 512  # runtimes bounded by their own heap flag (the JVM's -Xmx) use more than the heap


@dataclass
class Worker:
    """A worker's sandboxes: ``runner`` runs submissions, ``driver`` (started on first use) runs assert-test code.
    Distinct host uids, pid namespaces and cgroups."""

    runner: Sandbox
    driver_factory: Any
    driver: Sandbox | None = None

    def get_driver(self) -> Sandbox:
        """The driver sandbox (created on first use)."""
        if self.driver is None:
            self.driver = self.driver_factory()
        return self.driver

    def close(self) -> None:
        """Close both sandboxes."""
        self.runner.close()
        if self.driver is not None:
            self.driver.close()


@dataclass
class Outcome:
    """``compile_error`` (text) or per-test records: ``batch`` (index in the batch request → record) and
    ``asserts`` (index in the drive request → record); ``oom``: the runner sandbox's cgroup OOM-killed something."""

    compile_error: str | None = None
    batch: dict[int, dict[str, Any]] = field(default_factory=dict)
    asserts: dict[int, dict[str, Any]] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    oom: bool = False


def _heavy(req: dict[str, Any]) -> bool:
    """Whether ``req`` (a batch or run request) is a Python program whose text names a module of the sandbox zygote's
    image (:func:`~rlvr.judge.sandbox.host.names_zygote_module`: linear in the code and ``test_setup``)."""
    return not req.get("native") and names_zygote_module(req.get("code"), req.get("test_setup"))


def _open(sb: Sandbox, heavy: bool = False) -> Session:
    try:
        return sb.open(heavy)
    except SandboxError:
        return sb.open(heavy)  # once more, in a fresh sandbox (open() restarted it); a second failure propagates


def run_batch(worker: Worker, req: dict[str, Any], n: int, drive: dict[str, Any] | None, tls: list[float],
              hang_s: float) -> Outcome:
    """Run batch request ``req`` (``n`` tests) and, when ``drive`` is given, the driver's assert tests (``tls``: their
    wall limits, seconds). ``hang_s``: hang detector for the runner's part (all runners of the submission together),
    seconds. A runner that dies mid-batch costs only the test it was running (module docstring): the tests without a
    record go to a fresh runner, at most :data:`MAX_RUNNER_DEATHS` times. Raises :class:`SandboxError` only for
    infrastructure failures (see module docstring)."""
    out = Outcome()
    deadline = time.monotonic() + hang_s
    todo = list(range(n))  # indices (into req["tests"]) the current runner runs, in its order
    sub = {**req, "interactive": True} if drive is not None else req
    retry = False  # the current runner is a replacement: it flushes one frame per test
    deaths = 0
    while True:
        oom = _runner(worker, sub, todo, drive, tls, deadline, out)
        if oom is None:
            break
        left = [i for i in todo if i not in out.batch]
        if retry:  # frames came one per test, in order: the runner died during the first test without a record
            deaths += 1
            if left:
                out.batch[left.pop(0)] = dict(_OOM_KILLED if oom else _DIED)
        left = _skip_after_timeouts(req, out, left)
        if (not left and drive is None) or deaths >= MAX_RUNNER_DEATHS or time.monotonic() >= deadline:
            break
        todo, retry = left, True
        sub = {**sub, "tests": [req["tests"][i] for i in left], "flush_each": True}
        if req.get("max_timeouts"):
            sub["max_timeouts"] = int(req["max_timeouts"]) - _timeouts(out)
    for i in range(n):
        out.batch.setdefault(i, dict(_DIED))
    if drive is not None:
        for j in range(len(drive["tests"])):
            out.asserts.setdefault(j, dict(_DIED) if out.compile_error is None else {})
    return out


def _timeouts(out: Outcome) -> int:
    return sum(rec.get("status") == "timeout" for rec in out.batch.values())


def _skip_after_timeouts(req: dict[str, Any], out: Outcome, left: list[int]) -> list[int]:
    """``left``, or ``[]`` after marking them not run (as a runner would) when the submission already used up
    ``max_timeouts``."""
    limit = int(req.get("max_timeouts") or 0)
    if not limit or _timeouts(out) < limit:
        return left
    for i in left:
        out.batch[i] = {"status": "skipped", "message": "not run after repeated timeouts", "wall_s": 0.0}
    return []


def _runner(worker: Worker, req: dict[str, Any], todo: list[int], drive: dict[str, Any] | None, tls: list[float],
            deadline: float, out: Outcome) -> bool | None:
    """One runner on ``req`` whose test ``k`` is batch test ``todo[k]``; fills ``out``. Returns None when it ended
    normally (or hung past ``deadline``, or reached the driver relay), else whether its sandbox's cgroup OOM-killed
    something meanwhile (it died or broke the protocol mid-batch: the sandbox is restarted). A runner that dies
    during the driver relay is replaced there (:func:`_relay`, ``respawn``)."""
    sess = _open(worker.runner, _heavy(req))
    # the problem's memory limit bounds the whole submission (all its processes, its /tmp and /dev/shm), not only
    # each process (RLIMIT_AS): the sandbox's cgroup gets that limit plus the runtime's own share
    native = req.get("native") or {}
    slack = SLACK_MB if native.get("as_limit", True) else SLACK_JVM_MB
    worker.runner.limit_memory(int(req.get("memory_limit_mb") or 1024) + slack)
    oom0 = worker.runner.oom_kills()
    restart = died = False

    def respawn() -> Session | None:
        """Replace the runner that died during the relay: restart the sandbox, start a fresh runner on the same
        code with no batch test, and return its session once it is ready for relayed calls (None if it is not)."""
        nonlocal sess, oom0
        out.oom = out.oom or worker.runner.oom_kills() > oom0  # read before the restart removes the cgroup
        worker.runner.finish(sess, restart=True)
        sess = _open(worker.runner, _heavy(req))
        worker.runner.limit_memory(int(req.get("memory_limit_mb") or 1024) + slack)
        oom0 = worker.runner.oom_kills()
        sess.send({**req, "tests": [], "interactive": True, "flush_each": True})
        while (f := sess.recv(deadline)) is not None and f.get("t") != "ready":
            if f.get("t") in ("done", "error", "compile_error"):
                return None
        return sess if f is not None else None

    try:
        sess.send(req)
        ready = False
        while True:
            f = sess.recv(deadline)
            if f is None:
                restart = died = True
                break
            t = f.get("t")
            if t == "recs" and isinstance(f.get("recs"), list):
                for item in f["recs"]:
                    i, rec = (item.get("i"), item.get("rec")) if isinstance(item, dict) else (None, None)
                    if isinstance(i, int) and 0 <= i < len(todo) and isinstance(rec, dict):
                        out.batch[todo[i]] = rec
            elif t == "result" and isinstance(f.get("rec"), dict):
                out.result = f["rec"]
            elif t == "compile_error":
                out.compile_error = str(f.get("msg", ""))[-4000:]
            elif t == "ready":
                ready = True
                break
            elif t == "error":  # the runner's own exception (its traceback): a death with a message
                log.warning("the runner raised during a %r request (counted as its death: the test it was running "
                            "fails, the rest rerun on a fresh runner): %s",
                            req.get("op"), str(f.get("msg", ""))[-2000:])
                restart = died = True
                break
            elif t == "done":
                break
        if ready and drive is not None:
            out.asserts, alive = _relay(worker, sess, drive, tls, respawn, deadline)
            if alive:
                sess.send({"t": "end"})
                try:
                    while (f := sess.recv(time.monotonic() + 10.0)) is not None and f.get("t") != "done":
                        pass
                except SessionTimeout:
                    restart = True
            else:  # the last runner died in the relay and was not replaced
                restart = True
    except SessionTimeout:
        restart = True
    finally:
        oom = worker.runner.oom_kills() > oom0  # read before a restart removes the cgroup
        out.oom = out.oom or oom
        worker.runner.finish(sess, restart=restart or sess.broken)
    return oom if died and out.compile_error is None and req.get("op") == "batch" else None


def _relay(worker: Worker, runner: Session, drive: dict[str, Any], tls: list[float],
           respawn: Callable[[], Session | None], deadline_all: float) -> tuple[dict[int, dict[str, Any]], bool]:
    """Relay the driver's candidate calls to the runner; per-test wall budgets enforced here. Returns (records by
    assert-test index, whether the runner is alive at the end). A runner that dies (or breaks the protocol) during
    an assert test costs that test: its later calls get ``no_result``, and the next test starts with a fresh
    runner from ``respawn`` (at most :data:`MAX_RUNNER_DEATHS` times, and not past ``deadline_all``, the
    submission's hang detector, monotonic seconds); after that, calls get ``no_result``."""
    sb = worker.get_driver()
    sess = _open(sb)
    recs: dict[int, dict[str, Any]] = {}
    restart = False
    cur: int | None = None
    start = time.monotonic()
    runner_alive = True
    deaths = 0
    try:
        sess.send(drive)
        while True:
            if cur is None:
                deadline = time.monotonic() + 60.0
            else:
                deadline = start + tls[cur] + _DRIVER_GRACE_S
            try:
                f = sess.recv(deadline)
            except SessionTimeout:
                if cur is not None:  # the test code itself ran past its limit (on what the submission returned)
                    recs[cur] = {"status": "timeout", "message": "the test ran past its time limit"}
                restart = True
                break
            if f is None:
                restart = True
                break
            t = f.get("t")
            if t == "begin" and isinstance(f.get("i"), int) and 0 <= f["i"] < len(tls):
                if not runner_alive and deaths <= MAX_RUNNER_DEATHS and time.monotonic() < deadline_all:
                    fresh = respawn()  # before the test's clock starts: a sandbox restart is not its time
                    if fresh is not None:
                        runner, runner_alive = fresh, True
                    else:
                        deaths = MAX_RUNNER_DEATHS + 1  # a replacement that cannot start: no further attempt
                cur, start = f["i"], time.monotonic()
            elif t == "call" and cur is not None:
                budget = start + tls[cur] - time.monotonic()
                call = {k: f[k] for k in ("k", "target", "args", "kwargs", "getattr") if k in f}
                if budget <= 0:
                    rec: dict[str, Any] = {"status": "timeout"}
                elif not runner_alive:
                    rec = {**_DIED, "fatal": True}
                else:
                    runner.send({"t": "call", **call, "budget_s": budget})
                    try:
                        ans = runner.recv(time.monotonic() + budget + 10.0)
                    except SessionTimeout:
                        ans = None
                    if ans is None or ans.get("t") != "ret" or ans.get("k") != f.get("k"):
                        runner_alive, deaths = False, deaths + 1
                        rec = {**_DIED, "fatal": True}
                    else:
                        rec = ans.get("rec") if isinstance(ans.get("rec"), dict) else {**_DIED, "fatal": True}
                sess.send({"t": "ret", "k": f.get("k"), "rec": rec})
            elif t == "result" and isinstance(f.get("i"), int) and 0 <= f["i"] < len(tls):
                rec = f["rec"] if isinstance(f.get("rec"), dict) else {"status": "no_result"}
                rec.setdefault("wall_s", round(time.monotonic() - start, 6) if cur == f["i"] else 0.0)
                recs[f["i"]] = rec
                cur = None
            elif t == "error":
                raise SandboxError(f"test driver: {f.get('msg')}")
            elif t == "done":
                break
    finally:
        sb.finish(sess, restart=restart or sess.broken)
    return recs, runner_alive
