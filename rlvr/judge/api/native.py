"""rlvr's native wire API, used by :class:`~rlvr.judge.client.RemoteJudge`.

* ``POST /rlvr/judge`` – ``{"problem": Problem | null, "ground_truth": str | object | null, "data_source": str,
  "solution": str, "language": str, "max_timeouts": int | null}`` → :class:`~rlvr.judge.verdict.JudgeResult` JSON
  (exactly one of ``problem`` / ``ground_truth``).
* ``POST /rlvr/call_outputs`` – same body → ``{"outputs": [str | null]}`` (every call test runs: ``max_timeouts`` is
  not used).
* ``GET /rlvr/info`` → ``{"judge_version", "languages", "workers", "max_queue", "max_timeouts"}``.

The timeout rule: the server's judge stops a submission after its ``max_timeouts`` timed-out tests (``/rlvr/info``'s
``max_timeouts``; ``null`` for a judge without the rule). A ``/rlvr/judge`` request may ask for a lower value, 1 to
the server's (:func:`rlvr.judge.api.limits.check_max_timeouts`: 400 for 0 or a value above it, unless the server's
is 0): the training reward's ``reward_shaping.max_timeouts`` (:mod:`rlvr.reward.timeouts`), judged on a view of the
same sandbox pool (:func:`rlvr.judge.rule.with_max_timeouts`). Absent: the server's own rule. A server whose
``/rlvr/info`` has no ``max_timeouts`` key predates the field (and ignores it): the client refuses to ask it for
another value (:meth:`rlvr.judge.client.RemoteJudge.native_max_timeouts`).

Request ids: the body's ``request_id`` (or, failing that, an ``X-Request-ID`` header) is echoed in the answer's
``request_id`` field and ``X-Request-ID`` header; :class:`~rlvr.judge.client.RemoteJudge` sends a fresh random id per
logical request (kept across its retries) and rejects an answer carrying another id, so a retried or proxied request
can never be credited with another request's result.

Errors: 400 naming the field (bad request, unknown language, limits out of range, a problem without tests, a
``max_timeouts`` the server cannot apply, solution does not compile for call_outputs; an ``X-Request-ID`` that is
not 1–128 printable ASCII characters), 408 (body too slow), 413 (body over ``RLVR_SANDBOX_MAX_BODY_MB``), 422
(schema; a body ``request_id`` that is not 1–128 printable ASCII characters, a ``max_timeouts`` that is not an int
>= 0), 503 + ``Retry-After`` (saturated, or out of file descriptors), 500 with
``{"detail": "sandbox_error: …"}`` (the judge itself failed: infrastructure). Whatever the submission outputs or
returns gets a verdict (see :func:`rlvr.judge.api.admission.judge_program`). Bodies are parsed after admission, off
the event loop (:func:`rlvr.judge.api.admission.admitted`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from rlvr.data.schema import Problem
from rlvr.judge.api.admission import REPORT_CHARS, Answer, OutOfDescriptors, admitted, judge_program, out_of_descriptors
from rlvr.judge.api.common import (
    MAX_REQUEST_ID,
    REQUEST_ID_HEADER,
    REQUEST_ID_PATTERN,
    BadRequest,
    BoundedJSONRoute,
    SafeJSONResponse,
    body_schema,
    parse_body,
    problem_from_payload,
    the_judge,
)
from rlvr.judge.api.limits import check_language, check_max_timeouts, check_problem_limits
from rlvr.judge.rule import with_max_timeouts
from rlvr.judge.settle import CPU_LIMITS_KEY
from rlvr.judge.verdict import JudgeResult

__all__ = ["JudgeRequest", "JudgeResponse", "router"]

router = APIRouter(route_class=BoundedJSONRoute)


class JudgeRequest(BaseModel):
    """Body of ``/rlvr/judge`` and ``/rlvr/call_outputs``: exactly one of ``problem`` / ``ground_truth``.

    ``request_id``: the client's id of this request (1–128 printable ASCII characters, else 422 before anything
    runs: the id is echoed as a header), echoed in the answer so that the client can check that a body belongs to its
    own request (see the module docstring). ``max_timeouts``: ``/rlvr/judge`` stops the submission after this many
    timed-out tests (an int >= 0, else 422; 1 to the server judge's own value, else 400: module docstring); ``None``
    = the server's own rule. ``/rlvr/call_outputs`` runs every call test and does not read it."""

    problem: Problem | None = None
    ground_truth: str | dict[str, Any] | None = None
    data_source: str = "unknown"
    solution: str
    language: str = "python"
    request_id: str | None = Field(None, max_length=MAX_REQUEST_ID, pattern=REQUEST_ID_PATTERN)
    max_timeouts: int | None = Field(None, ge=0, strict=True)

    def to_problem(self) -> Problem:
        """The Problem to judge, with its limits checked (:mod:`rlvr.judge.api.limits`). Raises :class:`BadRequest`
        naming the field."""
        if (self.problem is None) == (self.ground_truth is None):
            raise BadRequest("exactly one of 'problem' and 'ground_truth' must be given")
        field = "problem" if self.problem is not None else "ground_truth"
        if self.problem is not None:
            problem = self.problem
        else:
            problem = problem_from_payload(self.ground_truth, self.data_source, "ground_truth")
        if not problem.tests:
            raise BadRequest(f"field '{field}.tests': the problem has no tests")
        check_problem_limits(problem, field)
        if CPU_LIMITS_KEY in problem.meta:  # CPU-judged limits are the pipeline's own (rlvr.judge.settle): a request
            # judges at its wall limits, so the server's cost bound holds
            problem = problem.model_copy(update={"meta": {k: v for k, v in problem.meta.items()
                                                          if k != CPU_LIMITS_KEY}})
        return problem


class JudgeResponse(JudgeResult):
    """``/rlvr/judge`` answer: a :class:`~rlvr.judge.verdict.JudgeResult` plus the request's ``request_id``."""

    request_id: str | None = None


def _own_max_timeouts(judge: Any) -> int | None:
    """The server judge's own timeout rule (``None``: a judge without the attribute)."""
    own = getattr(judge, "max_timeouts", None)
    return own if isinstance(own, int) and not isinstance(own, bool) else None


def _request_id(req: JudgeRequest, request: Request) -> str | None:
    return req.request_id or request.headers.get(REQUEST_ID_HEADER)


def _judge(request: Request) -> Callable[[bytes, Any], Answer]:
    def work(body: bytes, judge: Any) -> Answer:
        req = parse_body(body, JudgeRequest, long_tests=("problem",))
        check_language(req.language)
        problem = req.to_problem()
        if req.max_timeouts is not None:  # a lower timeout rule, on a view of the same pool
            judge = with_max_timeouts(judge, check_max_timeouts(req.max_timeouts, _own_max_timeouts(judge)))
        jr = judge_program(judge, problem, req.solution, req.language, "language")
        rid = _request_id(req, request)
        headers = {REQUEST_ID_HEADER: rid} if rid is not None else {}
        return Answer(JudgeResponse(**dict(jr), request_id=rid), headers=headers, verdict=jr.verdict,
                      keep=(req, problem, jr), size_hint=REPORT_CHARS * len(jr.tests) + 4096)

    return work


@router.post(
    "/rlvr/judge", response_model=JudgeResponse, response_class=SafeJSONResponse,
    openapi_extra=body_schema(JudgeRequest),
)
async def rlvr_judge(request: Request) -> Response:
    """Judge one solution on a Problem (rlvr's native endpoint); the body is parsed after admission, off the event
    loop (:func:`rlvr.judge.api.admission.admitted`)."""
    return await admitted(request, _judge(request))


def _call_outputs(request: Request) -> Callable[[bytes, Any], Answer]:
    def work(body: bytes, judge: Any) -> Answer:
        from rlvr.judge.sandbox import SandboxError

        req = parse_body(body, JudgeRequest, long_tests=("problem",))
        problem = req.to_problem()
        rid = _request_id(req, request)
        headers = {REQUEST_ID_HEADER: rid} if rid is not None else {}
        try:
            outs = judge.call_outputs(problem, req.solution)
        except (SandboxError, RuntimeError, OSError) as exc:
            if out_of_descriptors(exc):
                raise OutOfDescriptors(f"{type(exc).__name__}: {exc}"[:300]) from exc
            detail = f"sandbox_error: {type(exc).__name__}: {exc}"[:2000]
            return Answer({"detail": detail}, status=500, headers=headers, size_hint=len(detail) + 64)
        except ValueError as exc:  # the solution does not compile
            raise BadRequest(str(exc)) from exc
        hint = sum(len(o) for o in outs if o is not None) + 16 * len(outs) + 1024
        return Answer({"outputs": outs, "request_id": rid}, headers=headers, keep=(req, problem), size_hint=hint)

    return work


@router.post("/rlvr/call_outputs", response_class=SafeJSONResponse, openapi_extra=body_schema(JudgeRequest))
async def rlvr_call_outputs(request: Request) -> Response:
    """``repr`` of each call test's return value (``null`` where it failed), plus ``request_id``."""
    return await admitted(request, _call_outputs(request))


@router.get("/rlvr/info", response_class=SafeJSONResponse)
async def rlvr_info(request: Request) -> dict[str, Any]:
    """Judge version, available languages, sandbox count, queue bound and the judge's own ``max_timeouts`` (a
    ``/rlvr/judge`` request may lower it; its presence tells a client that this server takes the field)."""
    from rlvr.judge.core import JUDGE_VERSION
    from rlvr.judge.languages import available_languages

    return {
        "judge_version": JUDGE_VERSION,
        "languages": available_languages(),
        "workers": getattr(the_judge(request), "workers", None),
        "max_queue": request.app.state.gate.max_queue,
        "max_timeouts": _own_max_timeouts(the_judge(request)),
    }
