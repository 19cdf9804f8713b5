"""What every wire API of the judge server shares: the 400 error type, the Python-language test, the app's judge,
bounded body parsing callable off the event loop (:func:`parse_body`) and the text boundary (every response renders
as valid UTF-8 JSON, whatever bytes a program wrote: :func:`render_json`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from fastapi import HTTPException, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError

from rlvr.judge.verdict import safe_text

__all__ = [
    "CHUNK",
    "MAX_REQUEST_ID",
    "PYTHON_NAMES",
    "REQUEST_ID_HEADER",
    "REQUEST_ID_PATTERN",
    "SMALL",
    "STR_CHUNK",
    "BadRequest",
    "BoundedJSONRequest",
    "BoundedJSONRoute",
    "Rendered",
    "SafeJSONResponse",
    "body_schema",
    "check_request_id",
    "is_python",
    "parse_body",
    "parse_json",
    "problem_from_payload",
    "render_json",
    "safe_text",
    "shed",
    "the_judge",
    "validate_chunked",
]

#: Header carrying a request's id (echoed by the server; the native API also echoes the body's ``request_id``).
REQUEST_ID_HEADER = "X-Request-ID"

#: Longest request id, characters (body ``request_id`` and ``X-Request-ID``).
MAX_REQUEST_ID = 128
#: A request id: 1–128 printable ASCII characters (space to ``~``): echoable as an HTTP header value as it is, so an
#: id can never make the answer unsendable (CR/LF, NUL) or un-encodable (outside Latin-1).
REQUEST_ID_PATTERN = r"^[\x20-\x7e]{1,128}$"
_RID_RE = re.compile(REQUEST_ID_PATTERN.encode("ascii"))


def check_request_id(value: bytes) -> str | None:
    """``None`` when ``value`` (a raw ``X-Request-ID`` header value) is a valid request id
    (:data:`REQUEST_ID_PATTERN`), else a one-line reason naming the header."""
    if _RID_RE.fullmatch(value):
        return None
    return (f"header 'X-Request-ID': expected 1-{MAX_REQUEST_ID} printable ASCII characters, got {len(value)} bytes"
            f" {value[:40]!r}")


#: Language names that mean the embedded judge's default language (Python).
PYTHON_NAMES = frozenset({"python", "python3", "py"})


class BadRequest(ValueError):
    """A request the server cannot honour (answered with HTTP 400); the message names the field."""


def is_python(language: str) -> bool:
    """True for the names of Python (:data:`PYTHON_NAMES`, case-insensitive)."""
    return language.lower() in PYTHON_NAMES


def the_judge(request: Request) -> Any:
    """The judge serving ``request``'s app. Raises ``RuntimeError`` when the app's lifespan did not run (e.g. a
    ``TestClient`` used outside a ``with`` block)."""
    j = request.app.state.judge
    if j is None:
        raise RuntimeError("the judge is not started (lifespan did not run)")
    return j


#: Elements of a long list serialised per C-level call by :func:`render_json` (and validated per call by
#: :func:`validate_chunked`): each call holds the interpreter lock for a bounded time, so the event loop (another
#: thread) gets it back within the switch interval however long the list is.
CHUNK = 256


def _dumps(value: Any) -> str:
    return safe_text(json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")))


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


#: Characters of a long string (a program's output) escaped and made valid UTF-8 per call by :func:`render_json`.
STR_CHUNK = 1 << 18


def _key(k: Any) -> str:
    return _dumps(k if isinstance(k, str) else json.dumps(k)) + ":"


def _render_parts(value: Any, out: list[str]) -> None:
    """Append ``value``'s JSON text to ``out``, walking models, dicts and short lists; a list longer than
    :data:`CHUNK` is rendered :data:`CHUNK` elements per call (its elements' strings are a test report's, capped), a
    string longer than :data:`STR_CHUNK` a slice per call."""
    if isinstance(value, (BaseModel, dict)):
        items = value.items() if isinstance(value, dict) else iter(value)
        out.append("{")
        for n, (k, v) in enumerate(items):
            out.append(("," if n else "") + _key(k))
            _render_parts(v, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        if len(value) > CHUNK:
            for i in range(0, len(value), CHUNK):
                out.append(("," if i else "") + _dumps([_dump(v) for v in value[i:i + CHUNK]])[1:-1])
        else:
            for n, v in enumerate(value):
                if n:
                    out.append(",")
                _render_parts(v, out)
        out.append("]")
    elif isinstance(value, str) and len(value) > STR_CHUNK:
        out.append('"')
        out.extend(_dumps(value[i:i + STR_CHUNK])[1:-1] for i in range(0, len(value), STR_CHUNK))
        out.append('"')
    elif value is None or isinstance(value, (str, int, float)):
        out.append(_dumps(value))
    else:
        from pydantic_core import to_jsonable_python

        out.append(_dumps(to_jsonable_python(value)))


#: Up to this size hint (characters before JSON escaping) :func:`render_json` renders in one call (~0.1 ms for a
#: 10-test answer, against ~0.9 ms walking it): at ~10 ms per MB of text, even with every character escaped 6×
#: such a call holds the interpreter lock for at most ~30 ms.
SMALL = 1 << 19


def _to_json(content: Any) -> bytes | None:
    """``content`` rendered by pydantic-core's serializer (one call in Rust: ~10x less CPU than ``model_dump`` +
    ``json.dumps`` for a 10-test answer), or None where that would differ from :func:`_dumps`: a string that is not
    valid Unicode (pydantic-core refuses lone surrogates; :func:`_dumps` writes U+FFFD) or a non-finite float (written
    as ``Infinity``/``NaN`` here, refused by :func:`_dumps`; a text holding either word falls back too, which is
    only slower). The JSON is the same value; number spellings may differ (``0.00001`` for ``1e-05``)."""
    from pydantic_core import PydanticSerializationError, to_json

    try:
        data = to_json(content, inf_nan_mode="constants")
    except (PydanticSerializationError, TypeError, ValueError):
        return None
    if b"Infinity" in data or b"NaN" in data:
        return None
    return data


def render_json(content: Any, size_hint: int | None = None) -> bytes:
    """``content`` (plain JSON values, or a pydantic model) as compact UTF-8 JSON bytes; any string that is not valid
    Unicode (a program's invalid UTF-8 output carried as surrogates) is rendered with U+FFFD. Never raises for
    undecodable program output. A long list (over :data:`CHUNK` elements, e.g. the per-test results of a request
    with 40,000 tests) is rendered :data:`CHUNK` elements per call and a long string (16 MB of a program's
    undecodable output: ~0.5 s in one call) :data:`STR_CHUNK` characters per call, so rendering off the event loop
    never holds the interpreter lock for long. ``size_hint``: an upper estimate of the answer's length in characters
    (from what the caller knows: outputs' lengths, tests × report caps, the body's size); at most :data:`SMALL`, the
    answer is rendered in one call; ``None`` = unknown (rendered in pieces)."""
    if size_hint is not None and size_hint <= SMALL:
        fast = _to_json(content)
        return fast if fast is not None else _dumps(_dump(content)).encode("utf-8")
    parts: list[str] = []
    _render_parts(content, parts)
    return b"".join(p.encode("utf-8") for p in parts)


class SafeJSONResponse(JSONResponse):
    """The server's JSON response: as Starlette's, but any string that is not valid Unicode (a program's invalid
    UTF-8 output carried as surrogates) is rendered with U+FFFD instead of failing with a 500."""

    def render(self, content: Any) -> bytes:
        """Serialise ``content`` to UTF-8 JSON bytes (:func:`render_json`)."""
        return render_json(content)


class Rendered(Response):
    """A JSON answer already rendered to bytes (off the event loop, by :func:`rlvr.judge.api.admission.admitted`):
    the loop only sends it."""

    media_type = "application/json"


_M = TypeVar("_M", bound=BaseModel)


def parse_json(body: bytes) -> Any:
    """``body`` parsed by pydantic-core's bounded parser (see :class:`BoundedJSONRequest`); an empty body is ``None``.
    Raises ``HTTPException(400)`` for a body that is not bounded JSON."""
    if not body:
        return None
    from pydantic_core import from_json

    try:
        return from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        raise HTTPException(status_code=400, detail=f"request body: not valid JSON within bounds: {exc}") from exc


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads its body itself (:func:`parse_body`): documents ``model`` as the JSON
    request body, as a body parameter would."""
    schema = model.model_json_schema()
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _validation_error(exc: ValidationError, prefix: tuple[Any, ...], offset: int | None = None) -> Exception:
    from fastapi.exceptions import RequestValidationError

    errors = []
    for e in exc.errors(include_url=False):
        loc = tuple(e.get("loc", ()))
        if offset is not None and loc and isinstance(loc[0], int):
            loc = (loc[0] + offset, *loc[1:])
        errors.append({**e, "loc": (*prefix, *loc)})
    return RequestValidationError(errors)


def validate_chunked(items: list[Any], adapter: TypeAdapter[Any], loc: tuple[Any, ...]) -> list[Any]:
    """``items`` validated by ``adapter`` (a ``TypeAdapter(list[X])``) :data:`CHUNK` elements per call, so no single
    call holds the interpreter lock for long (validating 400,000 tests in one call takes ~5 s). Raises FastAPI's
    ``RequestValidationError`` with ``loc`` + the element's index on a bad element."""
    out: list[Any] = []
    for i in range(0, len(items), CHUNK):
        try:
            out.extend(adapter.validate_python(items[i:i + CHUNK]))
        except ValidationError as exc:
            raise _validation_error(exc, loc, offset=i) from None
    return out


def _tests_adapter() -> TypeAdapter[Any]:
    global _TESTS_ADAPTER
    if _TESTS_ADAPTER is None:
        from rlvr.data.schema import Test

        _TESTS_ADAPTER = TypeAdapter(list[Test])
    return _TESTS_ADAPTER


_TESTS_ADAPTER: TypeAdapter[Any] | None = None


def parse_body(body: bytes, model: type[_M], long_tests: tuple[str, ...] = ()) -> _M:
    """The request body ``body`` (raw bytes) as ``model``, the way FastAPI parses a body parameter, but callable off
    the event loop: 400 for a body that is not bounded JSON (:func:`parse_json`), FastAPI's
    ``RequestValidationError`` (answered 422 naming the field) when it does not fit ``model``.

    ``long_tests``: top-level fields holding a Problem whose ``tests`` list is validated apart, a chunk at a time
    (:func:`validate_chunked`), e.g. ``("problem",)`` for the native API."""
    from fastapi.exceptions import RequestValidationError

    data = parse_json(body)
    if data is None:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    apart: dict[str, list[Any]] = {}
    for key in long_tests:
        holder = data.get(key) if isinstance(data, dict) else None
        if isinstance(holder, dict) and isinstance(holder.get("tests"), list) and len(holder["tests"]) > CHUNK:
            apart[key] = holder["tests"]
            data[key] = {**holder, "tests": []}
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, ("body",)) from None
    for key, tests in apart.items():
        target = getattr(parsed, key)
        if target is not None:
            target.tests = validate_chunked(tests, _tests_adapter(), ("body", key, "tests"))
    return parsed


