"""``rlvr summary`` (rlvr.report.summary) on the committed final-eval summary and on hand-made summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlvr.cli import main
from rlvr.report.summary import format_summary, load_summary, read_summary, summary_rows

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
    assert [r["phase"] for r in rows] == ["baseline", "sft", "dpo", "grpo_seed1", "grpo_seed2", "grpo mean", "repair"]
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
    data = read_summary(COMMITTED)  # eval.json, headline/, seeds/: scores + provenance
    rows = {r["phase"]: r for r in summary_rows(data)["synthetic"]}
    for phase, r in rows.items():
        if r["seed_mean"]:
            assert r["accepted@1"] == data["seeds"]["grpo"]["synthetic"]["accepted@1"]["mean"]
            continue
        assert r["accepted@1"] == data["phases"][phase]["synthetic"]["accepted@1"]
    assert rows["dpo"]["delta_accepted@1"] == pytest.approx(
        data["phases"]["dpo"]["synthetic"]["accepted@1"] - data["phases"]["sft"]["synthetic"]["accepted@1"])
    text = format_summary(data, ROOT / "no-such-report.html")
    assert "synthetic (dev, n=" in text and "humaneval (test, n=" in text
    assert text.index("synthetic (dev") < text.index("humaneval (test")  # Dev before Test
    assert "not built yet" in text


def test_summary_reads_the_same_from_the_narrow_layout(tmp_path: Path) -> None:
    """The committed summary written again by the eval stage's writer (headline/ and seeds/ beside a
    provenance-only eval.json): read back equal, and `rlvr summary` prints the same text from either layout."""
    from rlvr.eval.final import write_summary

    old = read_summary(COMMITTED)  # the whole summary, whichever layout is committed
    assert old["headline"] and old["seeds"]
    final = tmp_path / "metrics" / "final"
    write_summary(final, old)
    assert read_summary(final / "eval.json") == old
    report = tmp_path / "none.html"
    assert format_summary(load_summary(final / "eval.json"), report) == format_summary(old, report)
    res = CliRunner().invoke(main, ["summary", "--eval-summary", str(final / "eval.json"), "--report", str(report),
                                    "--per-task-dir", str(tmp_path / "none")])
    assert res.exit_code == 0 and res.output.strip() == format_summary(old, report).strip()


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


def _boundary_summary() -> dict:
    """8 problems: baseline solves none (the percentile bootstrap's degenerate [0, 0]), sft 7, two GRPO seeds."""
    def m(a: float, p: float) -> dict:
        return {"toy": {"role": "test", "accepted@1": a, "pass@2": p,
                        "ci": {"accepted@1": {"lo": a, "hi": a, "n": 8}, "pass@2": {"lo": p - 0.1, "hi": p, "n": 8}}}}

    return {"phases": {"baseline": m(0.0, 0.0), "sft": m(0.875, 0.9), "grpo_seed1": m(0.75, 0.8),
                       "grpo_seed2": m(1.0, 1.0)},
            "seeds": {"grpo": {"toy": {"accepted@1": {"mean": 0.875, "std": 0.1768, "n": 2},
                                       "pass@2": {"mean": 0.9, "std": 0.1414, "n": 2}}}},
            "not_run": ["dpo"]}


def _per_task(solved: int, pass2: float) -> dict:
    return {f"toy/{i}": {"n": 2, "c": 1, "first": "accepted" if i < solved else "wrong_answer",
                         "pass@2": pass2 if i < solved else 0.0} for i in range(8)}


def test_wilson_interval_at_zero_and_one_and_n_per_dataset() -> None:
    rows = {r["phase"]: r for r in summary_rows(_boundary_summary())["toy"]}
    assert rows["baseline"]["n"] == 8
    lo, hi = rows["baseline"]["accepted@1_ci"]
    assert lo == 0.0 and hi == pytest.approx(0.3244, abs=1e-3)  # Wilson, not the bootstrap's [0, 0]
    assert rows["baseline"]["pass@k_ci_method"] == "wilson"  # pass@k at a boundary: Wilson too
    lo, hi = rows["grpo_seed2"]["accepted@1_ci"]
    assert hi == 1.0 and lo == pytest.approx(0.6756, abs=1e-3)
    assert rows["sft"]["pass@k_ci"] == pytest.approx((0.8, 0.9)) and rows["sft"]["pass@k_ci_method"] == "bootstrap"
    text = format_summary(_boundary_summary())
    assert "toy (test, n=8 problems)" in text and "[0.00,0.32]" in text and "[0.00,0.00]" not in text


def test_delta_with_mcnemar_p_and_paired_interval_from_per_task_arrays() -> None:
    arrays = {("baseline", "toy"): _per_task(0, 0.0), ("sft", "toy"): _per_task(7, 1.0)}
    rows = {r["phase"]: r for r in summary_rows(_boundary_summary(), lambda ph, ds: arrays.get((ph, ds)))["toy"]}
    sft = rows["sft"]
    assert sft["flips"] == (7, 0) and sft["p_accepted@1"] == pytest.approx(2 * 0.5 ** 7)  # exact McNemar
    lo, hi = sft["delta_pass@k_ci"]
    assert 0.0 < lo <= 0.875 <= hi <= 1.0  # paired bootstrap of the per-problem differences
    assert rows["grpo_seed1"]["p_accepted@1"] is None  # no per-task arrays for it
    text = format_summary(_boundary_summary(), per_task=lambda ph, ds: arrays.get((ph, ds)))
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("sft"))
    assert "+0.875" in line and "0.016" in line
    assert "need the per-task arrays" not in text
    assert "need the per-task arrays" in format_summary(_boundary_summary())


def test_seed_mean_row_follows_the_seeds() -> None:
    rows = summary_rows(_boundary_summary())["toy"]
    assert [r["phase"] for r in rows] == ["baseline", "sft", "grpo_seed1", "grpo_seed2", "grpo mean"]
    mean = rows[-1]
    assert mean["seed_mean"] and mean["seeds"] == 2 and mean["accepted@1"] == 0.875
    assert mean["previous"] == "sft" and mean["delta_accepted@1"] == pytest.approx(0.0)
    assert mean["accepted@1_ci"] is None and mean["p_accepted@1"] is None
    line = next(ln for ln in format_summary(_boundary_summary()).splitlines() if "grpo mean" in ln)
    assert "0.875" in line and "±0.177 sd" in line


def test_cli_reads_per_task_arrays(tmp_path: Path) -> None:
    src = tmp_path / "eval.json"
    src.write_text(json.dumps(_boundary_summary()), encoding="utf-8")
    for phase, solved, p2 in (("baseline", 0, 0.0), ("sft", 7, 1.0)):
        d = tmp_path / "final" / phase / "per_task"
        d.mkdir(parents=True)
        (d / "toy.json").write_text(json.dumps(_per_task(solved, p2)), encoding="utf-8")
    res = CliRunner().invoke(main, ["summary", "--eval-summary", str(src), "--per-task-dir", str(tmp_path / "final"),
                                    "--report", str(tmp_path / "none.html")])
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.strip().startswith("sft"))
    assert "0.016" in line
