"""Reference-solution check: every bundled reference/canonical solution through the judge.

Run by the ``judge_check`` stage on every ``dvc repro`` so a judge change that breaks a benchmark's own reference
solutions shows up as a metrics diff (and, for the datasets listed in ``must_pass``, as a failed stage).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import Field, field_validator

from rlvr.config import Section
from rlvr.data.schema import Problem
from rlvr.judge.recorded import RecordedMargins
from rlvr.judge.settle import judge_settled
from rlvr.judge.verdict import JudgeResult

__all__ = ["JudgeCheckParams", "JudgeLike", "check_references"]


class JudgeCheckParams(Section):
    """``judge_check`` section: datasets whose references must all be accepted; how many rejections to list."""

    must_pass: list[str] = Field(default_factory=list)
    full_datasets: list[str] = Field(default_factory=list)
    max_listed: int = 200

    @field_validator("must_pass")
    @classmethod
    def _one_spelling(cls, v: list[str]) -> list[str]:
        """``humanevalplus:v0.1.10`` = ``humanevalplus-v0.1.10`` (the judge stays free of rlvr.data: the same rule as
        :func:`rlvr.data.bundled.canonical_name` for an explicit version; default versions are filled by the stage)."""
        return [n.replace(":", "-", 1) for n in v]


class JudgeLike(Protocol):
    """What :func:`check_references` needs of a judge (embedded ``Judge`` or ``RemoteJudge``)."""

    def judge_many(self, items: Sequence[tuple[Problem, str]]) -> list[JudgeResult]: ...


def check_references(problems: Sequence[Problem], judge: JudgeLike, max_listed: int = 200,
                     recorded: RecordedMargins | None = None) -> dict[str, Any]:
    """Judge the first reference solution of every problem that has one; one that times out is judged again with CPU
    limits of 3 × the limits, and that verdict counts (:func:`rlvr.judge.settle.judge_settled`: the counts do not
    follow the machine's load; a program listed in ``recorded``, :mod:`rlvr.judge.recorded`, at its recorded margin).

    Returns a JSON-ready dict: ``problems`` (total), ``with_reference``, ``accepted``, ``rejected``,
    ``accepted_fraction`` (of those with a reference; 0.0 when none), ``verdicts`` (count per verdict), ``judge_s``
    (sum of judge seconds) and ``rejections``: up to ``max_listed`` of ``{id, verdict, passed, total, message}``.
    """
    items = [(p, p.solutions[0]) for p in problems if p.solutions]
    results = judge_settled(judge, items, recorded=recorded) if items else []
    verdicts = Counter(r.verdict for r in results)
    rejections = [
        {"id": p.id, "verdict": r.verdict, "passed": r.passed, "total": r.total, "message": r.message[:300]}
        for (p, _), r in zip(items, results, strict=True)
        if r.verdict != "accepted"
    ]
    accepted = verdicts.get("accepted", 0)
    return {
        "problems": len(problems),
        "with_reference": len(items),
        "accepted": accepted,
        "rejected": len(items) - accepted,
        "accepted_fraction": round(accepted / len(items), 6) if items else 0.0,
        "verdicts": dict(sorted(verdicts.items())),
        "judge_s": round(sum(r.judge_s for r in results), 3),
        "rejections": rejections[:max_listed],
    }
