"""SandboxFusion's wire API: ``GET /v1/ping`` and ``POST /run_code`` (models, mapping of judge results, routes).

* ``GET /v1/ping`` → ``"pong"`` (SandboxFusion's liveness probe).
* ``POST /run_code`` – SandboxFusion's run API (bytedance/SandboxFusion ``sandbox/server/sandbox_api.py``; request
  and response models as in the official PyPI client ``sandbox_fusion.models.RunCodeRequest``/``RunCodeResponse``,
  v0.3.7). Request: ``code``, ``language``, ``stdin``, ``compile_timeout`` / ``run_timeout`` (seconds),
  ``memory_limit_MB`` (``-1`` = server default, here :data:`DEFAULT_MEMORY_LIMIT_MB`), ``files`` (path → base64
  content, written next to the program), ``fetch_files``. Response: ``status`` ``Success`` (every command finished
  with exit code 0) / ``Failed`` / ``SandboxError`` (infrastructure), ``message``, ``compile_result`` (compiled
  languages only), ``run_result`` (``status`` ``Finished`` / ``TimeLimitExceeded`` / ``Error``, ``execution_time``
  wall seconds, ``cpu_time``, ``return_code``, ``stdout``, ``stderr``), ``executor_pod_name``, ``files``.
  Languages: those of :mod:`rlvr.judge.languages` whose toolchain is installed (``python``/``python3`` always; ``cpp``,
  ``c``, ``java``, … when present). A language the judge cannot run, limits out of range and bad file names are
  answered 400/422 naming the field (:mod:`rlvr.judge.api.limits`); a judge failure is HTTP 200 with
  ``status="SandboxError"`` (never a 500). Output the program wrote that is not valid UTF-8 is returned with U+FFFD
  in place of the undecodable bytes. Differences, by design: ``compile_timeout`` is the judge's
  per-language compile limit, not the request's; the embedded judge adds a final newline to ``stdin`` lacking one;
  ``fetch_files`` is accepted but nothing is fetched back (``files`` is always ``{}``). Extension: a top-level
  ``verdict`` field (rlvr's closed vocabulary); SandboxFusion clients ignore unknown fields.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from rlvr.judge.api.admission import Answer, admitted
from rlvr.judge.api.common import BadRequest, BoundedJSONRoute, SafeJSONResponse, body_schema, is_python, parse_body
from rlvr.judge.api.limits import MAX_FILES, MemoryMB, Seconds, check_file_name, check_language
from rlvr.judge.verdict import TestResult, Verdict

__all__ = [
    "DEFAULT_MEMORY_LIMIT_MB",
    "CommandRunResult",
    "RunCodeRequest",
    "RunCodeResponse",
    "exec_info",
    "router",
    "run_response",
]

#: Memory limit (MB) used when a request says ``memory_limit_MB = -1`` (SandboxFusion: "no limit"; rlvr's judge always
#: enforces one).
DEFAULT_MEMORY_LIMIT_MB = 1024

router = APIRouter(route_class=BoundedJSONRoute)
log = logging.getLogger("rlvr.judge.server")


class RunCodeRequest(BaseModel):
    """SandboxFusion ``/run_code`` request (``sandbox_fusion.models.RunCodeRequest`` plus ``memory_limit_MB``).

    ``compile_timeout``/``run_timeout``: seconds in ``(0, 60]``; ``memory_limit_MB``: MB, ``-1`` (server default) or
    16 … 4096; ``files``: relative path → base64 content (limits: :mod:`rlvr.judge.api.limits`)."""

    model_config = ConfigDict(extra="ignore")

    code: str
    language: str = "python"
    compile_timeout: Seconds = 10.0
    run_timeout: Seconds = 10.0
    memory_limit_MB: MemoryMB = -1
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict)
    fetch_files: list[str] = Field(default_factory=list)


class CommandRunResult(BaseModel):
    """One command's outcome (SandboxFusion ``CommandRunResult``): times in seconds."""

    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    cpu_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    """SandboxFusion ``/run_code`` response; ``verdict`` is rlvr's extension (ignored by SandboxFusion clients)."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    verdict: Verdict | None = None


def _command_result(status: str, r: Any, return_code: int | None) -> CommandRunResult:
    """``run_result`` of a run or a test (``r``: a :class:`rlvr.judge.RunResult` or a ``TestResult``; both carry
    ``time_s``, ``cpu_s`` in seconds and ``stdout``/``stderr``)."""
    return CommandRunResult(
        status=status, execution_time=r.time_s, cpu_time=r.cpu_s, return_code=return_code, stdout=r.stdout,
        stderr=r.stderr,
    )


def run_response(rr: Any, language: str = "python") -> RunCodeResponse:
    """Map a :class:`rlvr.judge.RunResult` to a SandboxFusion ``RunCodeResponse``.

    Compiled languages get a ``compile_result`` (``return_code`` 1 with the compiler's message on a compile error, then
    no ``run_result``), as SandboxFusion reports them. A finished run always carries an integer ``return_code`` (the
    official client's ``summary_run_code_result`` requires one): a run without one (killed) reports 1."""
    compiled = not is_python(language)
    verdict = rr.verdict
    if rr.status == "Error" or verdict == "sandbox_error":
        return RunCodeResponse(status="SandboxError", message=(rr.stderr or "sandbox error")[:2000], verdict=verdict)
    if compiled and verdict == "syntax_error":
        comp = CommandRunResult(status="Finished", return_code=1, stdout="", stderr=rr.stderr)
        return RunCodeResponse(status="Failed", message="compilation failed", compile_result=comp, verdict=verdict)
    comp_ok = CommandRunResult(status="Finished", return_code=0, stdout="", stderr="") if compiled else None
    if rr.status == "TimeLimitExceeded":
        run = _command_result("TimeLimitExceeded", rr, rr.exit_code)
        return RunCodeResponse(status="Failed", compile_result=comp_ok, run_result=run, verdict=verdict)
    code = rr.exit_code if rr.exit_code is not None else (0 if verdict == "accepted" else 1)
    run = _command_result("Finished", rr, code)
    status = "Success" if code == 0 else "Failed"
    return RunCodeResponse(status=status, compile_result=comp_ok, run_result=run, verdict=verdict)


def exec_info(tr: TestResult, language: str) -> RunCodeResponse:
    """A test's ``exec_info`` in ``/run_code`` form: ``Success`` when the program ran to exit code 0 (a wrong answer
    still ran successfully; ``passed`` says whether it was right), as ScaleBox reports stdio tests."""
    compiled = not is_python(language)
    if tr.verdict == "sandbox_error":
        return RunCodeResponse(status="SandboxError", message=tr.message, verdict=tr.verdict)
    if tr.verdict == "syntax_error" and compiled:
        comp = CommandRunResult(status="Finished", return_code=1, stdout="", stderr=tr.message)
        return RunCodeResponse(status="Failed", message="compilation failed", compile_result=comp, verdict=tr.verdict)
    comp_ok = CommandRunResult(status="Finished", return_code=0, stdout="", stderr="") if compiled else None
    if tr.verdict == "timeout":
        run = _command_result("TimeLimitExceeded", tr, tr.exit_code)
        return RunCodeResponse(
            status="Failed", message=tr.message, compile_result=comp_ok, run_result=run, verdict=tr.verdict
        )
    ran_ok = tr.verdict in ("accepted", "wrong_answer")
    code = tr.exit_code if tr.exit_code is not None else (0 if ran_ok else 1)
    run = _command_result("Finished", tr, code)
    status = "Success" if code == 0 and ran_ok else "Failed"
    return RunCodeResponse(
        status=status, message=tr.message, compile_result=comp_ok, run_result=run, verdict=tr.verdict
    )


def _decode_files(files: dict[str, str | None]) -> dict[str, bytes]:
    if len(files) > MAX_FILES:
        raise BadRequest(f"field 'files': {len(files)} files, at most {MAX_FILES} allowed")
    out: dict[str, bytes] = {}
    for name, b64 in files.items():
        check_file_name(name)
        if b64 is None:
            continue
        try:
            out[name] = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequest(f"field 'files.{name}': not valid base64: {exc}") from exc
    return out


@router.get("/v1/ping", response_class=SafeJSONResponse)
async def ping() -> str:
    """Liveness probe (SandboxFusion): answers ``"pong"``."""
    return "pong"


def _run(body: bytes, judge: Any) -> Answer:
    """The whole of ``/run_code`` after admission, in the thread pool: parse, decode files, run, answer."""
    req = parse_body(body, RunCodeRequest)
    check_language(req.language)
    files = _decode_files(req.files)
    mem = req.memory_limit_MB if req.memory_limit_MB > 0 else DEFAULT_MEMORY_LIMIT_MB
    kwargs: dict[str, Any] = {
        "stdin": req.stdin or "",
        "timeout_s": float(req.run_timeout),
        "memory_limit_mb": mem,
        "files": files or None,
    }
    if not is_python(req.language):
        kwargs["language"] = req.language
    try:
        rr = judge.run_code(req.code, **kwargs)
    except Exception as exc:  # infrastructure: SandboxFusion answers SandboxError, never a 500
        log.exception("run_code: the judge raised")
        return Answer(RunCodeResponse(status="SandboxError", message=f"{type(exc).__name__}: {exc}"[:2000]),
                      verdict="sandbox_error", size_hint=16384)
    hint = (len(rr.stdout) + len(rr.stderr)) + 4096
    return Answer(run_response(rr, req.language), verdict=rr.verdict, size_hint=hint)


@router.post(
    "/run_code", response_model=RunCodeResponse, response_model_exclude_none=False, response_class=SafeJSONResponse,
    openapi_extra=body_schema(RunCodeRequest),
)
async def run_code(request: Request) -> Response:
    """Run one program (SandboxFusion ``/run_code``). 400 for an unknown language or a bad file name, 422 for limits
    out of range (:mod:`rlvr.judge.api.limits`); a judge failure is ``status="SandboxError"``, never a 500. The body
    is parsed and its files decoded after admission, off the event loop (:func:`rlvr.judge.api.admission.admitted`)."""
    return await admitted(request, _run)
