"""Checkpoints that fit and survive, and resume instead of restart (issue 44): sizes, the free-space check, pruning,
the optimizer state dropped after a publish, the cache location under DVC's temporary workspaces, the resume key, a
finished run not starting verl, a raised max_steps continuing, and save_freq: auto. All on CPU with a fake verl."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_verl_launch import GRPO_8X, PROFILE, STEPS, FakeRunner, _run_grpo

from rlvr.config import ConfigError
from rlvr.train.local.grpo import GRPOParams
from rlvr.train.local.runs import cache_root, dvc_temp_root, run_dir
from rlvr.train.verl import checkpoints as ck
from rlvr.train.verl.mapping import save_freq_for
from rlvr.train.verl.overrides import VerlParams, grpo_overrides, load_profile
from rlvr.train.verl.resume import trajectory_params

QWEN7B = 7_615_616_512  # Qwen2.5-7B's parameters


def _model(tmp_path: Path, n_params: int = QWEN7B, dtype: str = "bfloat16") -> Path:
    """A local HF folder whose safetensors index says it holds ``n_params`` parameters of ``dtype``."""
    d = tmp_path / "model"
    d.mkdir(parents=True, exist_ok=True)
    width = {"bfloat16": 2, "float32": 4}[dtype]
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": n_params * width}}))
    (d / "config.json").write_text(json.dumps({"torch_dtype": dtype}))
    return d


def _step(ckpt: Path, n: int, role: str | None = "actor") -> Path:
    g = ckpt / f"global_step_{n}"
    shard = g / role if role else g
    shard.mkdir(parents=True)
    for kind in ("model", "optim", "extra_state"):
        (shard / f"{kind}_world_size_1_rank_0.pt").write_bytes(b"x" * 10)
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(n))
    return g


# ---- item 1: sizes, free space, pruning, optimizer dropped, cache location -------------------------------------


def test_a_7b_checkpoint_is_91_gb_and_two_are_kept_at_peak(tmp_path):
    assert ck.model_params(_model(tmp_path)) == QWEN7B
    assert ck.model_params(_model(tmp_path / "f", 1000, "float32")) == 1000
    assert ck.model_params("rlvr-test/not-downloaded") is None  # a Hub id not in the cache: not sized
    plan = ck.checkpoint_plan(QWEN7B, keep=2)
    assert round(plan.full / 1e9, 1) == 91.4 and plan.peak_count == 2 and round(plan.peak / 1e9) == 183
    assert round(plan.published / 1e9, 1) == 15.2 and round(plan.after_publish / 1e9, 1) == 30.5
    assert ck.checkpoint_plan(QWEN7B, keep=1).peak_count == 2  # the old one stays until the new one is saved
    assert ck.checkpoint_plan(QWEN7B, keep=None, steps=100, save_freq=20).peak_count == 6


def test_the_free_space_check_names_the_path_and_the_shortfall(tmp_path):
    a, b = tmp_path / "cache" / "run", tmp_path / "models" / "grpo"  # one file system: summed
    with pytest.raises(ConfigError) as e:
        ck.check_free_space({a: 150 * 10**9, b: 20 * 10**9}, free={str(a): 160 * 10**9, str(b): 160 * 10**9})
    msg = str(e.value)
    assert "\n" not in msg and str(a) in msg and "needs 170.0 GB" in msg and "short by 10.0 GB" in msg
    ck.check_free_space({a: 150 * 10**9}, free={str(a): 160 * 10**9})  # fits: no error


def test_disk_preflight_counts_the_checkpoints_already_there(tmp_path):
    model, run = _model(tmp_path), tmp_path / "run" / "checkpoints"
    _step(run, 5)
    free = {str(run): 200 * 10**9, str(tmp_path / "out"): 200 * 10**9}
    with pytest.raises(ConfigError, match="short by"):  # 183 GB of checkpoints + 15 GB published > 190
        ck.disk_preflight(run, tmp_path / "out", model, keep=2, free={**free, str(run): 190 * 10**9})
    assert ck.disk_preflight(run, tmp_path / "out", model, keep=2, free=free).peak_count == 2
    assert ck.disk_preflight(run, tmp_path / "out", "Qwen/Q", keep=2, free=free) is None


def test_pruning_keeps_the_newest_k_and_verls_latest(tmp_path):
    d = tmp_path / "checkpoints"
    for n in (5, 10, 15, 20):
        _step(d, n)
    (d / "latest_checkpointed_iteration.txt").write_text("20")
    gone = ck.prune_checkpoints(d, 2)
    assert [p.name for p in gone] == ["global_step_5", "global_step_10"]
    assert [s for s, _ in ck.checkpoint_steps(d)] == [15, 20]
    assert ck.prune_checkpoints(d, None) == []


def test_the_optimizer_is_dropped_after_publish_and_a_continuation_loads_model_and_extra(tmp_path):
    d = tmp_path / "checkpoints"
    _step(d, 5)
    g = _step(d, 10)
    key = "actor_rollout_ref.actor.checkpoint.load_contents"
    assert ck.load_contents_override(d, key) == []  # full checkpoint: verl loads everything
    assert ck.drop_optimizer(d) == 40  # step 5 (30 bytes) and step 10's optimizer shard (10)
    assert [s for s, _ in ck.checkpoint_steps(d)] == [10] and not ck.has_optimizer(g)
    assert (g / "actor" / "model_world_size_1_rank_0.pt").is_file()
    assert ck.load_contents_override(d, key) == [f"{key}=[model,extra]"]


def test_grpo_publish_drops_the_optimizer_and_older_checkpoints(tmp_path):
    _step(tmp_path / "run" / "checkpoints", 1)  # an older attempt's checkpoint verl would forget
    _run_grpo(tmp_path, FakeRunner(STEPS, ckpt_step=2))
    d = tmp_path / "run" / "checkpoints"
    assert [s for s, _ in ck.checkpoint_steps(d)] == [2]
    assert not list(d.rglob("optim_*")) and list(d.rglob("model_world_size_1_rank_0.pt"))


def test_grpo_refuses_to_start_without_the_disk_it_needs(tmp_path, monkeypatch):
    model = _model(tmp_path)
    monkeypatch.setattr(ck.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**12, 10**12 - 10**9, 10**9))
    fake = FakeRunner(STEPS)
    with pytest.raises(ConfigError, match=r"1\.0 GB free.*short by"):
        _run_grpo(tmp_path, fake, model_path=model)
    assert fake.calls == []  # verl never started


def test_the_cache_is_absolute_and_a_relative_one_is_refused_in_a_dvc_temp_workspace(tmp_path):
    repo = tmp_path / "repo"
    temp = repo / ".dvc" / "tmp" / "exps" / "tmpab12cd"
    assert dvc_temp_root(temp / "stages") == repo and dvc_temp_root(repo) is None
    assert cache_root({}, cwd=repo) == repo / ".cache"
    assert cache_root({}, cwd=temp) == repo / ".cache"  # survives the throw-away workspace
    assert cache_root({"RLVR_CACHE_DIR": "/big/cache"}, cwd=temp) == Path("/big/cache")
    assert cache_root({"RLVR_CACHE_DIR": "c"}, cwd=repo) == repo / "c"
    with pytest.raises(ConfigError, match=r"RLVR_CACHE_DIR=\.cache: a relative cache folder inside DVC.s temporary"):
        cache_root({"RLVR_CACHE_DIR": ".cache"}, cwd=temp)


# ---- item 2: resume key, finished runs, raised max_steps, save_freq -------------------------------------------


def _key_dir(grpo: GRPOParams, verl: VerlParams, tmp_path: Path) -> Path:
    return run_dir("grpo", trajectory_params(grpo.model_dump(), verl.model_dump(), reward="sparse"), "Qwen/Q", seed=1,
                   data_files=[tmp_path / "train.parquet"])


def test_the_resume_key_hashes_only_what_changes_the_trajectory(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "train.parquet").write_bytes(b"rows")
    g, v = GRPOParams(seed=1, max_steps=100, **GRPO_8X), VerlParams(profile=str(PROFILE))
    base = _key_dir(g, v, tmp_path)
    same = [
        (g.model_copy(update={"max_steps": 200}), v),
        (g.model_copy(update={"per_device_train_batch_size": 4, "gradient_accumulation_steps": 8}), v),
        (g, v.model_copy(update={"save_freq": 5, "test_freq": 2, "max_ckpt_to_keep": 1, "loggers": ["wandb"],
                                 "judge_pool": "process", "judge_pool_workers": 64, "project_name": "p",
                                 "reward_manager": "rate_limited", "profile": "profiles/qwen7b_4xh100.yaml"})),
    ]
    for gg, vv in same:
        assert _key_dir(gg, vv, tmp_path) == base
    changed = [
        (g.model_copy(update={"learning_rate": 2e-6}), v), (g.model_copy(update={"seed": 2}), v),
        (g.model_copy(update={"num_generations": 16}), v), (g, v.model_copy(update={"train_batch_size": 64})),
        (g, v.model_copy(update={"max_response_length": 4096})),
    ]
    assert len({_key_dir(gg, vv, tmp_path) for gg, vv in changed} | {base}) == len(changed) + 1
    (tmp_path / "train.parquet").write_bytes(b"other rows")
    assert _key_dir(g, v, tmp_path) != base  # new data: a new run
    rec = json.loads((base / "resume_key.json").read_text())
    assert rec["key"] == base.name and "learning_rate" in rec["params"]["stage"]
    assert "save_freq" not in rec["params"]["verl"] and "max_steps" not in rec["params"]["stage"]


def test_a_finished_run_does_not_start_verl_and_a_raised_max_steps_continues(tmp_path):
    def run(max_steps: int, fake: FakeRunner) -> dict:
        return _run_grpo(tmp_path, fake, grpo=GRPOParams(seed=1, beta=0.01, max_steps=max_steps, **GRPO_8X))

    run(2, FakeRunner(STEPS, ckpt_step=2))
    again = FakeRunner(STEPS, ckpt_step=2)
    m = run(2, again)
    assert [c[0][1:3] for c in again.calls] == [["-m", "verl.model_merger"]]  # merged again, verl not started
    assert m["steps"] == 2 and (tmp_path / "models" / "grpo" / "config.json").is_file()
    more = FakeRunner({3: STEPS[2], 4: STEPS[2]}, ckpt_step=4)
    run(4, more)
    argv = more.calls[0][0]
    assert "verl.trainer.main_ppo" in argv and "trainer.total_training_steps=4" in argv
    assert "actor_rollout_ref.actor.checkpoint.load_contents=[model,extra]" in argv  # optimizer dropped at step 2
    rows = (tmp_path / "metrics" / "grpo.tsv").read_text().splitlines()[1:]
    assert [r.split("\t")[0] for r in rows] == ["1", "2", "3", "4"]


def test_save_freq_auto_loses_at_most_five_percent():
    assert save_freq_for("auto", 100) == 5 and save_freq_for("auto", 20) == 1 and save_freq_for("auto", 50) == 2
    assert save_freq_for("auto", None) == 10 and save_freq_for(20, 100) == 20 and save_freq_for(-1, 100) == 10**9
    with pytest.raises(ConfigError, match=r"verl\.save_freq"):
        save_freq_for("often", 100)
    ov = grpo_overrides(GRPOParams(max_steps=100, **GRPO_8X), VerlParams(profile=str(PROFILE)),
                        load_profile(PROFILE), train_files="t", val_files="v", model_path="m", reward_mode="sparse",
                        ckpt_dir="c", experiment_name="e")
    assert "trainer.save_freq=5" in ov


def test_the_load_contents_overrides_are_verls_own_keys(tmp_path):
    """The continuation overrides compose against the installed verl's Hydra configs (GRPO and SFT)."""
    pytest.importorskip("verl")
    from test_verl_overrides import _grpo, compose

    from rlvr.train.verl.resume import GRPO_LOAD_CONTENTS, SFT_LOAD_CONTENTS

    cfg = compose("ppo_trainer", [*_grpo(tmp_path), f"{GRPO_LOAD_CONTENTS}=[model,extra]"])
    assert list(cfg.actor_rollout_ref.actor.checkpoint.load_contents) == ["model", "extra"]
    assert list(cfg.actor_rollout_ref.actor.checkpoint.save_contents) == ["model", "optimizer", "extra"]
    sft = compose("sft_trainer_engine", [f"{SFT_LOAD_CONTENTS}=[model,extra]"])
    assert list(sft.checkpoint.load_contents) == ["model", "extra"]


