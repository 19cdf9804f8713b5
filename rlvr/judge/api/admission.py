"""Bounded admission for judge calls: at most ``workers`` run, at most ``max_queue`` wait, the rest get 503.

The judging endpoints pass an :class:`AdmissionGate`: at most ``workers`` judge calls run at once (the judge's sandbox
count), at most ``max_queue`` more wait for a worker (``RLVR_SANDBOX_MAX_QUEUE``, default ``RLVR_SANDBOX_QUEUE_FACTOR``
× workers); beyond that the server answers **503** with a ``Retry-After`` header (delay-seconds, RFC 9110 §10.2.3: the
estimated time to drain the queue from the recent mean service time, 1 s to ``RLVR_SANDBOX_RETRY_AFTER_MAX_S``)
instead of queueing without bound. :class:`~rlvr.judge.client.RemoteJudge` honours it. Not gated: ``/v1/ping``,
``/rlvr/info``, ``/metrics``.

Admission starts before the body is read: a gated request first takes one of ``RLVR_SANDBOX_MAX_BODIES`` body places
(:meth:`AdmissionGate.body_place`; none free, or the queue full: 503 with ``Connection: close``, the body unread), and
its body must then arrive within ``RLVR_SANDBOX_BODY_TIMEOUT_S`` (else 408), so request bodies in memory are bounded
by places × ``RLVR_SANDBOX_MAX_BODY_MB`` and a slow sender holds a place for a bounded time. A server out of file
descriptors answers 503 too (:class:`OutOfDescriptors`), never ``sandbox_error``.

The event loop never works on request content. A gated endpoint (:func:`admitted`) only receives the body's bytes on
the loop (bounded by ``RLVR_SANDBOX_MAX_BODY_MB``, never parsed there), waits for admission, and then runs
everything else in the app's judging threads (:func:`off_loop`): JSON decoding and schema validation, building the
problem (ScaleBox test cases, code-fence extraction, base64 files), the judge call (sandbox run, output comparison,
literal parsing of returned values, checkers), building the answer and rendering it to JSON bytes. The loop then
only sends those bytes. So one tenant's request, however large or hostile, costs other clients (``/v1/ping``
included) at most the interpreter's thread switch interval per step, plus the longest single C-level call of that
work, which is kept short: test lists are validated, long lists and strings rendered and the request's objects freed
a chunk at a time (:mod:`rlvr.judge.api.common`), large answers leave in pieces, and
:class:`~rlvr.judge.api.collector.Collector` keeps full garbage collections off busy moments (``docs/judge/api.md``,
"The event loop never works on request content"). Consequence: a malformed request (400/422) is answered only once
admitted, and a saturated server answers 503 before looking at the body.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import functools
import logging
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from rlvr.judge.api.common import SMALL, BadRequest, Rendered, is_python, render_json, shed, the_judge
from rlvr.judge.verdict import JudgeResult, TestResult, summarise

__all__ = [
    "FD_RETRY_AFTER_S", "REPORT_CHARS", "AdmissionGate", "Answer", "Infrastructure", "OutOfDescriptors",
    "Saturated", "admitted", "admitted_call", "judge_program", "off_loop", "out_of_descriptors",
]

#: Upper estimate of one test's share of a judging answer, characters: its report (stdout ≤ 1,000, stderr ≤ 2,000,
#: message ≤ 2,000 characters, :mod:`rlvr.judge.scoring`) twice (ScaleBox copies it into ``exec_info``) plus the
#: fields. Used for :attr:`Answer.size_hint` (text before JSON escaping, which may grow control characters 6×).
REPORT_CHARS = 2 * 5000 + 500

log = logging.getLogger("rlvr.judge.server")


class Saturated(Exception):
    """The server is saturated (every worker busy, the queue full, or every body place taken): answered 503 with
    ``Retry-After``.

    ``retry_after_s``: suggested integer delay, seconds. ``close``: the request's body was not read, so the answer
    closes the connection. ``detail``: the message (default: the gate's state)."""

    def __init__(self, retry_after_s: int, running: int = 0, waiting: int = 0, close: bool = False,
                 detail: str | None = None) -> None:
        state = f"judge saturated: {running} running, {waiting} queued; retry after {retry_after_s} s"
        super().__init__(detail or state)
        self.retry_after_s = retry_after_s
        self.close = close


#: ``Retry-After`` of a request refused because the server ran out of file descriptors, seconds.
FD_RETRY_AFTER_S = 5


class OutOfDescriptors(Saturated):
    """The server process ran out of file descriptors (``EMFILE``/``ENFILE``) while serving an admitted request: a
    server-side shortage like a full queue, answered 503 with ``Retry-After`` (:data:`FD_RETRY_AFTER_S`), never
    ``sandbox_error`` (a verdict the rewards would read as the judge failing on this submission)."""

    def __init__(self, what: str) -> None:
        super().__init__(FD_RETRY_AFTER_S, detail=f"judge out of file descriptors ({what}); retry after "
                                                  f"{FD_RETRY_AFTER_S} s")


_FD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
_FD_TEXT = re.compile(rf"\[Errno (?:{errno.EMFILE}|{errno.ENFILE})\]|Too many open files")


def out_of_descriptors(exc: BaseException | None = None, text: str = "") -> bool:
    """True when ``exc`` (or an exception it was raised from or during) is an ``OSError`` with ``EMFILE`` or
    ``ENFILE``, or when ``text`` (a ``sandbox_error`` message, which carries the host-side exception's text) says so
    (``[Errno 24]``, ``[Errno 23]``, "Too many open files")."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _FD_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
    return bool(text) and _FD_TEXT.search(text) is not None


class AdmissionGate:
    """Bounded admission for judge calls, used from the event loop only (no locks needed).

    At most ``workers`` holders at once; up to ``max_queue`` more wait (FIFO) for a slot; a call beyond that raises
    :class:`Saturated` at once. ``retry_after_max_s`` caps the suggested delay, seconds. The suggested delay is
    ``ceil(mean service time × (queued + 1) / workers)`` (exponentially weighted mean, α = 0.2), at least 1 s.

    Before that, a request's body needs a place (:meth:`body_place`): at most ``max_bodies`` bodies are being read or
    held (waiting or judged) at once (default ``workers + max_queue``, every body the gate could hold), so at most
    ``max_bodies × RLVR_SANDBOX_MAX_BODY_MB`` of request bodies are in memory; a request beyond it, or arriving while
    the queue is full, is refused before its body is read. Raises ``ValueError`` for ``workers < 1``,
    ``max_queue < 0`` or ``max_bodies < 1``."""

    def __init__(
        self, workers: int, max_queue: int, retry_after_max_s: int = 30, max_bodies: int | None = None
    ) -> None:
        if max_bodies is None:
            max_bodies = workers + max_queue
        if workers < 1 or max_queue < 0 or max_bodies < 1:
            raise ValueError(f"AdmissionGate: workers must be >= 1, max_queue >= 0 and max_bodies "
                             f"(RLVR_SANDBOX_MAX_BODIES) >= 1, got {workers}, {max_queue}, {max_bodies}")
        self.workers = workers
        self.max_queue = max_queue
        self.max_bodies = max_bodies
        self.bodies = 0
        self.retry_after_max_s = max(1, retry_after_max_s)
        self.running = 0
        self.mean_service_s = 1.0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Requests currently queued for a worker."""
        return sum(1 for f in self._waiters if not f.done())

    def retry_after(self) -> int:
        """Suggested ``Retry-After`` (integer seconds, 1 … ``retry_after_max_s``)."""
        est = self.mean_service_s * (self.waiting + 1) / self.workers
        return int(min(self.retry_after_max_s, max(1, math.ceil(est))))

    @contextmanager
    def body_place(self) -> Iterator[None]:
        """Hold one of the ``max_bodies`` places for a request body while it is read, queued and judged. Raises
        :class:`Saturated` (with ``close``: the body stays unread) when every place is taken or the queue is full."""
        if self.bodies >= self.max_bodies or (self.running >= self.workers and self.waiting >= self.max_queue):
            raise Saturated(self.retry_after(), self.running, self.waiting, close=True)
        self.bodies += 1
        try:
            yield
        finally:
            self.bodies -= 1

    def _release(self) -> None:
        while self._waiters:  # hand the slot straight to the oldest waiter (``running`` unchanged)
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self.running -= 1

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold one worker slot; yields the seconds spent queued. Raises :class:`Saturated` when full."""
        t0 = time.monotonic()
        if self.running < self.workers and not self.waiting:
            self.running += 1
        elif self.waiting >= self.max_queue:
            raise Saturated(self.retry_after(), self.running, self.waiting)
        else:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():  # the slot was handed over just before the cancel
                    self._release()
                raise
        start = time.monotonic()
        try:
            yield start - t0
        finally:
            self.mean_service_s = 0.8 * self.mean_service_s + 0.2 * (time.monotonic() - start)
            self._release()


async def off_loop(request: Request, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in one of the app's judging threads (``app.state.executor``, a thread pool of the gate's
    workers + 2: an admitted call holds a gate slot, so there is always a free thread), in a copy of the caller's
    context, as ``asyncio.to_thread`` does; where the app has no such pool, in Starlette's (anyio's) thread pool.
    The app's own pool costs ~0.1 ms less CPU per request than anyio's worker-thread hand-off (limiter, cancel
    scopes)."""
    executor = getattr(request.app.state, "executor", None)
    if executor is None:
        return await run_in_threadpool(fn, *args)
    ctx = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(ctx.run, fn, *args))


