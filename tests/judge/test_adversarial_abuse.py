"""Adversarial suite, memory and CPU abuse (issue 14, item 4).

Fill programs print the right answer only when they got more memory past the sandbox than the problem's 512 MB limit,
so they must not be accepted; after each, the judge still accepts a correct program and the host's ``MemAvailable``
is back within half the fill size of its value before (nothing the submission wrote stays pinned)."""

from __future__ import annotations

import time

import pytest
from hostile import OK_VERDICTS, PROBES, cases, describe, judge_hostile, mem_available_mb
from hostile.abuse import FILLERS, NEED_CGROUP, PROGRAMS

from rlvr.judge.sandbox.cgroups import detect

CORRECT = "a, b = map(int, input().split())\nprint(a + b)\n"
FILL_MB = 900


def _settled_mem(baseline: float, timeout_s: float = 5.0) -> float:
    """Best ``MemAvailable`` (MB) seen while polling up to ``timeout_s`` s (other tenants make it noisy)."""
    best, deadline = mem_available_mb(), time.monotonic() + timeout_s
    while best < baseline - FILL_MB / 2 and time.monotonic() < deadline:
        time.sleep(0.25)
        best = max(best, mem_available_mb())
    return best


@pytest.mark.parametrize(("h", "target"), cases(PROGRAMS))
def test_abuse_is_contained(judge, h, target):
    if h.name in NEED_CGROUP and (mode := detect()).name == "none":
        pytest.skip(f"only a cgroup bounds several processes together, and none is available here: {mode.reason}")
    before = mem_available_mb()
    res, _ = judge_hostile(judge, h, target)
    assert res.verdict in OK_VERDICTS, f"{h.name} ({h.attempt}): {describe(res)}"
    assert judge.judge(PROBES["stdio"](), CORRECT).verdict == "accepted", f"judge unresponsive after {h.name}"
    if h.name in FILLERS:
        after = _settled_mem(before)
        assert after >= before - FILL_MB / 2, f"{h.name}: host MemAvailable {before:.0f} -> {after:.0f} MB"


def test_reports_stay_bounded_after_floods(judge):
    res = judge.judge(PROBES["stdio"](), "import os\nos.write(1, bytes(range(128, 256)) * 400000)\n")
    assert res.verdict in OK_VERDICTS
    assert all(len(t.stdout) <= 100_000 and len(t.stderr) <= 100_000 for t in res.tests)
