"""GPU smoke tests of the local engine (TRL on transformers) on a tiny Qwen2 on CUDA: SFT then GRPO, and the repair
stage's trainer (rollouts, warm start, unrolled multi-turn GRPO).

Skipped without a CUDA device (tests/conftest.py). Run on a GPU machine with:
``pytest -m gpu tests/train/test_train_gpu.py``; the result of the last run is in the README (Training section).
"""

from __future__ import annotations

import pytest
from train_fixtures import FakeJudge, build_model, small_family

from rlvr.train.local.common import TrainCommon

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_MODE", "disabled")


def test_sft_then_grpo_on_cuda(tmp_path):
    import torch

    from rlvr.train.local.grpo import GRPOParams, run_grpo
    from rlvr.train.local.sft import SFTParams, run_sft

    assert torch.cuda.is_available()
    torch.cuda.reset_peak_memory_stats()
    base = build_model(tmp_path / "base")
    train = [p for p in small_family() if p.split == "train"]
    dev = [p for p in small_family() if p.split == "dev"][:4]
    common = TrainCommon(
        report_to=["none"],
        logging_steps=1,
        save_steps=10,
        max_prompt_length=128,
        max_completion_length=16,
        eval_max_new_tokens=8,
    )
    sft = run_sft(
        SFTParams(max_steps=8, per_device_train_batch_size=8, learning_rate=1e-3),
        common,
        base,
        train,
        dev,
        FakeJudge(),
        tmp_path / "sft",
        tmp_path / "sft.tsv",
    )
    assert sft["steps"] == 8
    grpo = run_grpo(
        GRPOParams(max_steps=4, per_device_train_batch_size=8, num_generations=4, learning_rate=1e-4, seed=1),
        common,
        tmp_path / "sft",
        train,
        dev,
        FakeJudge(),
        tmp_path / "grpo",
        tmp_path / "grpo.tsv",
    )
    assert grpo["steps"] == 4
    assert torch.cuda.max_memory_allocated() > 0  # the trainers ran on the GPU
    peak = torch.cuda.max_memory_allocated() / 2**20
    print(f"GPU {torch.cuda.get_device_name(0)}: peak {peak:.1f} MiB; sft {sft}; grpo {grpo}")


def test_repair_training_on_cuda(tmp_path):
    """The repair stage's trainer on CUDA: the policy's own rollouts (hf backend on the GPU), a supervised warm start
    and unrolled multi-turn GRPO steps (rlvr.train.local.repair)."""
    import torch

    from rlvr.repair.env import EnvConfig
    from rlvr.train.local.repair import RepairTrainParams, run_repair_training

    assert torch.cuda.is_available()
    torch.cuda.reset_peak_memory_stats()
    base = build_model(tmp_path / "base")
    train = [p for p in small_family() if p.split == "train"]
    common = TrainCommon(report_to=["none"], logging_steps=1, save_steps=10, max_prompt_length=256,
                         max_completion_length=16)
    cfg = RepairTrainParams(max_steps=2, num_generations=4, per_device_train_batch_size=8, rollout_samples=2,
                            rollout_max_new_tokens=16, warmup_epochs=1)
    m = run_repair_training(cfg, EnvConfig(turns=2), common, base, train, FakeJudge(), tmp_path / "repair",
                            tmp_path / "repair.tsv")
    # a random-init policy fails every first attempt, so every problem yields repair contexts
    assert m["rollouts"]["contexts"] > 0 and not m["skipped"] and m["steps"] == 2
    assert m["warmup"]["steps"] >= 1 and (tmp_path / "repair" / "config.json").is_file()
    assert torch.cuda.max_memory_allocated() > 0  # rollouts and trainers ran on the GPU
    print(f"GPU {torch.cuda.get_device_name(0)}: peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB; "
          f"repair {m}")