async def admitted_call(request: Request, method: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``judge.<method>(*args, **kwargs)`` of ``request``'s app in the thread pool once the app's gate admits the
    request; records the queue wait on ``request.state.queue_wait_s`` and in the metrics. Raises :class:`Saturated`
    (answered 503) when the queue is full, and whatever the judge method raises."""
    fn = getattr(the_judge(request), method)
    state = request.app.state
    async with state.gate.slot() as wait_s:
        request.state.queue_wait_s = wait_s
        state.metrics.queue_wait.observe(wait_s)
        return await off_loop(request, functools.partial(fn, *args, **kwargs))


@dataclass
class Answer:
    """What an admitted endpoint's work returns (built off the event loop): ``content`` (a pydantic model or plain
    JSON values), HTTP ``status``, extra ``headers``, the ``verdict`` to log and count (None: not a judgement) and
    ``keep``: the request's large intermediate objects (parsed request, problem, judge result), handed over so that
    they are freed a chunk at a time (:func:`rlvr.judge.api.common.shed`) rather than in one long C call; and
    ``size_hint``: an upper estimate of the rendered answer's length in characters, which lets a small answer be
    rendered in one call (:func:`rlvr.judge.api.common.render_json`; ``None`` = unknown)."""

    content: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    verdict: str | None = None
    keep: tuple[Any, ...] = ()
    size_hint: int | None = None


async def admitted(request: Request, work: Callable[[bytes, Any], Answer]) -> Response:
    """Serve a gated endpoint without working on its content on the event loop (see the module docstring).

    Takes a body place (:meth:`AdmissionGate.body_place`) before reading anything, receives ``request``'s body as
    bytes (no parsing) within the app's ``body_timeout_s`` (408 and the connection closed past it), waits for the
    app's gate to admit the request (records the queue wait on ``request.state.queue_wait_s`` and in the metrics),
    then calls ``work(body, judge)`` in the thread pool and renders its :class:`Answer` to JSON bytes there too.
    Raises :class:`Saturated` (answered 503) when no body place is free or the queue is full,
    :class:`OutOfDescriptors` (503) when serving it ran out of file descriptors, and whatever ``work`` raises
    (``BadRequest`` → 400, ``RequestValidationError`` → 422, ``HTTPException``, :class:`Infrastructure` → 500)."""
    from starlette.requests import ClientDisconnect

    state = request.app.state
    with state.gate.body_place():  # admission before the body is read: a bounded number of bodies in memory
        timeout_s = getattr(state, "body_timeout_s", None)
        try:
            async with asyncio.timeout(timeout_s):
                body = await request.body()
        except ClientDisconnect:  # gone, or cut off by BodyLimit (which has answered 413 already): nothing to judge
            return Response(status_code=400)
        except TimeoutError:
            detail = f"request body not received within {timeout_s:g} s (RLVR_SANDBOX_BODY_TIMEOUT_S)"
            return Rendered(content=render_json({"detail": detail}), status_code=408, headers={"Connection": "close"})
        return await _admitted_body(request, body, work)


async def _admitted_body(request: Request, body: bytes, work: Callable[[bytes, Any], Answer]) -> Response:
    judge = the_judge(request)
    state = request.app.state

    def run() -> tuple[bytes, int, dict[str, str], str | None]:
        # only the rendered bytes leave this thread: the request's object trees (parsed body, problem, results,
        # answer model) are freed here, not on the event loop, where freeing a million objects takes ~0.3 s
        try:
            answer = work(body, judge)
            if answer.verdict == "sandbox_error" and out_of_descriptors(text=_message(answer.content)):
                raise OutOfDescriptors("the judge's sandbox_error says so")
        except Exception as exc:  # drop the frames (and the request's objects they hold) here, not on the loop
            if not isinstance(exc, Saturated) and out_of_descriptors(exc):
                raise OutOfDescriptors(f"{type(exc).__name__}: {exc}"[:300]) from None
            cause: BaseException | None = exc
            seen: set[int] = set()
            while cause is not None and id(cause) not in seen:
                seen.add(id(cause))
                cause.__traceback__ = None
                cause = cause.__cause__ or cause.__context__
            raise
        data = render_json(answer.content, answer.size_hint)
        if len(body) > SMALL or answer.size_hint is None or answer.size_hint > SMALL:  # else too small to matter
            shed(answer.content, *answer.keep)
        return data, answer.status, answer.headers, answer.verdict

    async with state.gate.slot() as wait_s:
        request.state.queue_wait_s = wait_s
        state.metrics.queue_wait.observe(wait_s)
        data, status, headers, verdict = await off_loop(request, run)
    collector = getattr(state, "collector", None)
    if collector is not None and collector.due(state.gate.running):
        await off_loop(request, collector.collect)
    if verdict is not None:
        request.state.verdict = verdict
    if len(data) <= _PIECE:
        return Rendered(content=data, status_code=status, headers=headers or None)
    # a large answer (16 MB of a program's output) goes out a piece per loop turn: each copy the server's layers make
    # of it then takes well under a millisecond of the loop, not ~20 ms per copy of the whole
    headers = {**headers, "content-length": str(len(data))}
    return StreamingResponse(_pieces(data), status_code=status, headers=headers, media_type="application/json")


_PIECE = 1 << 20


def _message(content: Any) -> str:
    """The failure text of an answer's content: a judge result's ``message`` or a SandboxFusion answer's."""
    msg = getattr(content, "message", None)
    if msg is None and isinstance(content, dict):
        msg = content.get("message") or content.get("detail")
    return msg if isinstance(msg, str) else ""


