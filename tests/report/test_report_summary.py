"""``rlvr summary`` (rlvr.report.summary) on the committed metrics/final/eval.json and on hand-made summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlvr.cli import main
from rlvr.report.summary import format_summary, load_summary, summary_rows

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "metrics" / "final" / "eval.json"


def _ci(v: float) -> dict[str, float]:
    return {"lo": v - 0.1, "hi": v + 0.1}


def _summary() -> dict:
    def m(a: float, p: float) -> dict:
        return {"toy": {"role": "dev", "accepted@1": a, "pass@2": p, "ci": {"accepted@1": _ci(a), "pass@2": _ci(p)}}}

    # keys deliberately out of pipeline order (the stage writes sorted JSON)
    return {"phases": {"repair": m(0.9, 0.9), "baseline": m(0.0, 0.1), "grpo_seed2": m(0.6, 0.8),
                       "dpo": m(0.5, 0.6), "grpo_seed1": m(0.4, 0.6), "sft": m(0.7, 0.7)},
            "seeds": {"grpo": {"toy": {"accepted@1": {"mean": 0.5}, "pass@2": {"mean": 0.7}}}},
            "not_run": [], "headline": {"phase": "grpo", "seeds": 2}}


def test_rows_in_pipeline_order_with_deltas_to_previous_phase() -> None:
    rows = summary_rows(_summary())["toy"]
    assert [r["phase"] for r in rows] == ["baseline", "sft", "dpo", "grpo_seed1", "grpo_seed2", "repair"]
    by = {r["phase"]: r for r in rows}
    assert by["baseline"]["delta_accepted@1"] is None
    assert by["sft"]["delta_accepted@1"] == pytest.approx(0.7)
    assert by["dpo"]["delta_accepted@1"] == pytest.approx(-0.2)
    # both seeds compare with dpo, not with each other
    assert by["grpo_seed2"]["previous"] == "dpo" and by["grpo_seed2"]["delta_accepted@1"] == pytest.approx(0.1)
    # repair compares with the seed mean of grpo
    assert by["repair"]["previous"] == "grpo"
    assert by["repair"]["delta_accepted@1"] == pytest.approx(0.4)
    assert by["repair"]["delta_pass@k"] == pytest.approx(0.2)
    assert by["sft"]["k"] == "pass@2" and by["sft"]["accepted@1_ci"] == pytest.approx((0.6, 0.8))


def test_committed_metrics_summary_matches_the_file() -> None:
    data = json.loads(COMMITTED.read_text(encoding="utf-8"))
    rows = {r["phase"]: r for r in summary_rows(data)["synthetic"]}
    for phase, r in rows.items():
        assert r["accepted@1"] == data["phases"][phase]["synthetic"]["accepted@1"]
    assert rows["dpo"]["delta_accepted@1"] == pytest.approx(
        data["phases"]["dpo"]["synthetic"]["accepted@1"] - data["phases"]["sft"]["synthetic"]["accepted@1"])
    text = format_summary(data, ROOT / "no-such-report.html")
    assert "synthetic (dev)" in text and "humaneval (test)" in text
    assert text.index("synthetic (dev)") < text.index("humaneval (test)")  # Dev before Test
    assert "not built yet" in text


def test_cli_prints_table_and_report_location(tmp_path: Path) -> None:
    src = tmp_path / "eval.json"
    src.write_text(json.dumps(_summary()), encoding="utf-8")
    report = tmp_path / "index.html"
    report.write_text("<html></html>", encoding="utf-8")
    res = CliRunner().invoke(main, ["summary", "--eval-summary", str(src), "--report", str(report)])
    assert res.exit_code == 0, res.output
    assert "grpo_seed1" in res.output and "+0.700" in res.output
    assert f"report: {report.resolve()}" in res.output


def test_missing_or_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="eval stage"):
        load_summary(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json: field 'phases'"):
        load_summary(bad)
    res = CliRunner().invoke(main, ["summary", "--eval-summary", str(bad)])
    assert res.exit_code != 0 and "field 'phases'" in res.output
