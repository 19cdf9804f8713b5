"""verl's code ``ground_truth`` layout (PRIME / TACO / APPS style) as rlvr tests.

verl routes ``data_source`` ``codecontests``/``apps``/``codeforces``/``taco`` to ``verl.utils.reward_score.prime_code``
(or to ``sandbox_fusion`` when a SandboxFusion URL is configured); both read ``reward_model.ground_truth`` as a JSON
string (or an already-parsed dict) of the form::

    {"inputs": [...], "outputs": [...], "fn_name": "name"}      # fn_name optional

and this module reads it the same way (sources: ``verl/utils/reward_score/prime_code/__init__.py`` and
``testing_util.py::run_test``; ``verl/utils/reward_score/sandbox_fusion/utils.py::check_correctness`` and
``_process_single_case``, verl 0.4–0.7):

* **No ``fn_name``: stdin/stdout tests.** ``inputs[i]`` is the program's standard input, ``outputs[i]`` the expected
  standard output; a list of lines is joined with ``"\\n"`` (``run_test``'s standard-input branch). Each pair becomes a
  :class:`~rlvr.data.schema.StdioTest`, judged by rlvr's own comparison (token-wise, whitespace-insensitive,
  :mod:`rlvr.judge.compare`), as every other stdio problem here is.
* **``fn_name``: call tests.** ``inputs[i]`` is either a list of positional arguments (APPS/TACO files) or a string
  with one JSON value per line (``run_test``: ``[json.loads(line) for line in inputs.split("\\n")]``, the layout
  ``sandbox_fusion`` feeds its wrapper on stdin); ``outputs[i]`` is the return value, or its JSON text. JSON's string
  dictionary keys are turned back into ints where they all parse, as ``run_test`` does. The function is looked up as
  ``sandbox_fusion``'s wrapper does: a module-level ``fn_name`` first, else ``Solution().fn_name`` (the entry point
  expression ``fn if 'fn' in globals() else Solution().fn``). The result is accepted under ``run_test``'s rule: a
  returned tuple counts as a list; it passes when it equals ``outputs[i]``, or ``outputs[i][0]`` when that is a
  non-empty list (APPS wraps each return value in a one-element list, TACO sometimes does not), or, for a list of
  tuples, when ``[list(x) for x in result] == outputs[i][0]``. That rule cannot be one host-side
  :class:`~rlvr.data.schema.CallTest` (it accepts two expectations), so each pair is an
  :class:`~rlvr.data.schema.AssertTest` whose code holds the JSON of the arguments and of the expectation.

What rlvr does differently, on purpose (it scores these problems as it scores its own): the program is extracted by
rlvr's extractor (:mod:`rlvr.generate.extract`), the per-test time limit is :attr:`Problem.time_limit_s` (6 s; verl
uses 5–10 s) and the reward is the configured reward mode (``sparse``/``dense``/``shaped``) over **all** tests, where
verl's ``continuous=True`` scores the pass ratio of the first 10.

Errors (a data bug, the same for every sample: it must fail loudly, never score 0): ``ValueError`` naming the field
when ``inputs``/``outputs`` are not lists, differ in length, are empty, a stdio input is not text, or a call input's
JSON does not parse.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["call_assert_code", "entry_expression", "is_verl_layout", "verl_layout_fields"]

#: The comparison of ``prime_code``'s ``run_test`` (call-based branch), run after the candidate's call in the sandbox.
_CHECK = """\
import json as _json
_args = _json.loads({args!r})
_exp = _json.loads({exp!r})
_out = candidate(*_args)
if isinstance(_out, tuple):
    _out = list(_out)
_ok = _out == _exp
if not _ok and isinstance(_exp, list) and _exp:
    _ok = _out == _exp[0]
    if not _ok and isinstance(_out, list) and _out and isinstance(_out[0], tuple):
        _ok = [list(_x) for _x in _out] == _exp[0]
assert _ok, "wrong answer"
"""


def is_verl_layout(d: Any) -> bool:
    """True when ``d`` (a parsed ``ground_truth``) is verl's ``{"inputs", "outputs"[, "fn_name"]}`` layout rather than
    rlvr's own (which has ``tests``)."""
    return isinstance(d, dict) and "tests" not in d and "inputs" in d and "outputs" in d


def entry_expression(fn_name: str) -> str:
    """The entry point expression that finds ``fn_name`` as ``sandbox_fusion``'s wrapper does: a module-level function
    of that name, else the method of a fresh ``Solution()``.

    >>> entry_expression("add")
    "add if 'add' in globals() else Solution().add"
    """
    return f"{fn_name} if {fn_name!r} in globals() else Solution().{fn_name}"


