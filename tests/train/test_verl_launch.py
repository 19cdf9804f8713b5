"""The verl launcher with a fake runner: the argv/env it builds, Ray address handling, the curves it writes from
verl-format logs (written by verl's own FileLogger), resume across attempts, and the model_merger command (parsed by
verl's own argument parser)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.layout import COST_KEY, read_curves
from rlvr.train.local.grpo import GRPOParams
from rlvr.train.local.sft import SFTParams
from rlvr.train.verl import logs as vlogs
from rlvr.train.verl import validation as vvalid
from rlvr.train.verl.commands import launch, run_teed
from rlvr.train.verl.launch import run_grpo_verl, run_sft_verl
from rlvr.train.verl.merge import latest_checkpoint, merge_command
from rlvr.train.verl.overrides import VerlParams

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "qwen7b_8xh100.yaml"
# batch fields agreeing with PROFILE's hardware and VerlParams()'s batches (rlvr.train.verl.mapping): GRPO 2 x 16 x 8
# GPUs = 32 prompts x 8 rollouts, SFT 1 x 8 x 8 = 64
GRPO_8X = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 16, "bf16": True}
SFT_8X = {"per_device_train_batch_size": 1, "gradient_accumulation_steps": 8, "bf16": True}


def _file_log(path: str, steps: dict[int, dict]) -> None:
    """Write steps in verl's file-logger format, with verl's own FileLogger when installed."""
    try:
        import os

        from verl.utils.tracking import FileLogger

        os.environ["VERL_FILE_LOGGER_PATH"] = path
        try:
            fl = FileLogger("rlvr", "x")
        finally:
            del os.environ["VERL_FILE_LOGGER_PATH"]
        for s, d in steps.items():
            fl.log(d, s)
        fl.finish()
    except ImportError:
        Path(path).write_text("".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in steps.items()))


class FakeRunner:
    """Records every call; plays verl: logs steps, dumps rollouts, saves a checkpoint; plays the merger."""

    def __init__(self, steps: dict[int, dict], dumps: dict[int, list[dict]] | None = None, ckpt_step: int = 2,
                 role: str | None = "actor", fail: bool = False) -> None:
        self.calls: list[tuple[list[str], dict]] = []
        self.steps, self.dumps, self.ckpt_step, self.role, self.fail = steps, dumps or {}, ckpt_step, role, fail

    def __call__(self, argv, env=None, cwd=None, check=False):
        self.calls.append((list(argv), dict(env or {})))
        if "verl.trainer.main_ppo" in argv or "verl.trainer.sft_trainer" in argv:
            _file_log(env["VERL_FILE_LOGGER_PATH"], self.steps)
            ov = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("--"))
            if ov.get("trainer.rollout_data_dir", "null") != "null":
                d = Path(ov["trainer.rollout_data_dir"])
                d.mkdir(parents=True, exist_ok=True)
                for step, recs in self.dumps.items():
                    (d / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
            ck = Path(ov["trainer.default_local_dir"])
            g = ck / f"global_step_{self.ckpt_step}"
            shard = g / self.role if self.role else g
            shard.mkdir(parents=True, exist_ok=True)
            for kind in ("model", "optim", "extra_state"):  # verl's FSDP checkpoint files (one rank)
                (shard / f"{kind}_world_size_1_rank_0.pt").write_bytes(b"x" * 8)
            (ck / "latest_checkpointed_iteration.txt").write_text(str(self.ckpt_step))
            if self.fail:
                raise subprocess.CalledProcessError(1, list(argv))
        elif "verl.model_merger" in argv:
            target = Path(argv[argv.index("--target_dir") + 1])
            (target / "config.json").write_text("{}")
        return 0


STEPS = {
    1: {"critic/score/mean": 0.25, "actor/kl_loss": 0.001, "actor/entropy": 1.5, "response_length/mean": 300.0,
        "actor/pg_clipfrac": 0.01, "timing_s/step": 40.0},
    2: {"critic/score/mean": 0.75, "actor/kl_loss": 0.002, "actor/entropy": 1.2, "response_length/mean": 280.0,
        "actor/pg_clipfrac": 0.02, "timing_s/reward": 3.5, "num_turns/mean": 3.5},
}
DUMPS = {  # two groups (prompt uids a, b) of two sessions each
    1: [{"uid": "a_0_0", "score": 0.0}, {"uid": "a_1_0", "score": 0.0}, {"uid": "b_0_0", "score": 1.0},
        {"uid": "b_1_0", "score": 0.0}],
    2: [{"uid": "a_0_0", "score": 1.0}, {"uid": "a_1_0", "score": 1.0}, {"uid": "b_0_0", "score": 1.0},
        {"uid": "b_1_0", "score": 0.0}],
}


def test_launch_passes_argv_env_and_check():
    fake = FakeRunner({})
    launch(["python", "-m", "x"], ["a=1", "b=2"], {"RAY_ADDRESS": "10.0.0.1:6379"}, runner=fake)
    argv, env = fake.calls[0]
    assert argv == ["python", "-m", "x", "a=1", "b=2"] and env["RAY_ADDRESS"] == "10.0.0.1:6379"
    assert "PATH" in env  # laid over os.environ


def _run_grpo(tmp_path, fake, grpo=None, **kw):
    kw.setdefault("check", lambda env, address: None)
    kw.setdefault("model_path", "models/sft")
    return run_grpo_verl(
        grpo or GRPOParams(seed=1, beta=0.01, **GRPO_8X), VerlParams(profile=str(PROFILE)),
        train_files=tmp_path / "train.parquet", val_files=tmp_path / "val.parquet", reward_mode="sparse",
        out_model_dir=tmp_path / "models" / "grpo", curves_path=tmp_path / "metrics" / "grpo.tsv",
        run_dir=tmp_path / "run", experiment_name="grpo-seed1", python="py", runner=fake, **kw,
    )


def test_run_grpo_verl_end_to_end_with_fake_runner(tmp_path, monkeypatch):
    fake = FakeRunner(STEPS, DUMPS)
    checked = []
    monkeypatch.setenv("RLVR_SANDBOX_URL", "http://judge:8080")
    m = _run_grpo(tmp_path, fake, ray_address="10.0.0.1:6379",
                  check=lambda env, address: checked.append((dict(env), address, len(fake.calls))))
    assert checked and checked[0][1] == "10.0.0.1:6379" and checked[0][2] == 0  # the preflight ran before verl
    assert checked[0][0]["RLVR_SANDBOX_URL"] == "http://judge:8080"
    (argv, env), (margv, _) = fake.calls
    assert any(a.startswith("+ray_kwargs.ray_init.runtime_env.env_vars={") and "RLVR_SANDBOX_URL:'http://judge:8080'"
               in a for a in argv)
    assert argv[:3] == ["py", "-m", "verl.trainer.main_ppo"]
    assert "algorithm.adv_estimator=rlvr_grpo" in argv and "actor_rollout_ref.rollout.n=8" in argv
    assert "reward.custom_reward_function.path=pkg://rlvr.reward.verl" in argv
    assert env["RAY_ADDRESS"] == "10.0.0.1:6379" and env["WANDB_MODE"]
    assert env["VERL_FILE_LOGGER_PATH"].endswith("run/logs/attempt-1.jsonl")
    ckpt = tmp_path / "run" / "checkpoints" / "global_step_2" / "actor"
    assert margv[:6] == ["py", "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
    assert margv[margv.index("--local_dir") + 1] == str(ckpt.resolve())
    out = tmp_path / "models" / "grpo"
    assert (out / "config.json").is_file()
    assert (tmp_path / "run" / "verl_overrides.txt").read_text().splitlines() == argv[3:]  # exact, in the run folder
    assert (tmp_path / "run" / "verl_command.sh").is_file() and not (out / "verl_command.sh").exists()
    # beside the weights (a DVC output): the same lines without this machine's paths, environment or attempt
    record = (out / "verl_overrides.txt").read_text()
    assert len(record.splitlines()) == len(argv[3:]) and "algorithm.adv_estimator=rlvr_grpo" in record
    assert str(tmp_path / "run") not in record and "attempt-" not in record and "http://judge" not in record
    assert "trainer.default_local_dir=<run>/checkpoints" in record
    assert "+ray_kwargs.ray_init.runtime_env.env_vars=<this machine's where/how settings" in record
    assert m["checkpoint"] == "<run>/checkpoints/global_step_2/actor"  # the metrics hold no path of this machine
    merged = json.loads((out / "verl_merge.json").read_text())
    assert merged["checkpoint"] == "<run>/checkpoints/global_step_2/actor"
    lines = (tmp_path / "metrics" / "grpo.tsv").read_text().splitlines()
    # seconds, throughput, MFU, memory: the cost mirror, not the plot
    costed = [c for c in vlogs.GRPO_COLUMNS if COST_KEY.search(c)]
    plotted = [c for c in vlogs.GRPO_COLUMNS if c not in costed]
    assert "judge_s" in costed and "step_s" in costed and "mfu_actor" in costed and "reward_mean" in plotted
    assert lines[0].split("\t") == ["step", *plotted]
    cost_lines = (tmp_path / "metrics" / "cost" / "grpo.tsv").read_text().splitlines()
    assert cost_lines[0].split("\t") == ["step", *costed]
    cost_rows = [dict(zip(costed, ln.split("\t")[1:], strict=True)) for ln in cost_lines[1:]]
    assert [r["judge_s"] for r in cost_rows] == ["", "3.5"] and [r["judge_wall_s"] for r in cost_rows] == ["", "3.5"]
    header, rows = read_curves(tmp_path / "metrics" / "grpo.tsv")
    assert header == ["step", *plotted, *costed]
    assert [r["step"] for r in rows] == ["1", "2"]
    assert rows[0]["reward_mean"] == "0.25" and rows[0]["zero_std_frac"] == "0.5" and rows[0]["accepted_rate"] == "0.25"
    assert rows[1]["zero_std_frac"] == "0.5" and rows[1]["reward_std"] == "0.433013"
    assert rows[0]["judge_s"] == "" and rows[1]["judge_s"] == "3.5" and rows[0]["pass_ratio"] == ""  # sparse
    assert rows[0]["num_turns"] == "" and rows[1]["num_turns"] == "3.5"
    assert m["engine"] == "verl" and m["steps"] == 2 and m["reward_first"] == 0.25 and m["reward_last"] == 0.75


def test_grpo_start_head_and_resume_keeps_earlier_curves(tmp_path):
    with pytest.raises(subprocess.CalledProcessError):  # the first attempt dies after its step-1 checkpoint
        _run_grpo(tmp_path, FakeRunner({1: STEPS[1]}, ckpt_step=1, fail=True))
    fake = FakeRunner({2: STEPS[2]}, ckpt_step=2)  # second attempt logs only what it ran (verl truncates)
    _run_grpo(tmp_path, fake, start_head=True)
    cmds = [c[0] for c in fake.calls]
    assert cmds[0] == ["ray", "start", "--head", "--disable-usage-stats"] and cmds[2] == ["ray", "stop"]
    assert fake.calls[1][1]["RAY_ADDRESS"] == "auto"
    assert fake.calls[1][1]["VERL_FILE_LOGGER_PATH"].endswith("attempt-2.jsonl")
    rows = (tmp_path / "metrics" / "grpo.tsv").read_text().splitlines()[1:]
    assert [r.split("\t")[0] for r in rows] == ["1", "2"]


def test_run_sft_verl_with_fake_runner(tmp_path):
    steps = {1: {"train/loss": 2.0, "train/lr": 1e-5, "train/grad_norm": 3.0, "train/global_tokens": 1000},
             2: {"train/loss": 1.0, "train/lr": 1e-5}, 3: {"val/loss": 1.1}}
    fake = FakeRunner(steps, role=None)
    m = run_sft_verl(SFTParams(epochs=1, **SFT_8X), VerlParams(profile=str(PROFILE)), model_path="Qwen/Q",
                     train_files=tmp_path / "sft.parquet", val_files=None, out_model_dir=tmp_path / "models" / "sft",
                     curves_path=tmp_path / "sft.tsv", run_dir=tmp_path / "run", python="py", runner=fake)
    (argv, _), (margv, _) = fake.calls
    assert argv[:3] == ["py", "-m", "torch.distributed.run"] and "verl.trainer.sft_trainer" in argv
    assert "model.path=Qwen/Q" in argv and "data.val_files=null" in argv
    assert margv[margv.index("--local_dir") + 1].endswith("checkpoints/global_step_2")
    assert m["loss_first"] == 2.0 and m["loss_last"] == 1.0 and m["val_loss"] == 1.1 and m["steps"] == 3


def test_merge_command_parses_with_verls_cli(tmp_path, monkeypatch):
    pytest.importorskip("verl")
    from verl.model_merger.base_model_merger import generate_config_from_args, parse_args

    cmd = merge_command(tmp_path / "ck" / "global_step_3" / "actor", tmp_path / "hf", python="py")
    monkeypatch.setattr(sys, "argv", ["verl.model_merger", *cmd[3:]])
    cfg = generate_config_from_args(parse_args())
    assert cfg.operation == "merge" and cfg.backend == "fsdp"
    assert cfg.local_dir == str(tmp_path / "ck" / "global_step_3" / "actor") and cfg.target_dir == str(tmp_path / "hf")
    assert cfg.hf_model_config_path == str(tmp_path / "ck" / "global_step_3" / "actor" / "huggingface")


def test_latest_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="global_step"):
        latest_checkpoint(tmp_path)
    for n in (5, 10, 9):
        (tmp_path / f"global_step_{n}").mkdir()
    assert latest_checkpoint(tmp_path).name == "global_step_10"
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("9\n")
    assert latest_checkpoint(tmp_path).name == "global_step_9"


def test_read_file_logs_merges_lines_and_reports_bad_lines(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"step": 0, "data": {"val-core/x/acc/mean@1": 0.1}}\n{"step": 1, "data": {"a": 1}}\n'
                 '{"step": 1, "data": {"b": 2}}\n{"step": 2, "da')  # torn last line of a killed run
    assert vlogs.read_file_logs([p, tmp_path / "missing.jsonl"]) == {0: {"val-core/x/acc/mean@1": 0.1},
                                                                    1: {"a": 1, "b": 2}}
    q = tmp_path / "b.jsonl"
    q.write_text('{"step": "x", "data": {}}\n{"step": 1, "data": {}}\n')
    with pytest.raises(ValueError, match=r"b\.jsonl:1"):
        vlogs.read_file_logs([q])
    rows = vlogs.grpo_rows({0: {"val-core/x/acc/mean@1": 0.1}, 1: {"critic/score/mean": 0.5}}, reward_mode="dense")
    assert [r["step"] for r in rows] == [1] and rows[0]["pass_ratio"] == 0.5 and rows[0]["kl"] is None


def test_step_split_throughput_mfu_memory_and_judge_wall_go_to_the_cost_mirror(tmp_path):
    """verl's per-step timings, throughput, MFU and allocator peaks (the 7B step figures of bench/gpu) and the judge's
    wall seconds land in the curves' cost mirror, never in the plot."""
    logged = {1: {"critic/score/mean": 0.25, "timing_s/step": 155.8, "timing_s/gen": 72.3, "timing_s/ref": 16.2,
                  "timing_s/old_log_prob": 4.6, "timing_s/update_actor": 29.8, "timing_s/update_weights": 2.7,
                  "perf/throughput": 178.9, "perf/mfu/actor": 0.1025, "actor/perf/max_memory_allocated_gb": 37.6,
                  "actor/perf/max_memory_reserved_gb": 60.9}}
    judge = {1: {"judge_s": 40.0, "judge_wall_s": 6.5, "judged": 64, "tool_parse_failures": 0}}
    rows = vlogs.grpo_rows(logged, reward_mode="sparse", judge=judge)
    plot = vlogs.write_tsv(tmp_path / "metrics" / "grpo" / "seed-1.tsv", rows, vlogs.GRPO_COLUMNS)
    cost = tmp_path / "metrics" / "cost" / "grpo" / "seed-1.tsv"
    plot_cols = plot.read_text().splitlines()[0].split("\t")
    head, vals = (line.split("\t") for line in cost.read_text().splitlines())
    got = dict(zip(head, vals, strict=True))
    assert {k: got[k] for k in ("step_s", "gen_s", "ref_s", "old_log_prob_s", "update_actor_s", "update_weights_s",
                                "tokens_per_gpu_per_s", "mfu_actor", "max_memory_allocated_gb",
                                "max_memory_reserved_gb", "judge_s", "judge_wall_s")} == {
        "step_s": "155.8", "gen_s": "72.3", "ref_s": "16.2", "old_log_prob_s": "4.6", "update_actor_s": "29.8",
        "update_weights_s": "2.7", "tokens_per_gpu_per_s": "178.9", "mfu_actor": "0.1025",
        "max_memory_allocated_gb": "37.6", "max_memory_reserved_gb": "60.9", "judge_s": "40", "judge_wall_s": "6.5"}
    assert not {"step_s", "mfu_actor", "judge_wall_s", "max_memory_allocated_gb"} & set(plot_cols)
    assert "reward_mean" in plot_cols and "judged" in plot_cols


