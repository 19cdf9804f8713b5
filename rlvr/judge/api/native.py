"""rlvr's native wire API, used by :class:`~rlvr.judge.client.RemoteJudge`.

* ``POST /rlvr/judge`` – ``{"problem": Problem | null, "ground_truth": str | object | null, "data_source": str,
  "solution": str, "language": str}`` → :class:`~rlvr.judge.verdict.JudgeResult` JSON (exactly one of ``problem`` /
  ``ground_truth``).
* ``POST /rlvr/call_outputs`` – same body → ``{"outputs": [str | null]}``.
* ``GET /rlvr/info`` → ``{"judge_version", "languages", "workers", "max_queue"}``.

Errors: 400 (bad request, unknown language, solution does not compile for call_outputs), 422 (schema), 500 with
``{"detail": "sandbox_error: …"}`` (infrastructure).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from rlvr.data.schema import Problem, from_ground_truth
from rlvr.judge.api.admission import admitted_call
from rlvr.judge.api.common import BadRequest, is_python, the_judge
from rlvr.judge.verdict import JudgeResult

__all__ = ["JudgeRequest", "router"]

router = APIRouter()


class JudgeRequest(BaseModel):
    """Body of ``/rlvr/judge`` and ``/rlvr/call_outputs``: exactly one of ``problem`` / ``ground_truth``."""

    problem: Problem | None = None
    ground_truth: str | dict[str, Any] | None = None
    data_source: str = "unknown"
    solution: str
    language: str = "python"

    def to_problem(self) -> Problem:
        """The Problem to judge. Raises :class:`BadRequest` naming the field."""
        if (self.problem is None) == (self.ground_truth is None):
            raise BadRequest("exactly one of 'problem' and 'ground_truth' must be given")
        if self.problem is not None:
            return self.problem
        try:
            return from_ground_truth(self.ground_truth, self.data_source)  # type: ignore[arg-type]
        except (ValueError, TypeError) as exc:
            raise BadRequest(f"field 'ground_truth': {exc}") from exc


@router.post("/rlvr/judge", response_model=JudgeResult)
async def rlvr_judge(req: JudgeRequest, request: Request) -> JudgeResult:
    """Judge one solution on a Problem (rlvr's native endpoint)."""
    from rlvr.judge.languages import UnknownLanguageError

    problem = req.to_problem()
    args: tuple[Any, ...] = (
        (problem, req.solution) if is_python(req.language) else (problem, req.solution, req.language)
    )
    try:
        jr = await admitted_call(request, "judge", *args)
    except UnknownLanguageError as exc:
        raise BadRequest(f"field 'language': {exc}") from exc
    request.state.verdict = jr.verdict
    return jr

@router.post("/rlvr/call_outputs")
async def rlvr_call_outputs(req: JudgeRequest, request: Request) -> JSONResponse:
    """``repr`` of each call test's return value (``null`` where it failed)."""
    from rlvr.judge.sandbox import SandboxError

    problem = req.to_problem()
    try:
        outs = await admitted_call(request, "call_outputs", problem, req.solution)
    except SandboxError as exc:
        return JSONResponse(status_code=500, content={"detail": f"sandbox_error: {exc}"[:2000]})
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    return JSONResponse(content={"outputs": outs})

@router.get("/rlvr/info")
async def rlvr_info(request: Request) -> dict[str, Any]:
    """Judge version, available languages and sandbox count of this server."""
    from rlvr.judge.core import JUDGE_VERSION
    from rlvr.judge.languages import available_languages

    return {
        "judge_version": JUDGE_VERSION,
        "languages": available_languages(),
        "workers": getattr(the_judge(request), "workers", None),
        "max_queue": request.app.state.gate.max_queue,
    }