def _plain(x: Any) -> Any:
    """numpy arrays (what pandas gives for a parquet list column) as nested lists; anything else unchanged."""
    if hasattr(x, "tolist") and not isinstance(x, (str, bytes)):
        return x.tolist()
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def _int_keys(d: dict[Any, Any]) -> dict[Any, Any]:
    return {int(k): v for k, v in d.items()}


def _call_args(raw: Any, i: int) -> list[Any]:
    if isinstance(raw, str):
        try:
            args = [json.loads(line) for line in raw.split("\n")]
        except json.JSONDecodeError as exc:
            raise ValueError(f"ground_truth: field 'inputs[{i}]': not one JSON value per line ({exc})") from exc
    elif isinstance(raw, list):
        args = list(raw)
    else:
        raise ValueError(f"ground_truth: field 'inputs[{i}]': expected a list of arguments or JSON lines, "
                         f"got {type(raw).__name__}")
    try:  # run_test: JSON forces string keys; undo it for a single dict argument
        if args and isinstance(args[0], dict):
            args = [_int_keys(args[0])]
    except (ValueError, TypeError):
        pass
    return args


def _call_expected(raw: Any) -> Any:
    exp = raw
    if isinstance(raw, str):
        try:
            exp = json.loads(raw)
        except json.JSONDecodeError:
            exp = raw  # a bare string return value
    for wrap in (False, True):  # run_test's two key conversions: the value itself, then its first element
        try:
            if not wrap and isinstance(exp, dict):
                exp = [_int_keys(exp)]
            elif wrap and isinstance(exp, list) and exp and isinstance(exp[0], dict):
                exp = [_int_keys(exp[0])]
        except (ValueError, TypeError):
            pass
    return exp


def _text(raw: Any, field: str) -> str:
    if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        return "\n".join(raw)
    if isinstance(raw, str):
        return raw
    raise ValueError(f"ground_truth: field '{field}': expected text or a list of lines, got {type(raw).__name__}")


def call_assert_code(args: list[Any], expected: Any) -> str:
    """The assert test of one call pair: JSON of ``args`` and ``expected`` decoded in the sandbox, ``candidate``
    called, compared by ``run_test``'s rule (module doc). Raises ``ValueError`` when a value is not JSON-encodable."""
    try:
        a, e = json.dumps(args), json.dumps(expected)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"ground_truth: a call test value is not JSON-encodable ({exc})") from exc
    return _CHECK.format(args=a, exp=e)


def verl_layout_fields(d: dict[str, Any], data_source: str = "unknown") -> dict[str, Any]:
    """The rlvr ``ground_truth`` fields (``id``, ``tests`` as test dicts, ``entry_point``, ``meta``) of verl's
    ``{"inputs", "outputs"[, "fn_name"]}`` ground truth ``d`` (module doc); :func:`rlvr.data.schema.from_ground_truth`
    validates them into a :class:`~rlvr.data.schema.Problem` (this module does not import the schema, which imports
    it).

    Args:
        d: the parsed ground truth. Extra keys are ignored, as verl ignores them.
        data_source: the row's ``data_source``; the id is ``"<data_source>/<first 12 hex of the sha256 of the
            canonical JSON of inputs, outputs and fn_name>"`` (stable, so a GRPO group's samples share one cached
            problem). numpy arrays (pandas' reading of parquet list columns) are read as lists.

    Raises:
        ValueError: naming the field, for the malformed layouts listed in the module doc.
    """
    ins, outs, fn = (_plain(d.get(k)) for k in ("inputs", "outputs", "fn_name"))
    if not isinstance(ins, list) or not isinstance(outs, list):
        raise ValueError("ground_truth: fields 'inputs' and 'outputs': expected lists")
    if len(ins) != len(outs):
        raise ValueError(f"ground_truth: 'inputs' has {len(ins)} items, 'outputs' {len(outs)}")
    if not ins:
        raise ValueError("ground_truth: field 'inputs': empty (no tests to judge)")
    if fn is not None and (not isinstance(fn, str) or not fn.isidentifier()):
        raise ValueError(f"ground_truth: field 'fn_name': expected a Python identifier, got {fn!r}")
    tests: list[dict[str, Any]] = []
    for i, (a, b) in enumerate(zip(ins, outs, strict=True)):
        if fn:
            tests.append({"kind": "assert", "code": call_assert_code(_call_args(a, i), _call_expected(b))})
        else:
            tests.append({"kind": "stdio", "stdin": _text(a, f"inputs[{i}]"), "stdout": _text(b, f"outputs[{i}]")})
    blob = json.dumps({"inputs": ins, "outputs": outs, "fn_name": fn}, sort_keys=True, ensure_ascii=False,
                      default=repr).encode()
    return {"id": f"{data_source}/{hashlib.sha256(blob).hexdigest()[:12]}", "tests": tests,
            "entry_point": entry_expression(fn) if fn else None,
            "meta": {"ground_truth_layout": "verl", **({"fn_name": fn} if fn else {})}}
