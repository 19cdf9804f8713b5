"""``train.sft_rl_overlap`` (issue 42): the share of the RL prompts that SFT and DPO also train on."""

from __future__ import annotations

import json

import pytest
from train_fixtures import small_family

from rlvr.train.local.common import TrainCommon
from rlvr.train.overlap import apply_sft_rl_overlap, unit_hash


def _rl_set(tmp_path, ids):
    f = tmp_path / "grpo" / "train.jsonl"
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("".join(json.dumps({"id": i, "prompt": []}) + "\n" for i in ids))
    return f


def test_default_is_full_overlap_and_reads_nothing(tmp_path):
    ps = small_family()
    assert TrainCommon().sft_rl_overlap == 1.0
    kept, n = apply_sft_rl_overlap(ps, 1.0, tmp_path / "absent.jsonl")
    assert kept == ps and n["rl_prompts_dropped"] == 0 and n["rl_prompts"] is None


def test_disjoint_drops_every_rl_prompt_and_counts(tmp_path):
    ps = small_family()
    rl = {p.id for p in ps[:10]} | {"not-a-train-problem"}
    kept, n = apply_sft_rl_overlap(ps, 0.0, _rl_set(tmp_path, sorted(rl)))
    assert [p.id for p in kept] == [p.id for p in ps[10:]]
    assert n == {"sft_rl_overlap": 0.0, "rl_share": 1.0, "problems": len(ps), "rl_prompts_eligible": 11,
                 "rl_prompts_used": 11, "rl_prompts": 10, "rl_prompts_kept": 0, "rl_prompts_dropped": 10,
                 "kept": len(ps) - 10}


def test_partial_overlap_is_deterministic_and_nested(tmp_path):
    ps = small_family()
    f = _rl_set(tmp_path, [p.id for p in ps])
    half = {p.id for p in apply_sft_rl_overlap(ps, 0.5, f)[0]}
    assert half == {p.id for p in ps if unit_hash(p.id) < 0.5}
    assert half <= {p.id for p in apply_sft_rl_overlap(ps, 0.8, f)[0]}
    assert half == {p.id for p in apply_sft_rl_overlap(ps, 0.5, f)[0]}


def test_errors_name_the_file_or_the_param(tmp_path):
    ps = small_family()
    with pytest.raises(FileNotFoundError, match=r"absent\.jsonl: RL prompt set not found"):
        apply_sft_rl_overlap(ps, 0.0, tmp_path / "absent.jsonl")
    with pytest.raises(ValueError, match="nothing is left"):
        apply_sft_rl_overlap(ps, 0.0, _rl_set(tmp_path, [p.id for p in ps]))
    with pytest.raises(ValueError, match=r"sft_rl_overlap=1.5"):
        apply_sft_rl_overlap(ps, 1.5, tmp_path / "absent.jsonl")
