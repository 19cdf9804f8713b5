"""One way to get a judge: embedded in this process, or remote over HTTP — with the same four methods.

:func:`get_judge` returns the process-wide embedded :class:`rlvr.judge.Judge` (closed at exit), or a
:class:`RemoteJudge` when ``RLVR_SANDBOX_URL`` (:class:`rlvr.config.RuntimeSettings` ``sandbox_url``) is set.

:class:`RemoteJudge` talks to

* an rlvr judge server (:mod:`rlvr.judge.server`, ``rlvr sandbox serve``): ``/rlvr/judge`` and ``/rlvr/call_outputs``
  do the whole work server-side, with the embedded judge's guards and verdicts; a client whose ``max_timeouts``
  differs from the server judge's own (``/rlvr/info``) sends it with each ``/rlvr/judge`` request
  (:meth:`RemoteJudge.native_max_timeouts`: the server may only lower its rule);
* a plain SandboxFusion server (bytedance/SandboxFusion, or a fork such as ScaleBox) that has no ``/rlvr/*``
  endpoints (detected once with ``GET /rlvr/info`` → 404): every test becomes one ``/run_code`` request running a
  generated driver program; outputs are compared on this side (:mod:`rlvr.judge.fallback`, which also states the
  limits of that mode).

Retries, backpressure and request ids: :mod:`rlvr.judge.transport` (a request is retried only on transport errors,
HTTP 502/503/504 and answers that are themselves an infrastructure failure — ``/run_code``'s ``SandboxError``, a
``sandbox_error`` verdict of ``/rlvr/judge`` — as that one request; ``503 + Retry-After`` is waited out; an answer
carrying another request's id is discarded). Each logical request is counted once
(:meth:`~rlvr.judge.transport.RetryingHTTP.request_counts`), which is what decides a run's failure.
When the server stays unreachable, :meth:`RemoteJudge.judge` returns verdict ``sandbox_error`` (infrastructure, never
the program's fault), :meth:`~RemoteJudge.run_code` a ``RunResult`` with status ``Error``, and
:meth:`~RemoteJudge.call_outputs` raises :class:`~rlvr.judge.sandbox.SandboxError`, as the embedded judge does.
"""

from __future__ import annotations

import atexit
import base64
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from rlvr.config import ConfigError
from rlvr.data.schema import CallTest, Problem
from rlvr.judge.fallback import call_outputs_fallback, failure_from_stderr, judge_fallback
from rlvr.judge.rule import lowers
from rlvr.judge.sandbox import SandboxError
from rlvr.judge.transport import RETRY_STATUS, RemoteUnavailable, RetryingHTTP, judge_infra, run_infra
from rlvr.judge.verdict import JudgeResult, TestResult, Verdict, summarise

__all__ = ["RETRY_STATUS", "RemoteJudge", "RemoteUnavailable", "get_judge", "reset_judge"]