def test_a_hub_model_in_the_cache_is_sized(tmp_path, monkeypatch):
    snap = _model(tmp_path / "hub")
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache",
                        lambda repo, name: str(snap / name) if repo == "Qwen/Q7" else None)
    assert ck.model_params("Qwen/Q7") == QWEN7B and ck.model_params("Qwen/other") is None


def test_model_only_checkpoints_of_the_lent_profiles_are_sized_at_4_bytes_per_param():
    """The lent profiles save ``[model]`` (no Adam moments): sized as 12 B/param, a 7B run would be refused on the
    lent 2 x H200's 128 GB disk although its model-only checkpoints (30 GB each) fit."""
    for rel in ("profiles/lent/qwen7b_random_2xh100.yaml", "profiles/lent/qwen7b_scripted_2xh200.yaml"):
        hw = load_profile(str(Path(__file__).resolve().parents[2] / rel))
        assert ck.saves_optimizer(hw.extra_overrides, "actor_rollout_ref.actor.checkpoint.save_contents") is False
        assert ck.saves_optimizer(hw.extra_overrides, "checkpoint.save_contents") is False
    assert ck.saves_optimizer([], "checkpoint.save_contents") is True
    assert ck.saves_optimizer(["++checkpoint.save_contents=[model,optimizer,extra]"], "checkpoint.save_contents")
    n = QWEN7B
    full, model_only = ck.checkpoint_plan(n, 2), ck.checkpoint_plan(n, 2, optimizer=False)
    assert full.full == 12 * n and model_only.full == 4 * n and model_only.peak == 8 * n
    assert model_only.peak < 128e9 < full.peak


def test_a_model_only_checkpoint_resumes_loading_only_the_model(tmp_path):
    """The lent profiles save ``[model]``: their checkpoints have neither optimizer nor extra_state files, so the
    continuation must ask verl for ``[model]`` alone (``[model,extra]`` made verl 0.9.1 open a file never saved)."""
    d = tmp_path / "checkpoints"
    g = _step(d, 3)
    for f in g.rglob("*.pt"):
        if not f.name.startswith("model_"):
            f.unlink()
    key = "actor_rollout_ref.actor.checkpoint.load_contents"
    assert ck.load_contents_override(d, key) == [f"{key}=[model]"]