def problem_from_payload(gt: Any, data_source: str, field: str) -> Any:
    """:func:`rlvr.data.schema.from_ground_truth` for request content: a JSON string is parsed by the bounded parser
    and a long ``tests`` list validated a chunk at a time (:func:`validate_chunked`). Raises :class:`BadRequest`
    naming ``field``."""
    from rlvr.data.schema import Problem

    if isinstance(gt, str):
        try:
            gt = parse_json(gt.encode("utf-8", "surrogatepass"))
        except HTTPException as exc:
            raise BadRequest(f"field '{field}': {exc.detail}") from exc
    if not isinstance(gt, dict) or not isinstance(gt.get("tests"), list):
        raise BadRequest(f"field '{field}': expected a JSON object with a 'tests' list")
    from fastapi.exceptions import RequestValidationError

    try:
        tests = validate_chunked(gt["tests"], _tests_adapter(), (field, "tests"))
    except RequestValidationError as exc:
        err = exc.errors()[0]
        raise BadRequest(f"field '{'.'.join(map(str, err['loc']))}': {err['msg']}") from None
    d = {**gt, "tests": []}
    d.setdefault("id", f"{data_source}/unknown")
    try:
        problem = Problem(source=data_source, split="unknown", statement="", **d)
    except (ValidationError, TypeError) as exc:
        raise BadRequest(f"field '{field}': {exc}") from exc
    problem.tests = tests
    return problem