def test_sft_launch_drops_the_ray_noset_variable_and_grpo_sets_it_on_several_gpus(monkeypatch):
    """torchrun ranks have no Ray accelerator ids: verl SFT died with IndexError on the lent 2 x H100 when the
    variable leaked into its environment; verl GRPO on 2 GPUs needs it (NCCL 'Duplicate GPU detected')."""
    from rlvr.train.verl.environ import NOSET_CUDA_VISIBLE_DEVICES, ray_env

    monkeypatch.setenv(NOSET_CUDA_VISIBLE_DEVICES, "1")
    seen = {}
    launch(["x"], [], {"A": "1"}, runner=lambda argv, env, cwd, check: seen.update(env),
           unset=(NOSET_CUDA_VISIBLE_DEVICES,))
    assert NOSET_CUDA_VISIBLE_DEVICES not in seen and seen["A"] == "1"
    assert NOSET_CUDA_VISIBLE_DEVICES not in ray_env(n_gpus=1)
    assert ray_env(n_gpus=2)[NOSET_CUDA_VISIBLE_DEVICES] == "1"


def test_worker_env_carries_the_logger_path_and_the_gpu_setting(tmp_path, monkeypatch):
    """An existing Ray cluster gets only runtime_env: the file logger's path and the several-GPU setting go there."""
    from rlvr.train.verl.environ import NOSET_CUDA_VISIBLE_DEVICES, worker_env
    from rlvr.train.verl.params import VerlProfile

    monkeypatch.setenv("RLVR_SANDBOX_URL", "http://judge:8080")
    env = worker_env(tmp_path / "logs" / "a.jsonl", VerlProfile(model="m", n_gpus_per_node=2))
    assert env["VERL_FILE_LOGGER_PATH"] == str((tmp_path / "logs" / "a.jsonl").resolve())
    assert env[NOSET_CUDA_VISIBLE_DEVICES] == "1" and env["RLVR_SANDBOX_URL"] == "http://judge:8080"
    assert NOSET_CUDA_VISIBLE_DEVICES not in worker_env(tmp_path / "b.jsonl", VerlProfile(model="m", n_gpus_per_node=1))


