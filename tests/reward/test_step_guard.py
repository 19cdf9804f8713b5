"""The per-step dead-judge guard: a step whose samples sent to the judge were all sandbox_error stops the run; a
step where the judge answered once, or where nothing reached the judge, goes on. Through verl's path (Ray reward
workers → key-value counts → the rlvr_grpo estimator): tests/train/test_verl_advantage.py; through TRL's:
tests/reward/test_reward_trl.py."""

from __future__ import annotations

import pytest

from rlvr.reward.modes import RewardOutcome
from rlvr.reward.step_guard import VERL_HINT, JudgeDied, StepGuard, check_step, job_totals, record, step_counts


def _o(status: str, has_code: bool = True) -> RewardOutcome:
    return RewardOutcome(score=None, acc=False, pass_ratio=0.0, status=status, n_tests=1, judge_s=0.0,
                         has_code=has_code)


def test_check_step_raises_only_when_every_judged_sample_failed(monkeypatch):
    monkeypatch.delenv("RLVR_SANDBOX_URL", raising=False)
    check_step(0, 0, 3, "verl GRPO")  # nothing reached the judge (no code anywhere): no verdict on the judge
    check_step(5, 4, 3, "verl GRPO")  # the judge answered once: transient errors are the retries' business
    with pytest.raises(JudgeDied, match=r"^verl GRPO step 3: all 5 samples sent to the judge \(embedded\) came back "
                                        r"sandbox_error.*stopping the run\. Check bubblewrap .*rlvr-node-judge"):
        check_step(5, 5, 3, "verl GRPO", VERL_HINT)
    monkeypatch.setenv("RLVR_SANDBOX_URL", "http://judge-host:8080")
    with pytest.raises(JudgeDied, match=r"\(http://judge-host:8080\)") as err:
        check_step(1, 1, "?", "TRL GRPO")
    assert "\n" not in str(err.value) and isinstance(err.value, RuntimeError)


def test_step_counts_leave_out_samples_without_code():
    outs = [_o("sandbox_error"), _o("syntax_error", has_code=False), _o("accepted")]
    assert step_counts(outs) == (2, 1)
    assert step_counts([{"status": "sandbox_error", "has_code": True}, {"status": "syntax_error", "has_code": False}]) \
        == (1, 1)


def test_the_guard_checks_what_was_judged_since_its_previous_call():
    totals = iter([None, (4, 0), (9, 1), (9, 1), (13, 5)])
    guard = StepGuard("verl GRPO", totals=lambda: next(totals))
    assert guard.check(1) is None  # no counts (no reward process recorded yet): nothing to say
    assert guard.check(2) == (4, 0)
    assert guard.check(3) == (5, 1)  # 1 error among 5: goes on
    assert guard.check(4) == (0, 0)  # nothing judged (all without code, or validation only)
    with pytest.raises(JudgeDied, match=r"step 5: all 4 samples"):
        guard.check(5)
    assert guard.calls == 5

    def broken():
        raise ConnectionError("GCS unreachable")

    assert StepGuard(totals=broken).check(1) is None  # a failure to read the counts does not stop a healthy run


def test_recording_outside_ray_does_nothing():
    record("sandbox_error", True)
    record("accepted", False)
    assert job_totals() is None
