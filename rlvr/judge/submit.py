"""One submission through a worker's sandboxes: the runner's fresh channel, and the driver relay for assert tests.

Failure accounting (issue 43, item 5: a runner's death is a verdict, not a second attempt). A runner that dies or
breaks the protocol (only the submission can kill it: it is the only other process of its uid in the sandbox; the
cgroup's OOM killer acts on the submission's memory) ends the submission's run: every test without a record gets
``no_result`` (→ ``runtime_error``; a ``SIGKILL`` record, hence ``memory_limit``, when the sandbox's cgroup OOM-killed
something meanwhile), the assert tests not yet judged included. None of them runs again: the runner sends its records
about every megabyte, so tests it ran before it died may have left no record, and running them in a fresh runner
would give the submission a second, independent attempt at each (a randomised program could kill its runner whenever
its own check of an answer fails). A runner that reports its own exception (an ``error`` frame: a
``KeyboardInterrupt`` the submission sent it, or a bug in the runner) counts as such a death; its traceback is logged
as a warning, so that a bug in the judge's own code does not pass silently as ``runtime_error``. Records that arrived
are kept (each frame is id-checked, each index bounds-checked against the runner's own test list). Past the hang
detector (one deadline for the submission) every test still without a record gets ``no_result`` too.

Infrastructure, which nothing a submission does can produce, is what is retried: a sandbox that cannot start or
whose fresh warden does not acknowledge, and a runner found dead because its warden is gone
(:meth:`~rlvr.judge.sandbox.Sandbox.warden_gone`: killed from outside, crashed; PID 1 ignores every signal from
inside its namespace) while the cgroup OOM-killed nothing. The tests without a record then run in a fresh sandbox (a
relayed call is sent again to a fresh runner), at most :data:`MAX_INFRA_RETRIES` times per submission; one more such
failure raises :class:`SandboxError` (→ ``sandbox_error``, excluded from rewards). A warden that ends the sandbox
because of what the submission left (a place its wipe could not clean, a changed rlimit or scheduling state) does so
after the runner ended, and says so (:meth:`~rlvr.judge.sandbox.Sandbox.finish` → ``"ended"``): never a retry. The
number of retries is :attr:`Outcome.retries`, reported in the verdict (``JudgeResult.retries``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from rlvr.judge.sandbox import Sandbox, SandboxError, Session, SessionTimeout
from rlvr.judge.sandbox.host import names_zygote_module

__all__ = ["Outcome", "Worker", "run_batch"]

log = logging.getLogger(__name__)
_DIED = {"status": "no_result", "message": "the submission's process ended before reporting this test"}
_OOM_KILLED = {"status": "signal", "signal": 9, "message": "the submission's runner was OOM-killed during this test"}
MAX_INFRA_RETRIES = 1  # fresh sandboxes for one submission after its sandbox was lost (never for a runner's death)
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
    ``asserts`` (index in the drive request → record); ``oom``: the runner sandbox's cgroup OOM-killed something;
    ``retries``: infrastructure retries (a sandbox that could not start, or was lost under the submission)."""

    compile_error: str | None = None
    batch: dict[int, dict[str, Any]] = field(default_factory=dict)
    asserts: dict[int, dict[str, Any]] = field(default_factory=dict)
    result: dict[str, Any] | None = None
    oom: bool = False
    retries: int = 0


def _heavy(req: dict[str, Any]) -> bool:
    """Whether ``req`` (a batch or run request) is a Python program whose text names a module of the sandbox zygote's
    image (:func:`~rlvr.judge.sandbox.host.names_zygote_module`: linear in the code and ``test_setup``)."""
    return not req.get("native") and names_zygote_module(req.get("code"), req.get("test_setup"))


def _open(sb: Sandbox, out: Outcome, heavy: bool = False) -> Session:
    try:
        return sb.open(heavy)
    except SandboxError:
        _retry(out, "the sandbox could not start")
        return sb.open(heavy)  # once more, in a fresh sandbox (open() restarted it); a second failure propagates


