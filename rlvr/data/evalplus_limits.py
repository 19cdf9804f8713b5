"""Per-test time limits of EvalPlus datasets, set as EvalPlus sets them.

EvalPlus (``evalplus`` 0.3.1, ``evalplus/eval/__init__.py::untrusted_check``, defaults in ``evalplus/config.py``)
gives every input its own wall limit ``max(min_time_limit, gt_time_limit_factor * t_gt)``, ``t_gt`` the ground
truth's time on that input measured when the expected outputs are computed, with ``DEFAULT_MIN_TIME_LIMIT = 1.0`` s and
``DEFAULT_GT_TIME_LIMIT_FACTOR = 4.0``. :func:`set_time_limits` does the same for rlvr: it judges each problem's
reference solution once (after its expected outputs are filled), reads every test's wall time ``time_s`` and writes
``time_limit_s = max(1.0, 4.0 * time_s)`` on the test (rounded up to the millisecond). The limits are fixed in the
problems file from then on, so a later verdict does not depend on the judging machine's load (a reference twice as
slow under load only loosens the limit it sets, and the 1 s floor covers almost every input: the limit is then the
same on every machine). ``Problem.time_limit_s`` becomes the largest per-test limit, for judges that only read the
problem's limit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.data.schema import Problem

__all__ = ["DEFAULT_GT_TIME_LIMIT_FACTOR", "DEFAULT_MIN_TIME_LIMIT", "evalplus_limit", "is_evalplus",
           "set_time_limits"]

DEFAULT_MIN_TIME_LIMIT = 1.0  # seconds; evalplus/config.py
DEFAULT_GT_TIME_LIMIT_FACTOR = 4.0  # evalplus/config.py


def is_evalplus(problem: Problem) -> bool:
    """True when ``problem`` has EvalPlus tests (a test with a ``group``)."""
    return any(getattr(t, "group", None) for t in problem.tests)


def evalplus_limit(gt_time_s: float, min_time_limit: float = DEFAULT_MIN_TIME_LIMIT,
                   factor: float = DEFAULT_GT_TIME_LIMIT_FACTOR) -> float:
    """``max(min_time_limit, factor * gt_time_s)`` in seconds, rounded up to the millisecond."""
    return max(min_time_limit, math.ceil(factor * max(gt_time_s, 0.0) * 1000.0) / 1000.0)


def set_time_limits(problems: Sequence[Problem], judge: Any, workers: int = 2,
                    min_time_limit: float = DEFAULT_MIN_TIME_LIMIT,
                    factor: float = DEFAULT_GT_TIME_LIMIT_FACTOR) -> tuple[list[Problem], dict[str, Any]]:
    """Set EvalPlus per-test limits on every EvalPlus problem of ``problems`` (others pass through unchanged).

    Args:
        judge: anything with ``judge(problem, solution) -> JudgeResult`` (per-test ``time_s``, wall seconds).
        workers: problems judged concurrently. min_time_limit (s) / factor: EvalPlus's defaults.
    Returns ``(problems, report)``, report ``{"problems_timed", "not_timed": [{id, reason}], "max_limit_s"}``.
    A problem whose reference cannot be judged (no solution, sandbox failure) keeps its limits and is listed; one
    whose tests all have limits already is left as it is."""
    todo = [p for p in problems if is_evalplus(p) and p.solutions and any(t.time_limit_s is None for t in p.tests)]

    def work(p: Problem) -> tuple[list[float] | None, str]:
        try:
            res = judge.judge(p, p.solutions[0])
        except Exception as exc:  # infrastructure: reported, never silent
            return None, f"judge_error: {type(exc).__name__}: {exc}"[:300]
        if len(res.tests) != len(p.tests) or any(t.verdict == "sandbox_error" for t in res.tests):
            return None, f"judge_error: {res.message}"[:300]
        return [float(t.time_s) for t in res.tests], ""

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        times = dict(zip((p.id for p in todo), ex.map(work, todo), strict=True))
    out: list[Problem] = []
    report: dict[str, Any] = {"problems_timed": 0, "not_timed": [], "max_limit_s": 0.0}
    for p in problems:
        if p.id not in times:
            if is_evalplus(p) and not p.solutions:
                report["not_timed"].append({"id": p.id, "reason": "no_solution"})
            out.append(p)
            continue
        ts, err = times[p.id]
        if ts is None:
            report["not_timed"].append({"id": p.id, "reason": err})
            out.append(p)
            continue
        limits = [evalplus_limit(t, min_time_limit, factor) for t in ts]
        tests = [t.model_copy(update={"time_limit_s": lim}) for t, lim in zip(p.tests, limits, strict=True)]
        top = max(limits, default=p.time_limit_s)
        report["problems_timed"] += 1
        report["max_limit_s"] = max(report["max_limit_s"], top)
        out.append(p.model_copy(update={"tests": tests, "time_limit_s": top}))
    return out, report
