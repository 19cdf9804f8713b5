"""The per-step dead-judge guard: 2 consecutive training steps whose samples sent to the judge were all sandbox_error
stop the run; a step where the judge answered once resets the count, a step where nothing reached the judge neither
counts nor resets it, and several windows of one step are one step. The reward side counts each sample once, in
memory, and publishes from a background thread. Through verl's path (Ray reward workers → key-value counts → the
rlvr_grpo estimator): tests/train/test_verl_advantage.py; through TRL's: tests/reward/test_reward_trl.py."""

from __future__ import annotations

import json
import threading
import time

import pytest
from reward_fixtures import fake_ray_counts

from rlvr.reward import step_guard
from rlvr.reward.modes import RewardOutcome
from rlvr.reward.step_guard import (
    DEAD_STEPS,
    ONCE_KEY,
    VERL_HINT,
    JudgeDied,
    StepGuard,
    expect_once,
    job_totals,
    record,
    step_counts,
)


def _o(status: str, has_code: bool = True) -> RewardOutcome:
    return RewardOutcome(score=None, acc=False, pass_ratio=0.0, status=status, n_tests=1, judge_s=0.0,
                         has_code=has_code)


def test_two_consecutive_dead_steps_stop_the_run(monkeypatch):
    monkeypatch.delenv("RLVR_SANDBOX_URL", raising=False)
    assert DEAD_STEPS == 2
    g = StepGuard("verl GRPO", totals=None, hint=VERL_HINT)
    g.observe(1, 1, 1)  # one judged sample, a timeout under load: one dead step is not enough
    g.observe(5, 4, 2)  # the judge answered once: resets
    g.observe(2, 2, 3)
    g.observe(0, 0, 4)  # nothing reached the judge (no code anywhere): neither counts nor resets
    with pytest.raises(JudgeDied, match=r"^verl GRPO step 5: all 5 samples sent to the judge \(embedded\) came back "
                                        r"sandbox_error, as did all 2 of step 3: no answer from the judge for 2 "
                                        r"consecutive steps.*stopping the run\. Check bubblewrap .*rlvr-node-judge"):
        g.observe(5, 5, 5)
    monkeypatch.setenv("RLVR_SANDBOX_URL", "http://judge-host:8080")
    g = StepGuard("TRL GRPO", totals=None)
    g.observe(1, 1)  # no step number: every call is a step of its own, numbered by the guard
    with pytest.raises(JudgeDied, match=r"^TRL GRPO step 2: .*\(http://judge-host:8080\).* as did all 1 of step 1")\
            as err:
        g.observe(1, 1)
    assert "\n" not in str(err.value) and isinstance(err.value, RuntimeError)


def test_windows_of_one_step_are_one_step():
    g = StepGuard(totals=None, where="embedded")
    g.observe(2, 2, 7)
    g.observe(3, 3, 7)  # a second batch of step 7 (evaluation, a second mini-batch): still one dead step
    g.observe(1, 0, 8)
    g.observe(4, 4, 8)  # summed with the step's first window: the judge answered in step 8
    g.observe(3, 3, 9)
    with pytest.raises(JudgeDied, match=r"step 10: all 6 samples .* as did all 3 of step 9"):
        g.observe(6, 6, 10)
    g = StepGuard(totals=None, where="embedded")
    g.observe(4, 1, 3)
    g.observe(8, 8, 3, failed_batch=True)  # a batch known all-failed makes its step dead, whatever the counts say
    with pytest.raises(JudgeDied, match=r"step 4: all 2 samples .* as did all 8 of step 3"):
        g.observe(2, 2, 4)


def test_step_counts_leave_out_samples_without_code():
    outs = [_o("sandbox_error"), _o("syntax_error", has_code=False), _o("accepted")]
    assert step_counts(outs) == (2, 1)
    assert step_counts([{"status": "sandbox_error", "has_code": True}, {"status": "syntax_error", "has_code": False}]) \
        == (1, 1)


