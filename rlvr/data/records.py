"""Record-level helpers shared by the dataset normalisers (:mod:`rlvr.data.loaders`, :mod:`rlvr.data.evalplus`,
:mod:`rlvr.data.hub`): typed field access that names the file/line and field on bad input, Problem construction with
the same error style, and the per-dataset default time limits.
"""

from __future__ import annotations

import ast
from typing import Any

from pydantic import ValidationError

from rlvr.data.errors import DataError
from rlvr.data.schema import Problem

__all__ = ["DEFAULT_TIME_LIMITS", "func_docstring", "get_field", "make_problem", "str_list", "time_limit"]

#: Per-test wall-clock limit (seconds) by dataset name. LeetCode asserts can be heavy (3 of 228 reference
#: solutions need >10 s for the whole check); CodeContests/APPS are full programs.
DEFAULT_TIME_LIMITS: dict[str, float] = {
    "humaneval": 10.0,
    "mbpp": 6.0,
    "mbpp_reg": 6.0,
    "mbpp_sanitized": 6.0,
    "humanevalplus": 6.0,
    "mbppplus": 6.0,
    "leetcode": 15.0,
    "leetcode_contest": 10.0,
    "codecontests": 10.0,
    "apps": 6.0,
}



def get_field(rec: dict[str, Any], key: str, where: str, typ: type | tuple[type, ...] = str) -> Any:
    """``rec[key]`` checked for presence and type; :class:`DataError` names ``where`` and the field otherwise."""
    if key not in rec or rec[key] is None:
        raise DataError(f"{where}: field '{key}': missing")
    val = rec[key]
    if not isinstance(val, typ):
        want = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise DataError(f"{where}: field '{key}': expected {want}, got {type(val).__name__}")
    return val


def str_list(rec: dict[str, Any], key: str, where: str) -> list[str]:
    """``rec[key]`` as a list of strings; :class:`DataError` names ``where`` and the field otherwise."""
    val = get_field(rec, key, where, list)
    if not all(isinstance(x, str) for x in val):
        raise DataError(f"{where}: field '{key}': expected a list of strings")
    return val


def make_problem(where: str, **kw: Any) -> Problem:
    """``Problem(**kw)``; a validation error becomes a :class:`DataError` naming ``where`` and the field."""
    try:
        return Problem(**kw)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise DataError(f"{where}: field '{'.'.join(map(str, e['loc']))}': {e['msg']}") from exc


def time_limit(name: str, override: float | None) -> float:
    """Per-test limit in seconds: ``override`` if given, else :data:`DEFAULT_TIME_LIMITS` (6 s for unknown names)."""
    return float(override) if override is not None else DEFAULT_TIME_LIMITS.get(name, 6.0)


def func_docstring(code: str, func: str) -> str | None:
    """Docstring of top-level function ``func`` in ``code`` (``None`` if absent or unparsable)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == func:
            return ast.get_docstring(node)
    return None
