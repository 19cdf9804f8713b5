"""Input limits of the judge server: what a request may ask for, checked before anything runs.

Every violation is answered with a 4xx whose message names the field (never a 500, never a run):

* ``run_timeout`` / ``compile_timeout`` (seconds): finite, ``0 < t <=`` :data:`MAX_TIMEOUT_S` (60 s); 422 on
  ``/run_code`` and ``/common_evaluate_batch`` (pydantic type :data:`Seconds`).
* ``memory_limit_MB`` (MB): ``-1`` (the server's default) or :data:`MIN_MEMORY_MB` (16) … :data:`MAX_MEMORY_MB`
  (4096); 422 (:data:`MemoryMB`).
* A problem's ``time_limit_s`` / ``memory_limit_mb`` (also its checker's) and ``float_tolerance`` (finite, ``>= 0``):
  the same ranges, ``-1`` not allowed; 400 (native API, ScaleBox ``ground_truth``; :func:`check_problem_limits`).
* ``files`` names (``/run_code``): relative, ``/``-separated, no ``..``, ``.`` or empty component, no NUL or control
  character, no trailing ``/`` (a directory), at most :data:`MAX_NAME_COMPONENT` bytes per component and
  :data:`MAX_NAME_BYTES` in all, at most :data:`MAX_FILES` files; 400 (:func:`check_file_name`).
* ``language``: a language of :mod:`rlvr.judge.languages` whose toolchain is installed; 400 (:func:`check_language`).
* ``max_timeouts`` (``/rlvr/judge``): absent (the server judge's own rule), or an int in ``1 …`` the server judge's
  own ``max_timeouts`` (any int ``>= 0`` when that is 0: it runs every test already); 0 ("run every test") or a
  value above the server's is refused, so a request can only lower what it costs; 422 for a negative or non-integer
  value, 400 otherwise (:func:`check_max_timeouts`).
* Request body: at most ``RLVR_SANDBOX_MAX_BODY_MB`` MiB (default 32); 413, decided from ``Content-Length`` before any
  byte is read and by counting the streamed bytes otherwise (:class:`BodyLimit`, installed by
  :func:`rlvr.judge.api.app.create_app`).
* Request JSON: parsed by a linear-time parser with integers of at most ~4,300 digits and 200 nesting levels, no
  ``NaN``/``Infinity``; 400 (:class:`rlvr.judge.api.common.BoundedJSONRequest`).

The ranges bound what one request can cost the server (a worker for at most ``tests × (60 s + 2 s) + 60 s`` of
runs, plus, for a problem with a special checker, ``tests × checker.time_limit_s`` of checks and at most
``max_timeouts`` checks broken by the submission's output with their reference checks, ``2 × max_timeouts ×
checker.time_limit_s``: :class:`rlvr.judge.scoring.CheckBudget`, where ``max_timeouts`` is the server judge's own
value: a request's is never above it; a sandbox of at most 4 GiB); they are the server's, not a dataset's
hyperparameters.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from rlvr.judge.api.common import BadRequest
from rlvr.judge.rule import lowers

__all__ = [
    "MAX_FILES",
    "MAX_MEMORY_MB",
    "MAX_NAME_BYTES",
    "MAX_NAME_COMPONENT",
    "MAX_TIMEOUT_S",
    "MIN_MEMORY_MB",
    "BodyLimit",
    "MemoryMB",
    "Seconds",
    "check_file_name",
    "check_language",
    "check_max_timeouts",
    "check_memory_mb",
    "check_problem_limits",
    "check_timeout_s",
]

#: Largest time limit a request may ask for, seconds (per run, or per test).
MAX_TIMEOUT_S = 60.0
#: Smallest and largest memory limit a request may ask for, MB (``-1`` = the server's default).
MIN_MEMORY_MB = 16
MAX_MEMORY_MB = 4096
#: Most files one ``/run_code`` request may write next to the program.
MAX_FILES = 64
#: Longest file name (UTF-8 bytes) in all and per ``/``-separated component (Linux ``NAME_MAX``).
MAX_NAME_BYTES = 1024
MAX_NAME_COMPONENT = 255


def _memory_value(value: int) -> int:
    if value != -1 and not MIN_MEMORY_MB <= value <= MAX_MEMORY_MB:
        raise ValueError(f"{value} MB is out of range [{MIN_MEMORY_MB}, {MAX_MEMORY_MB}] or -1 (server default)")
    return value


#: A request's time limit, seconds: finite, ``0 < t <= MAX_TIMEOUT_S`` (pydantic; 422 otherwise).
Seconds = Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)]
#: A request's memory limit, MB: ``-1`` (server default) or ``MIN_MEMORY_MB … MAX_MEMORY_MB`` (pydantic; 422 otherwise).
MemoryMB = Annotated[int, Field(ge=-1, le=MAX_MEMORY_MB), AfterValidator(_memory_value)]


def check_timeout_s(value: Any, field: str) -> float:
    """``value`` as seconds if it is a finite number in ``(0, MAX_TIMEOUT_S]``. Raises :class:`BadRequest` naming
    ``field`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRequest(f"field '{field}': expected a number of seconds, got {type(value).__name__}")
    t = float(value) if not isinstance(value, int) or abs(value) < 10**18 else math.inf
    if not math.isfinite(t) or not 0 < t <= MAX_TIMEOUT_S:
        raise BadRequest(f"field '{field}': {value!r} s is out of range (0, {MAX_TIMEOUT_S:g}] seconds")
    return t


def check_memory_mb(value: Any, field: str, allow_default: bool = True) -> int:
    """``value`` as MB if it is an int in ``[MIN_MEMORY_MB, MAX_MEMORY_MB]`` (or ``-1`` = server default when
    ``allow_default``). Raises :class:`BadRequest` naming ``field`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"field '{field}': expected an integer number of MB, got {type(value).__name__}")
    if allow_default and value == -1:
        return value
    if not MIN_MEMORY_MB <= value <= MAX_MEMORY_MB:
        extra = " or -1 (server default)" if allow_default else ""
        raise BadRequest(f"field '{field}': {value} MB is out of range [{MIN_MEMORY_MB}, {MAX_MEMORY_MB}]{extra}")
    return value


