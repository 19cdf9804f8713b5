"""Load-independent verdicts for trusted programs near their time limit (reference solutions, oracle filling).

A wall-clock limit makes a program whose run time is close to it flip between ``accepted`` and ``timeout`` with the
machine's load (one CodeContests reference did, between ``dvc repro`` runs; a busier clone rejected another, and at
load 8–10 on 2 cores oracle filling dropped 7 of HumanEval/83's tests). Where the verdict feeds a hashed output or a
quality metric — the governance stage's oracle filling (:func:`rlvr.data.oracles.fill_expected`) and reference
verification (``references.jsonl``, hence the SFT/DPO sets), and the ``judge_check`` stage — one rule applies:

    judge every program at the problem's (wall) limits; a program with any timed-out test is judged **once more
    with CPU-judged limits** (:func:`cpu_judged`): every test's limit multiplied by ``margin`` becomes a limit on
    the test's **CPU seconds** (user + system of the program: ``RLIMIT_CPU`` for a stdio test, the call server's
    CPU read from ``/proc`` for a call test), its wall limit a backstop :data:`MAX_SLOWDOWN` times longer. That
    second result is final.

So a timeout is never final at the first limit, and the final verdict of a correct program is ``accepted`` exactly
when each test needs under ``margin`` × its limit of CPU (a stdio test: + 1 s, rounded up to whole seconds, as
``RLIMIT_CPU`` is at the plain limits) — a quantity the load does not change, unlike wall time. A program that
cannot finish (an infinite loop, CPU-bound past ``margin`` × the limit) is stopped by its CPU limit and is
``timeout`` the same way on an idle or a busy machine. Whether a second run happened is never part of the result
(it is logged), so the rows written are the same either way.

**Supported load.** The wall backstop of the CPU-judged run is ``MAX_SLOWDOWN`` × its CPU limit, so the rule holds
while a CPU-bound program gets at least ``1 / MAX_SLOWDOWN`` of a core: a load average up to about
``MAX_SLOWDOWN`` × the cores (8 × the cores; on the 2-core machine, load 16), counting the judge's own workers.
Beyond that a reference needing close to its CPU limit could reach the wall backstop first. What stays
load-dependent: a program needing CPU within a few per cent of ``margin`` × its limit (CPU time itself varies
with cache contention: up to 40 % on the shared 2-core machine; such a program's decision is measured once and
committed, :mod:`rlvr.judge.recorded`, and the second run uses its recorded margin), and assert tests run in the
driver sandbox (not convertible to calls,
:mod:`rlvr.judge.asserts`), whose limits stay wall limits (× ``MAX_SLOWDOWN`` in the second run). Only the embedded
judge (:class:`rlvr.judge.core.Judge`, the pipeline's) reads CPU-judged limits; another judge sees the ``margin`` ×
wall limits of the old rule.

Why 3: the two CodeContests references that time out at their 10 s limit on the shared 2-core machine took 14.4 s
and 15.6 s of wall time (6.6 s and 8.8 s of CPU) at a load average of about 5; at 3 × they are accepted by CPU on any
machine. This is for trusted programs only: a model's code is judged at the plain wall limits (rewards, evaluation).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rlvr.data.schema import Problem
from rlvr.judge.recorded import DEFAULT_FILE as DEFAULT_RECORDED
from rlvr.judge.recorded import MIN_HEADROOM, RecordedMargins, program_sha256
from rlvr.judge.verdict import JudgeResult

__all__ = ["CPU_LIMITS_KEY", "MAX_SLOWDOWN", "NEAR_SHARE", "TIMEOUT_MARGIN", "cpu_judged", "cpu_judged_slack",
           "judge_settled", "measure_cpu", "near_limit", "relaxed", "timed_out"]

log = logging.getLogger(__name__)

TIMEOUT_MARGIN = 3.0  # the second run's CPU limits, × the problem's limits
MAX_SLOWDOWN = 8.0  # the second run's wall backstop, × its CPU limits: the supported load (module docstring)
NEAR_SHARE = 1.0 / MIN_HEADROOM  # a settle run using more of a test's CPU limit is logged as near it
CPU_LIMITS_KEY = "_rlvr_cpu_judged"
"""``Problem.meta`` key of a CPU-judged copy (:func:`cpu_judged`): its value is the wall backstop factor. Set only on
the copies judged here, never on a written problem."""


class _JudgeMany(Protocol):
    def judge_many(self, items: Sequence[tuple[Problem, str]]) -> list[JudgeResult]: ...


def relaxed(problem: Problem, factor: float, test_factors: Mapping[str, float] | None = None) -> Problem:
    """A copy of ``problem`` with ``time_limit_s`` and every test's own ``time_limit_s`` multiplied by ``factor``;
    a call test whose ``args`` text is in ``test_factors`` gets its own limit (or else the problem's) multiplied by
    that factor instead. Raises ``ValueError`` when a factor is not positive."""
    factors = dict(test_factors or {})
    for f in (factor, *factors.values()):
        if not f > 0:
            raise ValueError(f"factor: must be > 0, got {f!r}")

    def one(t: Any) -> Any:
        own = factors.get(getattr(t, "args", None)) if factors else None
        if own is not None:
            return t.model_copy(update={"time_limit_s": (t.time_limit_s or problem.time_limit_s) * own})
        return t.model_copy(update={"time_limit_s": t.time_limit_s * factor}) if t.time_limit_s else t

    return problem.model_copy(update={"tests": [one(t) for t in problem.tests],
                                      "time_limit_s": problem.time_limit_s * factor})


def cpu_judged(problem: Problem, margin: float, slowdown: float = MAX_SLOWDOWN,
               test_margins: Mapping[str, float] | None = None) -> Problem:
    """A copy of ``problem`` whose limits (× ``margin``, or a call test's own margin from ``test_margins``, keyed by
    its ``args`` text: :func:`relaxed`) are CPU limits, seconds, with wall backstops ``slowdown`` × as long
    (``meta[CPU_LIMITS_KEY] = slowdown``; read by the embedded judge's plan, :func:`cpu_judged_slack`). Raises
    ``ValueError`` when a margin is not positive or ``slowdown`` is below 1."""
    if not slowdown >= 1:
        raise ValueError(f"slowdown: must be >= 1, got {slowdown!r}")
    p = relaxed(problem, margin, test_margins)
    return p.model_copy(update={"meta": {**p.meta, CPU_LIMITS_KEY: float(slowdown)}})


def cpu_judged_slack(problem: Problem) -> float:
    """The wall backstop factor of a :func:`cpu_judged` copy (>= 1), or 0.0 for a problem with plain wall limits."""
    try:
        slack = float(problem.meta.get(CPU_LIMITS_KEY) or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return slack if slack >= 1 else 0.0


def timed_out(result: JudgeResult) -> bool:
    """True when the verdict, or any test's verdict (when ``result`` lists its tests), is ``timeout``."""
    return result.verdict == "timeout" or any(t.verdict == "timeout" for t in getattr(result, "tests", ()))


def judge_settled(judge: _JudgeMany, items: Sequence[tuple[Problem, str]],
                  margin: float = TIMEOUT_MARGIN, recorded: RecordedMargins | None = None) -> list[JudgeResult]:
    """Judge ``items`` (``(problem, program)`` pairs) with the module's rule: a result with a timeout is replaced by
    the result at CPU-judged limits of ``margin`` × the limits (:func:`cpu_judged`; one batch ``judge_many`` call for
    all of them). A program listed in ``recorded`` (:mod:`rlvr.judge.recorded`, the committed decisions for programs
    whose CPU need straddles the limit) is judged again at its recorded margin instead. Results in input order.
    ``margin`` 1 (or less) disables the second run of unlisted programs.

    Logs a warning for each program whose second run was accepted with a test using more than :data:`NEAR_SHARE`
    of its CPU limit: a candidate for the recorded margins (load can move CPU time by tens of per cent)."""
    results: list[Any] = list(judge.judge_many(items)) if items else []
    table = recorded or RecordedMargins()
    again = [(i, table.margin(items[i][0].id, items[i][1], margin)) for i, r in enumerate(results) if timed_out(r)]
    again = [(i, m) for i, m in again if m > 1 or table.listed(items[i][0].id, items[i][1])]
    if again:
        log.info("judge_settled: %d of %d programs timed out; judged again with CPU limits of %.1fx the limits "
                 "(%d at a recorded margin)", len(again), len(items), margin,
                 sum(table.listed(items[i][0].id, items[i][1]) for i, _ in again))
        copies = [cpu_judged(items[i][0], m) for i, m in again]
        second = judge.judge_many([(c, items[i][1]) for c, (i, _) in zip(copies, again, strict=True)])
        for c, (i, _), r in zip(copies, again, second, strict=True):
            results[i] = r
            near = near_limit(c, r)
            if near and not table.listed(items[i][0].id, items[i][1]):
                log.warning("judge_settled: %s's program %s used %.1f s of a %.1f s CPU limit on test %d: near "
                            "its settle limit, so load may flip it; record a margin in %s (docs/stages/"
                            "governance.md)", items[i][0].id, program_sha256(items[i][1])[:12], near[1], near[2],
                            near[0], DEFAULT_RECORDED)
    return results


def near_limit(judged: Problem, result: JudgeResult) -> tuple[int, float, float] | None:
    """``(test index, CPU seconds used, CPU limit seconds)`` of the first accepted test of a settle run
    (``judged``: the :func:`cpu_judged` copy) that used more than :data:`NEAR_SHARE` of its limit, else ``None``."""
    tests = list(judged.tests)
    for t in getattr(result, "tests", ()):
        if t.verdict == "accepted" and 0 <= t.index < len(tests):
            limit = tests[t.index].time_limit_s or judged.time_limit_s
            if limit and t.cpu_s > NEAR_SHARE * limit:
                return t.index, t.cpu_s, limit
    return None


def measure_cpu(judge: Any, problem: Any, program: str, args: str | None = None, repeats: int = 3,
                ceiling: float = 20.0) -> list[float]:
    """CPU seconds ``program`` needs on ``problem`` (on its call test whose ``args`` text is ``args``, else on its
    slowest test), once per repeat: each run is judged with CPU-judged limits of ``ceiling`` × the limits
    (:func:`rlvr.judge.settle.cpu_judged`) and the largest ``cpu_s`` of its tests is kept (a call test reports no CPU
    of its own: its wall seconds, an upper bound of its CPU on one core, stand in). ``judge``: the embedded
    :class:`rlvr.judge.core.Judge`. Raises ``ValueError`` when ``args``
    names no call test of ``problem``, or a run is not accepted (then the program cannot be measured here: a wrong
    answer, or a need beyond ``ceiling`` × the limit)."""
    if args is not None:
        tests = [t for t in problem.tests if getattr(t, "args", None) == args]
        if not tests:
            raise ValueError(f"{problem.id}: no call test with args {args!r}")
        problem = problem.model_copy(update={"tests": tests[:1]})
    out: list[float] = []
    for _ in range(repeats):
        r = judge.judge(cpu_judged(problem, ceiling), program)
        if r.verdict != "accepted":
            raise ValueError(f"{problem.id}: {r.verdict} at {ceiling}x the limits ({r.message[:200]}): not measurable")
        out.append(round(max(t.cpu_s or t.time_s for t in r.tests), 3))
    return out
