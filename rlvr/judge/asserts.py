"""Assert tests on the host side: which run as host-compared calls, and what the trusted driver needs for the rest.

:func:`as_call` turns an assert of the shape ``assert ENTRY(args) == LITERAL`` (or ``LITERAL == ENTRY(args)``,
``candidate`` for ``ENTRY``; positional and keyword arguments that are all literals) into a call whose return value is
compared on the host with Python's ``==`` on plain values — exactly the assert's own semantics, given a plain return
value — so the test code never runs at all. Everything else goes to the test driver (:func:`driver_request`), which
runs the test code in a separate sandbox with the candidate as a remote function.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Any

from rlvr.data.schema import Problem
from rlvr.judge.literal import parse_literal

__all__ = ["ConvertedAssert", "as_call", "driver_request", "free_names"]


@dataclass(frozen=True)
class ConvertedAssert:
    """A call form of an assert: ``args`` (literal of a list), ``kwargs`` (literal of a dict), ``expected`` (literal
    text of the right-hand side), compared with ``==``."""

    args: str
    kwargs: str
    expected: str


def _literal_text(src: str, node: ast.expr) -> str | None:
    text = ast.get_source_segment(src, node)
    if text is None:
        return None
    try:
        parse_literal(text, max_int_digits=10**8, ast_fallback_chars=len(text))  # dataset text: trusted
    except ValueError:
        return None
    return text


def as_call(code: str, entry_point: str | None) -> ConvertedAssert | None:
    """The call form of assert ``code`` when its shape allows (see module docstring), else None."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assert) or tree.body[0].msg is not None:
        return None
    test = tree.body[0].test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    names = {"candidate"} | ({entry_point} if entry_point and entry_point.isidentifier() else set())
    for call, other in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in names):
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        expected = _literal_text(code, other)
        args = [_literal_text(code, a) for a in call.args]
        kwargs = [(k.arg, _literal_text(code, k.value)) for k in call.keywords]
        if expected is None or None in args or any(v is None for _, v in kwargs):
            return None
        return ConvertedAssert(
            args="[" + ", ".join(args) + ("," if len(args) == 1 else "") + "]",  # type: ignore[arg-type]
            kwargs="{" + ", ".join(f"{k!r}: {v}" for k, v in kwargs) + "}",
            expected=expected,
        )
    return None


def free_names(code: str) -> set[str]:
    """Names ``code`` reads that it never binds itself and that are not builtins (an over-approximation that ignores
    scopes: enough to decide which names the driver must proxy)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    bound: set[str] = set()
    loaded: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (loaded if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return {x for x in loaded - bound if not hasattr(builtins, x)}


def driver_request(problem: Problem, codes: list[str], max_timeouts: int) -> dict[str, Any]:
    """The driver's ``drive`` request for assert test ``codes`` of ``problem``: trusted prelude (``solution_prefix``,
    the prompt ``starter_code`` when it compiles on its own, ``test_setup`` when it runs without the submission), entry
    point, and the candidate names to proxy (the driver proxies only those its trusted namespace does not bind)."""
    prelude = [
        {"code": problem.solution_prefix, "optional": False},
        {"code": problem.starter_code, "optional": True},
        # MBPP's test_setup may build objects with the SUBMISSION's classes (``root = Node(1)``): then it cannot run
        # here; it still runs after the solution in the submission's process, and the names it defines are proxied
        {"code": problem.test_setup, "optional": True},
    ]
    prelude = [p for p in prelude if p["code"].strip()]
    entry = problem.entry_point or ""
    remote = set()
    for code in codes:
        remote |= free_names(code)
    base = entry.split("(")[0].split(".")[0]
    if base and base.isidentifier():
        remote.add(base)
    remote.discard("candidate")
    # the entry point itself is always remote, even where the prompt defines a stub of it (HumanEval)
    if entry.isidentifier():
        remote.discard(entry)
    return {
        "op": "drive",
        "prelude": prelude,
        "tests": codes,
        "entry_point": entry,
        "remote_names": sorted(remote),
        "max_timeouts": max_timeouts,
    }
