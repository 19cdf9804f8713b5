"""bench/gpu/collect.py reads the judge seconds per step from where the stages write them: the curves TSV's cost
mirror (metrics/cost/<same path>), joined by step with the plot's ``judged`` column."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from rlvr.train.verl import logs as vlogs

ROOT = Path(__file__).resolve().parents[1]


def _collect():
    spec = importlib.util.spec_from_file_location("gpu_collect", ROOT / "bench/gpu/collect.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_curves_judge_reads_the_judge_seconds_from_the_cost_mirror(tmp_path):
    curves = tmp_path / "metrics" / "grpo" / "seed-1.tsv"
    vlogs.write_tsv(curves, [{"step": 1, "reward_mean": 0.5, "judge_s": 1.25, "judged": 8},
                             {"step": 2, "reward_mean": 0.75, "judged": 8}], vlogs.GRPO_COLUMNS)
    assert "judge_s" not in curves.read_text()  # the plot holds no seconds
    mod = _collect()
    assert mod._curves_judge(curves) == {1: {"judge_s": 1.25, "judged": 8}}
    assert mod._curves_judge(tmp_path / "absent.tsv") == {} and mod._curves_judge(None) == {}


def test_part_result_reads_stage_reports_written_as_folders(tmp_path):
    """run_gpu.sh's parts write the baseline as metrics/<part>/ (a file per dataset) and repair as
    metrics/<part>/eval/{after,before}/ (rlvr.stage.Result.folders); the collector reads them as the one-file
    reports it read before (rlvr.layout.read_metrics, rlvr.report.collect.repair_report)."""
    from rlvr.layout import write_metrics_folder

    m = tmp_path / "metrics"
    write_metrics_folder(m / "baseline_hf", {
        "synthetic": {"accepted@1": 0.5, "avg_generated_tokens": 40.0, "n_samples": 10, "gen_wall_s": 2.0},
        "protocol": {"backend": "hf"}})
    write_metrics_folder(m / "repair" / "eval" / "after", {"synthetic": {"recovery_rate": 0.5},
                                                           "training": {"steps": 7, "train_runtime_s": 3.0}})
    write_metrics_folder(m / "repair" / "eval" / "before", {"synthetic": {"recovery_rate": 0.0}})
    gpu = _collect()
    base = gpu.part_result(tmp_path, {"part": "baseline_hf", "rc": 0, "wall_s": 1.0})
    assert base["accepted_at_1"] == {"synthetic": 0.5} and base["gen_tokens"] == 400.0
    assert base["gen_tokens_per_s"] == 200.0
    rep = gpu.part_result(tmp_path, {"part": "repair", "rc": 0, "wall_s": 1.0})
    assert rep["steps"] == 7 and rep["metrics"]["train_runtime_s"] == 3.0


def test_scaling_collect_reads_each_runs_last_step_from_the_cost_mirror(tmp_path):
    """bench/gpu/scaling_collect.py: the step seconds come from the verl curves' cost mirror of each run
    (metrics/cost/scale<N>/seed-1.tsv); speedup and efficiency are of the last step against the smallest GPU count."""
    import pytest

    spec = importlib.util.spec_from_file_location("scaling_collect", ROOT / "bench/gpu/scaling_collect.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for n, (first, last) in {1: (300.0, 200.0), 2: (180.0, 110.0), 4: (120.0, 62.5)}.items():
        # the last step saves inside its timer: 10 s of save_checkpoint_s are not step time
        rows = [{"step": 1, "reward_mean": 0.0, "step_s": first},
                {"step": 2, "reward_mean": 0.0, "step_s": last + 10.0, "save_checkpoint_s": 10.0}]
        vlogs.write_tsv(tmp_path / "metrics" / f"scale{n}" / "seed-1.tsv", rows, vlogs.GRPO_COLUMNS)
    out = mod.collect(tmp_path, [1, 2, 4])
    assert {k: r["step_s"] for k, r in out["runs"].items()} == {"1": 200.0, "2": 110.0, "4": 62.5}
    assert out["speedup"] == {"1": 1.0, "2": 1.818, "4": 3.2}
    assert out["efficiency"] == {"1": 1.0, "2": 0.909, "4": 0.8}
    assert mod.collect(tmp_path, [2, 4])["reference_gpus"] == 2  # no 1-GPU run: relative to 2
    with pytest.raises(SystemExit, match="no run has a step"):
        mod.collect(tmp_path / "none", [1])
