"""The judge server's one app factory (:func:`create_app`), its structured logs and :func:`serve`.

Endpoints, by wire API: :mod:`rlvr.judge.api.sandboxfusion` (``GET /v1/ping``, ``POST /run_code``),
:mod:`rlvr.judge.api.scalebox` (``POST /common_evaluate_batch``), :mod:`rlvr.judge.api.native` (``/rlvr/*``), plus
``GET /metrics`` (:mod:`rlvr.judge.api.metrics`). Backpressure: :mod:`rlvr.judge.api.admission`. Input limits
(4xx naming the field, 413 for bodies over ``RLVR_SANDBOX_MAX_BODY_MB``): :mod:`rlvr.judge.api.limits`. Every answer
is UTF-8-safe JSON (:class:`~rlvr.judge.api.common.SafeJSONResponse`); errors: 400/413/422 for the request (400 for
an ``X-Request-ID`` that is not 1–128 printable ASCII characters, before anything runs), 408 for a body slower than
``RLVR_SANDBOX_BODY_TIMEOUT_S``, 503 + ``Retry-After`` when saturated (no body place, queue full, out of file
descriptors), 500 ``sandbox_error: …`` only when the judge itself fails. Connections, headers and their deadlines
are bounded below the app, by :mod:`rlvr.judge.api.frontdoor` (408, 431, 503), which :func:`serve` installs.

Structured logs: one JSON line per request on logger ``rlvr.judge.server`` (``endpoint``, ``method``, ``status``,
``verdict``, ``duration_s``, ``queue_wait_s``); :func:`serve` installs :class:`JsonLogFormatter` on it and turns
uvicorn's own access log off. The event loop never works on request content: a gated endpoint's body is parsed,
its problem built, judged, answered and rendered after admission in the app's judging threads
(:func:`rlvr.judge.api.admission.admitted`), and a server that owns its process moves full garbage collections to
idle moments (:class:`rlvr.judge.api.collector.Collector`), so ``/v1/ping`` stays fast under hostile load. Run
with :func:`serve` (``rlvr sandbox serve``); configuration only through ``RLVR_*`` variables
(:class:`rlvr.config.RuntimeSettings`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from rlvr.judge.api import datasets, native, sandboxfusion, scalebox
from rlvr.judge.api.admission import AdmissionGate, Infrastructure, Saturated
from rlvr.judge.api.collector import Collector
from rlvr.judge.api.common import (
    REQUEST_ID_HEADER,
    BadRequest,
    BoundedJSONRequest,
    SafeJSONResponse,
    check_request_id,
)
from rlvr.judge.api.frontdoor import uvicorn_stack
from rlvr.judge.api.limits import BodyLimit
from rlvr.judge.api.metrics import Metrics

__all__ = ["JsonLogFormatter", "configure_logging", "create_app", "serve", "uvicorn_stack", "validation_content"]

GATED = ("/run_code", "/common_evaluate_batch", "/rlvr/judge", "/rlvr/call_outputs")
_ENDPOINTS = frozenset({*GATED, "/v1/ping", "/rlvr/info", "/metrics"})
log = logging.getLogger("rlvr.judge.server")


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record: ``ts`` (Unix seconds), ``level``, ``logger``, ``msg`` and every ``extra`` field."""

    _STD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3), "level": record.levelname, "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in self._STD})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def validation_content(errors: Any) -> dict[str, Any]:
    """The 422 body: FastAPI's ``detail`` list without the offending input (a body may be megabytes) plus ``message``,
    one line naming each field, e.g. ``field 'run_timeout': Input should be less than or equal to 60``."""
    detail, lines = [], []
    for err in errors:
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        detail.append({"type": err.get("type"), "loc": list(err.get("loc", ())), "msg": err.get("msg")})
        lines.append(f"field '{'.'.join(loc) or 'body'}': {err.get('msg')}")
    return {"detail": detail, "message": "; ".join(lines)[:2000]}


