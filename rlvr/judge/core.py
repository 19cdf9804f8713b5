"""The embedded judge: a pool of workers (a warm submission sandbox + a driver sandbox each) turning (problem,
solution) into verdicts.

All tests of one submission run in one fresh runner of the worker's sandbox (:mod:`rlvr.judge.submit`); verdicts are
decided here on the host, where the expected outputs live (:mod:`rlvr.judge.scoring`). Assert tests of the shape
``assert f(x) == literal`` run as host-compared calls (:mod:`rlvr.judge.asserts`); the others run in the worker's
driver sandbox with the candidate as a remote function. Design and limits: ``docs/judge/threat-model.md``.
"""

from __future__ import annotations

import base64
import logging
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from rlvr.config import RuntimeSettings
from rlvr.data.schema import CallTest, Problem, StdioTest
from rlvr.judge.asserts import as_call, driver_request
from rlvr.judge.languages import Language, get_language
from rlvr.judge.sandbox import Sandbox, SandboxError
from rlvr.judge.sandbox.cgroups import detect
from rlvr.judge.scoring import CheckBudget, failure_verdict, printable, score
from rlvr.judge.settle import cpu_judged_slack
from rlvr.judge.submit import Worker, run_batch
from rlvr.judge.verdict import JudgeResult, TestResult, Verdict, summarise

__all__ = ["JUDGE_VERSION", "Judge", "RunResult", "host_memory_available_mb"]

JUDGE_VERSION = "rlvr-judge/2"
_T = TypeVar("_T")
log = logging.getLogger(__name__)


class RunResult(BaseModel):
    """One plain program run (SandboxFusion ``/run_code`` semantics).

    ``status``: ``Finished`` (the program ended by itself, any exit code), ``TimeLimitExceeded`` or ``Error``
    (sandbox failure). ``verdict``: accepted (exit 0) / runtime_error / timeout / memory_limit / syntax_error /
    sandbox_error. ``time_s``: wall seconds; ``cpu_s``: CPU seconds of the program. ``retries``: infrastructure
    retries (as :attr:`~rlvr.judge.verdict.JudgeResult.retries`)."""

    status: Literal["Finished", "TimeLimitExceeded", "Error"]
    verdict: Verdict
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    time_s: float = 0.0
    cpu_s: float = 0.0
    retries: int = 0


def host_memory_available_mb() -> int:
    """``MemAvailable`` of /proc/meminfo, MB (0 when unreadable)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return 0


def _native(lang: Language) -> dict[str, Any] | None:
    """The runner's ``native`` block for a compiled language (None for Python, which runs in the warm runner)."""
    if lang.compile is None and lang.name == "python":
        return None

    def resolved(argv: tuple[str, ...]) -> list[str]:
        first = argv[0]
        if not first.startswith("./"):
            first = os.path.realpath(shutil.which(first, path="/usr/bin:/usr/local/bin") or first)
        return [first, *argv[1:]]

    return {
        "source": lang.source,
        "compile": resolved(lang.compile) if lang.compile else None,
        "run": resolved(lang.run),
        "env": dict(lang.env),
        "as_limit": lang.address_space_limit,
        "compile_timeout_s": lang.compile_timeout_s,
    }


def _tl(problem: Problem, test: Any) -> float:
    """Wall limit of one test, seconds: the test's own ``time_limit_s`` when set, else the problem's."""
    own = getattr(test, "time_limit_s", None)
    return float(own) if own else float(problem.time_limit_s)


def _check_run_args(timeout_s: float, memory_limit_mb: int, files: dict[str, bytes] | None) -> None:
    if not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= 3600:  # NaN fails both comparisons
        raise ValueError(f"timeout_s: must be in (0, 3600] seconds, got {timeout_s!r}")
    if not isinstance(memory_limit_mb, int) or not 16 <= memory_limit_mb <= 65536:
        raise ValueError(f"memory_limit_mb: must be an integer in [16, 65536], got {memory_limit_mb!r}")
    for name in files or {}:
        parts = str(name).split("/")
        if not name or name.startswith("/") or ".." in parts or "\0" in name:
            raise ValueError(f"files: bad file name {name!r} (relative, no '..', no NUL)")


