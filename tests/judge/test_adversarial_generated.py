"""Adversarial suite, hacks derived from each bundled dataset's own tests (issue 14, item 7: the generator).

Default: a deterministic sample of 30 problems per dataset (those whose tests read free names first); ``slow``: every
problem. Every derived hack (see :mod:`hostile.generate`) must be rejected as the program's failure; the canonical
solutions of the same problems are accepted (the control: the problems are judgeable as sampled)."""

from __future__ import annotations

import pytest
from hostile import OK_VERDICTS
from hostile.generate import DATASETS, dataset_problems, derive_hacks

from rlvr.judge.settle import judge_settled

SAMPLE = 30


def _check(judge, spec: str, n: int | None) -> None:
    problems = dataset_problems(spec, judge, n=n)
    assert problems, spec
    items = [(p, code, name) for p in problems for name, code in derive_hacks(p)]
    assert len(items) >= 4 * len(problems)
    results = judge.judge_many([(p, code) for p, code, _ in items])
    beaten = [f"{p.id}:{name} -> {r.verdict} {r.message[:120]!r}"
              for (p, _, name), r in zip(items, results, strict=True) if r.verdict not in OK_VERDICTS]
    assert not beaten, f"{len(beaten)}/{len(items)} derived hacks not rejected as program failures:\n" + "\n".join(
        beaten[:40])
    # the control judges trusted programs with the references' rule (rlvr.judge.settle: a timeout is judged again
    # with CPU limits), so a canonical solution near its limit (mbpp/123 at a load of 6 on 2 cores) is not a failure
    control = judge_settled(judge, [(p, p.solutions[0]) for p in problems])
    bad = {p.id: (r.verdict, r.message[:200]) for p, r in zip(problems, control, strict=True) if not r.accepted}
    assert not bad, f"canonical solutions rejected: {bad}"


@pytest.mark.parametrize("spec", DATASETS)
def test_derived_hacks_rejected_on_a_sample(judge, spec):
    _check(judge, spec, SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("spec", DATASETS)
def test_derived_hacks_rejected_on_every_problem(judge, spec):
    _check(judge, spec, None)
