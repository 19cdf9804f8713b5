"""HTTP transport of the remote judge client: retries, backpressure and request ids.

Retries: a request is retried with capped exponential backoff and full jitter (AWS Architecture Blog, "Exponential
Backoff and Jitter", 2015: sleep ~ U(0, min(cap, base·2^attempt))) only on transport errors (connection refused or
reset, timeouts) and HTTP 502/503/504 — never on an answer about the program (a wrong answer, a timeout verdict, a
400). A 503 that carries ``Retry-After`` (the rlvr server's backpressure, RFC 9110 §10.2.3: delay-seconds or an
HTTP-date) is waited out instead: sleep the advised delay (capped at ``max_backoff_s``) plus up to 50 % jitter, for as
long as the total waiting stays within ``max_wait_s``; these answers do not use up ``retries``, since the server is
healthy and merely full.

Per request, not per verdict: an answer that is itself an infrastructure failure (SandboxFusion's ``status:
"SandboxError"``, an rlvr server's ``sandbox_error`` verdict) is retried the same way, as a new attempt of that one
request (:meth:`RetryingHTTP.call`), and every logical request is counted once, as failed when its last attempt still
failed (:meth:`RetryingHTTP.request_counts`): one test's failed ``/run_code`` request is one failed request, whatever
number of verdicts it touches. :class:`rlvr.judge.preflight.GuardedJudge` decides a run's failure on that share.

Request ids: each logical request carries a fresh random id in ``X-Request-ID`` (and, on rlvr's native API, in the
body's ``request_id``), kept across its retries. The rlvr server echoes it; a 200 answer that echoes another id (a
proxy or a connection pool mixing up answers), or a native answer that echoes none, is discarded and the request
retried, so no request can be credited with another request's result. Plain SandboxFusion servers echo nothing and
are not checked on ``/run_code``.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from rlvr.judge.sandbox import SandboxError

__all__ = ["REQUEST_ID_HEADER", "RETRY_STATUS", "RemoteUnavailable", "RetryingHTTP", "judge_infra", "run_infra"]

#: HTTP statuses that mean "the service (or a proxy in front of it) could not answer now": retried.
RETRY_STATUS: frozenset[int] = frozenset({502, 503, 504})
#: Header carrying a request's id (the server's :data:`rlvr.judge.api.common.REQUEST_ID_HEADER`).
REQUEST_ID_HEADER = "X-Request-ID"


class RemoteUnavailable(SandboxError):
    """The judge server could not be reached (or kept answering 502/503/504) after every retry."""


class RetryingHTTP:
    """An ``httpx`` client for one server with the retry, backpressure and request-id rules of the module docstring.

    Args:
        base_url: server root, e.g. ``http://judge:8080`` (a trailing ``/run_code``, as verl's ``sandbox_fusion_url``
            has, is accepted and removed). Raises ``ValueError`` when it is not an http(s) URL.
        timeout_s: fixed per-request timeout, seconds; ``None`` = the per-request value the caller passes.
        retries: extra attempts after a transport error, a 502/503/504 answer or a foreign answer.
        backoff_s / max_backoff_s: base and cap of the jittered exponential backoff, seconds.
        max_wait_s: total seconds one request may spend waiting out ``503 Retry-After`` answers before giving up.
        connections: HTTP connection pool size. transport: an ``httpx`` transport (tests: ``httpx.MockTransport``).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float | None = None,
        retries: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        max_wait_s: float = 600.0,
        connections: int = 16,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        url = base_url.strip().rstrip("/")
        if url.endswith("/run_code"):
            url = url[: -len("/run_code")]
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"RLVR_SANDBOX_URL / base_url: expected http(s)://host:port, got {base_url!r}")
        self.base_url = url
        self.timeout_s = timeout_s
        self.retries = max(0, retries)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_wait_s = max_wait_s
        self.backpressure_waits = 0  # 503 + Retry-After answers waited out (observability, benchmarks)
        self._sleep: Callable[[float], None] = time.sleep
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self._http = httpx.Client(base_url=url, transport=transport, limits=limits, timeout=60.0)
        self._lock = threading.Lock()
        self._closed = False
        self._sent = 0  # logical requests ended (call): counted once each, retries included in one
        self._failed = 0  # ... of which the last attempt still failed (unreachable, or an infrastructure answer)

    def request_counts(self) -> tuple[int, int]:
        """``(requests, failed)``: logical requests ended through :meth:`call` so far, and those whose last attempt
        failed (the server unreachable after every retry, or still answering an infrastructure failure)."""
        with self._lock:
            return self._sent, self._failed

    def call(
        self, method: str, path: str, timeout: float, body: dict[str, Any] | None = None, *,
        require_id: bool = False, id_in_body: bool = False,
        infra_failure: Callable[[httpx.Response], str | None] | None = None,
    ) -> httpx.Response:
        """One logical request, retried per request and counted once (module docstring).

        Each attempt carries a fresh request id (``X-Request-ID``; with ``id_in_body`` also the body's
        ``request_id``) and goes through :meth:`_request` (transport errors, 502/503/504, foreign answers).
        ``infra_failure(resp)``: why an answer is an infrastructure failure (``None``: it is not); such an answer is
        retried with the jittered backoff up to ``retries`` times and the last one returned (counted as failed).
        Raises :class:`RemoteUnavailable` (counted as failed)."""
        import uuid

        attempt = 0
        while True:
            rid = uuid.uuid4().hex
            sent = {**body, "request_id": rid} if id_in_body and body is not None else body
            try:
                resp = self._request(method, path, timeout, sent, request_id=rid, require_id=require_id)
            except RemoteUnavailable:
                self._count(failed=True)
                raise
            why = infra_failure(resp) if infra_failure is not None else None
            if why is None or attempt >= self.retries:
                self._count(failed=why is not None)
                return resp
            self._sleep(self._backoff(attempt))
            attempt += 1

    def _count(self, failed: bool) -> None:
        with self._lock:
            self._sent += 1
            self._failed += failed

    def _backoff(self, attempt: int) -> float:
        return random.uniform(0.0, min(self.max_backoff_s, self.backoff_s * (2**attempt)))

    @staticmethod
    def retry_after_s(resp: httpx.Response) -> float | None:
        """The delay a ``Retry-After`` header asks for, seconds (RFC 9110 §10.2.3: delay-seconds or an HTTP-date);
        ``None`` when absent or unreadable."""
        value = resp.headers.get("retry-after")
        if not value:
            return None
        value = value.strip()
        if value.isdigit():
            return float(value)
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())

    def _request(
        self, method: str, path: str, timeout: float, json: Any = None, request_id: str | None = None,
        require_id: bool = False,
    ) -> httpx.Response:
        """Send with retries on transport errors and 502/503/504 only (503 + ``Retry-After``: wait it out, see the
        module docstring). ``request_id``: sent as ``X-Request-ID``; a 200 answer that echoes another id (header or
        body ``request_id``), or, with ``require_id``, echoes none, is not this request's answer: it is discarded and
        the request retried like a transport error. Raises :class:`RemoteUnavailable`."""
        if self._closed:
            raise RuntimeError("judge is closed")
        headers = {REQUEST_ID_HEADER: request_id} if request_id else None
        last = ""
        attempt = 0
        waited = 0.0
        while True:
            advised = None
            try:
                resp = self._http.request(method, path, json=json, headers=headers, timeout=self.timeout_s or timeout)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                mismatch = self._foreign_answer(resp, request_id, require_id) if request_id else None
                if mismatch is not None:
                    last = mismatch
                elif resp.status_code not in RETRY_STATUS:
                    return resp
                else:
                    last = f"HTTP {resp.status_code}: {resp.text[:200]}"
                    if resp.status_code == 503:
                        advised = self.retry_after_s(resp)
            if advised is not None:
                delay = min(self.max_backoff_s, advised)
                delay += random.uniform(0.0, 0.5 * delay)
                if waited + delay <= self.max_wait_s:
                    waited += delay
                    with self._lock:
                        self.backpressure_waits += 1
                    self._sleep(delay)
                    continue
                last += f" (gave up after waiting {waited:.1f} s of Retry-After)"
                break
            if attempt >= self.retries:
                break
            self._sleep(self._backoff(attempt))
            attempt += 1
        raise RemoteUnavailable(f"{self.base_url}{path}: unavailable after {attempt + 1} attempts ({last})")

    @staticmethod
    def _foreign_answer(resp: httpx.Response, request_id: str, require_id: bool) -> str | None:
        """Why a 200 answer is not the answer to ``request_id`` (``None`` when it is, or for other statuses)."""
        if resp.status_code != 200:
            return None
        echoed = [resp.headers.get(REQUEST_ID_HEADER)]
        if require_id:
            try:
                data = resp.json()
            except ValueError:
                data = None
            echoed.append(data.get("request_id") if isinstance(data, dict) else None)
        seen = [e for e in echoed if e is not None]
        foreign = [e for e in seen if e != request_id]
        if foreign:
            return f"answer for another request (request id {str(foreign[0])[:40]!r}, expected {request_id!r})"
        if require_id and not seen:
            return "answer without a request id (server older than this client?)"
        return None

    @staticmethod
    def _json(resp: httpx.Response) -> Any:
        """The decoded JSON body of a 200 answer. Raises :class:`SandboxError` when it is not JSON (a proxy's page)."""
        try:
            return resp.json()
        except ValueError as exc:
            raise SandboxError(f"HTTP 200 with a body that is not JSON: {resp.text[:200]!r}") from exc

    @staticmethod
    def _detail(resp: httpx.Response) -> str:
        try:
            data = resp.json()
            d = data.get("message") or data.get("detail", resp.text)
        except Exception:
            d = resp.text
        return d if isinstance(d, str) else str(d)


# ------------------------------------------------------------- answers that are themselves an infrastructure failure
def _body(resp: httpx.Response) -> Any:
    """``resp``'s JSON body when it is a 200 with one, else ``None``."""
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


def judge_infra(resp: httpx.Response) -> str | None:
    """Why a ``/rlvr/judge`` answer is an infrastructure failure: the server's own sandbox failed (verdict
    ``sandbox_error``); ``None`` otherwise (an answer about the program, or an error handled by the caller)."""
    data = _body(resp)
    return "sandbox_error verdict" if isinstance(data, dict) and data.get("verdict") == "sandbox_error" else None


def run_infra(resp: httpx.Response) -> str | None:
    """Why a ``/run_code`` answer is an infrastructure failure (SandboxFusion: ``status: "SandboxError"``, or a run
    that did not happen: no ``run_result`` or its status ``Error``, when the program compiled); ``None`` otherwise."""
    data = _body(resp)
    if not isinstance(data, dict):
        return None
    if data.get("status") == "SandboxError":
        return "SandboxError"
    comp = data.get("compile_result") or {}
    if comp and (comp.get("status") != "Finished" or comp.get("return_code")):
        return None
    run = data.get("run_result") or {}
    return "no run result" if not run or run.get("status") == "Error" else None