GUARD_MSG = ("verl step 4: all 64 samples sent to the judge (embedded sandboxes) came back sandbox_error, as did "
             "all 64 of step 3: no answer from the judge for 2 consecutive steps")
# what Ray prints on the driver when the estimator raised in verl's TaskRunner actor (shape of a real RayTaskError)
RAY_TRACEBACK = f"""Traceback (most recent call last):
  File "verl/trainer/main_ppo.py", line 42, in main
ray.exceptions.RayTaskError(JudgeDied): ray::TaskRunner.run() (pid=4242, ip=10.0.0.1)
  File "rlvr/train/verl/advantage.py", line 120, in compute_rlvr_grpo
rlvr.reward.step_guard.JudgeDied: {GUARD_MSG}
"""


def _fake_trainer(tmp_path, stderr: str, status: int) -> str:
    """An executable standing in for ``python -m verl.trainer.main_ppo``: prints ``stderr`` there and exits."""
    (tmp_path / "err.txt").write_text(stderr)
    exe = tmp_path / "fake_python"
    exe.write_text(f"#!/bin/sh\necho trainer-stdout\ncat {tmp_path / 'err.txt'} >&2\nexit {status}\n")
    exe.chmod(0o755)
    return str(exe)


def test_a_run_the_judge_guard_stopped_ends_on_the_guards_message(tmp_path, capfd):
    """Through the default runner, a verl run stopped by the step guard raises JudgeDied with the guard's line (the
    stage prints it as its one-line error), not the trainer's exit status; verl's stderr still reaches ours."""
    from rlvr.reward.step_guard import JudgeDied
    from rlvr.stage import one_line_error

    with pytest.raises(JudgeDied) as ei:
        run_grpo_verl(
            GRPOParams(seed=1, **GRPO_8X), VerlParams(profile=str(PROFILE)), model_path="models/sft",
            train_files=tmp_path / "train.parquet", val_files=tmp_path / "val.parquet", reward_mode="sparse",
            out_model_dir=tmp_path / "m", curves_path=tmp_path / "c.tsv", run_dir=tmp_path / "run",
            experiment_name="grpo-seed1", python=_fake_trainer(tmp_path, RAY_TRACEBACK, 1), check=None)
    assert str(ei.value) == GUARD_MSG and one_line_error(ei.value) == GUARD_MSG
    assert isinstance(ei.value.__cause__, subprocess.CalledProcessError) and ei.value.__cause__.returncode == 1
    out, err = capfd.readouterr()
    assert "trainer-stdout" in out and "ray.exceptions.RayTaskError(JudgeDied)" in err