def create_app(
    judge: Any = None, *, max_queue: int | None = None, workers: int | None = None, max_body_mb: float | None = None,
    tune_gc: bool | None = None, max_bodies: int | None = None, body_timeout_s: float | None = None,
    metrics_verdicts: bool | None = None, metrics_token: str | None = None,
) -> FastAPI:
    """The FastAPI application serving ``judge`` (see the module docstring for the endpoints).

    ``judge``: an object with the :class:`rlvr.judge.Judge` methods; ``None`` = an embedded ``Judge()`` created at
    startup and closed at shutdown (``RLVR_SANDBOX_WORKERS`` sandboxes). ``workers``: concurrent judge calls (default:
    ``judge.workers``, else ``RLVR_SANDBOX_WORKERS`` or the CPU count). ``max_queue``: requests that may wait for a
    worker before 503 (default ``RLVR_SANDBOX_MAX_QUEUE``, else ``RLVR_SANDBOX_QUEUE_FACTOR`` × workers).
    ``max_body_mb``: largest request body, MiB (default ``RLVR_SANDBOX_MAX_BODY_MB``, 32); larger bodies get 413
    before they are read (``Content-Length``) or as soon as the streamed bytes pass it. ``tune_gc``: move the
    process's full garbage collections to idle moments (:class:`~rlvr.judge.api.collector.Collector`; process-wide,
    so only for a server that owns its process); default: when the app owns its judge (``judge=None``, the
    :func:`serve` path). ``max_bodies``: request bodies read or held at once (default ``RLVR_SANDBOX_MAX_BODIES``,
    else workers + ``max_queue``); a gated request beyond it is answered 503 before its body is read.
    ``body_timeout_s``: seconds a gated request's body may take to arrive once admitted (default
    ``RLVR_SANDBOX_BODY_TIMEOUT_S``, 60; past it: 408). ``metrics_verdicts`` / ``metrics_token``: who sees the
    verdict counters in ``/metrics`` (defaults ``RLVR_SANDBOX_METRICS_VERDICTS``, ``RLVR_SANDBOX_METRICS_TOKEN``;
    :class:`~rlvr.judge.api.metrics.Metrics`). Raises ``ValueError`` naming the setting for a limit out of range."""
    import os

    from rlvr.config import RuntimeSettings

    settings = RuntimeSettings()
    n = workers or getattr(judge, "workers", None) or settings.sandbox_workers or os.cpu_count() or 1
    if max_queue is None:
        max_queue = settings.sandbox_max_queue
    if max_queue is None:
        max_queue = math.ceil(settings.sandbox_queue_factor * n)
    if max_bodies is None:
        max_bodies = settings.sandbox_max_bodies
    gate = AdmissionGate(int(n), int(max_queue), settings.sandbox_retry_after_max_s, max_bodies)
    body_mb = settings.sandbox_max_body_mb if max_body_mb is None else max_body_mb
    max_body = int(body_mb * (1 << 20))
    body_timeout_s = settings.sandbox_body_timeout_s if body_timeout_s is None else body_timeout_s
    if not (math.isfinite(body_timeout_s) and body_timeout_s > 0):
        raise ValueError(f"RLVR_SANDBOX_BODY_TIMEOUT_S: expected a positive number of seconds, got {body_timeout_s!r}")
    metrics = Metrics(
        gate, settings.sandbox_metrics_verdicts if metrics_verdicts is None else metrics_verdicts,
        settings.sandbox_metrics_token if metrics_token is None else metrics_token,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio.to_thread

        limiter = anyio.to_thread.current_default_thread_limiter()  # never the bottleneck below the gate
        limiter.total_tokens = max(limiter.total_tokens, gate.workers + 8)
        owned = None
        app.state.executor = ThreadPoolExecutor(gate.workers + 2, thread_name_prefix="rlvr-judge-http")
        if app.state.collector is not None:
            app.state.collector.install()
        if app.state.judge is None:
            from rlvr.judge import Judge
            from rlvr.judge.sandbox import enable_child_subreaper

            enable_child_subreaper()  # orphaned sandbox processes come back here to be reaped, not to PID 1
            owned = app.state.judge = await run_in_threadpool(Judge)
        try:
            yield
        finally:
            if owned is not None:
                await run_in_threadpool(owned.close)
                app.state.judge = None
            app.state.executor.shutdown(wait=False)
            app.state.executor = None

    app = FastAPI(
        title="rlvr judge", description="SandboxFusion/ScaleBox-compatible code judge", lifespan=lifespan
    )
    app.state.judge = judge
    app.state.gate = gate
    app.state.executor = None  # the judging threads (admission.off_loop), while the lifespan runs
    app.state.collector = Collector() if (judge is None if tune_gc is None else tune_gc) else None
    app.state.metrics = metrics
    app.state.body_timeout_s = float(body_timeout_s)

    @app.exception_handler(Saturated)
    async def _saturated(request: Request, exc: Saturated) -> JSONResponse:
        metrics.rejected.labels(request.url.path).inc()
        headers = {"Retry-After": str(exc.retry_after_s)}
        if exc.close:  # the body was not read: the connection cannot carry another request
            headers["Connection"] = "close"
        return SafeJSONResponse(status_code=503, content={"detail": str(exc)}, headers=headers)

    @app.get("/metrics")
    async def prometheus_metrics(request: Request) -> Response:
        """Prometheus text exposition (see :mod:`rlvr.judge.api.metrics` for the metric names; the verdict counters
        only for whom :meth:`~rlvr.judge.api.metrics.Metrics.shows_verdicts` allows)."""
        from prometheus_client import CONTENT_TYPE_LATEST

        verdicts = metrics.shows_verdicts(request.headers.get("authorization"))
        return Response(content=metrics.exposition(verdicts), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(BadRequest)
    async def _bad_request(_: Request, exc: BadRequest) -> JSONResponse:
        return SafeJSONResponse(status_code=400, content={"detail": str(exc)})

    @app.exception_handler(Infrastructure)
    async def _infrastructure(_: Request, exc: Infrastructure) -> JSONResponse:
        return SafeJSONResponse(status_code=500, content={"detail": f"sandbox_error: {exc}"[:2000]})

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return SafeJSONResponse(status_code=422, content=validation_content(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return SafeJSONResponse(status_code=exc.status_code, content={"detail": exc.detail}, headers=exc.headers)

    for api in (sandboxfusion, scalebox, native, datasets):
        app.include_router(api.router)
    lane = {r.path: r.endpoint for api in (sandboxfusion, scalebox, native) for r in api.router.routes
            if isinstance(r, APIRoute) and r.path in GATED and "POST" in r.methods}  # included without a prefix
    app.add_middleware(GatedLane, fastapi_app=app, endpoints=lane)
    app.add_middleware(Observe, metrics=metrics)
    app.add_middleware(BodyLimit, max_bytes=max_body)  # outermost: before anything reads the body
    return app


class Observe:
    """ASGI middleware: per request, the Prometheus counters and latency histogram, the JSON log line (gated
    endpoints and errors), and the echo of an ``X-Request-ID`` header the request carried (when the answer has none).

    A plain ASGI middleware rather than Starlette's ``BaseHTTPMiddleware`` (``@app.middleware("http")``), which runs
    the rest of the app in a task of its own and relays the answer through a memory stream: about a fifth of the
    server's CPU per request on ``/common_evaluate_batch``. The status is read from the answer's start message; an
    exception out of the app counts (and is logged) as 500, as the server's error middleware answers it. A request
    whose ``X-Request-ID`` is not 1–128 printable ASCII characters (:func:`~rlvr.judge.api.common.check_request_id`)
    is answered 400 here, before the app (and any judging) sees it: such an id could not be echoed."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve the request through the app and record it (class docstring)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.monotonic()
        path = scope["path"]
        endpoint = path if path in _ENDPOINTS else "other"
        rid = next((v for k, v in scope["headers"] if k == _RID), None)
        status = 500
        if rid is not None and (bad := check_request_id(rid)) is not None:  # before anything runs
            rid = None
            app: Any = SafeJSONResponse(status_code=400, content={"detail": bad})
        else:
            app = self.app

        async def observed_send(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if rid is not None:
                    headers = list(message.get("headers") or ())
                    if not any(k.lower() == _RID for k, _ in headers):
                        headers.append((_RID, rid))
                        message = {**message, "headers": headers}
            await send(message)

        metrics = self.metrics
        try:
            await app(scope, receive, observed_send)
        finally:
            dt = time.monotonic() - t0
            st = scope.get("state") or {}
            verdict, wait = st.get("verdict"), st.get("queue_wait_s")
            metrics.requests.labels(endpoint, str(status)).inc()
            if endpoint != "/metrics":
                metrics.duration.labels(endpoint).observe(dt)
            if verdict is not None:
                metrics.verdicts.labels(endpoint, str(verdict)).inc()
            if endpoint in GATED or status >= 400:
                log.info(
                    "request",
                    extra={"endpoint": endpoint, "method": scope.get("method"), "status": status, "verdict": verdict,
                           "duration_s": round(dt, 6), "queue_wait_s": None if wait is None else round(wait, 6)},
                )


_RID = REQUEST_ID_HEADER.lower().encode("latin-1")


class GatedLane:
    """ASGI middleware, innermost: a ``POST`` to a gated endpoint (:data:`GATED`) goes straight to that endpoint's
    function (``endpoints``: path → function, from the routers of :mod:`~rlvr.judge.api.sandboxfusion`,
    :mod:`~rlvr.judge.api.scalebox` and :mod:`~rlvr.judge.api.native`), its exceptions to the app's exception
    handlers; every other request goes on to the app's router.

    What it leaves out is what these endpoints do not use: route matching over every route, FastAPI's
    ``request_response`` wrapper (an exit stack for dependencies with ``yield``, dependency solving, background
    tasks) and Starlette's exception middleware, whose handler lookup (the exception's MRO against the app's
    ``exception_handlers``) is done here the same way. Each gated endpoint takes only the request (a
    :class:`~rlvr.judge.api.common.BoundedJSONRequest`, as its route class gives it) and returns a ``Response``
    (no response-model validation applies), so its answer is the same either way; the lane saves ~0.4 ms of the
    server's CPU per request (``bench/judge/bench_judge.py``, system ``served``)."""

    def __init__(self, app: Any, fastapi_app: FastAPI, endpoints: dict[str, Any]) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        self.endpoints = endpoints  # path -> the endpoint function of its route

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve a gated ``POST`` here, anything else through the app (class docstring)."""
        endpoint = None
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            endpoint = self.endpoints.get(scope["path"])
        if endpoint is None:
            await self.app(scope, receive, send)
            return
        request = BoundedJSONRequest(scope, receive)
        try:
            response = await endpoint(request)
        except Exception as exc:
            handlers = self.fastapi_app.exception_handlers
            # as Starlette's ExceptionMiddleware: the first class of the MRO with a handler; Exception itself (500)
            # is the server error middleware's, which the re-raise reaches
            handler = next((handlers[c] for c in type(exc).__mro__ if c in handlers and c is not Exception), None)
            if handler is None:
                raise
            response = await handler(request, exc)
        await response(scope, receive, send)


def configure_logging(level: str = "info") -> None:
    """Send logger ``rlvr.judge.server`` to stderr as JSON lines (:class:`JsonLogFormatter`), once."""
    if not any(isinstance(h.formatter, JsonLogFormatter) for h in log.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(JsonLogFormatter())
        log.addHandler(handler)
    log.setLevel(level.upper())
    log.propagate = False


def serve(host: str = "127.0.0.1", port: int = 8080, workers: int = 1, log_level: str = "info") -> None:
    """Run the server with uvicorn (blocks). ``workers`` > 1 starts that many processes, each with its own embedded
    judge of ``RLVR_SANDBOX_WORKERS`` sandboxes, admission gate and metrics registry (uvicorn's app-factory mode).
    Request logs are JSON lines (:func:`configure_logging`); uvicorn's access log is off. The open-file soft limit is
    raised to the hard limit first, and uvicorn runs behind the front door
    (:func:`rlvr.judge.api.frontdoor.uvicorn_options`: connection limit, header cap and deadline, keep-alive)."""
    import uvicorn

    from rlvr.judge.api.frontdoor import raise_nofile_limit, uvicorn_options

    configure_logging(log_level)
    raise_nofile_limit()  # before the connection limit's default is derived from it
    uvicorn.run(
        "rlvr.judge.api.app:create_app", factory=True, host=host, port=port, workers=workers, log_level=log_level,
        access_log=False, **uvicorn_options(),
    )
