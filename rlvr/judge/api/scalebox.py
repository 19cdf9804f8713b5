"""ScaleBox's wire API: ``POST /common_evaluate_batch`` (all test cases of one submission in one request).

ScaleBox's unified evaluation (icip-cas/ScaleBox ``README.md`` "Calling the sandbox" and
``sandbox/server/online_judge_api.py``). Request = SandboxFusion's ``SubmitRequest`` (``id``, ``dataset``,
``completion`` (Markdown fences allowed: the last block of the language, or the whole text), ``config``: ``language``
(required), ``run_timeout`` (seconds per test), ``provided_data.test_cases``, ``extra``). ``test_cases`` forms
accepted:
``{"type": "stdin_stdout", "input": [str], "output": [str]}``;
``{"type": "function_call", "fn_name": str, "input": [[arg, …]], "output": [[ret]], "json_input": bool}``;
``{"type": "assert", "test": str, "entry_point": str}`` (HumanEval ``check``; Python only).
Superset (rlvr's own, documented here because ScaleBox has no such fields): ``test_cases`` may also be a list of
single cases or of rlvr test objects (``{"kind": "stdio"|"call"|"assert", …}``, see :mod:`rlvr.data.schema`);
``provided_data.rlvr_tests`` adds rlvr test objects; ``provided_data.ground_truth`` (rlvr's ``ground_truth`` payload)
supplies a whole problem; ``provided_data.entry_point`` names the function for call/assert tests;
``config.memory_limit_MB`` and ``extra.float_tolerance`` set those limits. Not supported (HTTP 400):
``extra.special_judge_program``, MultiPL-E ``assert`` tests of other languages. ``extra.run_all_cases`` /
``total_timeout`` are accepted and ignored (the judge's own ``max_timeouts`` applies). Response = ScaleBox's
``EvalResult`` (``id``, ``accepted``, ``extracted_code``, ``tests[]`` with ``passed``, ``exec_info`` (a ``/run_code``
response), ``test_info``) plus, per test, ``verdict``/``message`` and, top level, ``verdict``, ``passed``, ``total``,
``pass_ratio``, ``judge_s``, ``message`` (also repeated in ``extra``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import from_json

from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest, Test
from rlvr.judge.api.admission import REPORT_CHARS, Answer, admitted, judge_program
from rlvr.judge.api.common import (
    BadRequest,
    BoundedJSONRoute,
    SafeJSONResponse,
    body_schema,
    is_python,
    parse_body,
    problem_from_payload,
    validate_chunked,
)
from rlvr.judge.api.limits import MemoryMB, Seconds, check_language, check_problem_limits
from rlvr.judge.api.sandboxfusion import RunCodeResponse, exec_info
from rlvr.judge.verdict import JudgeResult, Verdict

__all__ = [
    "DEFAULT_RUN_TIMEOUT_S",
    "EvalConfig",
    "EvalResult",
    "EvalTestCase",
    "SubmitRequest",
    "extract_fenced",
    "problem_from_submit",
    "router",
]

#: Per-test time limit (seconds) when a ScaleBox request gives no ``run_timeout`` (ScaleBox's default).
DEFAULT_RUN_TIMEOUT_S = 10.0

router = APIRouter(route_class=BoundedJSONRoute)


class EvalConfig(BaseModel):
    """SandboxFusion/ScaleBox ``TestConfig`` (the fields this server reads; others are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    language: str | None = None
    compile_timeout: Seconds | None = None
    run_timeout: Seconds | None = None
    memory_limit_MB: MemoryMB | None = None
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


# Possessive quantifiers: the opening line never backtracks (linear on an opening line without a newline, e.g. a
# million backticks), same matches as the greedy form (:data:`rlvr.generate.extract._FENCE` has the reasoning).
_FENCE = re.compile(r"^(?P<f>`{3,}+)[ \t]*+(?P<lang>[\w+#.-]*+)[^\n]*+\n(?P<body>.*?)(?:^(?P=f)[ \t]*+$|\Z)",
                    re.M | re.S)
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
    simplified: no heuristic extraction). Linear time in ``completion``, extra memory at most the blocks' text."""
    key = language.lower()
    tags = next((t for t in _LANG_TAGS.values() if key in t), {key}) | {""}
    blocks = [m.group("body") for m in _FENCE.finditer(completion) if m.group("lang").lower() in tags]
    return blocks[-1] if blocks else completion