def test_run_teed_other_failures_and_successes(tmp_path, capfd):
    from rlvr.reward.step_guard import JudgeDied

    with pytest.raises(subprocess.CalledProcessError) as ei:  # another failure: the exit status, as before
        run_teed([_fake_trainer(tmp_path, "CUDA out of memory\n", 3)], check=True)
    assert ei.value.returncode == 3 and "CUDA out of memory" in capfd.readouterr().err
    # a guard line in a run that exited 0, or without check, raises nothing
    assert run_teed([_fake_trainer(tmp_path, RAY_TRACEBACK, 0)], check=True).returncode == 0
    assert run_teed([_fake_trainer(tmp_path, RAY_TRACEBACK, 1)]).returncode == 1
    # 300 kB of a progress bar redrawn with \r (no newline), then the guard's line without a final newline
    bar = "".join(f"rollout {i % 100:3d}%|####|\r" for i in range(15000))
    with pytest.raises(JudgeDied, match=r"^verl step 4: all 64 samples"):
        run_teed([_fake_trainer(tmp_path, bar + "\n" + RAY_TRACEBACK.rstrip("\n"), 1)], check=True)
    assert capfd.readouterr().err.count("rollout") == 15000  # all of it copied through


def test_the_verl_entry_points_launch_through_run_teed():
    import inspect

    from rlvr.repair import verl_run

    for fn in (launch, run_grpo_verl, run_sft_verl):
        assert inspect.signature(fn).parameters["runner"].default is run_teed
    assert "runner or commands.run_teed" in inspect.getsource(verl_run.run_repair_verl)


