"""EvalPlus's task-specific oracles and tolerance rule, as rlvr tests (so verdicts agree with EvalPlus task by task).

Source: ``evalplus`` 0.3.1, ``evalplus/eval/__init__.py::unsafe_execute`` and ``evalplus/eval/_special_oracle.py``
(Liu et al. 2023). The general rule (``out == exp``, else ``allclose`` with a tolerance) is
:func:`rlvr.judge.compare.values_equal`; what it cannot express without the task is here:

* ``set_eq`` (8 MBPP+ tasks, :data:`~rlvr.data.evalplus.MBPP_SET_EQ`): ``set(out) == set(exp)``.
* ``not_none`` (3 MBPP+ regex tasks, :data:`~rlvr.data.evalplus.MBPP_NOT_NONE`): the expectation is whether the
  reference's result is not ``None``; a ``bool`` result must equal it, any other result passes iff its
  ``is not None`` equals it (so ``False`` where the reference returns a ``re.Match`` fails, ``False`` where it returns
  ``None`` passes).
* ``always`` (``are_equivalent``, Mbpp/164 of v0.1.0): any result passes (the task is ambiguous; EvalPlus's
  ``exact_match or True``).
* ``or_zero`` (``sum_div``, Mbpp/295 of v0.1.0): exact, or ``0``.
* ``surface_area`` (Mbpp/581): exact, or ``|out - _surface_Area(*inp)| <= atol`` (EvalPlus's alternative reading).
* ``digit_distance`` (Mbpp/558): exact, or equal to ``_digit_distance_nums(*inp)`` (zero-padded reading).
* ``find_zero`` (HumanEval/32): ``|poly(xs, out)| <= atol``, the returned value is any root.
  Its verdict depends on the interpreter's float summation (see :data:`SUM_RULES`): the inputs on which the
  reference's root is not a root under both of CPython's ``sum`` rules are removed by governance
  (:func:`poly_root_robust`, :func:`rlvr.data.oracles.fill_expected`).
* ``poly_root_0.3.1``: HumanEval/32 as the PyPI release ``evalplus`` 0.3.1 grades it: every solution fails (its
  ``find_zero`` branch ``continue``s before recording the input as passed, so ``untrusted_check`` sees fewer results
  than inputs and returns ``fail``; fixed upstream after 0.3.1). Chosen with the loader option
  ``evalplus_release="0.3.1"`` (:data:`COMPAT`), to reproduce a table made with that release.
* ``evalplus_release="pre-set-eq"`` turns ``set_eq`` back into the general rule (``out == exp``), as the evaluator
  that produced the published MBPP+ v0.1.0 tables compared those 8 tasks (before evalplus issue #148, April 2024):
  an answer in another element order fails there, as it did in those tables. Its kind is ``eq_other_process``: the
  general rule, with the reference's value taken **in another interpreter process** whose string hash seed differs
  from the solution's (:func:`other_process_reference`). Those tables graded against ground truth that EvalPlus
  had cached (pickled) from an earlier process, so a reference that returns ``list(set(...))`` of strings listed them
  in another order than the same code did in the solution's process, and even the reference itself failed
  (Qwen2.5-Coder's published MBPP+ v0.1.0 results: ``intersection_array`` and ``find_dissimilar``, both plus,
  ``bench/parity/published.py``).

Each becomes an :class:`~rlvr.data.schema.AssertTest` (the expected value or reference code inside the test code, as
the benchmark's own tests are) keeping the call test's ``group`` and ``public``. :func:`evalplus_atols` applies
EvalPlus's float tolerance rule *in order* over a group, including its carry-over: ``atol`` is a variable of the
per-group loop, set to 1e-6 at the first float expectation and never reset, so later tests of the same group keep it.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from rlvr.data.schema import AssertTest, CallTest
from rlvr.judge.compare import is_floats

__all__ = ["COMPAT", "EVALPLUS_FLOAT_ATOL", "GENERAL_RULE_KINDS", "ORACLES", "OTHER_PROCESS_HASH_SEED", "SUM_RULES",
           "SUM_SENSITIVE", "evalplus_atols", "oracle_kind", "oracle_test", "other_process_reference",
           "poly_root_robust", "reference_source"]

EVALPLUS_FLOAT_ATOL = 1e-6

# entry point → oracle, per EvalPlus dataset (``dataset == "mbpp"`` / ``"humaneval"`` branches of unsafe_execute)
ORACLES: dict[str, dict[str, str]] = {
    "mbppplus": {
        "are_equivalent": "always", "sum_div": "or_zero", "surface_Area": "surface_area",
        "digit_distance_nums": "digit_distance",
        **dict.fromkeys(("similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly",
                         "larg_nnum", "intersection_array", "find_dissimilar", "Diff"), "set_eq"),
        **dict.fromkeys(("check_str", "text_match_three", "text_starta_endb"), "not_none"),
    },
    "humanevalplus": {"find_zero": "poly_root"},
}

# evaluator release → {oracle: the oracle that release actually applies (None: the general rule)}; see
# docs/judge/parity.md. "pre-set-eq": the evaluator before the MBPP+ set-equality oracle (added after evalplus issue
# #148, April 2024: the 8 tasks whose reference returns tuple(set(...))/list(set(...)) were compared with ``==``),
# which made the published MBPP+ v0.1.0 tables.
COMPAT: dict[str, dict[str, str | None]] = {
    "0.3.1": {"poly_root": "poly_root_0.3.1"},
    "pre-set-eq": {"set_eq": "eq_other_process"},
}
#: Kinds whose test is the general rule (a :class:`~rlvr.data.schema.CallTest` with the expected value, EvalPlus's
#: float tolerance included); only the way the reference's value is computed differs (:func:`reference_source`).
GENERAL_RULE_KINDS = frozenset({"eq_other_process"})
#: The string hash seed (``PYTHONHASHSEED``) of the process ``eq_other_process`` takes the reference's value in; the
#: sandbox runs solutions with ``0`` (:data:`rlvr.judge.sandbox.bwrap.SANDBOX_ENV`), so any other value is "another
#: process". Fixed, so the verdicts are the same on every run and machine.
OTHER_PROCESS_HASH_SEED = 1
_KINDS = {k for d in ORACLES.values() for k in d.values()} | {
    k for d in COMPAT.values() for k in d.values() if k is not None}

_SURFACE_AREA = '''
def _ep_surface_Area(base_edge, height):
    import math
    slant_height = math.sqrt((base_edge / 2) ** 2 + height**2)
    return round(base_edge**2 + 4 * (base_edge * slant_height) / 2)
'''
_DIGIT_DISTANCE = '''
def _ep_digit_distance_nums(num1, num2):
    s1, s2 = str(num1), str(num2)
    n = max(len(s1), len(s2))
    s1, s2 = s1.zfill(n), s2.zfill(n)
    return sum(abs(int(a) - int(b)) for a, b in zip(s1, s2))
'''
_POLY = '''
def _ep_poly(xs, x):
    import math
    return sum([coeff * math.pow(x, i) for i, coeff in enumerate(xs)])
'''


def oracle_kind(source: str, entry_point: str | None, release: str | None = None) -> str | None:
    """The EvalPlus special oracle of ``entry_point`` in dataset ``source`` (``humanevalplus``/``mbppplus``), or
    ``None`` for the general rule; ``release``: an evaluator release of :data:`COMPAT` whose bugs to reproduce
    (``None``: the corrected semantics). Raises ``ValueError`` for an unknown release."""
    if release is not None and release not in COMPAT:
        raise ValueError(f"evalplus_release {release!r}: known releases {sorted(COMPAT)}")
    kind = ORACLES.get(source, {}).get(entry_point or "")
    return COMPAT.get(release or "", {}).get(kind or "", kind)


_OTHER_PROCESS = '''
def {entry}(*args):
    import ast, os, subprocess, sys
    main = "\\nimport ast as _a, sys as _s\\nprint(repr({entry}(*_a.literal_eval(_s.stdin.read()))))\\n"
    env = dict(os.environ, PYTHONHASHSEED="{seed}")
    run = subprocess.run([sys.executable, "-s", "-B", "-c", {reference!r} + main], input=repr(list(args)),
                         env=env, capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(run.stderr[-2000:])
    return ast.literal_eval(run.stdout)
'''


def other_process_reference(reference: str, entry_point: str, seed: int = OTHER_PROCESS_HASH_SEED) -> str:
    """Code defining ``entry_point`` as the ``reference`` run in a child interpreter with ``PYTHONHASHSEED=seed``
    (one child per call, inside the same sandbox; it ends before the call returns).

    The call's arguments go to the child as their ``repr`` and its result comes back the same way, so a list or tuple
    keeps the child's element order (which, for elements built from a set of strings, follows the child's hash seed)
    while a set compares equal whatever the order. This is the ground truth of ``eq_other_process``: EvalPlus
    before the set-equality oracle compared ``out == exp`` with ``exp`` unpickled from an earlier process's run.
    Raises nothing itself; in the sandbox a failing child raises ``RuntimeError`` with its stderr."""
    return _OTHER_PROCESS.format(entry=entry_point, seed=int(seed), reference=reference)


def reference_source(kind: str | None, reference: str, entry_point: str) -> str:
    """The code whose result on each input is a test's expected value under oracle ``kind``: ``reference`` itself,
    or for ``eq_other_process`` that reference run in another process (:func:`other_process_reference`)."""
    if kind == "eq_other_process":
        return other_process_reference(reference, entry_point)
    return reference


def oracle_test(kind: str, test: CallTest, expected: str | None, atol: float, reference: str = "",
                entry_point: str = "") -> AssertTest:
    """The assert test deciding ``test`` under oracle ``kind`` (see the module docstring).

    Args:
        kind: an oracle name of :data:`ORACLES`. test: the call test (``args`` literal, ``group``, ``public``,
            ``time_limit_s`` are kept). expected: ``repr`` of the reference's result (not needed for ``not_none``
            and ``always``). atol: the task's record ``atol``. reference / entry_point: the reference solution's
            code and function name (``not_none`` computes the expectation by running it, as EvalPlus does at
            ground-truth time).
    Raises ``ValueError`` for an unknown kind or a missing expectation."""
    a = test.args
    if kind not in _KINDS or kind in GENERAL_RULE_KINDS:
        raise ValueError(f"unknown EvalPlus oracle {kind!r}" if kind not in _KINDS else
                         f"oracle {kind!r} is the general rule: a CallTest with the expected value, not an assert")
    if kind not in ("not_none", "always", "poly_root_0.3.1") and expected is None:
        raise ValueError(f"oracle {kind!r} needs the reference's result")
    if kind == "set_eq":
        code = f"assert set(candidate(*{a})) == set({expected})"
    elif kind == "not_none":
        code = (f"{reference}\n_ep_exp = {entry_point}(*{a}) is not None\n_ep_out = candidate(*{a})\n"
                "assert (_ep_out == _ep_exp) if isinstance(_ep_out, bool) else (_ep_exp == (_ep_out is not None))\n")
    elif kind == "always":
        code = f"candidate(*{a})"
    elif kind == "or_zero":
        code = f"_ep_out = candidate(*{a})\nassert _ep_out == {expected} or _ep_out == 0"
    elif kind == "surface_area":
        code = f"{_SURFACE_AREA}\n_ep_out = candidate(*{a})\n" \
               f"assert _ep_out == {expected} or abs(_ep_out - _ep_surface_Area(*{a})) <= {atol!r}"
    elif kind == "digit_distance":
        code = f"{_DIGIT_DISTANCE}\n_ep_out = candidate(*{a})\n" \
               f"assert _ep_out == {expected} or _ep_out == _ep_digit_distance_nums(*{a})"
    elif kind == "poly_root_0.3.1":
        code = f"candidate(*{a})\nraise AssertionError('evalplus 0.3.1: find_zero inputs are never recorded as passed')"
    else:  # poly_root
        code = f"{_POLY}\n_ep_out = candidate(*{a})\nassert abs(_ep_poly(*{a}, _ep_out)) <= {atol!r}"
    return AssertTest(code=code, public=test.public, group=test.group, time_limit_s=test.time_limit_s)


def repr_may_be_floats(text: str) -> bool:
    """Cheap pre-check before parsing an expected value's repr for EvalPlus's ``is_floats`` (a float, or a list/tuple
    of floats): ``False`` when the repr cannot hold one — a string literal (first character a quote) or a repr
    without any of ``.``, ``e``, ``E``, ``n`` (every float repr has a point, an exponent, ``inf`` or ``nan``). Saves
    parsing each of HumanEval+/15's hundreds of multi-megabyte string answers (about a minute of governance CPU)."""
    head = text.lstrip()[:1]
    if head in ("'", '"'):
        return False
    return any(c in text for c in ".eEn")


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def evalplus_atols(tests: list[Any], record_atol: float) -> list[Any]:
    """Give each filled call test the ``atol`` EvalPlus compares it with: per group (base, then plus, each a fresh
    loop of ``unsafe_execute``), start from the record's ``atol``; at the first test whose expectation
    :func:`~rlvr.judge.compare.is_floats` and while ``atol == 0``, set it to 1e-6, and keep it for the rest of the
    group. Tests that are not filled call tests are returned unchanged (they do not reset the carry)."""
    out: list[Any] = []
    carry: dict[Any, float] = {}
    for t in tests:
        if not isinstance(t, CallTest) or t.expected is None:
            out.append(t)
            continue
        atol = carry.get(t.group, record_atol)
        if atol == 0 and repr_may_be_floats(t.expected) and is_floats(_literal(t.expected)):
            atol = EVALPLUS_FLOAT_ATOL
        carry[t.group] = atol
        out.append(t if t.atol == atol else t.model_copy(update={"atol": atol}))
    return out


