"""Concurrent, bounded, fault-tolerant judging of a batch of completions (the reward layer's only judge caller).

A GRPO step is ``prompts × group size`` completions (e.g. 128 × 8 = 1,024, each with ~10 tests); they are judged
concurrently in requests of ``batch_size`` items (``judge.judge_many``), at most ``max_concurrency`` requests in flight.

Failure policy (the reward must never punish the policy for the infrastructure, and never let the policy escape a
failure through it; nothing raised here reaches the trainer):

* A program's own failure (wrong answer, crash, timeout, …) is a verdict, returned as is, **never retried**.
* Infrastructure — a transport error (``httpx.TransportError``, ``ConnectionError``, ``TimeoutError`` raised by a
  remote judge client), :class:`~rlvr.judge.sandbox.SandboxError` (judge unreachable, sandbox fails to start),
  ``RuntimeError`` (judge closed) or ``OSError`` — is retried up to ``max_retries`` times with exponential backoff
  (``retry_backoff_s · 2^attempt`` seconds), as is the judge's own ``sandbox_error`` verdict; what is still failing
  then reads as ``sandbox_error``.
* Any other exception raised while judging a request (e.g. the comparison of a forged return value overflowing, a
  rejected request) is the judge failing *on this submission*: the request's items are re-judged one by one so the
  others of the batch keep their verdicts, and an item whose judging still raises scores as ``wrong_answer`` (with the
  exception in ``message``, logged) — a failure, not ``sandbox_error``, so it cannot become an escape from a negative
  reward.
* A request still running after ``max(request_timeout_s, the judge's own bound)`` wall seconds is abandoned (its
  thread cannot be killed and finishes in the background) and reads as ``sandbox_error``: not retried, since a stuck
  judge is rarely unstuck by more load. The judge's own bound (:func:`judge_bound_s`: ``tests × (time limit + 2 s) +
  60 s`` per item, the embedded judge's hang timeout) keeps a slow but legal program from ever reaching it.

The judge object is duck-typed: anything with ``judge_many(items) -> list[JudgeResult]`` (``rlvr.judge.Judge``, the
remote client, a test fake).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rlvr.data.schema import Problem
from rlvr.judge.verdict import JudgeResult

__all__ = [
    "INFRA_ERRORS",
    "TRANSPORT_ERRORS",
    "JudgeLike",
    "ScoringOptions",
    "judge_all",
    "judge_all_async",
    "judge_bound_s",
    "sandbox_failure",
    "unscorable",
]

log = logging.getLogger(__name__)


class JudgeLike(Protocol):
    """What the reward layer needs of a judge (see ``rlvr.judge.Judge``)."""

    def judge_many(self, items: Sequence[tuple[Problem, str]]) -> list[JudgeResult]: ...


def _transport_errors() -> tuple[type[BaseException], ...]:
    errs: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:  # httpx is what the remote judge client speaks; importing it does not touch the network
        import httpx

        errs.append(httpx.TransportError)
    except ImportError:  # pragma: no cover - httpx is a hard dependency
        pass
    return tuple(errs)


TRANSPORT_ERRORS: tuple[type[BaseException], ...] = _transport_errors()


def _infra_errors() -> tuple[type[BaseException], ...]:
    from rlvr.judge.sandbox import SandboxError

    return (*TRANSPORT_ERRORS, SandboxError, OSError)


#: Exceptions that mean the judge's infrastructure failed (retried, then ``sandbox_error``). ``RuntimeError`` is
#: handled apart: its subclass ``RecursionError`` comes from what a submission returned.
INFRA_ERRORS: tuple[type[BaseException], ...] = _infra_errors()


def _is_infra(exc: BaseException) -> bool:
    return isinstance(exc, INFRA_ERRORS) or (isinstance(exc, RuntimeError) and not isinstance(exc, RecursionError))


def judge_bound_s(problem: Problem) -> float:
    """The embedded judge's own bound for one submission, wall seconds: ``tests × (time limit + 2 s) + 60 s``, plus
    the special checker's time when there is one (:func:`rlvr.judge.scoring.request_bound_s`)."""
    from rlvr.judge.scoring import request_bound_s

    return request_bound_s(problem)


@dataclass(frozen=True)
class ScoringOptions:
    """How to call the judge (where/how, not hyperparameters, hence not in ``params.yaml``).

    ``max_concurrency``: requests in flight (threads); ``batch_size``: items per ``judge_many`` request;
    ``request_timeout_s``: wall seconds after which a request is abandoned as ``sandbox_error``;
    ``max_retries``: extra attempts on transport errors / ``sandbox_error``; ``retry_backoff_s``: first backoff."""

    max_concurrency: int = 64
    batch_size: int = 1
    request_timeout_s: float = 300.0
    max_retries: int = 2
    retry_backoff_s: float = 0.5

    def __post_init__(self) -> None:
        if self.max_concurrency < 1 or self.batch_size < 1 or self.max_retries < 0 or self.request_timeout_s <= 0:
            raise ValueError(f"invalid ScoringOptions: {self}")


def sandbox_failure(message: str, n_tests: int = 0) -> JudgeResult:
    """A ``sandbox_error`` :class:`JudgeResult` standing for an infrastructure failure on the reward side."""
    return JudgeResult(verdict="sandbox_error", passed=0, total=n_tests, pass_ratio=0.0, judge_s=0.0, message=message)


