"""Metrics: pass@k (Chen et al. 2021) against hand-computed values, accepted@1, percentiles, verdict breakdown,
exec_success_rate, cost per solved, QA logs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rlvr.eval.metrics import compute_metrics, pass_at_k, percentile
from rlvr.eval.qa import write_qa_logs
from rlvr.judge.verdict import VERDICTS


def _row(task: str, i: int, verdict: str, ratio: float = 0.0, judge_s: float = 1.0, tokens: int = 10) -> dict:
    return {"key": f"{task}-{i}", "task_id": task, "sample_index": i, "verdict": verdict, "pass_ratio": ratio,
            "judge_s": judge_s, "n_tokens": tokens, "prompt": "p", "completion": "c", "code": "x",
            "message": f"m-{task}-{i}", "finish_reason": "stop"}


def test_pass_at_k_hand_computed():
    # n=5, c=2: pass@1 = c/n = 0.4; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 1)[0] == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2)[0] == pytest.approx(0.7)
    # n - c < k -> 1.0; c = 0 -> 0.0
    assert pass_at_k(5, 4, 2)[0] == 1.0
    assert pass_at_k(5, 0, 3)[0] == 0.0


def test_pass_at_k_matches_binomial_ratio_per_task():
    n = np.array([10, 10, 20, 7])
    c = np.array([0, 3, 11, 7])
    got = pass_at_k(n, c, 5)
    want = [1 - math.comb(int(a - b), 5) / math.comb(int(a), 5) for a, b in zip(n, c, strict=True)]
    assert got.shape == (4,)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_pass_at_k_rejects_bad_input():
    with pytest.raises(ValueError, match="exceeds"):
        pass_at_k(3, 1, 5)
    with pytest.raises(ValueError, match=">= 1"):
        pass_at_k(3, 1, 0)
    with pytest.raises(ValueError, match="outside"):
        pass_at_k(3, 4, 1)


def test_percentile_linear_and_empty():
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile(list(range(11)), 90) == pytest.approx(9.0)
    assert percentile([], 50) is None


def test_compute_metrics_counts_and_rates():
    rows = [
        _row("a", 0, "accepted", 1.0, judge_s=2.0, tokens=20), _row("a", 1, "wrong_answer", 0.5),
        _row("b", 0, "syntax_error", 0.0), _row("b", 1, "accepted", 1.0),
        _row("c", 0, "sandbox_error", 0.0), _row("c", 1, "timeout", 0.0),
    ]
    m = compute_metrics(rows, ks=(1, 2), greedy=False, gen_wall_s=2.0)
    assert m["n_tasks"] == 3 and m["n_samples"] == 6 and m["samples_per_task"] == 2
    assert m["accepted@1"] == pytest.approx(1 / 3)  # only task a's sample 0 is accepted
    assert m["pass@1"] == pytest.approx((0.5 + 0.5 + 0.0) / 3)
    assert m["pass@2"] == pytest.approx((1 + 1 + 0) / 3)
    assert set(m["verdicts"]) == set(VERDICTS)
    assert m["verdicts"]["accepted"] == {"count": 2, "fraction": pytest.approx(2 / 6)}
    assert m["verdicts"]["memory_limit"] == {"count": 0, "fraction": 0.0}
    # exec success: accepted/wrong_answer over samples that are not sandbox_error (3 of 5)
    assert m["exec_success_rate"] == pytest.approx(3 / 5)
    assert m["n_sandbox_error"] == 1
    assert m["pass_ratio_mean"] == pytest.approx(2.5 / 6)
    assert m["avg_generated_tokens"] == pytest.approx(70 / 6)
    assert m["judge_s_mean"] == pytest.approx(7 / 6)
    assert m["n_solved"] == 2
    assert m["tokens_per_solved"] == pytest.approx(70 / 2)
    assert m["judge_s_per_solved"] == pytest.approx(7 / 2)
    assert m["throughput_samples_per_s"] == pytest.approx(3.0)
    assert m["throughput_tokens_per_s"] == pytest.approx(35.0)


def test_cost_per_solved_is_none_when_nothing_solved():
    m = compute_metrics([_row("a", 0, "wrong_answer"), _row("b", 0, "runtime_error")])
    assert m["n_solved"] == 0
    assert m["tokens_per_solved"] is None and m["judge_s_per_solved"] is None
    assert m["accepted@1"] == 0.0
    assert m["throughput_samples_per_s"] is None  # no generation time given


def test_rows_resumed_without_judge_seconds_leave_the_judge_statistics_to_the_judged_ones():
    """A row resumed from a journal carries no ``judge_s`` (journals hold no measured time): the scores are the same,
    the judge seconds are those of the rows judged in this run, and the cost per solved is not guessed."""
    judged = [_row("a", 0, "accepted", 1.0, judge_s=3.0), _row("b", 0, "wrong_answer", judge_s=1.0)]
    resumed = [{k: v for k, v in _row("c", 0, "accepted", 1.0).items() if k != "judge_s"}]
    m = compute_metrics(judged + resumed)
    assert m["accepted@1"] == pytest.approx(2 / 3) and m["judge_s_mean"] == pytest.approx(2.0)
    assert m["judge_s_per_solved"] is None and m["tokens_per_solved"] == pytest.approx(15.0)
    none = compute_metrics(resumed)
    assert none["judge_s_mean"] is None and none["judge_s_p95"] is None and none["accepted@1"] == 1.0


def test_unknown_verdict_rejected():
    with pytest.raises(ValueError, match="unknown verdict"):
        compute_metrics([_row("a", 0, "ok")])


def test_qa_logs_bounded_per_verdict(tmp_path):
    rows = [_row("t", i, "wrong_answer") for i in range(5)] + [_row("u", 0, "accepted")]
    written = write_qa_logs(rows, tmp_path / "qa", per_verdict=2)
    assert written["wrong_answer"] == 2 and written["accepted"] == 1 and written["timeout"] == 0
    assert sorted(p.stem for p in (tmp_path / "qa").glob("*.jsonl")) == sorted(VERDICTS)
    recs = [json.loads(x) for x in (tmp_path / "qa" / "wrong_answer.jsonl").read_text().splitlines()]
    assert [r["sample_index"] for r in recs] == [0, 1]  # row order, deterministic
    assert recs[0]["message"] == "m-t-0" and recs[0]["prompt"] == "p" and recs[0]["code"] == "x"
    assert (tmp_path / "qa" / "timeout.jsonl").read_text() == ""


@pytest.mark.parametrize("module", ["rlvr.eval.metrics", "rlvr.eval.tracking", "rlvr.generate.extract",
                                    "rlvr.generate.openai_compat"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    res = doctest.testmod(importlib.import_module(module))
    assert res.attempted > 0 and res.failed == 0
