"""Reference verification of the governance stage.

After oracle filling (:mod:`rlvr.data.oracles`), :func:`verify_references` judges every reference solution (and every
known incorrect solution) of the problems whose role is in ``references.roles``; the verdicts go to
``data/governance/references.jsonl`` and the manifests stage builds the SFT set (accepted references) and the DPO seed
pairs (accepted vs rejected) from them without a judge. Verdicts near a time limit follow the deterministic rule of
:mod:`rlvr.judge.settle`, so the accepted set does not depend on the machine's load. It lives here because
governance already owns the judge and its cost, so the manifests stage stays a fast, judge-free transform that can be
re-run for any training-set knob.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import Field

from rlvr.config import Section
from rlvr.data.schema import Problem
from rlvr.judge.recorded import RecordedMargins
from rlvr.judge.settle import judge_settled
from rlvr.progress import progress

CHUNK = 64  # programs per judge_many call: a progress tick, and a small tail for the last chunk's stragglers

__all__ = ["ReferenceParams", "verify_references"]


class ReferenceParams(Section):
    """``governance.references``: judge the reference solutions (``solutions``, at most ``max_solutions`` per problem)
    and known-incorrect solutions (``incorrect_solutions``, at most ``max_incorrect``) of problems whose role is in
    ``roles``; ``verify: false`` skips it (then the manifests stage has no SFT/DPO data)."""

    verify: bool = True
    roles: list[Literal["train", "dev", "test"]] = Field(default_factory=lambda: ["train"])
    max_solutions: int = Field(default=4, ge=0)
    max_incorrect: int = Field(default=4, ge=0)


class _Judge(Protocol):
    def judge_many(self, items: Sequence[tuple[Problem, str]]) -> list[Any]: ...


def verify_references(
    problems: Sequence[Problem], judge: _Judge, cfg: ReferenceParams, recorded: RecordedMargins | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Judge the reference and known-incorrect solutions of every problem whose ``meta['role']`` is in
    ``cfg.roles`` (first ``max_solutions`` / ``max_incorrect`` of each), through ``judge.judge_many`` in chunks of
    :data:`CHUNK` programs (each chunk still spread over the judge's workers) so that a progress bar can count them.
    A program with a timed-out test is judged again at 3 × the limits and that verdict is final
    (:func:`rlvr.judge.settle.judge_settled`), so a reference near its limit does not flip with the machine's load;
    a program listed in ``recorded`` (:mod:`rlvr.judge.recorded`) is judged again at its recorded margin.

    Returns ``(rows, report)``: one row per judged program ``{"id", "kind": "solution"|"incorrect", "index",
    "verdict", "accepted", "pass_ratio"}`` (problem order, then kind, then index); ``report["counts"]``:
    ``references_judged``, ``references_accepted``, ``references_rejected``, ``incorrect_judged``,
    ``incorrect_rejected``, ``incorrect_accepted`` (a "wrong" program the tests cannot tell apart),
    ``problems_with_accepted``, ``problems_without_solution``; ``report["rejected"]``: ``[{id, index, verdict}]`` of
    references the judge did not accept (dropped from SFT, never silently)."""
    todo: list[tuple[Problem, str, str, int]] = []
    no_solution = 0
    for p in problems:
        if p.meta.get("role", "test") not in cfg.roles:
            continue
        if not p.solutions:
            no_solution += 1
        todo += [(p, s, "solution", i) for i, s in enumerate(p.solutions[: cfg.max_solutions])]
        todo += [(p, s, "incorrect", i) for i, s in enumerate(p.incorrect_solutions[: cfg.max_incorrect])]
    items = [(p, s) for p, s, _, _ in todo]
    results: list[Any] = []
    with progress(total=len(items), desc="references", unit="program") as bar:
        for start in range(0, len(items), CHUNK):
            results += judge_settled(judge, items[start : start + CHUNK], recorded=recorded)
            bar.update(len(items[start : start + CHUNK]))
    rows: list[dict[str, Any]] = []
    for (p, _s, kind, i), r in zip(todo, results, strict=True):
        rows.append({"id": p.id, "kind": kind, "index": i, "verdict": r.verdict, "accepted": r.verdict == "accepted",
                     "pass_ratio": round(float(r.pass_ratio), 6)})
    refs = [r for r in rows if r["kind"] == "solution"]
    wrong = [r for r in rows if r["kind"] == "incorrect"]
    counts = {
        "references_judged": len(refs),
        "references_accepted": sum(r["accepted"] for r in refs),
        "references_rejected": sum(not r["accepted"] for r in refs),
        "incorrect_judged": len(wrong),
        "incorrect_rejected": sum(not r["accepted"] for r in wrong),
        "incorrect_accepted": sum(r["accepted"] for r in wrong),
        "problems_with_accepted": len({r["id"] for r in refs if r["accepted"]}),
        "problems_without_solution": no_solution,
    }
    verdicts = dict(sorted(Counter(r["verdict"] for r in refs).items()))
    rejected = [{"id": r["id"], "index": r["index"], "verdict": r["verdict"]} for r in refs if not r["accepted"]]
    return rows, {"counts": counts, "verdicts": verdicts, "rejected": rejected}
