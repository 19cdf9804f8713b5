"""The judge as an HTTP service: SandboxFusion-compatible ``/run_code``, ScaleBox ``/common_evaluate_batch`` and the
native ``/rlvr/*`` endpoints the :class:`~rlvr.judge.client.RemoteJudge` uses.

Endpoints (``create_app(judge)``; the judge is any object with the :class:`rlvr.judge.Judge` methods):

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
  ``c``, ``java``, … when present). A language the judge cannot run is answered with HTTP 200 and
  ``status="SandboxError"`` plus a message (never a 500). Differences, by design: ``compile_timeout`` is the judge's
  per-language compile limit, not the request's; the embedded judge adds a final newline to ``stdin`` lacking one;
  ``fetch_files`` is accepted but nothing is fetched back (``files`` is always ``{}``). Extension: a top-level
  ``verdict`` field (rlvr's closed vocabulary); SandboxFusion clients ignore unknown fields.
* ``POST /common_evaluate_batch`` – ScaleBox's unified evaluation (icip-cas/ScaleBox ``README.md`` "Calling the
  sandbox" and ``sandbox/server/online_judge_api.py``): all test cases of one submission in one request. Request =
  SandboxFusion's ``SubmitRequest`` (``id``, ``dataset``, ``completion`` (Markdown fences allowed: the last block of the
  language, or the whole text), ``config``: ``language`` (required), ``run_timeout`` (seconds per test),
  ``provided_data.test_cases``, ``extra``). ``test_cases`` forms accepted:
  ``{"type": "stdin_stdout", "input": [str], "output": [str]}``;
  ``{"type": "function_call", "fn_name": str, "input": [[arg, …]], "output": [[ret]], "json_input": bool}``;
  ``{"type": "assert", "test": str, "entry_point": str}`` (HumanEval ``check``; Python only).
  Superset (rlvr's own, documented here because ScaleBox has no such fields): ``test_cases`` may also be a list of
  single cases or of rlvr test objects (``{"kind": "stdio"|"call"|"assert", …}``, see :mod:`rlvr.data.schema`);
  ``provided_data.rlvr_tests`` adds rlvr test objects; ``provided_data.ground_truth`` (rlvr's ``ground_truth``
  payload) supplies a whole problem; ``provided_data.entry_point`` names the function for call/assert tests;
  ``config.memory_limit_MB`` and ``extra.float_tolerance`` set those limits. Not supported (HTTP 400):
  ``extra.special_judge_program``, MultiPL-E ``assert`` tests of other languages. ``extra.run_all_cases`` /
  ``total_timeout`` are accepted and ignored (the judge's own ``max_timeouts`` applies). Response = ScaleBox's
  ``EvalResult`` (``id``, ``accepted``, ``extracted_code``, ``tests[]`` with ``passed``, ``exec_info`` (a
  ``/run_code`` response), ``test_info``) plus, per test, ``verdict``/``message`` and, top level, ``verdict``,
  ``passed``, ``total``, ``pass_ratio``, ``judge_s``, ``message`` (also repeated in ``extra``).
* ``POST /rlvr/judge`` – ``{"problem": Problem | null, "ground_truth": str | object | null, "data_source": str,
  "solution": str, "language": str}`` → :class:`~rlvr.judge.verdict.JudgeResult` JSON (exactly one of ``problem`` /
  ``ground_truth``). ``POST /rlvr/call_outputs`` – same body → ``{"outputs": [str | null]}``. ``GET /rlvr/info`` →
  ``{"judge_version", "languages", "workers"}``. Errors: 400 (bad request, unknown language, solution does not compile
  for call_outputs), 422 (schema), 500 with ``{"detail": "sandbox_error: …"}`` (infrastructure).

Operations:

* Backpressure: the judging endpoints pass an :class:`AdmissionGate`: at most ``workers`` judge calls run at once (the
  judge's sandbox count), at most ``max_queue`` more wait for a worker (``RLVR_SANDBOX_MAX_QUEUE``, default
  ``RLVR_SANDBOX_QUEUE_FACTOR`` × workers); beyond that the server answers **503** with a ``Retry-After`` header
  (delay-seconds, RFC 9110 §10.2.3: the estimated time to drain the queue from the recent mean service time, 1 s to
  ``RLVR_SANDBOX_RETRY_AFTER_MAX_S``) instead of queueing without bound. :class:`~rlvr.judge.client.RemoteJudge`
  honours it. Not gated: ``/v1/ping``, ``/rlvr/info``, ``/metrics``.
* ``GET /metrics``: Prometheus text exposition format 0.0.4 (``prometheus_client``, one registry per app):
  ``rlvr_judge_requests_total{endpoint,status}``, ``rlvr_judge_verdicts_total{endpoint,verdict}``,
  ``rlvr_judge_inflight``, ``rlvr_judge_queue_depth``, ``rlvr_judge_queue_capacity``, ``rlvr_judge_workers``,
  ``rlvr_judge_rejected_total{endpoint}``, histograms ``rlvr_judge_request_duration_seconds{endpoint}`` and
  ``rlvr_judge_queue_wait_seconds``. With ``serve(workers>1)`` each process has its own registry (scrape each, or
  run one process per port).
* Structured logs: one JSON line per request on logger ``rlvr.judge.server`` (``endpoint``, ``method``, ``status``,
  ``verdict``, ``duration_s``, ``queue_wait_s``); :func:`serve` installs :class:`JsonLogFormatter` on it and turns
  uvicorn's own access log off.

Blocking judge calls run in Starlette's thread pool so the event loop keeps serving. Run with :func:`serve`
(``rlvr sandbox serve``); configuration only through ``RLVR_*`` variables (:class:`rlvr.config.RuntimeSettings`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool

from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest, Test, from_ground_truth
from rlvr.judge.verdict import JudgeResult, TestResult, Verdict

__all__ = [
    "DEFAULT_MEMORY_LIMIT_MB",
    "DEFAULT_RUN_TIMEOUT_S",
    "AdmissionGate",
    "BadRequest",
    "CommandRunResult",
    "EvalResult",
    "EvalTestCase",
    "JsonLogFormatter",
    "JudgeRequest",
    "RunCodeRequest",
    "RunCodeResponse",
    "Saturated",
    "SubmitRequest",
    "configure_logging",
    "create_app",
    "extract_fenced",
    "problem_from_submit",
    "run_response",
    "serve",
]

#: Memory limit (MB) used when a request says ``memory_limit_MB = -1`` (SandboxFusion: "no limit"; rlvr's judge always
#: enforces one).
DEFAULT_MEMORY_LIMIT_MB = 1024
#: Per-test time limit (seconds) when a ScaleBox request gives no ``run_timeout`` (ScaleBox's default).
DEFAULT_RUN_TIMEOUT_S = 10.0
_PY = {"python", "python3", "py"}
_GATED = ("/run_code", "/common_evaluate_batch", "/rlvr/judge", "/rlvr/call_outputs")
_ENDPOINTS = frozenset({*_GATED, "/v1/ping", "/rlvr/info", "/metrics"})
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
log = logging.getLogger("rlvr.judge.server")


class BadRequest(ValueError):
    """A request the server cannot honour (answered with HTTP 400); the message names the field."""


# ---------------------------------------------------------------------------------------------- SandboxFusion models
class RunCodeRequest(BaseModel):
    """SandboxFusion ``/run_code`` request (``sandbox_fusion.models.RunCodeRequest`` plus ``memory_limit_MB``).

    ``compile_timeout``/``run_timeout``: seconds; ``memory_limit_MB``: MB (-1 = server default); ``files``: path →
    base64 content."""

    model_config = ConfigDict(extra="ignore")

    code: str
    language: str = "python"
    compile_timeout: float = 10.0
    run_timeout: float = 10.0
    memory_limit_MB: int = -1
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


# ---------------------------------------------------------------------------------------------------- ScaleBox models
class EvalConfig(BaseModel):
    """SandboxFusion/ScaleBox ``TestConfig`` (the fields this server reads; others are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    language: str | None = None
    compile_timeout: float | None = None
    run_timeout: float | None = None
    memory_limit_MB: int | None = None
    custom_extract_logic: str | None = None
    provided_data: dict[str, Any] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class SubmitRequest(BaseModel):
    """ScaleBox ``/common_evaluate_batch`` request (SandboxFusion ``SubmitRequest``)."""

    model_config = ConfigDict(extra="allow")

    dataset: str = ""
    id: int | str = 0
    completion: str
    config: EvalConfig


class EvalTestCase(BaseModel):
    """One test's outcome (ScaleBox ``EvalTestCase`` + rlvr ``verdict``/``message``)."""

    passed: bool
    exec_info: RunCodeResponse
    test_info: dict[str, Any] | None = None
    verdict: Verdict
    message: str = ""


class EvalResult(BaseModel):
    """ScaleBox ``EvalResult`` + rlvr's summary fields (``verdict``, ``passed``, ``total``, ``pass_ratio``, ``judge_s``
    seconds, ``message``)."""

    id: int | str
    accepted: bool
    extracted_code: str
    full_code: str | None = None
    test_code: str | None = None
    tests: list[EvalTestCase]
    extracted_type: str | None = None
    extra: dict[str, Any] | None = None
    verdict: Verdict
    passed: int
    total: int
    pass_ratio: float
    judge_s: float
    message: str = ""


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


# ------------------------------------------------------------------------------------------------------- conversions
def _is_python(language: str) -> bool:
    return language.lower() in _PY


def run_response(rr: Any, language: str = "python") -> RunCodeResponse:
    """Map a :class:`rlvr.judge.RunResult` to a SandboxFusion ``RunCodeResponse``.

    Compiled languages get a ``compile_result`` (``return_code`` 1 with the compiler's message on a compile error, then
    no ``run_result``), as SandboxFusion reports them. A finished run always carries an integer ``return_code`` (the
    official client's ``summary_run_code_result`` requires one): a run without one (killed) reports 1."""
    compiled = not _is_python(language)
    verdict = rr.verdict
    if rr.status == "Error" or verdict == "sandbox_error":
        return RunCodeResponse(status="SandboxError", message=(rr.stderr or "sandbox error")[:2000], verdict=verdict)
    if compiled and verdict == "syntax_error":
        comp = CommandRunResult(status="Finished", return_code=1, stdout="", stderr=rr.stderr)
        return RunCodeResponse(status="Failed", message="compilation failed", compile_result=comp, verdict=verdict)
    comp_ok = CommandRunResult(status="Finished", return_code=0, stdout="", stderr="") if compiled else None
    if rr.status == "TimeLimitExceeded":
        run = CommandRunResult(
            status="TimeLimitExceeded",
            execution_time=rr.time_s,
            cpu_time=rr.cpu_s,
            return_code=rr.exit_code,
            stdout=rr.stdout,
            stderr=rr.stderr,
        )
        return RunCodeResponse(status="Failed", compile_result=comp_ok, run_result=run, verdict=verdict)
    code = rr.exit_code if rr.exit_code is not None else (0 if verdict == "accepted" else 1)
    run = CommandRunResult(
        status="Finished",
        execution_time=rr.time_s,
        cpu_time=rr.cpu_s,
        return_code=code,
        stdout=rr.stdout,
        stderr=rr.stderr,
    )
    status = "Success" if code == 0 else "Failed"
    return RunCodeResponse(status=status, compile_result=comp_ok, run_result=run, verdict=verdict)


def _exec_info(tr: TestResult, language: str) -> RunCodeResponse:
    """A test's ``exec_info`` in ``/run_code`` form: ``Success`` when the program ran to exit code 0 (a wrong answer
    still ran successfully; ``passed`` says whether it was right), as ScaleBox reports stdio tests."""
    compiled = not _is_python(language)
    if tr.verdict == "sandbox_error":
        return RunCodeResponse(status="SandboxError", message=tr.message, verdict=tr.verdict)
    if tr.verdict == "syntax_error" and compiled:
        comp = CommandRunResult(status="Finished", return_code=1, stdout="", stderr=tr.message)
        return RunCodeResponse(status="Failed", message="compilation failed", compile_result=comp, verdict=tr.verdict)
    comp_ok = CommandRunResult(status="Finished", return_code=0, stdout="", stderr="") if compiled else None
    if tr.verdict == "timeout":
        run = CommandRunResult(
            status="TimeLimitExceeded",
            execution_time=tr.time_s,
            cpu_time=tr.cpu_s,
            return_code=tr.exit_code,
            stdout=tr.stdout,
            stderr=tr.stderr,
        )
        return RunCodeResponse(
            status="Failed", message=tr.message, compile_result=comp_ok, run_result=run, verdict=tr.verdict
        )
    ran_ok = tr.verdict in ("accepted", "wrong_answer")
    code = tr.exit_code if tr.exit_code is not None else (0 if ran_ok else 1)
    run = CommandRunResult(
        status="Finished",
        execution_time=tr.time_s,
        cpu_time=tr.cpu_s,
        return_code=code,
        stdout=tr.stdout,
        stderr=tr.stderr,
    )
    status = "Success" if code == 0 and ran_ok else "Failed"
    return RunCodeResponse(
        status=status, message=tr.message, compile_result=comp_ok, run_result=run, verdict=tr.verdict
    )


_FENCE = re.compile(r"^(?P<f>`{3,})[ \t]*(?P<lang>[\w+#.-]*)[^\n]*\n(?P<body>.*?)(?:^(?P=f)[ \t]*$|\Z)", re.M | re.S)
_LANG_TAGS = {
    "python": {"python", "py", "python3", "py3"},
    "cpp": {"cpp", "c++", "cc", "cxx"},
    "c": {"c"},
    "java": {"java"},
    "go": {"go", "golang"},
    "rust": {"rust", "rs"},
}


def extract_fenced(completion: str, language: str) -> str:
    """The code ScaleBox evaluates for ``completion``: the last fenced Markdown block tagged with ``language`` (or an
    alias) or untagged; the whole completion when it has no such block (ScaleBox's ``default_extract_helper`` rule,
    simplified: no heuristic extraction)."""
    key = language.lower()
    tags = next((t for t in _LANG_TAGS.values() if key in t), {key}) | {""}
    blocks = [m.group("body") for m in _FENCE.finditer(completion) if m.group("lang").lower() in tags]
    return blocks[-1] if blocks else completion


_TESTS = TypeAdapter(list[Test])


def _case_list(tc: Any, key: str, n: int | None = None) -> list[Any]:
    v = tc.get(key)
    if not isinstance(v, list):
        raise BadRequest(f"field 'config.provided_data.test_cases.{key}': expected a list")
    if n is not None and len(v) != n:
        raise BadRequest(f"field 'config.provided_data.test_cases.{key}': {len(v)} items, 'input' has {n}")
    return v


def _fn_output(out: Any, i: int) -> Any:
    # ScaleBox wraps each expected return value in a one-element list: "output": [[3], [7]]
    if not (isinstance(out, list) and len(out) == 1):
        raise BadRequest(f"field 'config.provided_data.test_cases.output[{i}]': expected a one-element list [value]")
    return out[0]


def _scalebox_batch(tc: dict[str, Any], language: str) -> tuple[list[Any], list[dict[str, Any]], str | None]:
    """Convert one ScaleBox ``test_cases`` object into rlvr tests (+ ``test_info`` echoes and the entry point)."""
    kind = tc.get("type")
    if kind is None:
        kind = "function_call" if tc.get("fn_name") else "stdin_stdout"
    if kind == "stdin_stdout":
        ins = _case_list(tc, "input")
        outs = _case_list(tc, "output", len(ins))
        tests, infos = [], []
        for i, (a, b) in enumerate(zip(ins, outs, strict=True)):
            if not isinstance(a, str) or not isinstance(b, str):
                raise BadRequest(f"field 'config.provided_data.test_cases.input/output[{i}]': expected strings")
            tests.append(StdioTest(stdin=a, stdout=b))
            infos.append({"input": {"stdin": a}, "output": {"stdout": b}})
        return tests, infos, None
    if kind == "function_call":
        fn = tc.get("fn_name")
        if not isinstance(fn, str) or not fn:
            raise BadRequest("field 'config.provided_data.test_cases.fn_name': required for function_call tests")
        if not _is_python(language):
            raise BadRequest(f"field 'config.language': function_call tests need python, got {language!r}")
        ins = _case_list(tc, "input")
        outs = _case_list(tc, "output", len(ins))
        tests, infos = [], []
        for i, (a, b) in enumerate(zip(ins, outs, strict=True)):
            if isinstance(a, str) and tc.get("json_input"):  # LiveCodeBench: one JSON value per line
                try:
                    a = [json.loads(line) for line in a.split("\n")]
                    b = [json.loads(b)] if isinstance(b, str) else b
                except json.JSONDecodeError as exc:
                    raise BadRequest(f"field 'config.provided_data.test_cases.input[{i}]': bad JSON: {exc}") from exc
            if not isinstance(a, list):
                raise BadRequest(f"field 'config.provided_data.test_cases.input[{i}]': expected a list of arguments")
            tests.append(CallTest(args=repr(a), expected=repr(_fn_output(b, i))))
            infos.append({"type": "function_call", "fn_name": fn, "input": a, "output": b})
        return tests, infos, fn
    if kind == "assert":
        if not _is_python(language):
            raise BadRequest(f"field 'config.language': assert tests are supported for python only, got {language!r}")
        code = tc.get("test", tc.get("tests"))
        if not isinstance(code, str):
            raise BadRequest("field 'config.provided_data.test_cases.test': expected the test code (a string)")
        entry = tc.get("entry_point")
        if entry and re.search(r"^def check\(", code, re.M):
            code = f"{code}\ncheck(candidate)\n"  # HumanEval: full_code = solution + test + check(entry_point)
        return [AssertTest(code=code)], [{"type": "assert", "entry_point": entry}], entry
    raise BadRequest(f"field 'config.provided_data.test_cases.type': unknown type {kind!r}")


def _single_cases(items: list[Any], language: str) -> tuple[list[Any], list[dict[str, Any]], str | None]:
    tests: list[Any] = []
    infos: list[dict[str, Any]] = []
    entry = None
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"field 'config.provided_data.test_cases[{i}]': expected an object")
        if "kind" in item:
            try:
                t = _TESTS.validate_python([item])[0]
            except ValidationError as exc:
                raise BadRequest(f"field 'config.provided_data.test_cases[{i}]': {exc.errors()[0]['msg']}") from exc
            tests.append(t)
            infos.append(t.model_dump(mode="json"))
            continue
        one = {k: (v if k in ("type", "fn_name", "json_input") else [v]) for k, v in item.items()}
        t, info, e = _scalebox_batch(one, language)
        tests += t
        infos += info
        entry = entry or e
    return tests, infos, entry