def test_portable_overrides_follow_the_inputs_not_the_machine(tmp_path):
    """Two machines with another repository path, cache folder, judge URL, settings and attempt write the same record;
    only whole paths are replaced (a sibling folder sharing the repository's prefix is kept; a root of / is not one)."""
    from rlvr.train.verl.mapping import ray_env_override
    from rlvr.train.verl.record import portable_overrides

    def record(root, run, env, attempt):
        return portable_overrides([
            f"data.train_files={root}/data/manifests/verl/train.parquet",
            f"trainer.default_local_dir={run}/checkpoints",
            f"trainer.rollout_data_dir='{run}'",
            ray_env_override({**env, "VERL_FILE_LOGGER_PATH": f"{run}/logs/attempt-{attempt}.jsonl"}),
            "actor_rollout_ref.rollout.n=8",
        ], run, root)

    a = record(tmp_path / "a" / "repo", tmp_path / "a" / "cache" / "run", {"RLVR_SANDBOX_URL": "http://j1:8080"}, 1)
    b = record(tmp_path / "b" / "rlvr", tmp_path / "b" / "c" / "run", {"RLVR_SANDBOX_WORKERS": "8"}, 3)
    assert a == b == [
        "data.train_files=./data/manifests/verl/train.parquet",
        "trainer.default_local_dir=<run>/checkpoints",
        "trainer.rollout_data_dir='<run>'",
        "+ray_kwargs.ray_init.runtime_env.env_vars=<this machine's where/how settings: see <run>/verl_overrides.txt>",
        "actor_rollout_ref.rollout.n=8",
    ]
    repo = tmp_path / "repo"
    assert portable_overrides([f"actor_rollout_ref.model.path={repo}-models/m", f"x={repo}/m"], tmp_path / "r", repo) \
        == [f"actor_rollout_ref.model.path={repo}-models/m", "x=./m"]
    assert portable_overrides(["x=/data/m"], tmp_path / "r", "/") == ["x=/data/m"]


