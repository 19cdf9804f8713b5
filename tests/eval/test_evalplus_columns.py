"""Base/plus statuses and metric columns for EvalPlus datasets (rlvr.eval.evalplus_columns)."""

from __future__ import annotations

import pytest

from rlvr.data.schema import CallTest, Problem
from rlvr.eval.evalplus_columns import evalplus_metrics, group_statuses
from rlvr.eval.metrics import compute_metrics, pass_at_k
from rlvr.judge.verdict import JudgeResult, TestResult


def _problem(groups):
    return Problem(id="humanevalplus/HumanEval/0", source="humanevalplus", split="test", statement="s",
                   tests=[CallTest(args="[]", expected="1", group=g) for g in groups])


def _result(verdicts):
    tests = [TestResult(index=i, verdict=v) for i, v in enumerate(verdicts)]
    ok = sum(v == "accepted" for v in verdicts)
    first = next((v for v in verdicts if v != "accepted"), "accepted")
    return JudgeResult(verdict=first, passed=ok, total=len(tests), pass_ratio=ok / len(tests), judge_s=0.0,
                       tests=tests)


def test_group_statuses():
    p = _problem(["base", "base", "plus"])
    assert group_statuses(p, _result(["accepted"] * 3)) == {"base_status": "pass", "plus_status": "pass"}
    assert group_statuses(p, _result(["accepted", "accepted", "timeout"])) == {"base_status": "pass",
                                                                                "plus_status": "fail"}
    assert group_statuses(p, _result(["wrong_answer", "accepted", "accepted"])) == {"base_status": "fail",
                                                                                    "plus_status": "pass"}
    assert group_statuses(p, None) == {"base_status": "fail", "plus_status": "fail"}
    only_base = _problem(["base"])  # Mbpp/793: no plus inputs
    assert group_statuses(only_base, _result(["accepted"]))["plus_status"] == "pass"
    assert group_statuses(only_base, _result(["syntax_error"]))["plus_status"] == "fail"
    ungrouped = _problem([None])
    assert group_statuses(ungrouped, _result(["accepted"])) == {}


def _row(task, i, base, plus):
    return {"task_id": task, "sample_index": i, "verdict": "accepted" if base == plus == "pass" else "wrong_answer",
            "pass_ratio": 1.0, "judge_s": 0.1, "n_tokens": 10, "base_status": base, "plus_status": plus}


def test_evalplus_metrics_columns():
    rows = [_row("a", 0, "pass", "fail"), _row("a", 1, "pass", "pass"),
            _row("b", 0, "pass", "pass"), _row("b", 1, "fail", "pass")]
    m = evalplus_metrics(rows, ks=(1, 2), estimator=pass_at_k)
    assert m["base"]["accepted@1"] == 1.0 and m["plus"]["accepted@1"] == 0.5
    assert m["base"]["pass@1"] == pytest.approx(0.75) and m["plus"]["pass@1"] == pytest.approx(0.5)
    assert m["plus"]["pass@2"] == 1.0 and m["n_tasks"] == 2
    full = compute_metrics(rows, ks=(1,))
    assert full["evalplus"]["plus"]["accepted@1"] == 0.5 and full["accepted@1"] == 0.5
    plain = [{k: v for k, v in r.items() if not k.endswith("_status")} for r in rows]
    assert "evalplus" not in compute_metrics(plain, ks=(1,))
