"""CPU tests of the verl override fixes found by the first real run on a GPU (docs/training/gpu.md): each failed
before its fix. No verl import needed: the overrides are plain strings."""

from __future__ import annotations

from pathlib import Path

from rlvr.train.local.grpo import GRPOParams
from rlvr.train.local.sft import SFTParams
from rlvr.train.verl.overrides import VerlParams, grpo_overrides, load_profile, sft_overrides

PROFILE = Path(__file__).resolve().parents[2] / "profiles" / "qwen7b_8xh100.yaml"


def _grpo(tmp_path: Path, verl: VerlParams | None = None, model_path: str = "Qwen/Qwen2.5-Coder-7B-Instruct"):
    return grpo_overrides(
        GRPOParams(seed=7, num_generations=8), verl or VerlParams(), load_profile(PROFILE),
        train_files=tmp_path / "train.parquet", val_files=tmp_path / "val.parquet", model_path=model_path,
        reward_mode="sparse", ckpt_dir=tmp_path / "ckpt", experiment_name="grpo-seed7",
    )


def test_grpo_epochs_cover_total_training_steps(tmp_path):
    """verl stops when its epochs run out even before total_training_steps, and then saves no final checkpoint (seen
    on the H100: 2 of 5 steps): total_epochs must be raised so the step count is reached."""
    ov = _grpo(tmp_path, verl=VerlParams(total_epochs=1, total_training_steps=5, train_batch_size=16,
                                         ppo_mini_batch_size=8))
    assert "trainer.total_epochs=5" in ov
    assert "trainer.total_training_steps=5" in ov
    ov = _grpo(tmp_path, verl=VerlParams(total_epochs=3, total_training_steps=None))
    assert "trainer.total_epochs=3" in ov


def test_grpo_save_freq_never_disables_the_final_checkpoint(tmp_path):
    """verl 0.9.1's v1 PPO trainer saves only when save_freq > 0: save_freq -1 must still save the last step."""
    ov = _grpo(tmp_path, verl=VerlParams(save_freq=-1))
    freq = int(next(o for o in ov if o.startswith("trainer.save_freq=")).split("=")[1])
    assert freq > 10**6
    assert "trainer.save_freq=20" in _grpo(tmp_path, verl=VerlParams(save_freq=20))


def test_local_model_paths_are_absolute(tmp_path, monkeypatch):
    """Ray workers and torchrun ranks do not run in the stage's folder: a relative local model folder must reach verl
    as an absolute path (a relative one was read as a Hub id on the H100); a Hub id stays as it is."""
    (tmp_path / "models" / "sft").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    ov = _grpo(tmp_path, model_path="models/sft")
    assert f"actor_rollout_ref.model.path={tmp_path / 'models' / 'sft'}" in ov
    assert "actor_rollout_ref.model.path=Qwen/Qwen2.5-Coder-7B-Instruct" in _grpo(
        tmp_path, model_path="Qwen/Qwen2.5-Coder-7B-Instruct")
    sft = sft_overrides(SFTParams(max_steps=3), VerlParams(), load_profile(PROFILE), train_files="t.parquet",
                        val_files=None, model_path="models/sft", ckpt_dir="c", experiment_name="s")
    assert f"model.path={tmp_path / 'models' / 'sft'}" in sft


def test_rollout_dump_with_a_paragraph_separator_in_a_sample(tmp_path):
    """H100 finding: verl dumps rollouts with ``ensure_ascii=False``; a random-init policy's output held U+2029 and
    the stage failed reading the dump (``JSONDecodeError: Unterminated string``) after training had finished."""
    import json

    from rlvr.train.verl.logs import read_rollout_dumps

    d = tmp_path / "rollouts"
    d.mkdir()
    recs = [{"input": "p", "output": f"x{chr(0x2029)}y", "score": 0.0, "step": 1}, {"output": "z", "score": 1.0}]
    (d / "1.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    assert read_rollout_dumps(d) == {1: recs}
