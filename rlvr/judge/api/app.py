"""The judge server's one app factory (:func:`create_app`), its structured logs and :func:`serve`.

Endpoints, by wire API: :mod:`rlvr.judge.api.sandboxfusion` (``GET /v1/ping``, ``POST /run_code``),
:mod:`rlvr.judge.api.scalebox` (``POST /common_evaluate_batch``), :mod:`rlvr.judge.api.native` (``/rlvr/*``), plus
``GET /metrics`` (:mod:`rlvr.judge.api.metrics`). Backpressure: :mod:`rlvr.judge.api.admission`. Input limits
(4xx naming the field, 413 for bodies over ``RLVR_SANDBOX_MAX_BODY_MB``): :mod:`rlvr.judge.api.limits`. Every answer
is UTF-8-safe JSON (:class:`~rlvr.judge.api.common.SafeJSONResponse`); errors: 400/413/422 for the request, 503 +
``Retry-After`` when saturated, 500 ``sandbox_error: …`` only when the judge itself fails.

Structured logs: one JSON line per request on logger ``rlvr.judge.server`` (``endpoint``, ``method``, ``status``,
``verdict``, ``duration_s``, ``queue_wait_s``); :func:`serve` installs :class:`JsonLogFormatter` on it and turns
uvicorn's own access log off. The event loop never works on request content: a gated endpoint's body is parsed,
its problem built, judged, answered and rendered after admission in Starlette's thread pool
(:func:`rlvr.judge.api.admission.admitted`), and a server that owns its process moves full garbage collections to
idle moments (:class:`rlvr.judge.api.admission.Collector`), so ``/v1/ping`` stays fast under hostile load. Run
with :func:`serve` (``rlvr sandbox serve``); configuration only through ``RLVR_*`` variables
(:class:`rlvr.config.RuntimeSettings`).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from rlvr.judge.api import datasets, native, sandboxfusion, scalebox
from rlvr.judge.api.admission import AdmissionGate, Collector, Infrastructure, Saturated
from rlvr.judge.api.common import REQUEST_ID_HEADER, BadRequest, SafeJSONResponse
from rlvr.judge.api.limits import BodyLimit
from rlvr.judge.api.metrics import Metrics

__all__ = ["JsonLogFormatter", "configure_logging", "create_app", "serve", "validation_content"]

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
    tune_gc: bool | None = None,
) -> FastAPI:
    """The FastAPI application serving ``judge`` (see the module docstring for the endpoints).

    ``judge``: an object with the :class:`rlvr.judge.Judge` methods; ``None`` = an embedded ``Judge()`` created at
    startup and closed at shutdown (``RLVR_SANDBOX_WORKERS`` sandboxes). ``workers``: concurrent judge calls (default:
    ``judge.workers``, else ``RLVR_SANDBOX_WORKERS`` or the CPU count). ``max_queue``: requests that may wait for a
    worker before 503 (default ``RLVR_SANDBOX_MAX_QUEUE``, else ``RLVR_SANDBOX_QUEUE_FACTOR`` × workers).
    ``max_body_mb``: largest request body, MiB (default ``RLVR_SANDBOX_MAX_BODY_MB``, 32); larger bodies get 413
    before they are read (``Content-Length``) or as soon as the streamed bytes pass it. ``tune_gc``: move the
    process's full garbage collections to idle moments (:class:`~rlvr.judge.api.admission.Collector`; process-wide,
    so only for a server that owns its process); default: when the app owns its judge (``judge=None``, the
    :func:`serve` path)."""
    import os

    from rlvr.config import RuntimeSettings

    settings = RuntimeSettings()
    n = workers or getattr(judge, "workers", None) or settings.sandbox_workers or os.cpu_count() or 1
    if max_queue is None:
        max_queue = settings.sandbox_max_queue
    if max_queue is None:
        max_queue = math.ceil(settings.sandbox_queue_factor * n)
    gate = AdmissionGate(int(n), int(max_queue), settings.sandbox_retry_after_max_s)
    body_mb = settings.sandbox_max_body_mb if max_body_mb is None else max_body_mb
    max_body = int(body_mb * (1 << 20))
    metrics = Metrics(gate)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio.to_thread

        limiter = anyio.to_thread.current_default_thread_limiter()  # never the bottleneck below the gate
        limiter.total_tokens = max(limiter.total_tokens, gate.workers + 8)
        owned = None
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

    app = FastAPI(
        title="rlvr judge", description="SandboxFusion/ScaleBox-compatible code judge", lifespan=lifespan
    )
    app.state.judge = judge
    app.state.gate = gate
    app.state.collector = Collector() if (judge is None if tune_gc is None else tune_gc) else None
    app.state.metrics = metrics

    @app.middleware("http")
    async def _observe(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        t0 = time.monotonic()
        path = request.url.path
        endpoint = path if path in _ENDPOINTS else "other"
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            rid = request.headers.get(REQUEST_ID_HEADER)
            if rid is not None and REQUEST_ID_HEADER not in response.headers:
                response.headers[REQUEST_ID_HEADER] = rid[:128]
            return response
        finally:
            dt = time.monotonic() - t0
            st = request.scope.get("state") or {}
            verdict, wait = st.get("verdict"), st.get("queue_wait_s")
            metrics.requests.labels(endpoint, str(status)).inc()
            if endpoint != "/metrics":
                metrics.duration.labels(endpoint).observe(dt)
            if verdict is not None:
                metrics.verdicts.labels(endpoint, str(verdict)).inc()
            if endpoint in GATED or status >= 400:
                log.info(
                    "request",
                    extra={"endpoint": endpoint, "method": request.method, "status": status, "verdict": verdict,
                           "duration_s": round(dt, 6), "queue_wait_s": None if wait is None else round(wait, 6)},
                )

    @app.exception_handler(Saturated)
    async def _saturated(request: Request, exc: Saturated) -> JSONResponse:
        metrics.rejected.labels(request.url.path).inc()
        return SafeJSONResponse(
            status_code=503, content={"detail": str(exc)}, headers={"Retry-After": str(exc.retry_after_s)}
        )

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        """Prometheus text exposition (see the module docstring for the metric names)."""
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(content=metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

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
    app.add_middleware(BodyLimit, max_bytes=max_body)  # outermost: before anything reads the body
    return app


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
    Request logs are JSON lines (:func:`configure_logging`); uvicorn's access log is off."""
    import uvicorn

    configure_logging(log_level)
    uvicorn.run(
        "rlvr.judge.api.app:create_app", factory=True, host=host, port=port, workers=workers, log_level=log_level,
        access_log=False,
    )
