"""Bounded admission for judge calls: at most ``workers`` run, at most ``max_queue`` wait, the rest get 503.

The judging endpoints pass an :class:`AdmissionGate`: at most ``workers`` judge calls run at once (the judge's sandbox
count), at most ``max_queue`` more wait for a worker (``RLVR_SANDBOX_MAX_QUEUE``, default ``RLVR_SANDBOX_QUEUE_FACTOR``
× workers); beyond that the server answers **503** with a ``Retry-After`` header (delay-seconds, RFC 9110 §10.2.3: the
estimated time to drain the queue from the recent mean service time, 1 s to ``RLVR_SANDBOX_RETRY_AFTER_MAX_S``)
instead of queueing without bound. :class:`~rlvr.judge.client.RemoteJudge` honours it. Not gated: ``/v1/ping``,
``/rlvr/info``, ``/metrics``.

Admitted calls run in Starlette's thread pool (:func:`admitted_call`), so the event loop keeps serving while a judge
call (sandbox run, output comparison, literal parsing of returned values) is under way.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from rlvr.judge.api.common import BadRequest, is_python, the_judge
from rlvr.judge.verdict import JudgeResult, TestResult, summarise

__all__ = ["AdmissionGate", "Infrastructure", "Saturated", "admitted_call", "judge_submission"]

log = logging.getLogger("rlvr.judge.server")


class Saturated(Exception):
    """The server is saturated (every worker busy, the queue full): answered 503 with ``Retry-After``.

    ``retry_after_s``: suggested integer delay, seconds."""

    def __init__(self, retry_after_s: int, running: int, waiting: int) -> None:
        super().__init__(f"judge saturated: {running} running, {waiting} queued; retry after {retry_after_s} s")
        self.retry_after_s = retry_after_s


class AdmissionGate:
    """Bounded admission for judge calls, used from the event loop only (no locks needed).

    At most ``workers`` holders at once; up to ``max_queue`` more wait (FIFO) for a slot; a call beyond that raises
    :class:`Saturated` at once. ``retry_after_max_s`` caps the suggested delay, seconds. The suggested delay is
    ``ceil(mean service time × (queued + 1) / workers)`` (exponentially weighted mean, α = 0.2), at least 1 s."""

    def __init__(self, workers: int, max_queue: int, retry_after_max_s: int = 30) -> None:
        if workers < 1 or max_queue < 0:
            raise ValueError(f"AdmissionGate: workers must be >= 1 and max_queue >= 0, got {workers}, {max_queue}")
        self.workers = workers
        self.max_queue = max_queue
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


async def admitted_call(request: Request, method: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``judge.<method>(*args, **kwargs)`` of ``request``'s app in the thread pool once the app's gate admits the
    request; records the queue wait on ``request.state.queue_wait_s`` and in the metrics. Raises :class:`Saturated`
    (answered 503) when the queue is full, and whatever the judge method raises."""
    fn = getattr(the_judge(request), method)
    state = request.app.state
    async with state.gate.slot() as wait_s:
        request.state.queue_wait_s = wait_s
        state.metrics.queue_wait.observe(wait_s)
        return await run_in_threadpool(fn, *args, **kwargs)


class Infrastructure(Exception):
    """The judge itself failed (sandbox pool closed or unusable): answered 500 ``{"detail": "sandbox_error: …"}``,
    which :class:`~rlvr.judge.client.RemoteJudge` reads as verdict ``sandbox_error``."""


async def judge_submission(request: Request, problem: Any, code: str, language: str, field: str) -> JudgeResult:
    """``judge.judge(problem, code[, language])`` through :func:`admitted_call`, for the judging endpoints.

    Whatever the submission produced gets a verdict, never a 500: an exception other than an infrastructure failure
    raised while judging (e.g. the comparison of a forged return value overflowing) is logged with its traceback and
    answered as ``wrong_answer`` on every test, with a message naming the exception — the submission's output could
    not be scored, so it is not accepted, and it is not ``sandbox_error`` (which the rewards leave out of training).
    Raises :class:`BadRequest` naming ``field`` for a language the judge cannot run, :class:`Infrastructure` for
    ``SandboxError`` / ``RuntimeError`` / ``OSError`` (the judge, not the submission, failed), :class:`Saturated`."""
    from rlvr.judge.languages import UnknownLanguageError
    from rlvr.judge.sandbox import SandboxError

    args: tuple[Any, ...] = (problem, code) if is_python(language) else (problem, code, language)
    try:
        return await admitted_call(request, "judge", *args)
    except (Saturated, BadRequest):
        raise
    except UnknownLanguageError as exc:
        raise BadRequest(f"field '{field}': {exc}") from exc
    except RecursionError as exc:  # a RuntimeError, but raised by what the submission returned
        return _unscorable(problem, exc)
    except (SandboxError, RuntimeError, OSError) as exc:
        raise Infrastructure(f"{type(exc).__name__}: {exc}"[:2000]) from exc
    except Exception as exc:
        return _unscorable(problem, exc)


def _unscorable(problem: Any, exc: BaseException) -> JudgeResult:
    log.error("judge raised while scoring %s", getattr(problem, "id", "?"), exc_info=exc)
    msg = f"the judge could not score this submission's output ({type(exc).__name__}: {exc})"[:2000]
    tests = [TestResult(index=i, verdict="wrong_answer", message=msg) for i in range(len(problem.tests))]
    return summarise(tests, 0.0, msg)