def check_file_name(name: str, field: str = "files") -> str:
    """``name`` if it is a safe relative file name (see the module table). Raises :class:`BadRequest` naming the
    field and the reason otherwise."""
    where = f"field '{field}' name {name[:80]!r}"
    if not name:
        raise BadRequest(f"{where}: empty file name")
    if any(ord(c) < 32 or c == "\x7f" for c in name):
        raise BadRequest(f"{where}: NUL or control character in a file name")
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"{where}: not valid Unicode ({exc.reason})") from exc
    if len(raw) > MAX_NAME_BYTES:
        raise BadRequest(f"{where}: {len(raw)} bytes, longer than {MAX_NAME_BYTES}")
    if name.startswith("/"):
        raise BadRequest(f"{where}: absolute path (names are relative to the program's directory)")
    if name.endswith("/"):
        raise BadRequest(f"{where}: names a directory, not a file")
    for part in name.split("/"):
        if part in ("", ".", ".."):
            raise BadRequest(f"{where}: path component {part!r} is not allowed")
        if len(part.encode("utf-8")) > MAX_NAME_COMPONENT:
            raise BadRequest(f"{where}: a path component is longer than {MAX_NAME_COMPONENT} bytes")
    return name


def check_language(language: str, field: str = "language") -> None:
    """Raise :class:`BadRequest` naming ``field`` when ``language`` is unknown or its toolchain is not installed."""
    from rlvr.judge.languages import UnknownLanguageError, available_languages, get_language

    try:
        get_language(language)
    except UnknownLanguageError as exc:
        raise BadRequest(f"field '{field}': {exc} (available: {', '.join(available_languages())})") from exc


def check_max_timeouts(value: int, own: int | None, field: str = "max_timeouts") -> int:
    """``value``, a request's timeout rule (an int >= 0, pydantic-checked), if the server's judge may apply it:
    ``1 <= value <= own``, or any value when ``own`` (the server judge's own ``max_timeouts``) is 0. A request can
    only lower the work one submission costs: 0 (run every test) or a value above ``own`` would raise it past the
    server's cost bound (module doc). Raises :class:`BadRequest` naming ``field`` and both values otherwise, or when
    the server's judge has no timeout rule (``own`` is ``None``)."""
    if own is None:
        raise BadRequest(f"field '{field}': {value} asked for, but this server's judge has no max_timeouts rule to "
                         f"lower")
    if lowers(own, value):
        return value
    asked = "0 (run every test)" if value == 0 else str(value)
    raise BadRequest(f"field '{field}': {asked} is above this server's max_timeouts={own}; a request may ask for "
                     f"1 to {own}")


def check_problem_limits(problem: Any, field: str = "problem") -> None:
    """Check a Problem's ``time_limit_s`` / ``memory_limit_mb`` (and its checker's) against the server's ranges.
    Raises :class:`BadRequest` naming the field."""
    check_timeout_s(problem.time_limit_s, f"{field}.time_limit_s")
    check_memory_mb(problem.memory_limit_mb, f"{field}.memory_limit_mb", allow_default=False)
    checker = getattr(problem, "checker", None)
    if checker is not None:
        check_timeout_s(checker.time_limit_s, f"{field}.checker.time_limit_s")
        check_memory_mb(checker.memory_limit_mb, f"{field}.checker.memory_limit_mb", allow_default=False)
    tol = getattr(problem, "float_tolerance", None)
    if tol is not None and (not math.isfinite(tol) or tol < 0):
        raise BadRequest(f"field '{field}.float_tolerance': {tol!r} is not a finite number >= 0")


class BodyLimit:
    """ASGI middleware bounding request bodies to ``max_bytes`` without buffering more than that.

    A declared ``Content-Length`` over the limit is answered 413 at once, before any byte of the body is read; a body
    without a length (chunked) is counted as it streams and answered 413 as soon as it passes the limit (RFC 9110
    §15.5.14): the 413 is sent from here, the application then sees the client as disconnected and whatever it still
    tries to send is dropped (this works through any middleware, which an exception raised from ``receive`` would
    not: ``BaseHTTPMiddleware`` wraps it in an exception group). The JSON ``detail`` names the limit and ``setting``,
    the variable that sets it."""

    def __init__(self, app: Any, max_bytes: int, setting: str = "RLVR_SANDBOX_MAX_BODY_MB") -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.setting = setting

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Serve the request with a counting ``receive``, or answer 413."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from rlvr.judge.api.common import SafeJSONResponse

        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            detail = f"request body of {int(declared)} bytes is larger than {self.max_bytes} ({self.setting})"
            # the body stays unread: the connection cannot carry another request
            await SafeJSONResponse(status_code=413, content={"detail": detail}, headers={"Connection": "close"})(
                scope, receive, send
            )
            return
        seen = 0
        started = answered = False

        async def counting_receive() -> Any:
            nonlocal seen, answered
            if answered:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    answered = True
                    if not started:
                        detail = f"request body larger than {self.max_bytes} bytes ({self.setting})"
                        await SafeJSONResponse(status_code=413, content={"detail": detail})(scope, receive, send)
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if answered:
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counting_receive, tracking_send)