# CPython's two float-summation rules of the builtin ``sum``: left to right up to 3.11, Neumaier's compensated
# summation from 3.12 on (gh-100425; ``Python/bltinmodule.c::builtin_sum_impl``). Each is the source of a module-level
# ``sum`` that shadows the builtin for the code it is prepended to (governance runs the reference under each rule in
# the sandbox) and that the host uses for the same check. Only sums of floats (a float or int ``start``) follow the
# rule; anything else is added left to right, as both interpreters do for such items.
_SUM_NAIVE = """
def sum(iterable, /, start=0):
    total = start
    for x in iterable:
        total = total + x
    return total
"""
_SUM_NEUMAIER = """
def sum(iterable, /, start=0):
    items = list(iterable)
    if type(start) not in (int, float) or not all(type(x) is float for x in items) or not items:
        total = start
        for x in items:
            total = total + x
        return total
    f, c = float(start), 0.0
    for x in items:
        t = f + x
        if abs(f) >= abs(x):
            c += (f - t) + x
        else:
            c += (x - t) + f
        f = t
    if c and c - c == 0.0:  # compensation finite and non-zero (an infinite or NaN sum stays as it is)
        f += c
    return f
"""
#: rule name → source of a module-level ``sum`` following it (``naive``: CPython <= 3.11, ``neumaier``: >= 3.12).
SUM_RULES: dict[str, str] = {"naive": _SUM_NAIVE, "neumaier": _SUM_NEUMAIER}
#: Oracles whose verdict on the reference depends on the float summation rule (governance keeps an input only if the
#: reference passes it under every rule of :data:`SUM_RULES`).
SUM_SENSITIVE = frozenset({"poly_root"})


