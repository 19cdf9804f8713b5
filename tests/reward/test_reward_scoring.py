"""Concurrent judging: order, concurrency bound, retries only on transport errors, per-request timeout."""

from __future__ import annotations

import asyncio

import pytest
from reward_fixtures import STDIO_SUM, FakeJudge

from rlvr.reward.scoring import ScoringOptions, judge_all, judge_all_async


def test_order_preserved_and_concurrency_bounded():
    j = FakeJudge(sleep_s=0.02)
    items = [(STDIO_SUM, "#WA" if i % 3 == 0 else "ok") for i in range(40)]
    res = judge_all(j, items, ScoringOptions(max_concurrency=4, retry_backoff_s=0))
    assert [r.verdict for r in res] == ["wrong_answer" if i % 3 == 0 else "accepted" for i in range(40)]
    assert 1 < j.peak <= 4
    assert j.items == 40


def test_batch_size_groups_requests():
    j = FakeJudge()
    judge_all(j, [(STDIO_SUM, "ok")] * 10, ScoringOptions(batch_size=4))
    assert j.calls == 3 and j.items == 10


def test_program_failures_are_never_retried():
    j = FakeJudge()
    res = judge_all(j, [(STDIO_SUM, "#WA"), (STDIO_SUM, "#TLE")], ScoringOptions(max_retries=3))
    assert [r.verdict for r in res] == ["wrong_answer", "timeout"]
    assert j.calls == 2


def test_transport_errors_are_retried():
    j = FakeJudge(fail_first=2)
    res = judge_all(j, [(STDIO_SUM, "#RAISE_TRANSPORT")], ScoringOptions(max_retries=2, retry_backoff_s=0))
    assert res[0].verdict == "accepted" and j.calls == 3


def test_transport_errors_exhausted_become_sandbox_error():
    j = FakeJudge(fail_first=10)
    res = judge_all(j, [(STDIO_SUM, "#RAISE_TRANSPORT")], ScoringOptions(max_retries=1, retry_backoff_s=0))
    assert res[0].verdict == "sandbox_error" and "ConnectionError" in res[0].message and j.calls == 2
    assert res[0].total == len(STDIO_SUM.tests)


def test_sandbox_error_verdict_retried_then_kept():
    j = FakeJudge()
    res = judge_all(
        j, [(STDIO_SUM, "#SANDBOX"), (STDIO_SUM, "ok")], ScoringOptions(max_retries=2, retry_backoff_s=0, batch_size=2)
    )
    assert [r.verdict for r in res] == ["sandbox_error", "accepted"]
    assert j.items == 2 + 1 + 1  # only the failed item is re-sent


def test_request_timeout_reads_as_sandbox_error(monkeypatch):
    monkeypatch.setattr("rlvr.reward.scoring.judge_bound_s", lambda p: 0.0)  # else floored at the judge's own bound
    j = FakeJudge(sleep_s=0.5)
    res = judge_all(j, [(STDIO_SUM, "ok")], ScoringOptions(request_timeout_s=0.05))
    assert res[0].verdict == "sandbox_error" and "timed out" in res[0].message


def test_a_judge_exception_on_one_submission_scores_it_as_a_failure_and_spares_the_others():
    class Brittle:
        calls = 0

        def judge_many(self, items):
            self.calls += 1
            if any("#BOOM" in s for _, s in items):
                raise OverflowError("int too large to convert to float")
            return [FakeJudge()._one(p, s) for p, s in items]

    j = Brittle()
    res = judge_all(j, [(STDIO_SUM, "ok"), (STDIO_SUM, "#BOOM"), (STDIO_SUM, "#WA")], ScoringOptions(batch_size=3))
    assert [r.verdict for r in res] == ["accepted", "wrong_answer", "wrong_answer"]
    assert "OverflowError" in res[1].message and j.calls == 4  # the batch, then each item alone


def test_infrastructure_exceptions_are_retried_then_sandbox_error():
    from rlvr.judge.sandbox import SandboxError

    for exc in (SandboxError("bwrap did not start"), RuntimeError("judge is closed")):
        class Down:
            def judge_many(self, items, exc=exc):
                raise exc

        res = judge_all(Down(), [(STDIO_SUM, "x")], ScoringOptions(max_retries=1, retry_backoff_s=0.0))
        assert res[0].verdict == "sandbox_error" and type(exc).__name__ in res[0].message


def test_sync_entry_works_inside_running_loop():
    async def main():
        return judge_all(FakeJudge(), [(STDIO_SUM, "ok")]), await judge_all_async(FakeJudge(), [(STDIO_SUM, "#WA")])

    a, b = asyncio.run(main())
    assert a[0].verdict == "accepted" and b[0].verdict == "wrong_answer"


def test_options_validation():
    with pytest.raises(ValueError):
        ScoringOptions(max_concurrency=0)
