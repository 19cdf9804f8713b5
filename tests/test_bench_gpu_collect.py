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