def _sum_rules() -> dict[str, Any]:
    out = {}
    for name, src in SUM_RULES.items():
        ns: dict[str, Any] = {}
        exec(src, ns)  # rlvr's own constant code above
        out[name] = ns["sum"]
    return out


_HOST_SUMS = _sum_rules()
_ROOT_REPR_CHARS = 64  # a float's repr is at most 24 characters: anything longer is not a root


def poly_root_robust(args: str, outputs: list[str | None], atol: float) -> bool:
    """True iff each of ``outputs`` (the ``repr`` of the reference's result on ``args``, ``[[xs]]``, once per run:
    the interpreter's own ``sum`` and each rule of :data:`SUM_RULES`) is an ``int``/``float`` ``x`` with
    ``|poly(xs, x)| <= atol`` (the ``poly_root`` test, EvalPlus's ``_poly``) under every rule of :data:`SUM_RULES`.

    Where it is False the reference passes that input or not depending on the judge's interpreter: near a root whose
    terms are ~1e13 the rounding of ``poly`` (~1e-3) is far above ``atol``, so a naive sum that happens to cancel to
    ``0.0`` passes and a compensated one fails; elsewhere Newton's 1000 iterations wander differently and one rule
    finds no root at all. Host cost: linear in ``len(xs)`` (the dataset's own input); outputs longer than a float's
    ``repr`` are refused unparsed."""
    xs = _literal(args)
    if not (isinstance(xs, list) and len(xs) == 1 and isinstance(xs[0], list)):
        return False
    coeffs = xs[0]
    if not all(type(c) in (int, float) for c in coeffs):
        return False
    for out in outputs:
        if out is None or len(out) > _ROOT_REPR_CHARS:
            return False
        x = _literal(out)
        if type(x) not in (int, float):
            return False
        for total in _HOST_SUMS.values():
            try:
                value = total([c * math.pow(x, i) for i, c in enumerate(coeffs)])
            except (OverflowError, ValueError):
                return False
            if not abs(value) <= atol:
                return False
    return True
