"""DPO trains and publishes in the section's precision (issue 44): with ``bf16: true`` and LoRA (the 7B profiles) the
policy reaches TRL's trainer in bfloat16 and ``models/dpo`` is published in bfloat16, not TRL's float32 default."""

from __future__ import annotations

import json

import pytest
from train_fixtures import build_model

from rlvr.train.local.common import TrainCommon
from rlvr.train.local.dpo import DPOParams, model_dtype, train_on_pairs

PAIRS = [{"prompt": [{"role": "user", "content": f"print {i}"}],
          "chosen": [{"role": "assistant", "content": f"print({i})"}],
          "rejected": [{"role": "assistant", "content": "print(0)"}]} for i in range(2, 6)]


def test_the_dtype_follows_bf16_and_lora():
    assert model_dtype(DPOParams(bf16=True, lora_r=8)) == "bfloat16"
    assert model_dtype(DPOParams(bf16=False, lora_r=8)) is None
    assert model_dtype(DPOParams(bf16=True, lora_r=0)) is None  # full fine-tune: fp32 master weights


@pytest.mark.slow
@pytest.mark.parametrize(("bf16", "want"), [(True, "bfloat16"), (False, "float32")])
def test_dpo_loads_trains_and_publishes_in_the_profiles_precision(tmp_path, monkeypatch, bf16, want):
    import torch
    from safetensors import safe_open

    import rlvr.train.local.dpo as dpo

    base = build_model(tmp_path / "base")
    seen = {}
    real_fit = dpo.fit

    def spy(trainer_cls, policy, args, *a, **kw):
        trainer, fitted = real_fit(trainer_cls, policy, args, *a, **kw)
        seen["init"], seen["model"] = args.model_init_kwargs, trainer.model.get_base_model().dtype
        return trainer, fitted

    monkeypatch.setattr(dpo, "fit", spy)
    real_kwargs = dpo.trainer_kwargs  # transformers refuses bf16 autocast off GPU unless told it is the CPU
    monkeypatch.setattr(dpo, "trainer_kwargs", lambda *a: {**real_kwargs(*a), "use_cpu": True})
    monkeypatch.setenv("WANDB_MODE", "disabled")
    cfg = DPOParams(bf16=bf16, lora_r=4, lora_alpha=8, max_steps=1, per_device_train_batch_size=2)
    common = TrainCommon(max_prompt_length=16, max_completion_length=8, report_to=["none"], save_steps=5)
    train_on_pairs(cfg, common, base, PAIRS, tmp_path / "run", tmp_path / "dpo", tmp_path / "dpo.tsv")
    assert seen["model"] == getattr(torch, want)
    assert (seen["init"] or {}).get("dtype") == (want if bf16 else None)
    with safe_open(str(tmp_path / "dpo" / "model.safetensors"), "pt") as f:
        dtypes = {f.get_tensor(k).dtype for k in f.keys()}
    assert dtypes == {getattr(torch, want)}
    assert json.loads((tmp_path / "dpo" / "config.json").read_text()).get("dtype", want) == want