# ------------------------------------------------------------------------------------------------------ RemoteJudge
class RemoteJudge(RetryingHTTP):
    """A judge served over HTTP (an rlvr server, or plain SandboxFusion through ``/run_code``; see module docstring).

    Args:
        base_url: server root, e.g. ``http://judge:8080`` (a trailing ``/run_code``, as verl's ``sandbox_fusion_url``
            has, is accepted and removed).
        timeout_s: fixed per-request timeout, seconds; ``None`` = derived per request from the problem's limits
            (tests × (time limit + 2 s) + 60 s for a whole submission, plus a special checker's time,
            :func:`rlvr.judge.scoring.request_bound_s`; run timeout + 60 s for one run).
        retries: extra attempts after a transport error or a 502/503/504 answer.
        backoff_s / max_backoff_s: base and cap of the jittered exponential backoff, seconds.
        concurrency: parallel requests of :meth:`judge_many` (and the HTTP connection pool size).
        native: force (``True``) or forbid (``False``) the ``/rlvr/*`` endpoints; ``None`` = detect once.
        max_timeouts: after this many timed-out tests of a submission the rest are not run and count as timeouts
            (the embedded judge's rule; 0 = run all). Fallback mode applies it here; native mode sends it with each
            ``/rlvr/judge`` request when it differs from the server judge's own (:meth:`native_max_timeouts`).
        max_wait_s: total seconds one request may spend waiting out ``503 Retry-After`` answers before giving up.
        transport: an ``httpx`` transport (tests: ``httpx.MockTransport``).
    Thread-safe; use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float | None = None,
        retries: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        concurrency: int = 16,
        native: bool | None = None,
        max_timeouts: int = 3,
        max_wait_s: float = 600.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.workers = max(1, concurrency)
        super().__init__(
            base_url, timeout_s=timeout_s, retries=retries, backoff_s=backoff_s, max_backoff_s=max_backoff_s,
            max_wait_s=max_wait_s, connections=self.workers, transport=transport,
        )
        self.max_timeouts = max_timeouts
        self._native = native
        self._native_lock = threading.Lock()  # one /rlvr/info probe, however many threads ask first
        self._info: dict[str, Any] | None = None  # a native server's /rlvr/info ({} when it did not answer one)
        self._pool: ThreadPoolExecutor | None = None

    # ---------------------------------------------------------------------------------------------------- plumbing
    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._closed

    def close(self) -> None:
        """Close the HTTP connections and the thread pool (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._http.close()

    def __enter__(self) -> RemoteJudge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_native(self) -> bool:
        """Whether the server offers rlvr's ``/rlvr/*`` endpoints (detected once with ``GET /rlvr/info``).

        Thread-safe: concurrent first callers wait for one probe (it is one request in :meth:`request_counts`).
        Raises :class:`RemoteUnavailable` when the server cannot be reached."""
        if self._native is None:
            with self._native_lock:
                if self._native is None:
                    self._native = self._probe()
        return self._native

    def _probe(self) -> bool:
        """``GET /rlvr/info``: whether it answered 200; keeps its JSON object for :meth:`server_max_timeouts`."""
        resp = self.call("GET", "/rlvr/info", 30.0)
        try:
            data = resp.json() if resp.status_code == 200 else None
        except ValueError:
            data = None
        self._info = data if isinstance(data, dict) else {}
        return resp.status_code == 200

    def server_max_timeouts(self) -> int | None:
        """The server judge's own timeout rule, from ``GET /rlvr/info``'s ``max_timeouts`` (asked once, also when
        ``native=True`` skipped detection); ``None`` for a server that does not say (an rlvr server older than
        per-request ``max_timeouts``, whose rule is its judge's 3, or a judge without the rule) and in fallback mode
        (this client applies its own rule). Raises :class:`RemoteUnavailable` when the server cannot be reached."""
        if not self.is_native():
            return None
        if self._info is None:
            with self._native_lock:
                if self._info is None:
                    self._probe()
        value = (self._info or {}).get("max_timeouts")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    def native_max_timeouts(self, key: str = "max_timeouts") -> int | None:
        """What a native ``/rlvr/judge`` request carries as ``max_timeouts``: ``None`` when the server's own rule is
        this client's (nothing sent: also at the default 3 with ``native=True`` and no probe, or on a server that does
        not advertise its rule, whose rule is its judge's 3), else this client's value, which the server applies
        (:func:`rlvr.judge.api.limits.check_max_timeouts`). Raises :class:`rlvr.config.ConfigError` (one line naming
        ``key``, the value, the server's and the URL) when the server cannot apply it: a server that does not
        advertise ``max_timeouts`` (older than the field: it would judge at its own rule), or a value the server
        refuses (0 or above its own, unless its own is 0); :class:`RemoteUnavailable` when the server cannot be
        reached."""
        mine = self.max_timeouts
        if self._info is None and self._native and mine == 3:
            return None  # native forced, today's rule: no /rlvr/info request only to find the server's
        server = self.server_max_timeouts()
        if server == mine or (server is None and mine == 3):
            return None
        where = f"the judge server at {self.base_url}"
        if server is None:
            raise ConfigError(f"{key}={mine}: {where} does not take a per-request max_timeouts (its /rlvr/info gives "
                              f"none: an rlvr server older than the field judges every request at its own rule, 3 by "
                              f"default); upgrade the server, set 3, or judge in-process (unset RLVR_SANDBOX_URL)")
        if lowers(server, mine):
            return mine
        asked = "0 (run every test)" if mine == 0 else str(mine)
        raise ConfigError(f"{key}={asked}: {where} has max_timeouts={server} and a request may only lower it "
                          f"(1 to {server}); set a value in that range or judge in-process (unset RLVR_SANDBOX_URL)")

    @staticmethod
    def _hang_timeout(problem: Problem, n_tests: int, checks: bool = True) -> float:
        from rlvr.judge.scoring import request_bound_s

        return request_bound_s(problem, n_tests, checks)

    # ------------------------------------------------------------------------------------------------------ judge
    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        """Judge one complete program against every test of ``problem`` (see :meth:`rlvr.judge.Judge.judge`).

        Never raises for the program's failures; an unreachable server gives verdict ``sandbox_error``. Raises
        ``ValueError`` (``UnknownLanguageError`` for a language the server cannot run) when the server rejects the
        request (HTTP 400/422), :class:`rlvr.config.ConfigError` (a ``ValueError``) when a native server cannot apply
        this client's ``max_timeouts`` (:meth:`native_max_timeouts`)."""
        t0 = time.monotonic()
        try:
            if self.is_native():
                return self._judge_native(problem, solution, language)
            return judge_fallback(self._post_run, problem, solution, language, self.max_timeouts, t0)
        except SandboxError as exc:
            msg = f"sandbox failure: {exc}"[:2000]
            results = [TestResult(index=i, verdict="sandbox_error", message=msg) for i in range(len(problem.tests))]
            return summarise(results, time.monotonic() - t0, msg)

    def _judge_native(self, problem: Problem, solution: str, language: str) -> JudgeResult:
        from rlvr.judge.languages import UnknownLanguageError

        body: dict[str, Any] = {"problem": problem.model_dump(mode="json"), "solution": solution,
                                "language": language}
        max_timeouts = self.native_max_timeouts()
        if max_timeouts is not None:
            body["max_timeouts"] = max_timeouts
        resp = self.call(
            "POST", "/rlvr/judge", self._hang_timeout(problem, len(problem.tests)), body, require_id=True,
            id_in_body=True, infra_failure=judge_infra,
        )
        if resp.status_code == 200:
            try:
                return JudgeResult.model_validate(self._json(resp))
            except ValueError as exc:  # pydantic ValidationError: not a JudgeResult
                raise SandboxError(f"/rlvr/judge answered an invalid result: {exc}"[:2000]) from exc
        detail = self._detail(resp)
        if resp.status_code in (400, 422):
            if detail.startswith("field 'language'"):
                raise UnknownLanguageError(detail)
            raise ValueError(f"{self.base_url}/rlvr/judge rejected {problem.id}: {detail}")
        raise SandboxError(f"HTTP {resp.status_code}: {detail}"[:2000])

    def judge_many(self, items: Sequence[tuple[Problem, str]], language: str = "python") -> list[JudgeResult]:
        """Judge many (problem, solution) pairs, at most ``concurrency`` requests at a time; results in input order."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rlvr-remote")
        futures = [self._pool.submit(self.judge, p, s, language) for p, s in items]
        return [f.result() for f in futures]

    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]:
        """``repr`` of each call test's return value, ``None`` where it failed (see
        :meth:`rlvr.judge.Judge.call_outputs`). Raises ``ValueError`` if the solution does not compile,
        :class:`~rlvr.judge.sandbox.SandboxError` on infrastructure failure."""
        calls = [t for t in problem.tests if isinstance(t, CallTest)]
        if not calls:
            return []
        if self.is_native():
            body = {"problem": problem.model_dump(mode="json"), "solution": solution}
            resp = self.call(
                "POST", "/rlvr/call_outputs", self._hang_timeout(problem, len(calls), False), body, require_id=True,
                id_in_body=True,
            )
            if resp.status_code == 200:
                data = self._json(resp)
                if not isinstance(data, dict) or not isinstance(data.get("outputs"), list):
                    raise SandboxError(f"/rlvr/call_outputs answered without 'outputs': {resp.text[:200]!r}")
                return list(data["outputs"])
            if resp.status_code in (400, 422):
                raise ValueError(f"{problem.id}: {self._detail(resp)}")
            raise SandboxError(f"HTTP {resp.status_code}: {self._detail(resp)}"[:2000])
        return call_outputs_fallback(self._post_run, problem, solution)

    # ---------------------------------------------------------------------------------------------------- run_code
    def _post_run(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """POST ``body`` to ``/run_code`` (with a fresh ``X-Request-ID``, checked when the server echoes it; an
        infrastructure answer retried as this one request, :func:`rlvr.judge.transport.run_infra`). Raises
        :class:`SandboxError` for any answer other than a JSON object with HTTP 200."""
        resp = self.call("POST", "/run_code", timeout, body, infra_failure=run_infra)
        if resp.status_code != 200:
            raise SandboxError(f"/run_code answered HTTP {resp.status_code}: {self._detail(resp)}"[:2000])
        data = self._json(resp)
        if not isinstance(data, dict):
            raise SandboxError(f"/run_code answered a non-object: {resp.text[:200]!r}")
        return data

    def run_code(
        self,
        code: str,
        stdin: str = "",
        timeout_s: float = 10.0,
        memory_limit_mb: int = 1024,
        files: dict[str, bytes] | None = None,
        language: str = "python",
    ) -> Any:
        """Run one program once through ``/run_code`` (see :meth:`rlvr.judge.Judge.run_code`); returns a
        :class:`rlvr.judge.RunResult`. An unreachable server gives status ``Error`` / verdict ``sandbox_error``."""
        from rlvr.judge.core import RunResult

        body = {
            "code": code, "language": language, "stdin": stdin, "run_timeout": timeout_s, "compile_timeout": 30.0,
            "memory_limit_MB": memory_limit_mb,
            "files": {k: base64.b64encode(v).decode() for k, v in (files or {}).items()}, "fetch_files": [],
        }
        from rlvr.judge.languages import UnknownLanguageError

        try:
            resp = self.call("POST", "/run_code", timeout_s + 90.0, body, infra_failure=run_infra)
            if resp.status_code in (400, 422):  # the request itself is wrong: raise, as the embedded judge does
                detail = self._detail(resp)
                if detail.startswith("field 'language'"):
                    raise UnknownLanguageError(detail)
                raise ValueError(f"{self.base_url}/run_code rejected the request: {detail}"[:2000])
            if resp.status_code != 200:
                raise SandboxError(f"/run_code answered HTTP {resp.status_code}: {self._detail(resp)}"[:2000])
            data = self._json(resp)
        except SandboxError as exc:
            return RunResult(status="Error", verdict="sandbox_error", stderr=str(exc)[:2000])
        if not isinstance(data, dict):
            return RunResult(status="Error", verdict="sandbox_error", stderr="/run_code answered a non-object")
        return self._run_result(data, language)

    @staticmethod
    def _run_result(data: dict[str, Any], language: str) -> Any:
        from rlvr.judge.core import RunResult

        if data.get("status") == "SandboxError":
            return RunResult(status="Error", verdict="sandbox_error", stderr=data.get("message") or "")
        comp = data.get("compile_result") or {}
        run = data.get("run_result") or {}
        if comp and (comp.get("status") != "Finished" or comp.get("return_code")):
            return RunResult(status="Finished", verdict="syntax_error", stderr=comp.get("stderr") or "")
        if not run or run.get("status") == "Error":
            return RunResult(status="Error", verdict="sandbox_error", stderr=data.get("message") or "no run result")
        stdout, stderr = run.get("stdout") or "", run.get("stderr") or ""
        rc = run.get("return_code")
        verdict: Verdict
        if data.get("verdict"):  # an rlvr server says it exactly
            verdict = data["verdict"]
        elif run.get("status") == "TimeLimitExceeded":
            verdict = "timeout"
        elif rc == 0:
            verdict = "accepted"
        else:
            verdict = failure_from_stderr(stderr, language)
        return RunResult(
            status="TimeLimitExceeded" if verdict == "timeout" else "Finished", verdict=verdict, exit_code=rc,
            stdout=stdout, stderr=stderr, time_s=float(run.get("execution_time") or 0.0),
            cpu_s=float(run.get("cpu_time") or 0.0),
        )


# ------------------------------------------------------------------------------------------------------ get_judge
_LOCK = threading.Lock()
_JUDGE: Any = None
_JUDGE_PID: int | None = None
_ATEXIT = False


def _is_closed(j: Any) -> bool:
    closed = getattr(j, "closed", None)
    if isinstance(closed, bool):
        return closed
    ev = getattr(j, "_closed", None)  # rlvr.judge.Judge keeps a threading.Event
    return bool(ev.is_set()) if hasattr(ev, "is_set") else False


def _close_at_exit() -> None:
    global _JUDGE
    with _LOCK:
        j, _JUDGE = _JUDGE, None
    if j is not None and _JUDGE_PID == os.getpid():
        try:
            j.close()
        except Exception:  # interpreter shutdown: best effort
            pass


def get_judge() -> Any:
    """The process-wide judge: a :class:`RemoteJudge` when ``RLVR_SANDBOX_URL`` is set, else the embedded
    :class:`rlvr.judge.Judge` (``RLVR_SANDBOX_WORKERS`` sandboxes). Created on first use, closed at interpreter exit,
    re-created after :meth:`close` or in a forked child (a child never reuses its parent's sandboxes)."""
    global _JUDGE, _JUDGE_PID, _ATEXIT
    from rlvr.config import RuntimeSettings

    with _LOCK:
        if _JUDGE is not None and _JUDGE_PID == os.getpid() and not _is_closed(_JUDGE):
            return _JUDGE
        url = RuntimeSettings().sandbox_url.strip()
        if url:
            j: Any = RemoteJudge(url)
        else:
            from rlvr.judge.core import Judge

            j = Judge()
        _JUDGE, _JUDGE_PID = j, os.getpid()
        if not _ATEXIT:
            atexit.register(_close_at_exit)
            _ATEXIT = True
        return j


def reset_judge() -> None:
    """Close (in the process that made it) and forget the process-wide judge; the next :func:`get_judge` makes a new
    one (e.g. after changing ``RLVR_SANDBOX_URL``)."""
    _close_at_exit()
