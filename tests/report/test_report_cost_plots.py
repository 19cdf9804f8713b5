"""``rlvr cost`` (the cost files beside the metrics) and the seeds-overlaid curve data the report writes for
``dvc plots`` (reports/plots/<stage>.tsv)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from rlvr.layout import write_curves, write_metrics
from rlvr.report.build import seed_overlays
from rlvr.report.collect import collect
from rlvr.report.cost import main as cost_main


def test_rlvr_cost_prints_the_cost_files_only(tmp_path):
    m = tmp_path / "metrics"
    write_metrics(m / "sft.json", {"dev": {"accepted@1": 0.7}, "train_runtime_s": 1.805, "steps": 240})
    write_metrics(m / "final" / "eval_sft.json", {"syn": {"accepted@1": 0.5, "judge_s_mean": 0.0123456}})
    res = CliRunner().invoke(cost_main, ["--metrics-dir", str(m), "--all"])
    assert res.exit_code == 0, res.output
    assert "\n\nfinal/eval_sft\n  syn.judge_s_mean  0.01235\n" in res.output
    assert "train_runtime_s  1.805" in res.output and "accepted@1" not in res.output and "steps" not in res.output
    res = CliRunner().invoke(cost_main, ["--metrics-dir", str(m), "final/"])
    assert res.output.splitlines()[0] == "final/eval_sft" and "train_runtime_s" not in res.output


def test_rlvr_cost_shows_the_timing_columns_of_the_curves(tmp_path):
    m = tmp_path / "metrics"
    (m / "cost" / "grpo").mkdir(parents=True)
    (m / "cost" / "grpo" / "seed-1.tsv").write_text("step\tjudge_step_s\n5\t0.5\n10\t1.5\n15\t\n")
    res = CliRunner().invoke(cost_main, ["--metrics-dir", str(m), "grpo/"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == ["grpo/seed-1.tsv", "  judge_step_s.steps  2", "  judge_step_s.total  2",
                                       "  judge_step_s.mean   1", "  judge_step_s.max    1.5"]


def test_curves_timing_is_drawn_in_the_report_but_not_in_the_dvc_plot_data(tmp_path):
    """The seeds-overlaid plot data (reports/plots/grpo.tsv, a DVC plot) holds no judge seconds, so it is the same on
    any machine; the report's Stability section still draws them from the cost mirror."""
    from rlvr.report.build import stability_section
    from rlvr.report.params import ReportParams

    m = tmp_path / "metrics"
    for seed, secs in ((1, "0.5"), (2, "0.7")):
        write_curves(m / "grpo" / f"seed-{seed}.tsv", ["reward_mean", "judge_step_s"],
                     [{"step": 5, "reward_mean": "0.25", "judge_step_s": secs}])
    col = collect(m, tmp_path / "data")
    assert seed_overlays(col) == {"grpo.tsv": "step\tseed\treward_mean\n5\t1\t0.25\n5\t2\t0.25\n"}
    curve = next(c for c in col.training["grpo"].curves if c.seed == 2)
    assert curve.cost == {"judge_step_s": [0.7]} and "judge_step_s" not in curve.columns
    assert str(m / "cost" / "grpo" / "seed-2.tsv") in col.sources
    charts = [b for b in stability_section(col, ReportParams())["blocks"] if b["kind"] == "chart"]
    assert [b["alt"] for b in charts] == ["training curves of grpo (curves): reward_mean, judge_step_s"]


def test_seed_overlays_put_every_seed_in_one_long_table(tmp_path):
    m = tmp_path / "metrics"
    (m / "grpo").mkdir(parents=True)
    (m / "grpo" / "seed-1.tsv").write_text("step\treward_mean\n5\t0.25\n10\t0.5\n")
    (m / "grpo" / "seed-2.tsv").write_text("step\treward_mean\taccepted\n5\t0.1\t0.2\n")
    (m / "sft").mkdir()
    (m / "sft" / "curves.tsv").write_text("step\tloss\n1\t2.0\n")
    out = seed_overlays(collect(m, tmp_path / "data"))
    assert out == {"grpo.tsv": "step\tseed\treward_mean\taccepted\n5\t1\t0.25\t\n10\t1\t0.5\t\n5\t2\t0.1\t0.2\n"}


def _many_cost_files(m):
    """A run's worth of cost files: 3 eval phases x 12 datasets, training, judge_check, a curves TSV."""
    for phase in ("eval_sft", "eval_dpo", "eval_grpo_seed1"):
        for i in range(12):
            write_metrics(m / phase / f"ds{i}.json", {"accepted@1": 0.5, "gen_wall_s": 2.0, "judge_wall_s": 0.5,
                                                      "judge_s_mean": 0.01, "throughput_tokens_per_s": 400.0,
                                                      "resumed_tasks": 1 if i == 0 else 0,
                                                      "eval@k": {"gen_wall_s": 1.0}})
    write_metrics(m / "sft.json", {"train_runtime_s": 60.0, "resumed_from_step": 0})
    write_metrics(m / "judge_check" / "humaneval.json", {"judge_s": 3.5})
    (m / "cost" / "grpo").mkdir(parents=True)
    (m / "cost" / "grpo" / "seed-1.tsv").write_text("step\tjudge_step_s\n5\t0.5\n")


def test_rlvr_cost_starts_with_totals_per_stage_on_one_screen(tmp_path):
    m = tmp_path / "metrics"
    _many_cost_files(m)
    res = CliRunner().invoke(cost_main, ["--metrics-dir", str(m)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert len(lines) <= 24 and max(map(len, lines)) <= 100, res.output  # one terminal screen
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[2:]}
    assert lines[1].split() == ["stage", "files", "gen_s", "judge_s", "train_s", "wall_s", "resumed"]
    assert rows["eval_sft"] == ["12", "36.0", "6.0", "0.0", "0.0", "1"]  # 12 x (2 + 1 eval@k) s, 12 x 0.5 s
    assert rows["sft"] == ["1", "0.0", "0.0", "60.0", "0.0", "0"]
    assert rows["judge_check"] == ["1", "0.0", "3.5", "0.0", "0.0", "0"]
    assert rows["total"] == ["39", "108.0", "21.5", "60.0", "0.0", "3"]
    everything = CliRunner().invoke(cost_main, ["--metrics-dir", str(m), "--all"]).output
    assert everything.startswith(res.output) and everything.count("judge_s_mean") == 36  # --all: every key too


def test_rlvr_cost_of_the_committed_run_fits_a_screen():
    res = CliRunner().invoke(cost_main, ["--metrics-dir", str(Path(__file__).parents[2] / "metrics")])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert len(lines) <= 30 and lines[-1].startswith("total"), res.output
