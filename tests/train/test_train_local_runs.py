"""The local engine end to end on a 1-layer hidden-32 Qwen2: SFT, DPO and GRPO each run a couple of steps with a
fake judge, publish a loadable model, write their curves, and resume from an interrupted run's checkpoint."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch
from train_fixtures import FakeJudge, build_model, small_family

from rlvr.layout import read_curves, write_metrics
from rlvr.train.local.common import TrainCommon, resume_checkpoint

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("models") / "base")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_MODE", "disabled")


def _common(**kw):
    args = {"report_to": ["none"], "logging_steps": 1, "save_steps": 1, "max_prompt_length": 128,
            "max_completion_length": 16, "eval_max_new_tokens": 8}
    return TrainCommon(**{**args, **kw})


def _split(split):
    return [p for p in small_family() if p.split == split]


def _header(path):
    return path.read_text().splitlines()[0].split("\t")


def test_a_run_shorter_than_logging_steps_logs_its_last_step(base, tmp_path):
    """transformers logs every logging_steps only: the curves callback logs the last step too, so a 3-step run with
    logging_steps 2 has rows at steps 2 and 3 and its train_loss counts all three steps (it was 0.0 for a run shorter
    than logging_steps)."""
    from rlvr.train.local.sft import SFTParams, run_sft

    cfg = SFTParams(max_steps=3, per_device_train_batch_size=4, learning_rate=1e-3)
    curves = tmp_path / "sft.tsv"
    m = run_sft(cfg, _common(logging_steps=2, save_steps=2), base, _split("train"), _split("dev")[:1], FakeJudge(),
                tmp_path / "sft", curves)
    assert [line.split("\t")[0] for line in curves.read_text().splitlines()[1:]] == ["2", "3"]
    assert m["steps"] == 3 and m["train_loss"] > 0
    short = run_sft(SFTParams(max_steps=1, per_device_train_batch_size=4, learning_rate=1e-3),
                    _common(logging_steps=5, save_steps=5), base, _split("train"), _split("dev")[:1], FakeJudge(),
                    tmp_path / "short", tmp_path / "short.tsv")
    assert short["train_loss"] > 0


def test_sft_trains_publishes_and_resumes(base, tmp_path, caplog):
    from transformers import AutoModelForCausalLM

    from rlvr.train.local.sft import SFT_CURVES, SFTParams, run_sft

    cfg, common = SFTParams(max_steps=2, per_device_train_batch_size=4, learning_rate=1e-3), _common()
    out, curves = tmp_path / "sft", tmp_path / "sft.tsv"
    m = run_sft(cfg, common, base, _split("train"), _split("dev")[:2], FakeJudge(), out, curves)
    assert m["steps"] == 2 and m["resumed_from_step"] == 0 and m["sft_set"]["accepted"] == 12
    assert 0.0 <= m["dev"]["accepted@1"] <= 1.0 and m["dev"]["n"] == 2 and "dev_base" in m
    assert AutoModelForCausalLM.from_pretrained(out) is not None and (out / "tokenizer_config.json").is_file()
    assert _header(curves) == ["step", *SFT_CURVES] and len(curves.read_text().splitlines()) == 3
    # an identical re-run of the finished run (2 steps, not a whole number of 3-step epochs) trains no step past
    # max_steps and publishes the same weights
    first = AutoModelForCausalLM.from_pretrained(out).state_dict()
    caplog.set_level(logging.INFO, logger="rlvr.train.local.common")
    again = run_sft(cfg, common, base, _split("train"), _split("dev")[:2], FakeJudge(), tmp_path / "again",
                    tmp_path / "again.tsv")
    assert again["resumed_from_step"] == 2 and again["steps"] == 2
    assert "finished run in the cache" in caplog.text and "checkpoint-2 (step 2 of 2)" in caplog.text  # logged
    # and reports the finished run's loss (from the logged per-step losses, as the fresh run does), not 0.0
    assert m["train_loss"] > 0 and again["train_loss"] == m["train_loss"]
    second = AutoModelForCausalLM.from_pretrained(tmp_path / "again").state_dict()
    assert all(torch.equal(first[k], second[k]) for k in first)
    # the committed provenance file follows the inputs, not the cache: byte-identical; the resume is cost
    _, cost_fresh, prov_fresh = write_metrics(tmp_path / "fresh" / "metrics" / "sft.json", m)
    _, cost_again, prov_again = write_metrics(tmp_path / "again" / "metrics" / "sft.json", again)
    assert prov_again.read_bytes() == prov_fresh.read_bytes() and "resumed" not in prov_fresh.read_text()
    assert json.loads(cost_again.read_text())["resumed_from_step"] == 2
    assert json.loads(cost_fresh.read_text())["resumed_from_step"] == 0
    # the same for an epoch-bounded run (max_steps -1, 12 rows / batch 4 = 3 steps), which Trainer.train resumes
    ep = SFTParams(epochs=1, per_device_train_batch_size=4, learning_rate=1e-3)
    e1 = run_sft(ep, common, base, _split("train"), [], FakeJudge(), tmp_path / "e1", tmp_path / "e1.tsv")
    e2 = run_sft(ep, common, base, _split("train"), [], FakeJudge(), tmp_path / "e2", tmp_path / "e2.tsv")
    assert e2["resumed_from_step"] == e1["steps"] > 0
    assert e1["train_loss"] > 0 and e2["train_loss"] == e1["train_loss"]
    # interruption after step 1: drop the last checkpoint and the published model, run again → resumes at 1
    # the run's folder: its key also hashes the SFT rows as rendered (run_dir's rows), so find it by its key's params
    want = json.loads(json.dumps({"sft": cfg.model_dump(), "train": common.model_dump()}, sort_keys=True, default=str))
    (rdir,) = [k.parent for k in (tmp_path / "cache" / "train" / "sft").glob("*/resume_key.json")
               if json.loads(k.read_text())["params"] == want]
    shutil.rmtree(rdir / "checkpoint-2")
    shutil.rmtree(out)
    assert resume_checkpoint(rdir).endswith("checkpoint-1")
    m2 = run_sft(cfg, common, base, _split("train"), [], FakeJudge(), out, curves)
    assert m2["resumed_from_step"] == 1 and m2["steps"] == 2 and out.is_dir()
    assert "resuming from" in caplog.text and "checkpoint-1 (step 1)" in caplog.text
    assert [r.split("\t")[0] for r in curves.read_text().splitlines()[1:]] == ["1", "2"]
    # the loss of a run resumed mid-way counts the steps trained before the interruption too (transformers' own
    # training_loss counts only this process's steps over the global step)
    assert m2["train_loss"] == m["train_loss"]


def test_dpo_mines_pairs_and_trains(base, tmp_path):
    from rlvr.train.local.dpo import DPO_CURVES, DPOParams, run_dpo

    cfg = DPOParams(max_steps=2, per_device_train_batch_size=2, k=2, max_problems=4, pair_rule="pass_ratio")
    judge = FakeJudge()
    m = run_dpo(cfg, _common(), base, _split("train"), [], judge, tmp_path / "dpo", tmp_path / "dpo.tsv")
    assert m["steps"] == 2 and m["pairs"]["dataset_pairs"] == 4 and m["pairs"]["samples"] == 8
    assert m["pairs"]["pairs"] == m["pairs"]["dataset_pairs"] + m["pairs"]["mined_pairs"]
    assert _header(tmp_path / "dpo.tsv") == ["step", *DPO_CURVES]
    assert (tmp_path / "dpo" / "config.json").is_file()
    calls = judge.calls  # a re-run with the same params reuses the cached pairs: no new mining
    again = run_dpo(cfg, _common(), base, _split("train"), [], judge, tmp_path / "dpo2",
                    tmp_path / "dpo2.tsv")
    assert judge.calls == calls
    # and its finished checkpoint (the dvc repro: resumed_from_step 0 -> 2): only the cost file differs
    assert (m["resumed_from_step"], again["resumed_from_step"]) == (0, 2)
    _, _, prov1 = write_metrics(tmp_path / "m1" / "metrics" / "dpo.json", m)
    _, cost2, prov2 = write_metrics(tmp_path / "m2" / "metrics" / "dpo.json", again)
    assert prov2.read_bytes() == prov1.read_bytes() and "resumed" not in prov1.read_text()
    assert json.loads(cost2.read_text())["resumed_from_step"] == 2


def test_grpo_trains_with_judge_reward_and_writes_curves(base, tmp_path):
    from rlvr.reward.trl import make_reward_funcs
    from rlvr.train.local.grpo import GRPO_CURVES, GRPOParams, run_grpo

    class ReferenceJudge(FakeJudge):  # the reward sees ground_truth only: grade by hash like FakeJudge
        pass

    cfg = GRPOParams(max_steps=2, per_device_train_batch_size=4, num_generations=2, learning_rate=1e-3, seed=1)
    funcs = make_reward_funcs("dense", judge=ReferenceJudge())
    curves = tmp_path / "grpo.tsv"
    m = run_grpo(cfg, _common(), base, _split("train"), _split("dev")[:2], FakeJudge(), tmp_path / "g", curves,
                 reward_mode="dense", reward_funcs=funcs)
    assert m["steps"] == 2 and m["reward_first"] is not None and m["dev"]["n"] == 2
    assert _header(curves) == ["step", *(c for c in GRPO_CURVES if c != "judge_step_s")]  # seconds: cost mirror
    assert _header(tmp_path / "cost" / "grpo.tsv") == ["step", "judge_step_s"]
    header, rows = read_curves(curves)
    assert header == ["step", *(c for c in GRPO_CURVES if c != "judge_step_s"), "judge_step_s"]
    assert len(rows) == 2
    for r in rows:
        for col in ("reward_mean", "reward_std", "accepted", "pass_ratio", "frac_reward_zero_std", "entropy",
                    "completion_length", "judge_step_s"):
            assert r[col] != "", col
        assert 0.0 <= float(r["pass_ratio"]) <= 1.0 and float(r["judge_step_s"]) >= 0.0
        # issue 42: the share of the completions sent to the judge that came back sandbox_error (empty in a step
        # where none had code: the tiny policy's); a healthy judge gives 0
        assert r["sandbox_error_share"] in ("", "0")
    assert "sandbox_error_share" in header and m["sandbox_error_share_max"] in (None, 0.0)


def test_dpo_on_several_processes_trains_through_the_worker(base, tmp_path):
    """dpo.launch.processes > 1: the stage mines once, writes the job, and `accelerate launch` starts one worker per
    GPU. On a CPU the launcher is replaced by running the real worker module once (what each rank runs); the command
    itself is checked as accelerate's CLI spells it."""
    import subprocess
    import sys

    from rlvr.train.local.dpo import FITTED_FILE, JOB_FILE, DPOLaunch, DPOParams, launch_command, run_dpo

    cmd = launch_command(DPOLaunch(processes=4), "run/dpo_job.json", python="py", mixed_precision="bf16")
    assert cmd == ["py", "-m", "accelerate.commands.launch", "--num_processes", "4", "--num_machines", "1",
                   "--mixed_precision", "bf16", "--multi_gpu", "-m", "rlvr.train.local.dpo_worker", "run/dpo_job.json"]
    with pytest.raises(ValueError, match="at least 2"):
        launch_command(DPOLaunch(processes=1), "j")

    seen = []

    def runner(argv, check):
        seen.append(argv)
        job = argv[-1]
        return subprocess.run([sys.executable, "-m", "rlvr.train.local.dpo_worker", job], check=check)

    import rlvr.train.local.dpo as dpo

    cfg = DPOParams(max_steps=2, per_device_train_batch_size=2, k=2, max_problems=4, pair_rule="pass_ratio",
                    launch=DPOLaunch(processes=2))
    orig = dpo.launch_training
    dpo.launch_training = lambda *a, **k: orig(*a, runner=runner, **k)
    try:
        m = run_dpo(cfg, _common(), base, _split("train"), [], FakeJudge(), tmp_path / "dpo", tmp_path / "dpo.tsv")
    finally:
        dpo.launch_training = orig
    assert seen and seen[0][seen[0].index("--num_processes") + 1] == "2"
    assert m["steps"] == 2 and m["pairs"]["pairs"] > 0 and (tmp_path / "dpo" / "config.json").is_file()
    run = next((tmp_path / "cache").rglob(JOB_FILE)).parent
    assert (run / FITTED_FILE).is_file()


def test_dpo_mining_in_a_child_process_gives_the_stage_process_texts(base, tmp_path):
    """dpo.mining.process child: the samples come from `python -m rlvr.train.local.dpo_mine` (a process that exits
    before training, so the GPUs are free for the launch) and equal the in-process ones; a broken child fails the
    stage with the child's status."""
    import subprocess

    from rlvr.data.prompts import build_messages
    from rlvr.generate import SamplingParams
    from rlvr.train.local.dpo import DPOMining
    from rlvr.train.local.dpo_mine import JOB_FILE, generate_texts, run_child

    prompts = [build_messages(p) for p in _split("train")[:3]]
    sp = SamplingParams(temperature=0.0, max_new_tokens=6, seed=0)
    here = generate_texts(base, prompts, 2, sp, DPOMining())
    child = run_child(base, prompts, 2, sp, DPOMining(process="child"), tmp_path)
    assert child == here and len(child) == 3 and all(len(t) == 2 for t in child)
    assert (tmp_path / JOB_FILE).is_file()
    with pytest.raises(subprocess.CalledProcessError):
        run_child(tmp_path / "no-such-model", prompts, 2, sp, DPOMining(process="child"), tmp_path)