def test_run_teed_stops_the_trainer_when_interrupted(tmp_path, monkeypatch):
    """Ctrl-C (or any error) while verl's output is being copied kills verl, as subprocess.run does."""
    import os

    exe = tmp_path / "slow"
    exe.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\necho started >&2\nexec sleep 30\n")
    exe.chmod(0o755)

    class Interrupting:
        def write(self, _text):
            raise KeyboardInterrupt

    monkeypatch.setattr(sys, "stderr", Interrupting())
    with pytest.raises(KeyboardInterrupt):
        run_teed([str(exe)], check=True)
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)


# verl 0.9.1's validation lines (RayPPOTrainer._val_metrics_update over process_validation_metrics) with the default
# val_kwargs.n = 1: our reward's numeric keys each get mean@1 (acc, the core variable, in val-core; the rest in
# val-aux), plus the turn counts; a validation line carries no critic/score/mean of its own.
def _val_line(source_scores: dict[str, tuple[float, float]]) -> dict[str, float]:
    line: dict[str, float] = {}
    for source, (acc, pass_ratio) in source_scores.items():
        line |= {f"val-aux/{source}/reward/mean@1": acc, f"val-aux/{source}/score/mean@1": acc,
                 f"val-core/{source}/acc/mean@1": acc, f"val-aux/{source}/pass_ratio/mean@1": pass_ratio,
                 f"val-aux/{source}/n_tests/mean@1": 3.0, f"val-aux/{source}/judge_s/mean@1": 0.2,
                 f"val-aux/{source}/acc_success_only/mean@1": acc}
    return line | {"val-aux/num_turns/min": 2, "val-aux/num_turns/max": 2, "val-aux/num_turns/mean": 2.0}


