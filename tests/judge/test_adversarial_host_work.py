"""Adversarial suite, host-side work on submission output (issue 28, item 6): generated programs whose stdout or
return value is shaped to make the host's comparison or parsing superlinear (see :mod:`hostile.host_work`).

Each must get a failure verdict, and judging it must stay far from the hours the former quadratic readers needed:
``judge_s`` under :data:`HANG_GUARD_S` (a guard against a hang, not a speed target; the per-byte cost of each reader
is asserted by ratios in ``tests/judge/test_host_bounds.py``). Afterwards the judge still accepts a correct program."""

from __future__ import annotations

import pytest
from hostile import OK_VERDICTS, PROBES, cases, describe, judge_hostile
from hostile.host_work import PROGRAMS

HANG_GUARD_S = 60.0


@pytest.mark.parametrize(("h", "target"), cases(PROGRAMS))
def test_host_work_stays_bounded(judge, h, target):
    res, _ = judge_hostile(judge, h, target)
    assert res.verdict in OK_VERDICTS, f"{h.name} ({h.attempt}): {describe(res)}"
    assert res.judge_s < HANG_GUARD_S, f"{h.name}: judged in {res.judge_s:.1f} s"


def test_judge_still_accepts_after_hostile_outputs(judge):
    correct = "a, b = map(int, input().split())\nprint(a + b)\n"
    assert judge.judge(PROBES["stdio"](), correct).verdict == "accepted"
    half = "print(int(input()) / 2)\n"
    assert judge.judge(PROBES["stdio_float"](), half).verdict == "accepted"
