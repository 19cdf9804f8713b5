"""What every wire API of the judge server shares: the 400 error type, the Python-language test and the app's judge."""

from __future__ import annotations

from typing import Any

from fastapi import Request

__all__ = ["PYTHON_NAMES", "BadRequest", "is_python", "the_judge"]

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