def _retry(out: Outcome, why: str) -> None:
    """Count one infrastructure retry in ``out``; raise :class:`SandboxError` past :data:`MAX_INFRA_RETRIES`."""
    out.retries += 1
    if out.retries > MAX_INFRA_RETRIES:
        raise SandboxError(f"{why} (after {out.retries - 1} retries)")
    log.warning("judge: %s; retrying the submission's remaining tests in a fresh sandbox", why)


def run_batch(worker: Worker, req: dict[str, Any], n: int, drive: dict[str, Any] | None, tls: list[float],
              hang_s: float) -> Outcome:
    """Run batch request ``req`` (``n`` tests) and, when ``drive`` is given, the driver's assert tests (``tls``: their
    wall limits, seconds). ``hang_s``: hang detector for the runner's part (all runners of the submission together),
    seconds. A runner's death fails every test without a record; only a lost sandbox reruns them, in a fresh one
    (module docstring). Raises :class:`SandboxError` only for infrastructure failures (see module docstring)."""
    out = Outcome()
    deadline = time.monotonic() + hang_s
    todo = list(range(n))  # indices (into req["tests"]) the current runner runs, in its order
    sub = {**req, "interactive": True} if drive is not None else req
    limit = int(req.get("max_timeouts") or 0)
    while _runner(worker, sub, todo, drive, tls, deadline, out):  # the sandbox was lost under the runner
        _retry(out, "the sandbox was lost during a submission")
        todo = [i for i in todo if i not in out.batch]
        if limit and _timeouts(out) >= limit:  # as the lost runner would have: not run after repeated timeouts
            for i in todo:
                out.batch[i] = {"status": "skipped", "message": "not run after repeated timeouts", "wall_s": 0.0}
            todo = []
        if not todo and drive is None and req.get("op") == "batch":
            break
        sub = {**sub, "tests": [req["tests"][i] for i in todo]}
        if limit:
            sub["max_timeouts"] = limit - _timeouts(out)
    died = dict(_OOM_KILLED if out.oom else _DIED)
    for i in range(n):
        out.batch.setdefault(i, dict(died))
    if drive is not None:
        for j in range(len(drive["tests"])):
            out.asserts.setdefault(j, dict(died) if out.compile_error is None else {})
    return out


def _timeouts(out: Outcome) -> int:
    return sum(rec.get("status") == "timeout" for rec in out.batch.values())


class _Run:
    """The current runner of :func:`_runner`: its session, the cgroup's OOM-kill count when it started, and whether
    its session was finished already."""

    def __init__(self, worker: Worker, req: dict[str, Any], out: Outcome) -> None:
        self.worker, self.req, self.out = worker, req, out
        native = req.get("native") or {}
        # the problem's memory limit bounds the whole submission (all its processes, its /tmp and /dev/shm), not
        # only each process (RLIMIT_AS): the sandbox's cgroup gets that limit plus the runtime's own share
        self.memory_mb = int(req.get("memory_limit_mb") or 1024) + (
            SLACK_MB if native.get("as_limit", True) else SLACK_JVM_MB)
        self.sess = self._start()

    def _start(self) -> Session:
        sess = _open(self.worker.runner, self.out, _heavy(self.req))
        self.worker.runner.limit_memory(self.memory_mb)
        self.oom0 = self.worker.runner.oom_kills()
        self.finished = False
        return sess

    def lost(self) -> bool:
        """Called when the runner is found dead: whether that is because the sandbox was lost under it (its warden is
        gone: :meth:`~rlvr.judge.sandbox.Sandbox.warden_gone`) while the cgroup OOM-killed nothing; infrastructure."""
        return self.worker.runner.warden_gone() and self.worker.runner.oom_kills() <= self.oom0

    def finish(self, restart: bool = False) -> None:
        """Finish the session (once), noting in ``out`` whether the cgroup OOM-killed something meanwhile."""
        if self.finished:
            return
        self.finished = True
        oom = self.worker.runner.oom_kills() > self.oom0  # read before a restart or close removes the cgroup
        self.out.oom = self.out.oom or oom
        self.worker.runner.finish(self.sess, restart=restart)

    def died(self) -> Session | None:
        """The runner died during the driver relay: a fresh runner on the same code, with no batch test, once it is
        ready for relayed calls, when the sandbox was lost (infrastructure, counted); else None (its death is the
        submission's verdict)."""
        lost = self.lost()
        self.finish(restart=not self.sess.eof)
        if not lost:
            return None
        _retry(self.out, "the sandbox was lost during the driver relay")
        self.sess = self._start()
        self.sess.send({**self.req, "tests": [], "interactive": True})
        deadline = time.monotonic() + 60.0
        while (f := self.sess.recv(deadline)) is not None and f.get("t") != "ready":
            if f.get("t") in ("done", "error", "compile_error"):
                return None
        return self.sess if f is not None else None