class Judge:
    """Embedded judge over a pool of workers.

    Args:
        workers: concurrent workers (default ``RLVR_SANDBOX_WORKERS`` or the CPU count).
        max_timeouts: after this many timed-out tests of one submission the rest are not run and count as
            timeouts (0 = run every test); also the number of checker failures one submission's outputs may cause
            before its remaining checks are skipped (:class:`rlvr.judge.scoring.CheckBudget`).
        output_limit_mb: cap on a test's stdout/stderr file size, MB (larger output: runtime_error).
        sandbox_memory_mb: cgroup memory limit over one submission sandbox (all its processes + tmpfs/shm), MB.
        driver_memory_mb: the same for a driver sandbox, MB.
        forkloop: submission sandboxes run stdio tests through the compiled per-test loop (same verdicts, less CPU;
            :mod:`rlvr.judge.sandbox.forkloop`); None: ``RLVR_FORKLOOP`` (default on).
    ``workers × (sandbox_memory_mb + driver_memory_mb)`` must fit the host's ``MemAvailable`` when cgroups are active:
    otherwise ``sandbox_memory_mb`` is lowered to fit (logged as a warning), and ``ValueError`` is raised when that
    would leave less than 512 MB per sandbox. Thread-safe; use as a context manager or call :meth:`close`.
    """

    def __init__(self, workers: int | None = None, max_timeouts: int = 3, output_limit_mb: int = 16,
                 sandbox_memory_mb: int = 2048, driver_memory_mb: int = 512, forkloop: bool | None = None) -> None:
        n = workers or RuntimeSettings().sandbox_workers or os.cpu_count() or 1
        self.workers = n
        self.max_timeouts = max_timeouts
        self.output_limit_mb = output_limit_mb
        mode = detect()
        avail = host_memory_available_mb()
        if mode.name != "none" and avail and n * (sandbox_memory_mb + driver_memory_mb) > avail:
            fit = avail // n - driver_memory_mb
            if fit < 512:
                raise ValueError(f"{n} judge workers need {n * (512 + driver_memory_mb)} MB at least; the host has "
                                 f"{avail} MB available: use fewer workers (RLVR_SANDBOX_WORKERS)")
            log.warning("judge: %d workers x %d MB exceed MemAvailable %d MB; sandbox memory lowered to %d MB",
                        n, sandbox_memory_mb + driver_memory_mb, avail, fit)
            sandbox_memory_mb = fit
        self.sandbox_memory_mb, self.driver_memory_mb = sandbox_memory_mb, driver_memory_mb
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._all = [
            Worker(Sandbox(memory_mb=sandbox_memory_mb, forkloop=forkloop),
                   lambda: Sandbox(tmp_mb=64, memory_mb=driver_memory_mb, forkloop=False, preload=True))
            for _ in range(n)
        ]
        for w in self._all:
            self._idle.put(w)
        self._executor = ThreadPoolExecutor(max_workers=n, thread_name_prefix="rlvr-judge")
        self._closed = threading.Event()

    # ------------------------------------------------------------------ plumbing
    def _with_worker(self, fn: Callable[[Worker], _T]) -> _T:
        if self._closed.is_set():
            raise RuntimeError("judge is closed")
        w = self._idle.get()
        try:
            return fn(w)
        finally:
            self._idle.put(w)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._closed.is_set()

    def sandbox_cpu_seconds(self) -> float:
        """CPU seconds used inside every sandbox so far (wardens, runners, test processes, drivers), for benchmarks;
        updated at the end of each submission."""
        return sum(w.runner.cpu_seconds() + (w.driver.cpu_seconds() if w.driver else 0.0) for w in self._all)

    def isolation_info(self) -> dict[str, Any]:
        """What isolation is active: ``cgroup`` mode (``v2``/``v1``/``none``) and why a better one was not used,
        per-sandbox memory (MB) and pids limits, whether the seccomp filter loaded and the warden is non-dumpable
        (known once a sandbox has started), whether stdio tests run through the compiled per-test loop (``forkloop``,
        known once a sandbox has started) and whether sandboxes get their own host uids (root only)."""
        mode = detect()
        pong = next((w.runner.pong for w in self._all if w.runner.pong), {})
        return {
            "cgroup": mode.name,
            "cgroup_reason": mode.reason,
            "sandbox_memory_mb": self.sandbox_memory_mb if mode.name != "none" else None,
            "driver_memory_mb": self.driver_memory_mb if mode.name != "none" else None,
            "pids_max": self._all[0].runner.pids_max if mode.name != "none" else None,
            "seccomp": pong.get("seccomp"),
            "warden_dumpable": pong.get("dumpable"),
            "forkloop": pong.get("forkloop"),
            "per_sandbox_uid": os.geteuid() == 0,
            "empty_environment": True,
        }

    def close(self) -> None:
        """Stop every sandbox (idempotent)."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._executor.shutdown(wait=True)
        for w in self._all:
            w.close()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ judging
    def _plan(self, problem: Problem, solution: str, tests: Sequence[Any], language: str) -> dict[str, Any]:
        """Split ``tests`` into the runner's batch (stdio, call, converted asserts) and the driver's asserts."""
        lang = get_language(language)
        prefix = problem.solution_prefix if lang.name == "python" else ""
        code = f"{prefix}\n{solution}" if prefix else solution
        batch, where, converted, drive_codes, drive_tls = [], [], {}, [], []
        slack = cpu_judged_slack(problem)  # CPU-judged limits (rlvr.judge.settle): wall = slack x the CPU limit
        walls = []
        for i, t in enumerate(tests):
            tl = _tl(problem, t)
            walls.append(tl * slack if slack else tl)
            lim: dict[str, float] = {"tl": walls[-1], "cpu": tl} if slack else {"tl": tl}
            if isinstance(t, StdioTest):
                batch.append({"kind": "stdio", "stdin": t.stdin, **lim})
            elif isinstance(t, CallTest):
                batch.append({"kind": "call", "args": t.args, **lim})
            else:
                conv = as_call(t.code, problem.entry_point)
                if conv is not None:
                    batch.append({"kind": "call", "args": conv.args, "kwargs": conv.kwargs, **lim})
                    converted[i] = conv.expected
                else:  # the driver's asserts keep wall limits (x slack when CPU-judged)
                    where.append(("d", len(drive_codes)))
                    drive_codes.append(t.code)
                    drive_tls.append(walls[-1])
                    continue
            where.append(("b", len(batch) - 1))
        req = {
            "op": "batch", "native": _native(lang), "code": code, "tests": batch, "entry_point": problem.entry_point,
            "test_setup": problem.test_setup, "memory_limit_mb": problem.memory_limit_mb,
            "output_limit_mb": self.output_limit_mb, "max_timeouts": self.max_timeouts,
            "call_cpu_s": sum(_tl(problem, t) for t in tests) + 1.0,
        }
        drive = driver_request(problem, drive_codes, self.max_timeouts) if drive_codes else None
        hang = sum(w + 2.0 for w in walls) + 60.0
        return {"req": req, "n": len(batch), "drive": drive, "tls": drive_tls, "hang": hang, "where": where,
                "converted": converted}

    def _run(self, problem: Problem, solution: str, tests: Sequence[Any], language: str) -> Any:
        plan = self._plan(problem, solution, tests, language)
        return plan, self._with_worker(
            lambda w: run_batch(w, plan["req"], plan["n"], plan["drive"], plan["tls"], plan["hang"])
        )

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        """Judge one complete program against every test of ``problem``.

        ``solution`` is the full program (function problems: the code including the ``def``); the judge prepends
        ``problem.solution_prefix``. ``language``: a name of :mod:`rlvr.judge.languages` (compiled languages:
        stdin/stdout tests only; compile errors are ``syntax_error``). Never raises for the program's failures;
        infrastructure failures become ``sandbox_error``. Raises :class:`~rlvr.judge.languages.UnknownLanguageError`
        for an unavailable language. Limits are wall seconds; on a copy made by :func:`rlvr.judge.settle.cpu_judged`
        (trusted references only) they are CPU seconds of the program, with wall backstops ``slack`` × as long
        (stdio: ``RLIMIT_CPU``; calls and converted asserts: the call server's CPU; driver asserts: wall only)."""
        get_language(language)
        t0 = time.monotonic()
        tests = problem.tests
        try:
            plan, out = self._run(problem, solution, tests, language)
        except SandboxError as exc:
            msg = f"sandbox failure: {exc}"[:2000]
            results = [TestResult(index=i, verdict="sandbox_error", message=msg) for i in range(len(tests))]
            return summarise(results, time.monotonic() - t0, msg)
        if out.compile_error is not None:
            msg = printable(out.compile_error, 2000, tail=True)
            results = [TestResult(index=i, verdict="syntax_error", message=msg) for i in range(len(tests))]
            res = summarise(results, time.monotonic() - t0, msg)
            res.retries = out.retries
            return res
        results = []
        budget = CheckBudget(self.max_timeouts)  # checker time counts in this request's bound
        for i, (t, (side, j)) in enumerate(zip(tests, plan["where"], strict=True)):
            rec = out.batch[j] if side == "b" else out.asserts[j]
            results.append(score(problem, t, i, rec, self, out.oom, plan["converted"].get(i), budget))
        first_fail = next((r for r in results if r.verdict != "accepted"), None)
        res = summarise(results, time.monotonic() - t0, first_fail.message if first_fail else "")
        res.retries = out.retries
        return res

    def judge_many(self, items: Sequence[tuple[Problem, str]], language: str = "python") -> list[JudgeResult]:
        """Judge many (problem, solution) pairs concurrently on the pool; results in input order."""
        futures = [self._executor.submit(self.judge, p, s, language) for p, s in items]
        return [f.result() for f in futures]

    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]:
        """For each call test of ``problem``, the literal of what ``solution`` returns (plain values only), or
        ``None`` where it failed (exception, timeout, unserialisable value). Used to fill ``CallTest.expected`` from
        the canonical solution, the EvalPlus way. Raises :class:`SandboxError` on infrastructure failure or
        ``ValueError`` if the solution does not compile."""
        calls = [t for t in problem.tests if isinstance(t, CallTest)]
        if not calls:
            return []
        plan = self._plan(problem, solution, calls, "python")
        plan["req"]["max_timeouts"] = 0
        out = self._with_worker(lambda w: run_batch(w, plan["req"], plan["n"], None, [], plan["hang"]))
        if out.compile_error is not None:
            raise ValueError(f"{problem.id}: solution does not compile: {out.compile_error}")
        return [rec.get("value") if rec.get("status") == "ok" else None for _, rec in sorted(out.batch.items())]

    def run_code(self, code: str, stdin: str = "", timeout_s: float = 10.0, memory_limit_mb: int = 1024,
                 files: dict[str, bytes] | None = None, language: str = "python") -> RunResult:
        """Run one program once (SandboxFusion ``/run_code``): ``stdin`` text in, stdout/stderr out.

        ``timeout_s``: wall-clock limit, seconds. ``memory_limit_mb``: address-space limit, MB. ``files``: name →
        content, written into the program's working directory first. ``language``: see :mod:`rlvr.judge.languages`
        (raises ``UnknownLanguageError`` when unavailable); a compile error gives verdict ``syntax_error`` with the
        compiler's message in ``stderr``. A fresh runner like any submission. Raises ``ValueError`` naming the field
        for a ``timeout_s`` outside (0, 3600], a ``memory_limit_mb`` outside [16, 65536] or a file name that is
        absolute, empty or climbs out of the working directory."""
        _check_run_args(timeout_s, memory_limit_mb, files)
        req = {
            "native": _native(get_language(language)), "op": "run", "code": code, "stdin": stdin,
            "timeout_s": timeout_s, "memory_limit_mb": memory_limit_mb, "output_limit_mb": self.output_limit_mb,
            "files": {k: base64.b64encode(v).decode() for k, v in (files or {}).items()},
        }
        try:
            out = self._with_worker(lambda w: run_batch(w, req, 0, None, [], timeout_s + 60.0))
        except SandboxError as exc:
            return RunResult(status="Error", verdict="sandbox_error", stderr=str(exc)[:2000])
        if out.compile_error is not None:
            return RunResult(status="Finished", verdict="syntax_error", stderr=printable(out.compile_error, 4000),
                             retries=out.retries)
        rec = out.result or {"status": "no_result", "message": "the program's process ended without a result"}
        failed = failure_verdict(rec, "stdio", out.oom)
        verdict: Verdict
        if failed is not None:
            verdict = failed[0]
        elif rec.get("exit_code") not in (0, None):
            syntax = "SyntaxError" in (rec.get("stderr") or "") and rec.get("wall_s") == 0.0
            verdict = "syntax_error" if syntax else "runtime_error"
        else:
            verdict = "accepted"
        return RunResult(
            status="TimeLimitExceeded" if verdict == "timeout" else "Finished",
            verdict=verdict,
            exit_code=rec.get("exit_code") if isinstance(rec.get("exit_code"), int) else None,
            stdout=printable(rec.get("stdout"), 1 << 24),
            stderr=printable(rec.get("stderr") or rec.get("message"), 1 << 20),
            time_s=float(rec.get("wall_s") or 0.0),
            cpu_s=float(rec.get("cpu_s") or 0.0),
            retries=out.retries,
        )
