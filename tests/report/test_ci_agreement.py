"""One interval per metric everywhere: the eval stage's metrics files, the HTML report and ``rlvr summary`` show the
same 95 % interval (issue: the summary printed 0/16 as [0.00, 0.19] where the report and metrics said [0, 0]).
accepted@1 is a proportion: Wilson; pass@k is bootstrapped, Wilson at exactly 0 or 1 (rlvr.eval.stats)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlvr.eval.stats import per_task_metric_cis, wilson_ci
from rlvr.report.collect import Phase
from rlvr.report.params import ReportParams
from rlvr.report.quality import _phase_cis
from rlvr.report.summary import format_summary, summary_rows


@pytest.mark.parametrize("solved", [0, 16, 5])
def test_metrics_report_and_summary_show_one_interval(solved):
    per_task = {f"t{i}": {"n": 1, "c": int(i < solved), "first": "accepted" if i < solved else "wrong_answer",
                          "pass@1": float(i < solved)} for i in range(16)}
    metrics = per_task_metric_cis(per_task, n_boot=200, seed=0)  # what the eval stage writes (rlvr.eval.final)
    wilson = wilson_ci(solved, 16)
    assert (metrics["accepted@1"]["lo"], metrics["accepted@1"]["hi"]) == pytest.approx(wilson)
    if solved in (0, 16):  # every problem agrees: the bootstrap would have zero width
        assert (metrics["pass@1"]["lo"], metrics["pass@1"]["hi"]) == pytest.approx(wilson)
        assert metrics["pass@1"]["hi"] - metrics["pass@1"]["lo"] > 0.15
    phase = Phase(name="baseline", base="baseline", seed=None, path=Path("."),
                  datasets={"ds": {"accepted@1": solved / 16, "pass@1": solved / 16, "n_tasks": 16}},
                  per_task={"ds": per_task})
    report = _phase_cis(phase, "ds", ReportParams())
    counts_only = _phase_cis(Phase(name="baseline", base="baseline", seed=None, path=Path("."),
                                   datasets=phase.datasets), "ds", ReportParams())
    for ci in (report["accepted@1"], counts_only["accepted@1"]):
        assert (ci["lo"], ci["hi"]) == pytest.approx(wilson)
    for k in ("pass@1",) if solved in (0, 16) else ():
        assert (report[k]["lo"], report[k]["hi"]) == pytest.approx(wilson)
    summary = {"phases": {"baseline": {"ds": {"role": "dev", "accepted@1": solved / 16, "pass@1": solved / 16,
                                               "ci": metrics}}}}
    row = summary_rows(summary)["ds"][0]
    assert row["accepted@1_ci"] == pytest.approx(wilson)
    assert row["pass@k_ci"] == pytest.approx((metrics["pass@1"]["lo"], metrics["pass@1"]["hi"]))
    if solved == 0:
        assert "0.000 [0.00,0.19]" in format_summary(summary)
