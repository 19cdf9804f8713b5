"""A learning signal in every group (issue 42, item 3), verl side, on CPU (no verl import): DAPO's dynamic sampling
as a ``verl.filter_groups`` param, and the zero-variance share (all-pass / all-fail) in the GRPO and repair curves."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from rlvr.train.local.grpo import GRPOParams
from rlvr.train.verl import logs as vlogs
from rlvr.train.verl.overrides import VerlParams, grpo_overrides, load_profile

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "qwen7b_4xh100.yaml"


def _overrides(tmp_path: Path, verl: VerlParams) -> list[str]:
    return grpo_overrides(GRPOParams(seed=1, num_generations=8), verl, load_profile(PROFILE),
                          train_files=tmp_path / "t.parquet", val_files=tmp_path / "v.parquet", model_path="m",
                          reward_mode="dense", ckpt_dir=tmp_path / "c", experiment_name="grpo-seed1")


def test_filter_groups_off_adds_no_override(tmp_path):
    assert not [o for o in _overrides(tmp_path, VerlParams()) if o.startswith("algorithm.filter_groups")]


def test_filter_groups_on_maps_to_verl_v1_keys(tmp_path):
    v = VerlParams.model_validate({"filter_groups": {"enable": True, "metric": "acc", "max_inflight_gen_batches": 2}})
    ov = _overrides(tmp_path, v)
    assert "algorithm.filter_groups.enable=True" in ov and "algorithm.filter_groups.metric=acc" in ov
    assert "algorithm.filter_groups.max_inflight_gen_batches=2" in ov
    # verl 0.9.1's V1 replay buffer ignores max_num_gen_batches (a warning): not offered, so not silently dropped
    assert not [o for o in ov if "max_num_gen_batches" in o]


def test_filter_groups_rejects_unknown_metric_and_keys():
    assert VerlParams.model_validate({"filter_groups": {"enable": True}}).filter_groups.metric == "reward"
    with pytest.raises(ValidationError, match="metric"):
        VerlParams.model_validate({"filter_groups": {"enable": True, "metric": "score"}})
    with pytest.raises(ValidationError, match="max_num_gen_batches"):
        VerlParams.model_validate({"filter_groups": {"enable": True, "max_num_gen_batches": 4}})


def _dump(groups: dict[str, list[float]]) -> list[dict]:
    return [{"uid": f"{g}_{i}_0", "score": s} for g, scores in groups.items() for i, s in enumerate(scores)]


STEP = {"critic/score/mean": 0.5}


def test_zero_variance_share_splits_all_pass_and_all_fail():
    dumps = {1: _dump({"a": [1.0, 1.0, 1.0], "b": [0.0, 0.0, 0.0], "c": [0.0, 1.0, 1.0], "d": [0.5, 0.5, 0.5]})}
    row = vlogs.grpo_rows({1: STEP}, dumps, "dense")[0]
    assert row["zero_std_frac"] == 0.75 and row["all_pass_frac"] == 0.25 and row["all_fail_frac"] == 0.25
    assert row["filtered_groups"] == 0  # dynamic sampling off: verl logs no eviction


def test_zero_variance_share_counts_groups_dynamic_sampling_evicted():
    # 4 trained groups (1 flat) + 4 evicted by algorithm.filter_groups: 5 of the 8 generated groups had no signal
    dumps = {1: _dump({"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 0.0], "d": [1.0, 1.0]})}
    step = {**STEP, "training/filter_groups/evicted_samples": 4}
    row = vlogs.grpo_rows({1: step}, dumps, "sparse")[0]
    assert row["filtered_groups"] == 4 and row["zero_std_frac"] == 5 / 8
    assert row["all_pass_frac"] == 0.25 and row["all_fail_frac"] == 0.0  # of the trained batch
    assert {"all_pass_frac", "all_fail_frac", "filtered_groups"} <= set(vlogs.GRPO_COLUMNS)