def unscorable(problem: Problem, exc: BaseException) -> JudgeResult:
    """A ``wrong_answer`` :class:`JudgeResult` for a submission the judge raised on while scoring (logged)."""
    log.error("reward: the judge raised on a submission of %s; scored as a failure", problem.id, exc_info=exc)
    msg = f"reward: the judge could not score this submission ({type(exc).__name__}: {exc})"[:2000]
    return JudgeResult(verdict="wrong_answer", passed=0, total=len(problem.tests), pass_ratio=0.0, judge_s=0.0,
                       message=msg)


def _judge_isolated(judge: JudgeLike, chunk: list[tuple[Problem, str]]) -> list[JudgeResult]:
    """``judge_many(chunk)``; when it raises a non-infrastructure exception, each item alone (so one hostile item
    cannot take the others down), an item that still raises scoring as :func:`unscorable`. Raises infrastructure
    exceptions (:data:`INFRA_ERRORS`) for the caller to retry."""
    try:
        res = judge.judge_many(chunk)
    except Exception as exc:
        if _is_infra(exc):
            raise
        if len(chunk) == 1:
            return [unscorable(chunk[0][0], exc)]
        out = []
        for item in chunk:
            try:
                out.append(judge.judge_many([item])[0])
            except Exception as one:
                if _is_infra(one):
                    raise
                out.append(unscorable(item[0], one))
        return out
    if len(res) != len(chunk):
        raise RuntimeError(f"judge_many returned {len(res)} results for {len(chunk)} items")
    return list(res)


def _call_with_retries(judge: JudgeLike, chunk: list[tuple[Problem, str]], opts: ScoringOptions) -> list[JudgeResult]:
    """One request, retried on infrastructure errors and on per-item ``sandbox_error`` (only those items)."""
    out: list[JudgeResult | None] = [None] * len(chunk)
    todo = list(range(len(chunk)))
    last_err = ""
    for attempt in range(opts.max_retries + 1):
        if attempt:
            time.sleep(opts.retry_backoff_s * 2 ** (attempt - 1))
        try:
            res = _judge_isolated(judge, [chunk[i] for i in todo])
        except Exception as exc:  # only infrastructure errors get here
            last_err = f"{type(exc).__name__}: {exc}"
            continue
        still = []
        for i, r in zip(todo, res, strict=True):
            out[i] = r
            if r.verdict == "sandbox_error":
                still.append(i)
        todo = still
        if not todo:
            break
    for i in todo:
        if out[i] is None:
            msg = f"reward: judge infrastructure failed {opts.max_retries + 1}x: {last_err}"[:2000]
            out[i] = sandbox_failure(msg, len(chunk[i][0].tests))
    return out  # type: ignore[return-value]


async def judge_all_async(
    judge: JudgeLike,
    items: Sequence[tuple[Problem, str]],
    opts: ScoringOptions | None = None,
    *,
    executor: cf.Executor | None = None,
    semaphore: asyncio.Semaphore | None = None,
) -> list[JudgeResult]:
    """Judge ``items`` (``(problem, program)`` pairs) concurrently; results in input order.

    See the module docstring for the concurrency bound, per-request timeout and retry policy. Never raises: a
    program's failure, an infrastructure failure and a judge exception on one submission all become verdicts.
    ``executor``/``semaphore``: shared ones bound concurrency across many concurrent calls (verl awaits one call per
    sample); by default each call gets its own, sized ``opts.max_concurrency``."""
    opts = opts or ScoringOptions()
    items = list(items)
    if not items:
        return []
    chunks = [list(range(s, min(s + opts.batch_size, len(items)))) for s in range(0, len(items), opts.batch_size)]
    results: list[JudgeResult | None] = [None] * len(items)
    sem = semaphore or asyncio.Semaphore(opts.max_concurrency)
    loop = asyncio.get_running_loop()
    own_pool = executor is None
    pool = executor or cf.ThreadPoolExecutor(
        max_workers=min(opts.max_concurrency, len(chunks)), thread_name_prefix="rlvr-reward"
    )

    async def run(idx: list[int]) -> None:
        chunk = [items[i] for i in idx]
        limit = max(opts.request_timeout_s, sum(judge_bound_s(p) for p, _ in chunk))
        async with sem:
            fut = loop.run_in_executor(pool, _call_with_retries, judge, chunk, opts)
            try:
                res = await asyncio.wait_for(fut, timeout=limit)
            except TimeoutError:
                res = [sandbox_failure(f"reward: judge request timed out after {limit:g} s", len(p.tests))
                       for p, _ in chunk]
        for i, r in zip(idx, res, strict=True):
            results[i] = r

    try:
        await asyncio.gather(*(run(c) for c in chunks))
    finally:
        if own_pool:
            pool.shutdown(wait=False, cancel_futures=True)
    return results  # type: ignore[return-value]


def judge_all(
    judge: JudgeLike, items: Sequence[tuple[Problem, str]], opts: ScoringOptions | None = None
) -> list[JudgeResult]:
    """Synchronous :func:`judge_all_async`; safe to call from inside a running event loop (runs in a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(judge_all_async(judge, items, opts))
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["v"] = asyncio.run(judge_all_async(judge, items, opts))
        except BaseException as exc:  # re-raised in the caller's thread
            box["e"] = exc

    t = threading.Thread(target=target, name="rlvr-reward-loop")
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box["v"]
