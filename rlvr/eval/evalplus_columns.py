"""EvalPlus's two columns from one rlvr verdict: ``base_status`` / ``plus_status`` and the base / plus metrics.

EvalPlus (``evalplus`` 0.3.1, ``evalplus/evaluate.py``) checks a solution on the benchmark's original inputs
(``base``) and on its added inputs (``plus``) separately and writes ``base_status`` and ``plus_status`` (``pass`` /
``fail``); the original benchmark's score (HumanEval, MBPP) counts ``base_status == pass``, the "+" score (HumanEval+,
MBPP+) counts ``base_status == plus_status == pass``. rlvr judges all tests of a problem in one run; every EvalPlus
test carries its ``group`` (:class:`rlvr.data.schema.CallTest`), so both statuses are read off the per-test verdicts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlvr.data.schema import Problem
from rlvr.judge.verdict import JudgeResult

__all__ = ["evalplus_metrics", "group_statuses"]


def group_statuses(problem: Problem, result: JudgeResult | None) -> dict[str, str]:
    """``{"base_status", "plus_status"}`` (``"pass"``/``"fail"``) of ``result`` for an EvalPlus problem, ``{}`` for a
    problem without test groups.

    A group passes iff every one of its tests is ``accepted``; an empty group (MBPP+ ``Mbpp/793`` has no plus inputs)
    passes unless the program does not compile (EvalPlus: ``exec`` of the solution fails → ``fail``). A result
    without per-test records (the judge could not run it), or ``None`` (no code to judge), fails both groups."""
    groups = [getattr(t, "group", None) for t in problem.tests]
    if not any(groups):
        return {}
    if result is None or len(result.tests) != len(problem.tests) or any(
            r.verdict == "syntax_error" for r in result.tests):
        return {"base_status": "fail", "plus_status": "fail"}
    out = {}
    for g in ("base", "plus"):
        ok = all(r.verdict == "accepted" for gr, r in zip(groups, result.tests, strict=True) if gr == g)
        out[f"{g}_status"] = "pass" if ok else "fail"
    return out


def evalplus_metrics(
    rows: Sequence[Mapping[str, Any]],
    ks: Sequence[int] = (1,),
    *,
    estimator: Callable[[Sequence[int], Sequence[int], int], Any],
) -> dict[str, Any] | None:
    """Base and plus columns of judged rows that carry ``base_status``/``plus_status`` (``None`` if none does).

    Returns ``{"base": {"accepted@1", "pass@k"…}, "plus": {…}, "n_tasks"}``: ``base`` counts ``base_status ==
    "pass"`` (HumanEval / MBPP), ``plus`` counts ``base_status == plus_status == "pass"`` (HumanEval+ / MBPP+); the
    estimators are those of :func:`rlvr.eval.metrics.compute_metrics` over rows with ``task_id``, ``sample_index``.
    Rows without the statuses count as failing both. ``estimator(ns, cs, k)`` -> per-task pass@k array: the caller's
    unbiased estimator (:func:`rlvr.eval.metrics.pass_at_k`, passed in by ``compute_metrics`` so that this module does
    not import it back)."""
    pass_at_k = estimator

    if not any("base_status" in r for r in rows):
        return None
    out: dict[str, Any] = {}
    for col in ("base", "plus"):
        tasks: dict[str, dict[str, Any]] = {}
        for r in rows:
            ok = r.get("base_status") == "pass" and (col == "base" or r.get("plus_status") == "pass")
            t = tasks.setdefault(r["task_id"], {"n": 0, "c": 0, "first": False})
            t["n"] += 1
            t["c"] += ok
            if r.get("sample_index", 0) == 0:
                t["first"] = ok
        m: dict[str, Any] = {"accepted@1": sum(t["first"] for t in tasks.values()) / len(tasks) if tasks else None}
        for k in ks:
            ns = [t["n"] for t in tasks.values()]
            cs = [t["c"] for t in tasks.values()]
            m[f"pass@{k}"] = float(pass_at_k(ns, cs, k).mean()) if tasks and min(ns) >= k else None
        out[col] = m
    out["n_tasks"] = len({r["task_id"] for r in rows})
    return out