def problem_from_submit(req: SubmitRequest) -> tuple[Problem, str, list[dict[str, Any]]]:
    """Build the Problem a ScaleBox request describes; returns ``(problem, extracted_code, test_infos)``.

    Raises :class:`BadRequest` naming the offending field (see the module docstring for the accepted forms)."""
    cfg = req.config
    if not cfg.language:
        raise BadRequest("config.language field must exist, got None")
    language = cfg.language
    extra = cfg.extra or {}
    if extra.get("special_judge_program"):
        raise BadRequest("field 'config.extra.special_judge_program': special judges are not supported by rlvr")
    data = cfg.provided_data or {}
    tests: list[Any] = []
    infos: list[dict[str, Any]] = []
    entry: str | None = data.get("entry_point")
    base: Problem | None = None
    if data.get("ground_truth") is not None:
        try:
            base = from_ground_truth(data["ground_truth"], req.dataset or "unknown")
        except (ValueError, TypeError, ValidationError) as exc:
            raise BadRequest(f"field 'config.provided_data.ground_truth': {exc}") from exc
        tests += base.tests
        infos += [t.model_dump(mode="json") for t in base.tests]
        entry = entry or base.entry_point
    tc = data.get("test_cases")
    if isinstance(tc, dict):
        t, info, e = _scalebox_batch(tc, language)
    elif isinstance(tc, list):
        t, info, e = _single_cases(tc, language)
    elif tc is None:
        t, info, e = [], [], None
    else:
        raise BadRequest("field 'config.provided_data.test_cases': expected an object or a list")
    tests += t
    infos += info
    entry = entry or e
    if data.get("rlvr_tests") is not None:
        try:
            own = _TESTS.validate_python(data["rlvr_tests"])
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(map(str, err["loc"]))
            raise BadRequest(f"field 'config.provided_data.rlvr_tests.{loc}': {err['msg']}") from exc
        tests += own
        infos += [x.model_dump(mode="json") for x in own]
    if not tests:
        raise BadRequest("field 'config.provided_data.test_cases': no test cases given")
    if not entry and any(isinstance(x, CallTest) for x in tests):
        raise BadRequest("field 'config.provided_data.entry_point': call tests need a function name")
    upd: dict[str, Any] = {"tests": tests, "entry_point": entry}
    if cfg.run_timeout is not None:
        upd["time_limit_s"] = float(cfg.run_timeout)
    elif base is None:
        upd["time_limit_s"] = DEFAULT_RUN_TIMEOUT_S
    if cfg.memory_limit_MB is not None and cfg.memory_limit_MB > 0:
        upd["memory_limit_mb"] = int(cfg.memory_limit_MB)
    if extra.get("float_tolerance") is not None:
        upd["float_tolerance"] = float(extra["float_tolerance"])
    if base is None:
        base = Problem(
            id=f"{req.dataset or 'request'}/{req.id}",
            source=req.dataset or "request",
            split="unknown",
            statement="",
            tests=[],
        )
    code = extract_fenced(req.completion, language)
    return base.model_copy(update=upd), code, infos


