"""A test's input as EvalPlus writes it in ``<samples>_eval_results.json`` (``base_fail_tests`` / ``plus_fail_tests``).

Source: ``evalplus`` 0.3.1, ``evalplus/evaluate.py`` (``evaluate``: ``get_failed_tests`` then
``mbpp_serialize_inputs``, then ``json.dump``) and ``evalplus/data/mbpp.py``. EvalPlus lists the input *after* its
type restoration (``mbpp_deserialize_inputs``: tuples, sets, complex numbers, the same restoration rlvr's loader
applies, :func:`rlvr.data.evalplus.mbppplus_restore_inputs`), re-serialised for three MBPP+ tasks:

* ``Mbpp/115``: each set (or the ``{}`` standing for an empty one) becomes a list (``list(item)``; EvalPlus lists a
  set of strings in its process's hash order, rlvr in the order the problems file writes it);
* ``Mbpp/124``: ``(str(a), str(b))`` — the float and the complex number as text (``"0.0"``, ``"1j"``);
* ``Mbpp/252``: ``[str(z)]`` — the complex number as text (``"(1+0j)"``).

``json.dump`` then writes tuples as arrays, ``inf`` / ``nan`` as ``Infinity`` / ``NaN`` (its ``allow_nan`` default)
and integers of any size in full. :func:`evalplus_input` returns that JSON-ready value for one rlvr test: the
argument list of a :class:`~rlvr.data.schema.CallTest` (``args``), or of the ``candidate(*args)`` call in an
:class:`~rlvr.data.schema.AssertTest` that a special oracle made (:func:`rlvr.data.evalplus_oracles.oracle_test`).
"""

from __future__ import annotations

import ast
from typing import Any

from rlvr.data.schema import Problem
from rlvr.judge.literal import parse_literal

__all__ = ["assert_args", "evalplus_input", "jsonable"]


def assert_args(code: str) -> str | None:
    """The source text of ``args`` in the first ``candidate(*args)`` call of an assert test's ``code`` (how
    :func:`rlvr.data.evalplus_oracles.oracle_test` writes the input), ``None`` when there is none or the code does not
    parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate"
                and len(node.args) == 1 and isinstance(node.args[0], ast.Starred)):
            return ast.get_source_segment(code, node.args[0].value)
    return None


def jsonable(value: Any) -> Any:
    """``value`` as ``json.dump`` writes it, made explicit: tuples (and, never reached after the MBPP+
    re-serialisation, sets) become lists, dict values are converted the same way, everything else is kept (floats,
    ``inf``/``nan``, integers of any size, strings, ``None``). A complex number, which EvalPlus never leaves in an
    input it writes, becomes its ``str``."""
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, complex):
        return str(value)
    return value


class _SetsAsLists(ast.NodeTransformer):
    def visit_Set(self, node: ast.Set) -> ast.AST:
        return ast.List(elts=[self.visit(e) for e in node.elts], ctx=ast.Load())


def _ordered(text: str, value: Any) -> Any:
    """``value`` again with each set display of ``text`` read as a list in its written order (so a set of strings is
    written in the problems file's order, not this process's hash order); ``value`` when ``text`` holds no set or the
    AST cannot read it."""
    if not _has_set(value):
        return value
    try:
        tree = _SetsAsLists().visit(ast.parse(text.strip(), mode="eval"))
        return ast.literal_eval(ast.fix_missing_locations(tree))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return value


def _has_set(value: Any) -> bool:
    if isinstance(value, set | frozenset):
        return True
    if isinstance(value, list | tuple):
        return any(_has_set(v) for v in value)
    if isinstance(value, dict):
        return any(_has_set(v) for v in value.values())
    return False


def _mbpp_serialize(task: int, inp: list[Any]) -> Any:
    """EvalPlus's ``mbpp_serialize_inputs`` for one argument list (module docstring)."""
    if task == 115:
        return [[list(item) for item in inp[0]]]
    if task == 124:
        return (str(inp[0]), str(inp[1]))
    if task == 252:
        return [str(inp[0])]
    return inp


def _task_number(problem: Problem) -> int | None:
    tid = str(problem.meta.get("task_id") or problem.id)
    tail = tid.rsplit("/", 1)[-1]
    return int(tail) if tail.isdigit() else None


def evalplus_input(problem: Problem, index: int) -> Any | None:
    """The input of ``problem.tests[index]`` as EvalPlus writes it in a ``*_fail_tests`` list (module docstring);
    ``None`` when the test carries no argument list (a stdin/stdout test, an assert test without a ``candidate(*…)``
    call) or its text does not parse. Raises ``IndexError`` for an index outside ``problem.tests``."""
    test = problem.tests[index]
    text = getattr(test, "args", None)
    if text is None and hasattr(test, "code"):
        text = assert_args(test.code)
    if text is None:
        return None
    try:
        value = parse_literal(text, max_int_digits=10**6)
    except (ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(value, list | tuple):
        return None
    value = list(_ordered(text, value))
    task = _task_number(problem)
    if problem.source == "mbppplus" and task is not None:
        value = _mbpp_serialize(task, value)
    return jsonable(value)
