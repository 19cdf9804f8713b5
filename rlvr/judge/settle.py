"""Load-independent verdicts for trusted programs near their time limit (reference solutions).

A wall-clock limit makes a program whose run time is close to it flip between ``accepted`` and ``timeout`` with the
machine's load (one CodeContests reference did, between ``dvc repro`` runs). Where the verdict feeds a hashed output
or a quality metric — the governance stage's reference verification (``references.jsonl``, hence the SFT/DPO sets)
and the ``judge_check`` stage — :func:`judge_settled` applies one deterministic rule:

    judge every program at the problem's limits; a program with any timed-out test is judged **once more** with
    every limit multiplied by ``margin`` (default :data:`TIMEOUT_MARGIN` = 3), and that second result is final.

The outcome is the program's verdict at ``margin`` × the limits whenever its first run timed out, and its verdict at
the limits otherwise; both agree unless a test's run time lies between the limit and ``margin`` × the limit. So a
program near its limit gets the same verdict on an idle or a busy machine (it is accepted either way once a slowdown
below ``margin`` × pushed it over), and only a program near ``margin`` × its limit *and* slowed past the limit in
its first run could still flip. Whether a second run happened is never part of the result (it is logged), so the
rows written are the same either way. Why 3: the two CodeContests references that time out at their 10 s limit on
the shared 2-core machine took 14.4 s and 15.6 s of wall time (6.6 s and 8.8 s of CPU) at a load average of about
5, so a margin of 2 would leave them little headroom. This is for trusted programs only: a model's code is judged at
the plain limits (rewards, evaluation).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from rlvr.data.schema import Problem
from rlvr.judge.verdict import JudgeResult

__all__ = ["TIMEOUT_MARGIN", "judge_settled", "relaxed", "timed_out"]

log = logging.getLogger(__name__)

TIMEOUT_MARGIN = 3.0  # the second run's limits, × the problem's


class _JudgeMany(Protocol):
    def judge_many(self, items: Sequence[tuple[Problem, str]]) -> list[JudgeResult]: ...


def relaxed(problem: Problem, factor: float) -> Problem:
    """A copy of ``problem`` with ``time_limit_s`` and every test's own ``time_limit_s`` multiplied by ``factor``.
    Raises ``ValueError`` when ``factor`` is not positive."""
    if not factor > 0:
        raise ValueError(f"factor: must be > 0, got {factor!r}")
    tests = [t.model_copy(update={"time_limit_s": t.time_limit_s * factor}) if t.time_limit_s else t
             for t in problem.tests]
    return problem.model_copy(update={"tests": tests, "time_limit_s": problem.time_limit_s * factor})


def timed_out(result: JudgeResult) -> bool:
    """True when the verdict, or any test's verdict (when ``result`` lists its tests), is ``timeout``."""
    return result.verdict == "timeout" or any(t.verdict == "timeout" for t in getattr(result, "tests", ()))


def judge_settled(judge: _JudgeMany, items: Sequence[tuple[Problem, str]],
                  margin: float = TIMEOUT_MARGIN) -> list[JudgeResult]:
    """Judge ``items`` (``(problem, program)`` pairs) with the module's rule: a result with a timeout is replaced by
    the result at ``margin`` × the limits (one batch ``judge_many`` call for all of them). Results in input order.
    ``margin`` 1 (or less) disables the second run."""
    results: list[Any] = list(judge.judge_many(items)) if items else []
    again = [i for i, r in enumerate(results) if timed_out(r)]
    if again and margin > 1:
        log.info("judge_settled: %d of %d programs timed out; judged again at %.1fx the limits", len(again),
                 len(items), margin)
        second = judge.judge_many([(relaxed(items[i][0], margin), items[i][1]) for i in again])
        for i, r in zip(again, second, strict=True):
            results[i] = r
    return results
