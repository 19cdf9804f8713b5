"""The batch and precision params verl does not read (rlvr.train.verl.mapping.check_sft_batch / check_grpo_batch):
a value that disagrees with the verl setting governing it stops the stage with one line naming the keys and both
values, before anything is launched; the local engine does not check them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlvr.config import ConfigError
from rlvr.train.local.grpo import GRPOParams
from rlvr.train.local.repair import RepairTrainParams
from rlvr.train.local.sft import SFTParams
from rlvr.train.verl.mapping import check_grpo_batch, check_sft_batch
from rlvr.train.verl.params import VerlParams, VerlProfile

HW = VerlProfile(model="m", n_gpus_per_node=4, ppo_micro_batch_size_per_gpu=2, sft_micro_batch_size_per_gpu=1)
VERL = VerlParams(profile="profiles/p.yaml", sft_train_batch_size=64, ppo_mini_batch_size=32)
SFT = {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 16, "bf16": True}   # 1 x 16 x 4 = 64
GRPO = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 32, "bf16": True}  # 2 x 32 x 4 = 32 x 8


def _raises(fn, *args, match: str) -> str:
    with pytest.raises(ConfigError, match=match) as exc:
        fn(*args)
    assert "\n" not in str(exc.value)
    return str(exc.value)


def test_agreeing_values_pass():
    check_sft_batch(SFTParams(**SFT), VERL, HW)
    check_grpo_batch(GRPOParams(num_generations=8, **GRPO), VERL, HW)
    check_grpo_batch(RepairTrainParams(num_generations=8, **GRPO), VERL, HW, "repair.train")
    two_nodes = HW.model_copy(update={"nnodes": 2})  # every GPU of every node is a data-parallel rank
    check_sft_batch(SFTParams(**{**SFT, "gradient_accumulation_steps": 8}), VERL, two_nodes)


@pytest.mark.parametrize(("change", "match"), [
    ({"per_device_train_batch_size": 2, "gradient_accumulation_steps": 8},
     r"sft\.per_device_train_batch_size=2 and the profile's hardware\.sft_micro_batch_size_per_gpu=1 "
     r"\(profiles/p\.yaml\) disagree"),
    ({"gradient_accumulation_steps": 8},
     r"sft\.per_device_train_batch_size\*gradient_accumulation_steps\*hardware GPUs = 1\*8\*4 = 32 and "
     r"verl\.sft_train_batch_size = 64 .*disagree"),
    ({"bf16": False}, r"sft\.bf16=false but verl trains in bf16"),
])
def test_sft_disagreement_names_the_key_and_both_values(change, match):
    _raises(check_sft_batch, SFTParams(**{**SFT, **change}), VERL, HW, match=match)


@pytest.mark.parametrize("section", ["grpo", "repair.train"])
@pytest.mark.parametrize(("change", "match"), [
    ({"per_device_train_batch_size": 8, "gradient_accumulation_steps": 8},
     r"{s}\.per_device_train_batch_size=8 and the profile's hardware\.ppo_micro_batch_size_per_gpu=2 "
     r"\(profiles/p\.yaml\) disagree"),
    ({"gradient_accumulation_steps": 16},
     r"{s}\.per_device_train_batch_size\*gradient_accumulation_steps\*hardware GPUs = 2\*16\*4 = 128 and "
     r"verl\.ppo_mini_batch_size\*{s}\.num_generations = 256 .*disagree"),
    ({"bf16": False}, r"{s}\.bf16=false but verl trains in bf16.*set {s}\.bf16: true"),
])
def test_grpo_disagreement_names_the_section_key_and_both_values(section, change, match):
    cls = GRPOParams if section == "grpo" else RepairTrainParams
    _raises(check_grpo_batch, cls(num_generations=8, **{**GRPO, **change}), VERL, HW, section,
            match=match.format(s=re.escape(section)))


def test_the_verl_launchers_check_before_anything_runs(tmp_path):
    """run_sft_verl / run_grpo_verl refuse a disagreeing section before writing overrides or calling the runner."""
    from rlvr.train.verl.launch import run_grpo_verl, run_sft_verl

    calls = []

    def runner(argv, **kw):
        calls.append(argv)

    common = {"model_path": "m", "train_files": tmp_path / "t.parquet", "out_model_dir": tmp_path / "out",
              "curves_path": tmp_path / "c.tsv", "run_dir": tmp_path / "run", "profile": HW, "runner": runner}
    with pytest.raises(ConfigError, match=r"sft\.bf16=false"):
        run_sft_verl(SFTParams(**{**SFT, "bf16": False}), VERL, val_files=None, **common)
    with pytest.raises(ConfigError, match=r"grpo\.per_device_train_batch_size=8"):
        run_grpo_verl(GRPOParams(num_generations=8, **{**GRPO, "per_device_train_batch_size": 8,
                                                       "gradient_accumulation_steps": 8}),
                      VERL, val_files=tmp_path / "v.parquet", reward_mode="sparse", experiment_name="x",
                      check=None, **common)
    assert calls == [] and not (Path(tmp_path / "run") / "verl_overrides.txt").exists()
