"""Micro batches verl trains on. Without padding removal a token-packed micro batch is padded to its longest row, so
``use_dynamic_bsz: auto`` (the 7B profiles) packs only with padding removal (flash-attn, or SDPA with transformers'
packed-sequence masks), and otherwise fixed micro batches are sized so that rows x the length caps fit the token
budget, whatever lengths the policy writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rlvr.config import ConfigError
from rlvr.train.local.grpo import GRPOParams
from rlvr.train.verl.mapping import fit_micro_batch, resolve_dynamic_bsz
from rlvr.train.verl.overrides import VerlParams, load_profile, micro_batches

ROOT = Path(__file__).resolve().parents[2]
PROFILES = [ROOT / "profiles" / f"qwen7b_{n}xh100.yaml" for n in (2, 4, 8)]


@pytest.fixture
def no_packed_sdpa(monkeypatch):
    """A machine where neither flash-attn nor transformers' packed-sequence masks are available."""
    import rlvr.train.verl.mapping as mapping

    monkeypatch.setattr(mapping, "packed_sdpa_supported", lambda: False)


@pytest.fixture
def flash_attn(monkeypatch):
    """Make ``flash_attn`` look installed (rlvr.train.verl.mapping.resolve_attention probes it with find_spec)."""
    real = importlib.util.find_spec

    def find_spec(name, *a, **kw):
        return object() if name == "flash_attn" else real(name, *a, **kw)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_auto_packs_exactly_with_padding_removal():
    prof = load_profile(PROFILES[1])
    assert prof.use_dynamic_bsz == "auto"
    assert resolve_dynamic_bsz(prof, True) is True and resolve_dynamic_bsz(prof, False) is False
    for fixed in (True, False):  # a profile's bool is taken as it is
        p = prof.model_copy(update={"use_dynamic_bsz": fixed})
        assert resolve_dynamic_bsz(p, True) is fixed and resolve_dynamic_bsz(p, False) is fixed


@pytest.mark.parametrize(("rows", "budget", "seq", "per_gpu", "expect"), [
    (2, 8192, 3584, 64, 2),     # GRPO update at the 7B caps (1,536 + 2,048): the profile's 2 rows fit
    (8, 8192, 3584, 256, 2),    # log-probs: 8 rows would be 28,672 padded tokens
    (8, 8192, 2560, 256, 2),    # shorter caps: 3 rows fit but do not divide 256
    (8, 8192, 2560, 96, 3),
    (2, 8192, 6608, 64, 1),     # a 3-turn repair row: one per micro batch
    (4, 16384, 4096, 6, 3),     # the largest divisor under the cap
])
def test_fit_micro_batch_holds_the_budget_padded_and_divides(rows, budget, seq, per_gpu, expect):
    got = fit_micro_batch(rows, budget, seq, per_gpu, "ppo_max_token_len_per_gpu")
    assert got == expect and got * seq <= budget and per_gpu % got == 0


def test_one_row_over_the_budget_names_the_key():
    with pytest.raises(ConfigError, match=r"log_prob_max_token_len_per_gpu=4096 tokens < one row .*6608"):
        fit_micro_batch(8, 4096, 6608, 64, "log_prob_max_token_len_per_gpu")


def _compose(overrides):
    pytest.importorskip("verl")
    pytest.importorskip("hydra")
    from test_verl_overrides import compose

    return compose("ppo_trainer", overrides)


def _grpo_overrides(tmp_path, profile, verl):
    from rlvr.train.verl.overrides import grpo_overrides

    return grpo_overrides(GRPOParams(num_generations=8, beta=0.001), verl, profile,
                          train_files=tmp_path / "t.parquet", val_files=tmp_path / "v.parquet",
                          model_path="Qwen/Qwen2.5-Coder-7B-Instruct", reward_mode="sparse",
                          ckpt_dir=tmp_path / "ckpt", experiment_name="grpo-seed1")


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
@pytest.mark.parametrize(("response", "expect_micro"), [(2048, 2), (5072, 1)], ids=["grpo", "repair"])
def test_the_7b_profiles_train_fixed_micro_batches_within_the_budget_without_padding_removal(
        tmp_path, path, response, expect_micro, no_packed_sdpa):
    prof = load_profile(path)
    verl = VerlParams(max_prompt_length=1536, max_response_length=response, train_batch_size=32 * prof.n_gpus_per_node,
                      ppo_mini_batch_size=8 * prof.n_gpus_per_node)
    cfg = _compose(_grpo_overrides(tmp_path, prof, verl))
    a = cfg.actor_rollout_ref
    seq = 1536 + response
    assert a.actor.use_dynamic_bsz is False
    assert a.rollout.log_prob_use_dynamic_bsz is False and a.ref.log_prob_use_dynamic_bsz is False
    assert a.actor.ppo_micro_batch_size_per_gpu == expect_micro
    budget = prof.log_prob_max_token_len_per_gpu or prof.ppo_max_token_len_per_gpu
    lp = a.rollout.log_prob_micro_batch_size_per_gpu
    assert a.ref.log_prob_micro_batch_size_per_gpu == lp and 1 <= lp < prof.log_prob_micro_batch_size_per_gpu
    assert lp * seq <= budget and expect_micro * seq <= prof.ppo_max_token_len_per_gpu
    assert (8 * 8) % expect_micro == 0 and (32 * 8) % lp == 0  # verl splits a batch into equal chunks
    from verl.utils.config import validate_config

    validate_config(cfg, use_reference_policy=True, use_critic=False)


def test_with_flash_attn_the_profile_packs_and_keeps_its_rows(tmp_path, flash_attn):
    prof = load_profile(PROFILES[1])
    assert micro_batches(prof, True, 2560, 64, 256) == (True, prof.ppo_micro_batch_size_per_gpu,
                                                        prof.log_prob_micro_batch_size_per_gpu)
    cfg = _compose(_grpo_overrides(tmp_path, prof, VerlParams(max_prompt_length=1536, max_response_length=1024)))
    a = cfg.actor_rollout_ref
    assert a.model.use_remove_padding is True and a.actor.use_dynamic_bsz is True
    assert a.actor.ppo_micro_batch_size_per_gpu == prof.ppo_micro_batch_size_per_gpu


def test_with_packed_sdpa_the_profiles_remove_padding_and_pack(tmp_path):
    """This machine: no flash-attn, a transformers that masks packed sequences: SDPA with padding removal, packed."""
    from rlvr.train.verl.mapping import packed_sdpa_supported

    if not packed_sdpa_supported():
        pytest.skip("transformers < 4.56: no packed-sequence masks for SDPA")
    prof = load_profile(PROFILES[1])
    cfg = _compose(_grpo_overrides(tmp_path, prof, VerlParams(max_prompt_length=1536, max_response_length=2048)))
    a = cfg.actor_rollout_ref
    assert a.model.override_config.attn_implementation == "sdpa"
    assert a.model.use_remove_padding is True and a.actor.use_dynamic_bsz is True
    assert a.actor.ppo_max_token_len_per_gpu == prof.ppo_max_token_len_per_gpu  # real tokens: the budget holds
