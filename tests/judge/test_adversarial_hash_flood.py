"""Adversarial suite, hash flooding (issue 43, item 3; :mod:`hostile.hash_flood`): programs returning sets, frozensets
and dicts of values that all share one hash, against a call test whose expected value is a list of 60,000 integers.

Each flooding value is refused as a hash flood (its test a ``wrong_answer`` whose message says so), never built on
the host; the readable ones (at most 32 distinct values per hash) are read and compared. ``judge_s`` under
:data:`HANG_GUARD_S` is a guard against a hang, not a speed target (the per-byte costs, side by side with values that
hash apart, are asserted by ratios in ``tests/judge/test_host_bounds.py``). Afterwards the judge still accepts a
correct program.
"""

from __future__ import annotations

import pytest
from hostile import OK_VERDICTS, cases, describe, judge_hostile
from hostile.hash_flood import PROGRAMS, READABLE, probe

HANG_GUARD_S = 60.0


@pytest.fixture(scope="module")
def big():
    return probe()


@pytest.fixture(autouse=True)
def _once(request):
    # call tests go through the call server, never the per-test stdio loop the `judge` fixture varies: run once
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("judge") == "python_loop":
        pytest.skip("host-side parsing of a call test's value does not depend on the stdio loop")


@pytest.mark.parametrize(("h", "target"), cases(PROGRAMS))
def test_a_flooding_value_is_refused_not_built(judge, big, h, target):
    res, _ = judge_hostile(judge, h, target, big)
    assert res.verdict in OK_VERDICTS, f"{h.name} ({h.attempt}): {describe(res)}"
    assert res.verdict == "wrong_answer" and "hash flooding" in res.tests[0].message, describe(res)
    assert res.judge_s < HANG_GUARD_S, f"{h.name}: judged in {res.judge_s:.1f} s"


@pytest.mark.parametrize(("h", "target"), cases(READABLE))
def test_values_within_the_bound_are_read_and_compared(judge, big, h, target):
    res, _ = judge_hostile(judge, h, target, big)
    assert res.verdict == "wrong_answer" and "hash flooding" not in res.tests[0].message, describe(res)
    assert res.judge_s < HANG_GUARD_S, f"{h.name}: judged in {res.judge_s:.1f} s"


def test_the_probe_still_accepts_a_correct_program(judge, big):
    assert judge.judge(big, "def f():\n    return list(range(60_000))\n").verdict == "accepted"