_TESTS = TypeAdapter(list[Test])


def _lines(text: str) -> Iterator[str]:
    """The ``\\n``-separated lines of ``text``, one at a time (no list of every line)."""
    pos = 0
    while (end := text.find("\n", pos)) >= 0:
        yield text[pos:end]
        pos = end + 1
    yield text[pos:]


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
        if not is_python(language):
            raise BadRequest(f"field 'config.language': function_call tests need python, got {language!r}")
        ins = _case_list(tc, "input")
        outs = _case_list(tc, "output", len(ins))
        tests, infos = [], []
        for i, (a, b) in enumerate(zip(ins, outs, strict=True)):
            if isinstance(a, str) and tc.get("json_input"):  # LiveCodeBench: one JSON value per line
                try:  # the request's bounded JSON parser (linear; json.loads is quadratic in an integer's digits)
                    a = [from_json(line, allow_inf_nan=False) for line in _lines(a)]
                    b = [from_json(b, allow_inf_nan=False)] if isinstance(b, str) else b
                except ValueError as exc:
                    raise BadRequest(f"field 'config.provided_data.test_cases.input[{i}]': bad JSON: {exc}") from exc
            if not isinstance(a, list):
                raise BadRequest(f"field 'config.provided_data.test_cases.input[{i}]': expected a list of arguments")
            tests.append(CallTest(args=repr(a), expected=repr(_fn_output(b, i))))
            infos.append({"type": "function_call", "fn_name": fn, "input": a, "output": b})
        return tests, infos, fn
    if kind == "assert":
        if not is_python(language):
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
    check_language(language, "config.language")
    extra = cfg.extra or {}
    if extra.get("special_judge_program"):
        raise BadRequest("field 'config.extra.special_judge_program': special judges are not supported by rlvr")
    data = cfg.provided_data or {}
    tests: list[Any] = []
    infos: list[dict[str, Any]] = []
    entry: str | None = data.get("entry_point")
    base: Problem | None = None
    if data.get("ground_truth") is not None:
        base = problem_from_payload(data["ground_truth"], req.dataset or "unknown", "config.provided_data.ground_truth")
        check_problem_limits(base, "config.provided_data.ground_truth")
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
        if not isinstance(data["rlvr_tests"], list):
            raise BadRequest("field 'config.provided_data.rlvr_tests': expected a list of tests")
        try:
            own = validate_chunked(data["rlvr_tests"], _TESTS, ("config", "provided_data", "rlvr_tests"))
        except RequestValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(map(str, err["loc"]))
            raise BadRequest(f"field '{loc}': {err['msg']}") from None
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
        tol = extra["float_tolerance"]
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol < float("inf"):
            raise BadRequest(f"field 'config.extra.float_tolerance': {tol!r} is not a finite number >= 0")
        upd["float_tolerance"] = float(tol)
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
            exec_info=exec_info(tr, language),
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


def _evaluate(body: bytes, judge: Any) -> Answer:
    """The whole of ``/common_evaluate_batch`` after admission, in the thread pool: parse, build, judge, answer."""
    req = parse_body(body, SubmitRequest)
    problem, code, infos = problem_from_submit(req)
    language = req.config.language or "python"
    jr = judge_program(judge, problem, code, language, "config.language")
    hint = len(body) + REPORT_CHARS * len(jr.tests) + 4096  # echoes of the body (code, test_info) + reports
    return Answer(_eval_result(req, code, infos, jr), verdict=jr.verdict, keep=(req, problem, infos, jr),
                  size_hint=hint)


@router.post(
    "/common_evaluate_batch", response_model=EvalResult, response_class=SafeJSONResponse,
    openapi_extra=body_schema(SubmitRequest),
)
async def common_evaluate_batch(request: Request) -> Response:
    """Judge one submission on all its test cases in one request (ScaleBox). 400/422 for a bad request (naming the
    field), 500 ``sandbox_error: …`` only when the judge itself fails; any program output gets a verdict. The body is
    parsed, its code extracted and the answer built after admission, off the event loop
    (:func:`rlvr.judge.api.admission.admitted`)."""
    return await admitted(request, _evaluate)