def shed(*roots: Any) -> None:
    """Free request-sized object trees a chunk at a time: every list longer than :data:`CHUNK` reachable from
    ``roots`` (through models, dicts, tuples and shorter lists) is emptied :data:`CHUNK` elements per step.

    CPython frees a list's elements in one uninterruptible C call, so dropping the last reference to a 40,000-test
    request tree holds the interpreter lock for ~0.3 s wherever it happens (measured); shedding it in steps lets the
    event loop in between. Call it on what a request built, once its answer is rendered; the objects must not be used
    afterwards (their lists are emptied in place)."""
    stack = list(roots)
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if id(v) in seen or isinstance(v, (str, bytes, int, float, bool)) or v is None:
            continue
        seen.add(id(v))
        if isinstance(v, list) and len(v) > CHUNK:
            while v:
                del v[-CHUNK:]
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, BaseModel):
            stack.extend(v.__dict__.values())
            stack.extend((v.__pydantic_extra__ or {}).values())


class BoundedJSONRequest(Request):
    """A request whose JSON body is parsed by pydantic-core's parser (``pydantic_core.from_json``) instead of
    ``json.loads``: linear time, integers of at most ~4,300 digits, nesting at most 200 levels, no lone surrogates, no
    ``NaN``/``Infinity``. ``json.loads`` is quadratic in an integer's digits (a 1-million-digit number takes ~4 s of
    the event loop, with the interpreter's digit limit lifted as :mod:`rlvr.judge.literal` does), so a body could
    stall every other request. A violation is answered 400 naming the problem."""

    async def json(self) -> Any:
        """The parsed body (cached). Raises ``HTTPException(400)`` for a body that is not bounded JSON."""
        if not hasattr(self, "_json"):
            self._json = parse_json(await self.body())
        return self._json


class BoundedJSONRoute(APIRoute):
    """The route class of every judge API router: handlers see a :class:`BoundedJSONRequest` (FastAPI's documented
    custom ``APIRoute``/``Request`` pattern)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The default handler, called with the request re-wrapped as a :class:`BoundedJSONRequest`."""
        original = super().get_route_handler()

        async def handler(request: Request) -> Response:
            return await original(BoundedJSONRequest(request.scope, request.receive))

        return handler