def _val_parquet(path: Path, rows: dict[str, int]) -> Path:
    """A validation parquet as the manifests stage writes it (rlvr.data.export.write_verl_parquet): ``rows[source]``
    problems of each source."""
    from rlvr.data.export import write_verl_parquet
    from rlvr.data.schema import Problem, StdioTest

    problems = [Problem(id=f"{s}/{i}", source=s, split="dev", statement="Print 1.", tests=[StdioTest(stdin="",
                                                                                                    stdout="1")])
                for s, n in rows.items() for i in range(n)]
    write_verl_parquet(problems, path)
    return path


VAL_STEPS = {  # validation before training (step 0), at test_freq (step 1) and after the last step (2)
    0: _val_line({"mbpp_reg": (0.1, 0.2), "humaneval": (0.0, 0.1)}),
    1: {**STEPS[1], **_val_line({"mbpp_reg": (0.3, 0.4), "humaneval": (0.2, 0.3)})},
    2: {**STEPS[2], **_val_line({"mbpp_reg": (0.5, 0.75), "humaneval": (0.25, 0.5)})},
}


def test_validation_scores_are_the_last_validation_weighted_by_rows(tmp_path):
    log = tmp_path / "attempt-1.jsonl"
    _file_log(str(log), {s: VAL_STEPS[s] for s in (0, 1)})
    log2 = tmp_path / "attempt-2.jsonl"
    _file_log(str(log2), {2: VAL_STEPS[2], 3: {"critic/score/mean": 0.5}})  # a later step that did not validate
    val = _val_parquet(tmp_path / "val.parquet", {"mbpp_reg": 3, "humaneval": 1})
    assert vvalid.val_row_counts(val) == {"humaneval": 1, "mbpp_reg": 3}
    dev = vvalid.validation_scores(vlogs.read_file_logs([log, log2]), val)
    assert dev == {"accepted@1": pytest.approx((3 * 0.5 + 0.25) / 4), "pass_ratio": pytest.approx((3 * 0.75 + 0.5) / 4),
                   "n": 4, "step": 2,
                   "by_source": {"humaneval": {"accepted@1": 0.25, "pass_ratio": 0.5, "n": 1},
                                 "mbpp_reg": {"accepted@1": 0.5, "pass_ratio": 0.75, "n": 3}}}
    assert vvalid.validation_scores(vlogs.read_file_logs([log]), val)["step"] == 1
    # never validated (test_freq -1, no validation before training): no scores, and no parquet needed
    assert vvalid.validation_scores({1: STEPS[1], 2: STEPS[2]}, tmp_path / "missing.parquet") is None


def test_validation_scores_refuse_what_they_cannot_map(tmp_path):
    val = _val_parquet(tmp_path / "val.parquet", {"mbpp_reg": 2})
    with pytest.raises(ValueError, match=r"'humaneval'.*does not hold"):
        vvalid.validation_scores({2: _val_line({"humaneval": (0.5, 0.5)})}, val)
    no_acc = {k: v for k, v in _val_line({"mbpp_reg": (0.5, 0.5)}).items() if "/acc/" not in k}
    with pytest.raises(ValueError, match="no acc/mean@<n>"):
        vvalid.validation_scores({2: no_acc}, val)
    with pytest.raises(ValueError, match="not a number"):
        vvalid.validation_scores({2: {**_val_line({"mbpp_reg": (0.5, 0.5)}), "val-core/mbpp_reg/acc/mean@1": None}},
                                 val)
    with pytest.raises(FileNotFoundError):
        vvalid.validation_scores({2: _val_line({"mbpp_reg": (0.5, 0.5)})}, tmp_path / "missing.parquet")


