"""Adversarial suite, verdict forging / harness takeover and verdict laundering (issue 14, items 1 and 5).

Every program is wrong for its probe; it may only fail as the program's own failure (``OK_VERDICTS``: never
``accepted``, never ``sandbox_error``). Programs that plant processes carry a host tag that must be gone from the
host's process table once the verdict is back. The probes' correct solutions are accepted (so the tests can fail)."""

from __future__ import annotations

import pytest
from hostile import OK_VERDICTS, PROBES, cases, describe, forging, judge_hostile, laundering, wait_gone

CORRECT = {
    "stdio": "a, b = map(int, input().split())\nprint(a + b)\n",
    "call": "def add(a, b):\n    return a + b\n",
    "assert_he": "def add(a, b):\n    return a + b\n",
    "assert_mbpp": "def add(a, b):\n    return a + b\n",
    "float_call": "def half(x):\n    return x + 0.5\n",
}


@pytest.mark.parametrize("probe", sorted(CORRECT))
def test_probe_accepts_its_correct_solution(judge, probe):
    res = judge.judge(PROBES[probe](), CORRECT[probe])
    assert res.verdict == "accepted", describe(res)


@pytest.mark.parametrize(("h", "target"), cases(forging.PROGRAMS))
def test_forging_is_a_program_failure(judge, h, target):
    res, tag = judge_hostile(judge, h, target)
    assert res.verdict in OK_VERDICTS, f"{h.name} ({h.attempt}): {describe(res)}"
    if tag is not None:
        assert wait_gone(tag) == [], f"{h.name}: planted process outlives the submission"


@pytest.mark.parametrize(("h", "target"), cases(laundering.PROGRAMS))
def test_laundering_is_a_program_failure_and_the_judge_recovers(judge, h, target):
    res, _ = judge_hostile(judge, h, target)
    assert res.verdict in OK_VERDICTS, f"{h.name} ({h.attempt}): {describe(res)}"
    again = judge.judge(PROBES[target](), CORRECT[target])
    assert again.verdict == "accepted", f"after {h.name}: {describe(again)}"
