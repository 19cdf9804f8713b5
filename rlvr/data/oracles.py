"""Call-test oracles (EvalPlus, Liu et al. 2023), filled by the governance stage.

A :class:`CallTest` with ``expected=None`` gets the ``repr`` of what the
problem's first reference solution returns, computed by the judge (``call_outputs``). Tests whose output cannot be
computed (exception, timeout, non-builtin value) are removed and reported; a problem left without tests, or without a
reference solution, is dropped and reported. As EvalPlus' ``assertion`` does, a test with ``atol == 0`` whose
expected value is a float (or a list/tuple of floats) gets ``atol = 1e-6`` (EvalPlus problems: in order per group,
with EvalPlus's carry-over, :func:`rlvr.data.evalplus_oracles.evalplus_atols`); problems with an EvalPlus special
oracle (``meta['evalplus_oracle']``: set comparison, ``find_zero``, …) get the assert tests of
:func:`rlvr.data.evalplus_oracles.oracle_test` instead, and EvalPlus problems get per-test time limits from the
reference's times (:func:`rlvr.data.evalplus_limits.set_time_limits`, when the judge can ``judge`` and
``measure_limits`` is on; the governance stage turns it off and applies the committed limits instead,
:func:`rlvr.data.evalplus_limits.apply_time_limits`).

A special oracle whose verdict depends on the interpreter's float summation
(:data:`~rlvr.data.evalplus_oracles.SUM_SENSITIVE`: HumanEval/32 ``find_zero``, whose reference is Newton's method on
a ``sum``-evaluated polynomial) is filled from three runs of the reference: the interpreter's own ``sum`` and each of
CPython's two rules (left to right up to 3.11, compensated from 3.12, :data:`~rlvr.data.evalplus_oracles.SUM_RULES`);
an input is kept only if every run's result passes under both rules
(:func:`~rlvr.data.evalplus_oracles.poly_root_robust`), so the tests the reference passes are the same whichever
interpreter governance and the judge run (``sum_dependent_tests``).

"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from rlvr.data.evalplus_limits import is_evalplus, set_time_limits
from rlvr.data.evalplus_oracles import (
    GENERAL_RULE_KINDS,
    SUM_RULES,
    SUM_SENSITIVE,
    evalplus_atols,
    oracle_test,
    poly_root_robust,
    reference_source,
    repr_may_be_floats,
)
from rlvr.data.schema import CallTest, Problem
from rlvr.judge.recorded import RecordedMargins
from rlvr.judge.settle import cpu_judged
from rlvr.progress import progress

__all__ = ["EVALPLUS_FLOAT_ATOL", "FILL_RETRY_FACTOR", "canonical_set_literal", "fill_expected"]

EVALPLUS_FLOAT_ATOL = 1e-6
FILL_RETRY_FACTOR = 10.0  # CPU-limit multiplier of the second oracle run of a reference that failed a test


class _CallOutputs(Protocol):
    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]: ...


def _is_floats(expected: str) -> bool:
    """EvalPlus ``is_floats`` on a repr: a float, or a non-empty list/tuple of floats (``inf``/``nan`` count)."""
    if not repr_may_be_floats(expected):
        return False
    try:
        from rlvr.judge.literal import parse_literal

        v = parse_literal(expected)
    except Exception:
        try:
            v = ast.literal_eval(expected)
        except Exception:
            return False
    if isinstance(v, float):
        return True
    return isinstance(v, list | tuple) and bool(v) and all(isinstance(x, float) for x in v)


def canonical_set_literal(value: str) -> str:
    """``value`` (the ``repr`` of a set-compared output) with its elements sorted by ``repr``, so that the bytes do not
    depend on the order a set was iterated in (which follows the interpreter's per-process string hash seed).

    Only a list/tuple/set/frozenset literal is re-ordered (as a list: the test compares ``set(…)`` of both sides, so
    the meaning is unchanged); any other value, or a ``repr`` that is not a Python literal, is returned unchanged.

    >>> canonical_set_literal("('b', 'a')")
    "['a', 'b']"
    """
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    if isinstance(items, (list, tuple, set, frozenset)):
        return repr(sorted(items, key=repr))
    return value


def fill_expected(
    problems: Sequence[Problem], judge: _CallOutputs, workers: int = 2, measure_limits: bool = True,
    recorded: RecordedMargins | None = None,
) -> tuple[list[Problem], dict[str, Any]]:
    """Fill every ``CallTest.expected is None`` by running the first reference solution through ``judge``.

    ``measure_limits``: then time the reference on the filled EvalPlus problems and set EvalPlus's per-test limits
    (:func:`rlvr.data.evalplus_limits.set_time_limits`; load-dependent, so off in the governance stage).

    A problem on which the reference fails any test (exception, timeout, unserialisable value) is run once more with
    CPU-judged limits of :data:`FILL_RETRY_FACTOR` × its time limits (:func:`rlvr.judge.settle.cpu_judged`: each
    call may use that many CPU seconds, its wall limit is only a backstop :data:`~rlvr.judge.settle.MAX_SLOWDOWN`
    × longer), and that second run decides every test: the rule of :mod:`rlvr.judge.settle`. A test is thus kept
    exactly when the reference returns a plain value within ``FILL_RETRY_FACTOR`` × its limit of CPU (HumanEval+:
    60 s), on an idle machine or under any load the settle rule supports (a load average up to ``MAX_SLOWDOWN`` ×
    the cores); a reference that cannot finish (CPU-bound past that) loses the test the same way idle or busy.
    ``recorded``: the committed margins (:mod:`rlvr.judge.recorded`) of references whose CPU need on an input
    straddles that cap; a listed reference's second run uses its recorded margin (whole program or per input).

    A :data:`~rlvr.data.evalplus_oracles.SUM_SENSITIVE` problem's reference is also run under each rule of
    :data:`~rlvr.data.evalplus_oracles.SUM_RULES` (its source prepended: a module-level ``sum``), with the same retry;
    an input whose results are not roots under every rule is removed (module docstring).

    Returns ``(kept, report)``: ``report = {"problems_computed", "tests_computed", "tests_failed",
    "failed_tests": {id: n}, "tests_sum_dependent", "sum_dependent_tests": {id: n}, "dropped": [{id, reason}]}``;
    reasons: ``no_solution``, ``judge_error: …``, ``no_tests_left``. Problems without pending call tests pass through
    untouched."""
    pending = [p for p in problems if any(isinstance(t, CallTest) and t.expected is None for t in p.tests)]
    table = recorded or RecordedMargins()

    def outputs(p: Problem, solution: str) -> list[str | None]:
        outs = judge.call_outputs(p, solution)
        if any(o is None for o in outs):  # once more, CPU-judged at FILL_RETRY_FACTOR x the limit: that is final
            margin = table.margin(p.id, solution, FILL_RETRY_FACTOR)
            outs = judge.call_outputs(cpu_judged(p, margin, test_margins=table.test_margins(p.id, solution)), solution)
        return outs

    def work(p: Problem) -> tuple[list[list[str | None]] | None, str | None]:
        if not p.solutions:
            return None, "no_solution"
        try:
            runs = [outputs(p, reference_source(p.meta.get("evalplus_oracle"), p.solutions[0], p.entry_point or ""))]
            if p.meta.get("evalplus_oracle") in SUM_SENSITIVE:  # the reference under each float-summation rule
                runs += [outputs(p, SUM_RULES[rule] + "\n" + p.solutions[0]) for rule in sorted(SUM_RULES)]
            return runs, None
        except Exception as exc:  # compile error or sandbox failure: reported, never silent
            return None, f"judge_error: {type(exc).__name__}: {exc}"[:500]

    with ThreadPoolExecutor(max_workers=workers) as ex:
        outs = progress(ex.map(work, pending), total=len(pending), desc="oracles", unit="problem")
        results = dict(zip((p.id for p in pending), outs, strict=True))
    report: dict[str, Any] = {"problems_computed": 0, "tests_computed": 0, "tests_failed": 0,
                              "failed_tests": {}, "tests_sum_dependent": 0, "sum_dependent_tests": {}, "dropped": []}
    kept: list[Problem] = []
    for p in problems:
        if p.id not in results:
            kept.append(p)
            continue
        runs, err = results[p.id]
        if runs is None:
            report["dropped"].append({"id": p.id, "reason": err})
            continue
        calls = [t for t in p.tests if isinstance(t, CallTest)]
        if any(len(outs) != len(calls) for outs in runs):
            n_out = "/".join(str(len(outs)) for outs in runs)
            report["dropped"].append({"id": p.id, "reason": f"judge_error: {n_out} outputs for {len(calls)} tests"})
            continue
        new_tests, failed, sum_dependent = [], 0, 0
        out_iter = iter(zip(*runs, strict=True))
        atol_rec = float(p.meta.get("evalplus_atol", 0))
        for t in p.tests:
            if not isinstance(t, CallTest):
                new_tests.append(t)
                continue
            values = next(out_iter)
            value = values[0]
            if t.expected is not None:
                new_tests.append(t)
            elif value is None:
                failed += 1
            elif len(values) > 1 and not poly_root_robust(t.args, list(values), atol_rec):
                sum_dependent += 1
            elif p.meta.get("evalplus_oracle") and p.meta["evalplus_oracle"] not in GENERAL_RULE_KINDS:
                # EvalPlus special oracle (rlvr.data.evalplus_oracles)
                exp = canonical_set_literal(value) if p.meta["evalplus_oracle"] == "set_eq" else value
                new_tests.append(oracle_test(p.meta["evalplus_oracle"], t, exp, float(p.meta.get("evalplus_atol", 0))))
            else:
                atol = EVALPLUS_FLOAT_ATOL if t.atol == 0 and _is_floats(value) else t.atol
                new_tests.append(t.model_copy(update={"expected": value, "atol": atol}))
        if "evalplus_atol" in p.meta:  # EvalPlus's in-order float tolerance rule
            new_tests = evalplus_atols(new_tests, float(p.meta["evalplus_atol"]))
        report["tests_computed"] += len(calls) - failed - sum_dependent
        report["tests_failed"] += failed
        if failed:
            report["failed_tests"][p.id] = failed
        report["tests_sum_dependent"] += sum_dependent
        if sum_dependent:
            report["sum_dependent_tests"][p.id] = sum_dependent
        if not new_tests:
            report["dropped"].append({"id": p.id, "reason": "no_tests_left"})
            continue
        report["problems_computed"] += 1
        kept.append(p.model_copy(update={"tests": new_tests}))
    if measure_limits and hasattr(judge, "judge") and any(is_evalplus(p) for p in kept):  # limits from the reference
        kept, report["time_limits"] = set_time_limits(kept, judge, workers=workers)
    return kept, report
