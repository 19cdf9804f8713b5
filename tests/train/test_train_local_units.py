"""Fast unit tests of the local training engine: pair mining, SFT set, TSV curves, run folders, tracking, params."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
from pydantic import ValidationError
from train_fixtures import FakeJudge, small_family

from rlvr.train.local.common import (
    TrainCommon,
    TsvCurves,
    checkpoint_step,
    grpo_rows,
    load_problem_sets,
    logged_training_loss,
    resume_checkpoint,
    run_dir,
    setup_tracking,
    sft_rows,
)
from rlvr.train.local.dpo import dataset_pairs, mine_pairs
from rlvr.train.local.grpo import GRPO_CURVES, GRPOParams, TimedReward
from rlvr.train.local.runs import rows_sha256
from rlvr.train.local.sft import build_sft_set


def test_mine_pairs_accepted_rule_pairs_accepted_against_rejected():
    p1, p2 = small_family()[:2]
    judged = [
        [("A", True, 1.0), ("B", False, 0.0), ("C", False, 2 / 3), ("A", True, 1.0)],
        [("X", True, 1.0), ("Y", True, 1.0)],  # all accepted: no pair
    ]
    pairs, stats = mine_pairs([p1, p2], judged, rule="accepted", min_margin=0.0, max_pairs_per_problem=2)
    assert [(q["chosen"][0]["content"], q["rejected"][0]["content"]) for q in pairs] == [("A", "B")]
    assert pairs[0]["id"] == p1.id and pairs[0]["margin"] == 1.0 and pairs[0]["prompt"][0]["role"] == "user"
    assert stats["pairs"] == 1 and stats["samples"] == 6 and stats["accepted_samples"] == 4
    assert stats["problems_all_accepted"] == 1 and stats["problems_none_accepted"] == 0


def test_mine_pairs_min_margin_and_pass_ratio_rule():
    p = small_family()[0]
    judged = [[("hi", False, 2 / 3), ("mid", False, 1 / 3), ("lo", False, 0.0), ("lo2", False, 0.0)]]
    pairs, _ = mine_pairs([p], judged, rule="accepted")
    assert pairs == []  # nothing accepted
    pairs, _ = mine_pairs([p], judged, rule="pass_ratio", min_margin=0.5, max_pairs_per_problem=5)
    got = {(q["chosen"][0]["content"], q["rejected"][0]["content"]) for q in pairs}
    assert len(got) == 1 and got <= {("hi", "lo"), ("hi", "lo2")}  # "hi" used once; mid-lo margin 1/3 < 0.5
    pairs, _ = mine_pairs([p], judged, rule="pass_ratio", min_margin=0.0, max_pairs_per_problem=5)
    assert all(q["margin"] > 0 for q in pairs) and len(pairs) == 2  # 2 distinct chosen (hi, mid) vs lo/lo2
    with pytest.raises(ValueError, match="sample lists"):
        mine_pairs([p], [], rule="accepted")


def test_mine_pairs_is_deterministic():
    ps = small_family()[:3]
    judged = [[(f"{i}-{j}", j % 2 == 0, float(j % 2 == 0)) for j in range(6)] for i in range(3)]
    assert mine_pairs(ps, judged, seed=1) == mine_pairs(ps, judged, seed=1)


def test_dataset_pairs_require_judge_agreement():
    ps = small_family()[:3]
    pairs = dataset_pairs(ps, FakeJudge())
    assert len(pairs) == 3 and all(q["origin"] == "dataset" for q in pairs)
    assert pairs[0]["chosen"][0]["content"] == "```python\n" + ps[0].solutions[0] + "\n```"
    broken = ps[0].model_copy(update={"incorrect_solutions": list(ps[0].solutions)})  # "wrong" one is accepted
    assert dataset_pairs([broken], FakeJudge()) == []


def test_build_sft_set_keeps_only_accepted_references():
    ps = small_family()[:4]
    judge = FakeJudge(reject=[ps[1].solutions[0]])  # a broken reference solution
    kept, stats = build_sft_set(ps, judge)
    assert stats == {"problems": 4, "candidates": 4, "accepted": 3, "rejected": 1, "problems_covered": 3}
    assert all(text.startswith("```python\n") for _, text in kept)
    rows = sft_rows(kept)
    assert rows[0]["completion"][0]["role"] == "assistant" and rows[0]["prompt"][0]["role"] == "user"


def test_grpo_rows_carry_reward_columns():
    from rlvr.data.schema import from_ground_truth

    p = small_family()[0]
    row = grpo_rows([p])[0]
    assert row["data_source"] == "synthetic"
    assert from_ground_truth(row["ground_truth"]).tests == p.tests


def test_load_problem_sets(tmp_path):
    from rlvr.data.schema import write_problems

    write_problems(tmp_path / "synthetic.jsonl", small_family())
    assert len(load_problem_sets(tmp_path, ["synthetic/train", "synthetic/dev"])) == 16
    with pytest.raises(FileNotFoundError, match=r"nope\.jsonl"):
        load_problem_sets(tmp_path, ["nope/train"])
    with pytest.raises(ValueError, match="no problems in split 'test'"):
        load_problem_sets(tmp_path, ["synthetic/test"])


def _log(curves: TsvCurves, step: int, logs: dict) -> None:
    curves.callback.on_log(None, SimpleNamespace(global_step=step), None, logs=logs)


def test_tsv_curves_columns_rows_and_resume(tmp_path):
    path = tmp_path / "c.tsv"
    curves = TsvCurves(path, {"reward_mean": "reward", "kl": "kl"})
    _log(curves, 1, {"reward": 0.25, "kl": 0.0})
    _log(curves, 2, {"reward": 0.5})
    _log(curves, 2, {"train_runtime": 3.0})  # summary row without curve keys: skipped
    lines = path.read_text().splitlines()
    assert lines == ["step\treward_mean\tkl", "1\t0.25\t0", "2\t0.5\t"]
    again = TsvCurves(path, {"reward_mean": "reward", "kl": "kl"})
    again.load_existing(upto_step=1)
    _log(again, 2, {"reward": 0.75, "kl": 0.1})
    assert path.read_text().splitlines()[1:] == ["1\t0.25\t0", "2\t0.75\t0.1"]


def test_tsv_curves_keep_judge_seconds_out_of_the_plot(tmp_path):
    """The plot TSV is the same whatever the judge took (0.05 s or 2.5 s a step); judge_step_s goes to the cost
    mirror metrics/cost/<same path>, and a resume restores it from there."""
    cols = {"reward_mean": "reward", "judge_step_s": "judge/step_s"}
    for name, secs in (("fast", 0.05), ("slow", 2.5)):
        curves = TsvCurves(tmp_path / name / "metrics" / "grpo" / "seed-1.tsv", cols)
        _log(curves, 1, {"reward": 0.25, "judge/step_s": secs})
        _log(curves, 2, {"reward": 0.5, "judge/step_s": 2 * secs})
    plot = [(tmp_path / n / "metrics" / "grpo" / "seed-1.tsv").read_bytes() for n in ("fast", "slow")]
    assert plot[0] == plot[1] == b"step\treward_mean\n1\t0.25\n2\t0.5\n"
    cost = tmp_path / "slow" / "metrics" / "cost" / "grpo" / "seed-1.tsv"
    assert cost.read_text().splitlines() == ["step\tjudge_step_s", "1\t2.5", "2\t5"]
    again = TsvCurves(tmp_path / "slow" / "metrics" / "grpo" / "seed-1.tsv", cols)
    again.load_existing(upto_step=1)
    _log(again, 2, {"reward": 0.75, "judge/step_s": 1.0})
    assert cost.read_text().splitlines() == ["step\tjudge_step_s", "1\t2.5", "2\t1"]


def test_run_dir_keys_on_params_and_model(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    m = tmp_path / "m"
    m.mkdir()
    (m / "config.json").write_text("{}")
    a = run_dir("sft", {"lr": 1}, m)
    assert a == run_dir("sft", {"lr": 1}, m) and a.parent == tmp_path / "cache" / "train" / "sft"
    assert a != run_dir("sft", {"lr": 2}, m)
    assert run_dir("grpo", {"lr": 1}, m, seed=3).parent.name == "seed-3"
    (m / "config.json").write_text('{"x": 1}')
    assert a != run_dir("sft", {"lr": 1}, m)
    # retrained weights of the same size (same shape) are a different input model: no resume of the old run
    (m / "model.safetensors").write_bytes(b"\x00" * 64)
    b = run_dir("sft", {"lr": 1}, m)
    (m / "model.safetensors").write_bytes(b"\x01" * 64)
    assert b != run_dir("sft", {"lr": 1}, m)


def test_run_dir_keys_on_the_training_problems(tmp_path, monkeypatch):
    # same params and input model, another training set (e.g. governed data changed): a fresh run, never a resume
    # of the old run's finished checkpoint
    from rlvr.data.synthetic import generate

    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    ps = generate(templates=["add", "sub"], max_constant=4)
    a = run_dir("sft", {"lr": 1}, "hub/model", problems=ps)
    assert a == run_dir("sft", {"lr": 1}, "hub/model", problems=list(reversed(ps)))  # order does not matter
    assert a != run_dir("sft", {"lr": 1}, "hub/model", problems=ps[1:])
    changed = [ps[0].model_copy(update={"statement": "other"}), *ps[1:]]
    assert a != run_dir("sft", {"lr": 1}, "hub/model", problems=changed)


def test_run_dir_keys_on_the_rows_as_rendered(tmp_path, monkeypatch):
    # same params, model and problems, another prompt text (a repair-protocol change, 2026-11-29): a fresh run; the
    # key's inputs record the rows' hash
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    rows = [{"prompt": [{"role": "user", "content": "Write a program."}]}]
    a = run_dir("repair", {"lr": 1}, "hub/model", rows=rows)
    assert a == run_dir("repair", {"lr": 1}, "hub/model", rows=[dict(r) for r in rows])
    assert a != run_dir("repair", {"lr": 1}, "hub/model", rows=[{"prompt": [{"role": "user", "content": "Write a "
                                                                             "program. Rules: ..."}]}])
    assert a != run_dir("repair", {"lr": 1}, "hub/model")  # no rows given: the key as before
    assert json.loads((a / "resume_key.json").read_text())["rows"] == rows_sha256(rows)


def test_resume_checkpoint_finds_last(tmp_path):
    assert resume_checkpoint(tmp_path / "missing") is None
    assert resume_checkpoint(tmp_path) is None
    for s in (5, 10):
        (tmp_path / f"checkpoint-{s}").mkdir()
    assert checkpoint_step(resume_checkpoint(tmp_path)) == 10
    assert checkpoint_step(None) == 0


def test_logged_training_loss_is_the_same_from_memory_or_a_checkpoint(tmp_path):
    """The run's loss comes from its log history, each logged loss weighted by its interval's steps (the last step
    is always logged, so the last interval may be shorter), summaries without ``loss`` skipped; the history read
    back from a checkpoint's trainer_state.json gives the same float, so a finished run found in the cache reports
    what the fresh run did."""
    import json

    history = [{"loss": 1.1, "step": 5}, {"loss": 0.7, "step": 10}, {"loss": 0.4, "step": 12},
               {"train_loss": 9.9, "step": 12, "train_runtime": 3.0}]
    assert logged_training_loss(history) == pytest.approx((1.1 * 5 + 0.7 * 5 + 0.4 * 2) / 12)
    ckpt = tmp_path / "checkpoint-12"
    ckpt.mkdir()
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 12, "log_history": history}))
    assert logged_training_loss(ckpt) == logged_training_loss(history)
    assert logged_training_loss(tmp_path / "missing") == 0.0 and logged_training_loss([{"step": 1}]) == 0.0


def test_setup_tracking(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert setup_tracking("sft", ["wandb"]) == ["none"]
    for k in ("WANDB_MODE", "WANDB_RUN_GROUP", "WANDB_JOB_TYPE", "WANDB_DIR", "WANDB_NAME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path))
    assert setup_tracking("grpo", ["wandb"], seed=2) == ["wandb"]
    assert os.environ["WANDB_MODE"] == "offline" and os.environ["WANDB_JOB_TYPE"] == "grpo"
    assert os.environ["WANDB_NAME"] == "grpo-seed2" and os.environ["WANDB_RUN_GROUP"].startswith("rlvr-")
    assert setup_tracking("sft", ["none"]) == ["none"]


def test_grpo_params_batch_must_hold_whole_groups():
    with pytest.raises(ValidationError, match="multiple of num_generations"):
        GRPOParams(per_device_train_batch_size=6, num_generations=4)
    assert GRPOParams(per_device_train_batch_size=4, gradient_accumulation_steps=2, num_generations=8)
    with pytest.raises(ValidationError):
        GRPOParams(bogus=1)


def test_timed_reward_logs_seconds_and_keeps_name():
    logged = {}

    def code_dense(**kw):
        return [1.0] * len(kw["completions"])

    t = TimedReward(code_dense)
    assert t.__name__ == "code_dense"
    assert t(completions=["a", "b"], log_metric=lambda k, v: logged.__setitem__(k, v)) == [1.0, 1.0]
    assert logged["judge/step_s"] >= 0 and "judge_step_s" in GRPO_CURVES


def test_curves_survive_dvc_deleting_the_output_before_a_resumed_rerun(tmp_path):
    from rlvr.train.local.common import TsvCurves

    main, mirror = tmp_path / "metrics" / "c.tsv", tmp_path / "run" / "curves.tsv"
    first = TsvCurves(main, {"loss": "loss"}, mirror=mirror)
    first.rows = [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}]
    first.write()
    main.unlink()  # DVC removes a stage's outputs before running it again
    again = TsvCurves(main, {"loss": "loss"}, mirror=mirror)
    again.load_existing(upto_step=2)
    assert [r["step"] for r in again.rows] == ["1", "2"]


def test_set_seed_pins_threads_and_deterministic_algorithms():
    import torch

    from rlvr.train.local.common import TrainCommon, set_seed

    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    try:
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(False)
        set_seed(3, TrainCommon().cpu_threads)
        assert torch.get_num_threads() == 2 and torch.are_deterministic_algorithms_enabled()
        a = torch.rand(4)
        set_seed(3, 1)
        assert torch.get_num_threads() == 1 and torch.equal(torch.rand(4), a)
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(det)


def test_dpo_mining_with_vllm_must_run_in_a_child_process():
    """The vLLM engine does not reliably free its GPU memory in-process, and the DPO launch needs every GPU right
    after mining: `backend: vllm` with `process: stage` is refused when params load, naming the fields."""
    from pydantic import ValidationError

    from rlvr.train.local.dpo import DPOMining, DPOParams

    with pytest.raises(ValidationError, match="backend vllm needs process: child"):
        DPOParams(mining={"backend": "vllm"})
    assert DPOParams(mining={"backend": "vllm", "process": "child", "tensor_parallel_size": 2}).mining == DPOMining(
        backend="vllm", process="child", tensor_parallel_size=2)


def test_checkpoints_fall_on_logged_steps():
    """A resume starts at a checkpoint; with save_steps a multiple of logging_steps every checkpoint is a logged step,
    so each logged loss averages exactly the steps logged_training_loss weights it by."""
    assert TrainCommon(save_steps=100, logging_steps=5).save_steps == 100
    with pytest.raises(ValueError, match=r"train\.save_steps=50 is not a multiple of train\.logging_steps=20"):
        TrainCommon(save_steps=50, logging_steps=20)