def _runner(worker: Worker, req: dict[str, Any], todo: list[int], drive: dict[str, Any] | None, tls: list[float],
            deadline: float, out: Outcome) -> bool:
    """One runner on ``req`` whose test ``k`` is batch test ``todo[k]``; fills ``out``. Returns True when the sandbox
    was lost under it before it finished its batch (infrastructure: the caller reruns the tests without a record in a
    fresh one), else False (it ended normally, died by the submission's doing, hung past ``deadline`` or reached the
    driver relay, which handles a lost sandbox itself: :meth:`_Run.died`)."""
    run = _Run(worker, req, out)
    sess = run.sess
    restart = lost = False
    try:
        sess.send(req)
        ready = False
        while True:
            f = sess.recv(deadline)
            if f is None:
                lost = run.lost()
                restart = not sess.eof  # a runner alive but out of protocol is killed with its sandbox
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
                log.warning("the runner raised during a %r request (counted as its death: every test without a "
                            "record fails): %s", req.get("op"), str(f.get("msg", ""))[-2000:])
                break
            elif t == "done":
                break
        if ready and drive is not None:
            out.asserts, alive = _relay(worker, run, drive, tls, deadline)
            if alive:
                run.sess.send({"t": "end"})
                try:
                    while (f := run.sess.recv(time.monotonic() + 10.0)) is not None and f.get("t") != "done":
                        pass
                except SessionTimeout:
                    restart = True
            else:  # the last runner died in the relay
                restart = not run.sess.eof
    except SessionTimeout:
        restart = True
    finally:
        run.finish(restart=restart)
    return lost and out.compile_error is None


def _relay(worker: Worker, run: _Run, drive: dict[str, Any], tls: list[float],
           deadline_all: float) -> tuple[dict[int, dict[str, Any]], bool]:
    """Relay the driver's candidate calls to the runner of ``run``; per-test wall budgets enforced here. Returns
    (records by assert-test index, whether the runner is alive at the end). A runner that dies (or breaks the
    protocol) fails the call it was serving and every later one (``no_result``): the submission's verdict, not a
    fresh runner; only when the sandbox was lost under it (:meth:`_Run.died`) does a fresh runner get that call again,
    before ``deadline_all`` (the submission's hang detector, monotonic seconds)."""
    sb = worker.get_driver()
    sess = _open(sb, run.out)
    recs: dict[int, dict[str, Any]] = {}
    restart = False
    cur: int | None = None
    start = time.monotonic()
    runner, runner_alive = run.sess, True
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
                cur, start = f["i"], time.monotonic()
            elif t == "call" and cur is not None:
                call = {k: f[k] for k in ("k", "target", "args", "kwargs", "getattr") if k in f}
                rec: dict[str, Any] | None = None
                while rec is None:
                    budget = start + tls[cur] - time.monotonic()
                    if budget <= 0:
                        rec = {"status": "timeout"}
                    elif not runner_alive:
                        rec = {**_DIED, "fatal": True}
                    else:
                        runner.send({"t": "call", **call, "budget_s": budget})
                        try:
                            ans = runner.recv(time.monotonic() + budget + 10.0)
                        except SessionTimeout:
                            ans = None
                        if ans is not None and ans.get("t") == "ret" and ans.get("k") == f.get("k"):
                            rec = ans.get("rec") if isinstance(ans.get("rec"), dict) else {**_DIED, "fatal": True}
                        elif time.monotonic() < deadline_all and (fresh := run.died()) is not None:
                            runner = fresh  # the sandbox was lost (infrastructure): the same call, once more
                        else:
                            runner_alive = False
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