async def _pieces(data: bytes) -> AsyncIterator[bytes]:
    view = memoryview(data)
    for i in range(0, len(data), _PIECE):
        yield bytes(view[i:i + _PIECE])


class Infrastructure(Exception):
    """The judge itself failed (sandbox pool closed or unusable): answered 500 ``{"detail": "sandbox_error: …"}``,
    which :class:`~rlvr.judge.client.RemoteJudge` reads as verdict ``sandbox_error``."""


def judge_program(judge: Any, problem: Any, code: str, language: str, field: str) -> JudgeResult:
    """``judge.judge(problem, code[, language])`` for the judging endpoints; called in the thread pool, after admission
    (:func:`admitted`).

    Whatever the submission produced gets a verdict, never a 500: an exception other than an infrastructure failure
    raised while judging (e.g. the comparison of a forged return value overflowing) is logged with its traceback and
    answered as ``wrong_answer`` on every test, with a message naming the exception — the submission's output could
    not be scored, so it is not accepted, and it is not ``sandbox_error`` (which the rewards leave out of training).
    Raises :class:`BadRequest` naming ``field`` for a language the judge cannot run, :class:`OutOfDescriptors` (503)
    when the failure is the server's file descriptors running out, :class:`Infrastructure` for other
    ``SandboxError`` / ``RuntimeError`` / ``OSError`` (the judge, not the submission, failed)."""
    from rlvr.judge.languages import UnknownLanguageError
    from rlvr.judge.sandbox import SandboxError

    args: tuple[Any, ...] = (problem, code) if is_python(language) else (problem, code, language)
    try:
        return judge.judge(*args)
    except BadRequest:
        raise
    except UnknownLanguageError as exc:
        raise BadRequest(f"field '{field}': {exc}") from exc
    except RecursionError as exc:  # a RuntimeError, but raised by what the submission returned
        return _unscorable(problem, exc)
    except (SandboxError, RuntimeError, OSError) as exc:
        if out_of_descriptors(exc):
            raise OutOfDescriptors(f"{type(exc).__name__}: {exc}"[:300]) from exc
        raise Infrastructure(f"{type(exc).__name__}: {exc}"[:2000]) from exc
    except Exception as exc:
        return _unscorable(problem, exc)


def _unscorable(problem: Any, exc: BaseException) -> JudgeResult:
    log.error("judge raised while scoring %s", getattr(problem, "id", "?"), exc_info=exc)
    msg = f"the judge could not score this submission's output ({type(exc).__name__}: {exc})"[:2000]
    tests = [TestResult(index=i, verdict="wrong_answer", message=msg) for i in range(len(problem.tests))]
    return summarise(tests, 0.0, msg)