def test_check_takes_what_was_judged_since_the_previous_step():
    totals = iter([None, (4, 0), (9, 1), (9, 1), (13, 5), (16, 8)])
    guard = StepGuard("verl GRPO", totals=lambda: next(totals), where="embedded")
    assert guard.check(1) is None  # no counts (no reward process published yet): nothing to say
    assert guard.check(2) == (4, 0)
    assert guard.check(2) is None  # verl's second mini-batch of step 2: no new window, the totals are not read
    assert guard.check(3) == (5, 1)  # 1 error among 5: goes on
    assert guard.check(4) == (0, 0)  # nothing judged (all without code, or validation only)
    assert guard.check(5) == (4, 4)  # dead, once
    assert guard.check(5) is None and guard.check(5) is None  # the same step again: not a second dead step
    with pytest.raises(JudgeDied, match=r"step 6: all 3 samples .* as did all 4 of step 5"):
        guard.check(6)

    def broken():
        raise ConnectionError("GCS unreachable")

    assert StepGuard(totals=broken).check(1) is None  # a failure to read the counts does not stop a healthy run


def test_recording_outside_ray_does_nothing():
    record("sandbox_error", True)
    record("accepted", False)
    assert job_totals() is None


@pytest.fixture
def in_ray(monkeypatch):
    """A process "in Ray" with a fake key-value store and a fresh counter that never publishes by itself."""
    kv, counts = fake_ray_counts(monkeypatch)
    yield kv, counts
    counts.close()


def test_record_counts_in_memory_and_publishing_is_separate(in_ray):
    """``record`` runs on the reward worker's event loop: it must not call GCS; the publisher (here: ``flush``)
    puts the totals once, however many samples were recorded."""
    kv, _ = in_ray
    for i in range(1000):
        record("sandbox_error" if i % 4 == 0 else "accepted", True)
    record("syntax_error", False)  # no code: never reached the judge
    assert kv.store == {} and kv.put_threads == []
    assert step_guard.flush() is True and step_guard.flush() is False  # unchanged totals: no second put
    assert json.loads(kv.store["job1/node-1"]) == {"judged": 1000, "sandbox_error": 250}
    assert job_totals() == (1000, 250) and len(kv.put_threads) == 1


def test_the_background_thread_publishes_within_its_interval(in_ray):
    kv, counts = in_ray
    counts.interval_s = 0.05
    record("sandbox_error", True)
    deadline = time.monotonic() + 10
    while "job1/node-1" not in kv.store and time.monotonic() < deadline:
        time.sleep(0.01)
    assert json.loads(kv.store["job1/node-1"]) == {"judged": 1, "sandbox_error": 1}
    assert kv.put_threads and threading.get_ident() not in kv.put_threads  # never on the recording thread
    assert counts.thread is not None and counts.thread.daemon


def test_a_failed_publish_is_retried(in_ray, monkeypatch, caplog):
    kv, _ = in_ray
    record("accepted", True)
    put = kv._internal_kv_put
    monkeypatch.setattr(kv, "_internal_kv_put", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("GCS down")))
    assert step_guard.flush() is False and "cannot publish judged counts" in caplog.text
    monkeypatch.setattr(kv, "_internal_kv_put", put)
    assert step_guard.flush() is True and job_totals() == (1, 0)


def test_a_sample_marked_once_counts_once(in_ray):
    """rlvr's rate_limited manager marks its sample's extra_info copy; whichever of the timeout and the late call
    records first counts, the other does nothing. An unmarked dict (verl's shared one) counts every time."""
    sample = {"split": "train"}
    expect_once(sample)
    record("sandbox_error", True, sample=sample)  # the manager's timeout
    record("accepted", True, sample=sample)  # the abandoned call finishing later
    assert sample[ONCE_KEY] is True
    shared = {"split": "train"}
    record("accepted", True, sample=shared)
    record("accepted", True, sample=shared)
    assert ONCE_KEY not in shared
    step_guard.flush()
    assert job_totals() == (3, 1)
