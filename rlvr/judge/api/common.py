"""What every wire API of the judge server shares: the 400 error type, the Python-language test, the app's judge and
the text boundary (every response renders as valid UTF-8 JSON, whatever bytes a program wrote)."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from rlvr.judge.verdict import safe_text

__all__ = [
    "PYTHON_NAMES",
    "REQUEST_ID_HEADER",
    "BadRequest",
    "BoundedJSONRequest",
    "BoundedJSONRoute",
    "SafeJSONResponse",
    "is_python",
    "safe_text",
    "the_judge",
]

#: Header carrying a request's id (echoed by the server; the native API also echoes the body's ``request_id``).
REQUEST_ID_HEADER = "X-Request-ID"

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


class SafeJSONResponse(JSONResponse):
    """The server's JSON response: as Starlette's, but any string that is not valid Unicode (a program's invalid
    UTF-8 output carried as surrogates) is rendered with U+FFFD instead of failing with a 500."""

    def render(self, content: Any) -> bytes:
        """Serialise ``content`` to UTF-8 JSON bytes (never raises for undecodable program output)."""
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
        return safe_text(text).encode("utf-8")


class BoundedJSONRequest(Request):
    """A request whose JSON body is parsed by pydantic-core's parser (``pydantic_core.from_json``) instead of
    ``json.loads``: linear time, integers of at most ~4,300 digits, nesting at most 200 levels, no lone surrogates, no
    ``NaN``/``Infinity``. ``json.loads`` is quadratic in an integer's digits (a 1-million-digit number takes ~4 s of
    the event loop, with the interpreter's digit limit lifted as :mod:`rlvr.judge.literal` does), so a body could
    stall every other request. A violation is answered 400 naming the problem."""

    async def json(self) -> Any:
        """The parsed body (cached). Raises ``HTTPException(400)`` for a body that is not bounded JSON."""
        if not hasattr(self, "_json"):
            from pydantic_core import from_json

            body = await self.body()
            try:
                self._json = from_json(body, allow_inf_nan=False)
            except ValueError as exc:
                detail = f"request body: not valid JSON within bounds: {exc}"
                raise HTTPException(status_code=400, detail=detail) from exc
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