def _eval_result(req: SubmitRequest, code: str, infos: list[dict[str, Any]], jr: JudgeResult) -> EvalResult:
    language = req.config.language or "python"
    cases = [
        EvalTestCase(
            passed=tr.verdict == "accepted",
            exec_info=_exec_info(tr, language),
            test_info=infos[i] if i < len(infos) else None,
            verdict=tr.verdict,
            message=tr.message,
        )
        for i, tr in enumerate(jr.tests)
    ]
    summary = {
        "verdict": jr.verdict,
        "passed": jr.passed,
        "total": jr.total,
        "pass_ratio": jr.pass_ratio,
        "judge_s": jr.judge_s,
        "message": jr.message,
    }
    return EvalResult(
        id=req.id, accepted=jr.verdict == "accepted", extracted_code=code, tests=cases, extra=dict(summary), **summary
    )


# ------------------------------------------------------------------------------------------------------- operations
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


class _Metrics:
    """The app's Prometheus collectors, in a registry of its own (several apps can live in one process)."""

    def __init__(self, gate: AdmissionGate) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "rlvr_judge_requests", "HTTP requests by endpoint and status code", ["endpoint", "status"], registry=r
        )
        self.verdicts = Counter(
            "rlvr_judge_verdicts", "Verdicts returned (submission-level; run_code: the run's)", ["endpoint", "verdict"],
            registry=r,
        )
        self.rejected = Counter(
            "rlvr_judge_rejected", "Requests answered 503 because the queue was full", ["endpoint"], registry=r
        )
        self.duration = Histogram(
            "rlvr_judge_request_duration_seconds", "Request latency, seconds (queue wait included)", ["endpoint"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.queue_wait = Histogram(
            "rlvr_judge_queue_wait_seconds", "Time admitted requests waited for a worker, seconds",
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        Gauge("rlvr_judge_inflight", "Judge calls running now", registry=r).set_function(lambda: gate.running)
        Gauge("rlvr_judge_queue_depth", "Requests waiting for a worker", registry=r).set_function(lambda: gate.waiting)
        Gauge("rlvr_judge_queue_capacity", "Most requests allowed to wait", registry=r).set(gate.max_queue)
        Gauge("rlvr_judge_workers", "Concurrent judge calls (sandboxes)", registry=r).set(gate.workers)

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


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


# --------------------------------------------------------------------------------------------------------------- app
def _decode_files(files: dict[str, str | None]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name, b64 in files.items():
        if b64 is None:
            continue
        try:
            out[name] = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadRequest(f"field 'files.{name}': not valid base64: {exc}") from exc
    return out


def create_app(judge: Any = None, *, max_queue: int | None = None, workers: int | None = None) -> FastAPI:
    """The FastAPI application serving ``judge`` (see the module docstring for the endpoints).

    ``judge``: an object with the :class:`rlvr.judge.Judge` methods; ``None`` = an embedded ``Judge()`` created at
    startup and closed at shutdown (``RLVR_SANDBOX_WORKERS`` sandboxes). ``workers``: concurrent judge calls (default:
    ``judge.workers``, else ``RLVR_SANDBOX_WORKERS`` or the CPU count). ``max_queue``: requests that may wait for a
    worker before 503 (default ``RLVR_SANDBOX_MAX_QUEUE``, else ``RLVR_SANDBOX_QUEUE_FACTOR`` × workers)."""
    import os

    from rlvr.config import RuntimeSettings

    settings = RuntimeSettings()
    n = workers or getattr(judge, "workers", None) or settings.sandbox_workers or os.cpu_count() or 1
    if max_queue is None:
        max_queue = settings.sandbox_max_queue
    if max_queue is None:
        max_queue = math.ceil(settings.sandbox_queue_factor * n)
    gate = AdmissionGate(int(n), int(max_queue), settings.sandbox_retry_after_max_s)
    metrics = _Metrics(gate)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        import anyio.to_thread

        limiter = anyio.to_thread.current_default_thread_limiter()  # never the bottleneck below the gate
        limiter.total_tokens = max(limiter.total_tokens, gate.workers + 8)
        owned = None
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

    app = FastAPI(title="rlvr judge", description="SandboxFusion/ScaleBox-compatible code judge", lifespan=lifespan)
    app.state.judge = judge
    app.state.gate = gate
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
            if endpoint in _GATED or status >= 400:
                log.info(
                    "request",
                    extra={"endpoint": endpoint, "method": request.method, "status": status, "verdict": verdict,
                           "duration_s": round(dt, 6), "queue_wait_s": None if wait is None else round(wait, 6)},
                )

    async def gated(request: Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn`` in the thread pool once the gate admits the request (raises :class:`Saturated`)."""
        async with gate.slot() as wait_s:
            request.state.queue_wait_s = wait_s
            metrics.queue_wait.observe(wait_s)
            return await run_in_threadpool(fn, *args, **kwargs)

    @app.exception_handler(Saturated)
    async def _saturated(request: Request, exc: Saturated) -> JSONResponse:
        metrics.rejected.labels(request.url.path).inc()
        return JSONResponse(
            status_code=503, content={"detail": str(exc)}, headers={"Retry-After": str(exc.retry_after_s)}
        )

    @app.get("/metrics")
    async def prometheus_metrics() -> Response:
        """Prometheus text exposition (see the module docstring for the metric names)."""
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(content=metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    def the_judge() -> Any:
        j = app.state.judge
        if j is None:  # used without its lifespan (e.g. TestClient outside a ``with`` block)
            raise RuntimeError("the judge is not started (lifespan did not run)")
        return j

    @app.exception_handler(BadRequest)
    async def _bad_request(_: Request, exc: BadRequest) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.get("/v1/ping")
    async def ping() -> str:
        """Liveness probe (SandboxFusion): answers ``"pong"``."""
        return "pong"

    @app.post("/run_code", response_model=RunCodeResponse, response_model_exclude_none=False)
    async def run_code(req: RunCodeRequest, request: Request) -> RunCodeResponse:
        """Run one program (SandboxFusion ``/run_code``)."""
        from rlvr.judge.languages import UnknownLanguageError, get_language

        try:
            get_language(req.language)
        except UnknownLanguageError as exc:
            return RunCodeResponse(status="SandboxError", message=str(exc))
        files = _decode_files(req.files)
        mem = req.memory_limit_MB if req.memory_limit_MB > 0 else DEFAULT_MEMORY_LIMIT_MB
        kwargs: dict[str, Any] = {
            "stdin": req.stdin or "",
            "timeout_s": float(req.run_timeout),
            "memory_limit_mb": mem,
            "files": files or None,
        }
        if not _is_python(req.language):
            kwargs["language"] = req.language
        try:
            rr = await gated(request, the_judge().run_code, req.code, **kwargs)
        except UnknownLanguageError as exc:
            return RunCodeResponse(status="SandboxError", message=str(exc))
        except Saturated:
            raise
        except Exception as exc:  # infrastructure: SandboxFusion answers SandboxError, never a 500
            request.state.verdict = "sandbox_error"
            return RunCodeResponse(status="SandboxError", message=f"{type(exc).__name__}: {exc}"[:2000])
        request.state.verdict = rr.verdict
        return run_response(rr, req.language)

    @app.post("/common_evaluate_batch", response_model=EvalResult)
    async def common_evaluate_batch(req: SubmitRequest, request: Request) -> EvalResult:
        """Judge one submission on all its test cases in one request (ScaleBox)."""
        from rlvr.judge.languages import UnknownLanguageError

        problem, code, infos = problem_from_submit(req)
        language = req.config.language or "python"
        args: tuple[Any, ...] = (problem, code) if _is_python(language) else (problem, code, language)
        try:
            jr = await gated(request, the_judge().judge, *args)
        except UnknownLanguageError as exc:
            raise BadRequest(f"field 'config.language': {exc}") from exc
        request.state.verdict = jr.verdict
        return _eval_result(req, code, infos, jr)

    @app.post("/rlvr/judge", response_model=JudgeResult)
    async def rlvr_judge(req: JudgeRequest, request: Request) -> JudgeResult:
        """Judge one solution on a Problem (rlvr's native endpoint)."""
        from rlvr.judge.languages import UnknownLanguageError

        problem = req.to_problem()
        args: tuple[Any, ...] = (
            (problem, req.solution) if _is_python(req.language) else (problem, req.solution, req.language)
        )
        try:
            jr = await gated(request, the_judge().judge, *args)
        except UnknownLanguageError as exc:
            raise BadRequest(f"field 'language': {exc}") from exc
        request.state.verdict = jr.verdict
        return jr

    @app.post("/rlvr/call_outputs")
    async def rlvr_call_outputs(req: JudgeRequest, request: Request) -> JSONResponse:
        """``repr`` of each call test's return value (``null`` where it failed)."""
        from rlvr.judge.sandbox import SandboxError

        problem = req.to_problem()
        try:
            outs = await gated(request, the_judge().call_outputs, problem, req.solution)
        except SandboxError as exc:
            return JSONResponse(status_code=500, content={"detail": f"sandbox_error: {exc}"[:2000]})
        except ValueError as exc:
            raise BadRequest(str(exc)) from exc
        return JSONResponse(content={"outputs": outs})

    @app.get("/rlvr/info")
    async def rlvr_info() -> dict[str, Any]:
        """Judge version, available languages and sandbox count of this server."""
        from rlvr.judge.core import JUDGE_VERSION
        from rlvr.judge.languages import available_languages

        return {
            "judge_version": JUDGE_VERSION,
            "languages": available_languages(),
            "workers": getattr(the_judge(), "workers", None),
            "max_queue": gate.max_queue,
        }

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
        "rlvr.judge.server:create_app", factory=True, host=host, port=port, workers=workers, log_level=log_level,
        access_log=False,
    )