@pytest.mark.parametrize("n", [1, 4])
def test_validation_scores_read_what_verl_itself_logs(tmp_path, n):
    """The keys of verl's own ``_val_metrics_update`` (``val_kwargs.n`` responses per prompt: mean@n, and with n > 1
    std@n, best@k/worst@k bootstraps): accepted@1 is the mean of ``acc`` over every response, pass@1's estimate."""
    np = pytest.importorskip("numpy")
    ray_trainer = pytest.importorskip("verl.trainer.ppo.ray_trainer")
    sources = ["mbpp_reg"] * (2 * n) + ["humaneval"] * n
    uids = [f"u{i // n}" for i in range(3 * n)]
    acc = [(i % 3 == 0) for i in range(3 * n)]  # our reward's dict: acc is a bool, status a string (skipped by verl)
    pass_ratio = [0.5 + 0.5 * a for a in acc]
    infos = {"reward": [float(a) for a in acc], "score": [float(a) for a in acc], "acc": acc,
             "pass_ratio": pass_ratio, "status": ["accepted" if a else "wrong_answer" for a in acc]}
    logged = ray_trainer.RayPPOTrainer._val_metrics_update(None, np.array(sources, dtype=object), uids, infos, [])
    assert f"val-core/mbpp_reg/acc/mean@{n}" in logged and f"val-aux/mbpp_reg/pass_ratio/mean@{n}" in logged
    log = tmp_path / "v.jsonl"
    _file_log(str(log), {5: logged})  # through verl's FileLogger (numpy values, orjson)
    val = _val_parquet(tmp_path / "val.parquet", {"mbpp_reg": 2, "humaneval": 1})
    dev = vvalid.validation_scores(vlogs.read_file_logs([log]), val)
    assert dev is not None and dev["step"] == 5 and dev["n"] == 3
    assert dev["accepted@1"] == pytest.approx(sum(acc) / len(acc))
    assert dev["pass_ratio"] == pytest.approx(sum(pass_ratio) / len(pass_ratio))
    mbpp = acc[: 2 * n]
    assert dev["by_source"]["mbpp_reg"]["accepted@1"] == pytest.approx(sum(mbpp) / len(mbpp))


def test_run_grpo_verl_maps_verls_last_validation_to_dev(tmp_path):
    _val_parquet(tmp_path / "val.parquet", {"mbpp_reg": 3, "humaneval": 1})
    m = _run_grpo(tmp_path, FakeRunner(VAL_STEPS, DUMPS))
    assert m["steps"] == 2 and m["dev"]["step"] == 2
    assert m["dev"]["accepted@1"] == pytest.approx(0.4375) and m["dev"]["pass_ratio"] == pytest.approx(0.6875)
    from rlvr.layout import split_metrics

    scores, _, _ = split_metrics({"seed": 1, **m})  # what metrics/grpo/seed-<n>.json gets: the local engine's keys
    assert scores == {"dev": {"accepted@1": pytest.approx(0.4375), "pass_ratio": pytest.approx(0.6875)}}
    # the validation lines are not training steps in the curves
    assert [r["step"] for r in read_curves(tmp_path / "metrics" / "grpo.tsv")[1]] == ["1", "2"]


def test_run_grpo_verl_without_a_validation_of_the_trained_policy_has_no_dev(tmp_path, capfd):
    _val_parquet(tmp_path / "val.parquet", {"mbpp_reg": 3, "humaneval": 1})
    assert "dev" not in _run_grpo(tmp_path / "a", FakeRunner(STEPS, DUMPS))  # verl never validated
    # test_freq -1 with val_before_train: only the input policy's score (step 0), not the trained one's
    (tmp_path / "b").mkdir()
    _val_parquet(tmp_path / "b" / "val.parquet", {"mbpp_reg": 3, "humaneval": 1})
    m = _run_grpo(tmp_path / "b", FakeRunner({s: VAL_STEPS[s] if s == 0 else STEPS[s] for s in (0, 1, 2)}, DUMPS))
    assert "dev" not in m and m["steps"] == 2
    assert "last validation at step 0, not the last training step 2" in capfd.readouterr().err
