"""Launch verl (GRPO or SFT) from the grpo/sft stages: overrides → command → run → curves → merged HF model.

Ray (GRPO): ``verl.trainer.main_ppo`` calls ``ray.init()`` itself when Ray is not initialised; ``ray.init`` joins the
cluster named by ``RAY_ADDRESS`` (Ray's own variable) and otherwise starts a local one on this node. So:

* single node: nothing to do (or ``start_head=True`` runs ``ray start --head`` first and ``ray stop`` after, for a
  dashboard that outlives the driver);
* existing cluster: ``ray_address="<host>:6379"`` (or ``RAY_ADDRESS`` in the environment); every node needs the same
  venv with rlvr installed, since the reward function is imported as ``pkg://rlvr.reward.verl`` in Ray workers.

Either way the driver's where/how settings (:func:`rlvr.train.verl.environ.propagated_env`) reach every worker
through the job's Ray ``runtime_env`` (a cluster started elsewhere has its own environment;
:mod:`rlvr.train.verl.environ`), and :mod:`rlvr.train.verl.preflight` checks the judge before verl starts.

Every attempt logs to its own file (``<run_dir>/logs/attempt-<k>.jsonl`` through ``VERL_FILE_LOGGER_PATH``; verl's
file logger truncates on open) and :mod:`rlvr.train.verl.logs` merges them, so a resumed run keeps earlier curves.
Checkpoints live in ``<run_dir>/checkpoints`` (outside DVC outputs); verl resumes from them (``resume_mode=auto``).
Before each launch :func:`pre_launch` prunes checkpoints below the newest ``verl.max_ckpt_to_keep`` and checks the
free space the run needs (:mod:`rlvr.train.verl.checkpoints`); after the publish the optimizer state is dropped and
the run marked finished, so a re-run of a finished run merges its kept checkpoint without starting verl
(:mod:`rlvr.train.verl.resume`).
The command and its runner are :mod:`rlvr.train.verl.commands`'s: the runner is injectable (tests pass a fake;
nothing here needs a GPU until it runs); the default, :func:`~rlvr.train.verl.commands.run_teed`, turns a run the
judge step guard stopped into :class:`rlvr.reward.step_guard.JudgeDied` with the guard's own message.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rlvr.io import atomic_dir, atomic_write_json, atomic_write_text
from rlvr.train.verl import logs as vlogs
from rlvr.train.verl.checkpoints import drop_optimizer
from rlvr.train.verl.commands import Runner, grpo_command, launch, run_teed, sft_command, write_overrides
from rlvr.train.verl.environ import NOSET_CUDA_VISIBLE_DEVICES, propagated_env, ray_env, worker_env
from rlvr.train.verl.mapping import (
    check_grpo_batch,
    check_sft_batch,
    resolve_dynamic_bsz,
    save_freq_for,
    steps_for,
)
from rlvr.train.verl.merge import merge
from rlvr.train.verl.overrides import (
    VerlParams,
    VerlProfile,
    grpo_overrides,
    load_profile,
    resolve_attention,
    sft_overrides,
)
from rlvr.train.verl.preflight import cluster_preflight, judge_preflight, preflight
from rlvr.train.verl.record import portable_overrides, portable_path
from rlvr.train.verl.resume import GRPO_LOAD_CONTENTS, SFT_LOAD_CONTENTS, mark_finished, pre_launch, sft_steps
from rlvr.train.verl.validation import final_dev

__all__ = [
    "attention_record",
    "cluster_preflight",
    "judge_preflight",
    "log_attention",
    "next_attempt_log",
    "pre_launch",
    "preflight",
    "run_grpo_verl",
    "run_sft_verl",
]


def attention_record(profile: VerlProfile) -> dict[str, Any]:
    """``{attn_implementation, use_remove_padding, use_dynamic_bsz}`` a verl launch of ``profile`` uses on this
    machine (:func:`rlvr.train.verl.mapping.resolve_attention`, :func:`~rlvr.train.verl.mapping.resolve_dynamic_bsz`),
    recorded in the stage's metrics."""
    attn, rmpad = resolve_attention(profile)
    return {"attn_implementation": attn, "use_remove_padding": rmpad,
            "use_dynamic_bsz": resolve_dynamic_bsz(profile, rmpad)}


def log_attention(profile: VerlProfile) -> None:
    """Print the attention backend and micro batching a verl launch will use (:func:`attention_record`) to stderr,
    for the stage's log."""
    r = attention_record(profile)
    print(f"verl attention: {r['attn_implementation']} (use_remove_padding={r['use_remove_padding']}, "
          f"use_dynamic_bsz={r['use_dynamic_bsz']})", file=sys.stderr)


def next_attempt_log(run_dir: str | Path) -> tuple[Path, list[Path]]:
    """``(new log path, earlier attempts' logs in order)`` under ``<run_dir>/logs/attempt-<k>.jsonl``."""
    d = Path(run_dir) / "logs"
    d.mkdir(parents=True, exist_ok=True)
    old = sorted(d.glob("attempt-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
    k = int(old[-1].stem.split("-")[1]) + 1 if old else 1
    return d / f"attempt-{k}.jsonl", old


def run_grpo_verl(
    grpo: Any,
    verl: VerlParams,
    *,
    model_path: str | Path,
    train_files: str | Path,
    val_files: str | Path,
    reward_mode: str,
    out_model_dir: str | Path,
    curves_path: str | Path,
    run_dir: str | Path,
    experiment_name: str,
    reward_shaping: Mapping[str, Any] | None = None,
    profile: VerlProfile | None = None,
    ray_address: str | None = None,
    start_head: bool = False,
    python: str = sys.executable,
    runner: Runner = run_teed,
    check: Callable[..., Any] | None = preflight,
    judge: Any = None,
) -> dict[str, Any]:
    """GRPO on verl end to end; returns the metrics dict for ``metrics/grpo*.json``. ``judge``: the stage's
    :class:`rlvr.judge.preflight.JudgeParams` (the step guard's partial-failure bound, :func:`worker_env`).

    First ``check(env, ray_address)`` (default :func:`rlvr.train.verl.preflight.preflight`: the judge accepts a
    correct program here and, on an existing cluster, on every node; ``None`` skips it), so a stage whose workers
    cannot reach the judge fails before training. The driver's settings (:func:`propagated_env`: ``RLVR_*``,
    ``WANDB_*``, ``HF_*``) reach every Ray worker through the job's ``runtime_env`` (the ``ray_env`` of
    :func:`rlvr.train.verl.overrides.grpo_overrides`). Writes ``<run_dir>/verl_overrides.txt`` and
    ``verl_command.sh`` before launching, runs
    ``python -m verl.trainer.main_ppo <overrides>``, converts the logs to ``curves_path`` (:data:`logs.GRPO_COLUMNS`),
    merges the last checkpoint's actor into ``out_model_dir`` (atomically, with a record of the overrides beside
    the weights: :func:`portable_overrides`). ``model_path`` is the policy to start from (the sft/dpo output, or
    ``verl.model``).

    Metrics: ``engine``, ``reward_mode``, ``steps`` (last logged step), ``reward_first``/``reward_last`` (mean
    ``reward_mean`` over the first/last quarter of steps), ``accepted_rate_first``/``_last``, the partial judge
    failure (:func:`rlvr.train.verl.logs.judge_failures`: ``sandbox_error_share_max``/``_mean``,
    ``tool_sandbox_errors``), ``checkpoint``, and
    ``dev``: verl's validation of the trained policy on ``val_files``
    (:func:`rlvr.train.verl.validation.validation_scores`: ``accepted@1``, ``pass_ratio``, ``n``, ``step``,
    ``by_source``), the local engine's ``dev`` keys. verl validates every ``verl.test_freq`` steps and after the
    last step; ``dev`` is left out when its last validation is not at the
    last training step (``test_freq`` -1: verl only validated the input policy, before training).
    Raises ``ValueError`` when the validation logged is not what the reward returns
    (:func:`~rlvr.train.verl.validation.validation_scores`).
    Raises ``subprocess.CalledProcessError`` when a command fails (:class:`rlvr.reward.step_guard.JudgeDied` when the
    judge step guard stopped verl, :func:`run_teed`), ``FileNotFoundError`` when no checkpoint appears.
    Raises :class:`rlvr.config.ConfigError` before anything runs when ``grpo``'s batch or precision params disagree
    with verl's (:func:`rlvr.train.verl.mapping.check_grpo_batch`) or verl cannot express a value
    (:func:`rlvr.train.verl.overrides.grpo_overrides`).
    """
    run = Path(run_dir)
    profile = profile or load_profile(verl.profile)
    check_grpo_batch(grpo, verl, profile)
    ckpt_dir = run / "checkpoints"
    steps = steps_for(verl.total_training_steps, getattr(grpo, "max_steps", None), "grpo")
    done, extra = pre_launch(run, ckpt_dir, out_model_dir, model_path, verl, steps,
                             save_freq_for(verl.save_freq, steps), GRPO_LOAD_CONTENTS, profile.extra_overrides)
    log_path, old_logs = next_attempt_log(run)
    rollouts = run / "rollouts"
    overrides = grpo_overrides(
        grpo, verl, profile, train_files=Path(train_files).resolve(), val_files=Path(val_files).resolve(),
        model_path=model_path, reward_mode=reward_mode, ckpt_dir=ckpt_dir.resolve(),
        experiment_name=experiment_name, rollout_data_dir=rollouts.resolve(), reward_shaping=reward_shaping,
        judge_log_dir=(run / "judge").resolve(), ray_env=worker_env(log_path, profile, judge),
    )
    overrides += extra
    cmd = grpo_command(python)
    logs = old_logs
    if not done:
        write_overrides(run, cmd, overrides)
        log_attention(profile)
        env = {**ray_env(ray_address, profile.n_gpus_per_node * profile.nnodes),
               "VERL_FILE_LOGGER_PATH": str(log_path.resolve())}
        if check is not None:
            check(propagated_env(), ray_address)
        if start_head and not ray_address:
            runner(["ray", "start", "--head", "--disable-usage-stats"], env={**os.environ, **env}, check=True)
            env["RAY_ADDRESS"] = "auto"
        try:
            launch(cmd, overrides, env, runner=runner)
        finally:
            if start_head and not ray_address:
                runner(["ray", "stop"], env={**os.environ, **env}, check=False)
        logs = [*old_logs, log_path]
    rows = vlogs.step_rows(logs, run, reward_mode, train_files, val_files)
    vlogs.write_tsv(curves_path, rows, vlogs.GRPO_COLUMNS)
    dev = final_dev(vlogs.read_file_logs(logs), val_files, rows[-1]["step"] if rows else None)
    ckpt = _publish(ckpt_dir, out_model_dir, "actor", run, python, runner, target_steps=steps)
    return {
        "engine": "verl",
        "attention": attention_record(profile),
        "reward_mode": reward_mode,
        "steps": rows[-1]["step"] if rows else 0,
        "checkpoint": portable_path(ckpt, run),
        **{k.replace("reward_mean", "reward"): v for k, v in vlogs.summarise(rows, "reward_mean").items()},
        **vlogs.summarise(rows, "accepted_rate"),
        **vlogs.judge_failures(rows),
        **({"dev": dev} if dev is not None else {}),
    }


def run_sft_verl(
    sft: Any,
    verl: VerlParams,
    *,
    model_path: str | Path,
    train_files: str | Path,
    val_files: str | Path | None,
    out_model_dir: str | Path,
    curves_path: str | Path,
    run_dir: str | Path,
    experiment_name: str = "sft",
    profile: VerlProfile | None = None,
    rdzv_endpoint: str | None = None,
    python: str = sys.executable,
    runner: Runner = run_teed,
) -> dict[str, Any]:
    """SFT on verl end to end (``torchrun -m verl.trainer.sft_trainer``); returns the metrics dict.

    ``train_files``/``val_files``: the ``messages`` parquet (:func:`rlvr.train.verl.data.write_sft_parquet`).
    Curves: :data:`logs.SFT_COLUMNS`. Metrics: ``engine``, ``steps``, ``loss_first``/``loss_last``, ``val_loss``
    (last logged), ``checkpoint``. Raises like :func:`run_grpo_verl`; the batch and precision check is
    :func:`rlvr.train.verl.mapping.check_sft_batch`."""
    run = Path(run_dir)
    profile = profile or load_profile(verl.profile)
    check_sft_batch(sft, verl, profile)
    ckpt_dir = run / "checkpoints"
    steps = sft.max_steps if sft.max_steps and sft.max_steps > 0 else None
    hint = steps or sft_steps(train_files, verl.sft_train_batch_size, sft.epochs)
    done, extra = pre_launch(run, ckpt_dir, out_model_dir, model_path, verl, steps,
                             save_freq_for(verl.save_freq, hint), SFT_LOAD_CONTENTS, profile.extra_overrides)
    log_path, old_logs = next_attempt_log(run)
    overrides = sft_overrides(
        sft, verl, profile, train_files=Path(train_files).resolve(),
        val_files=None if val_files is None else Path(val_files).resolve(), model_path=model_path,
        ckpt_dir=ckpt_dir.resolve(), experiment_name=experiment_name, steps_hint=hint,
    ) + extra
    cmd = sft_command(profile, python=python, rdzv_endpoint=rdzv_endpoint)
    logs = old_logs
    if not done:
        write_overrides(run, cmd, overrides)
        log_attention(profile)
        env = {"WANDB_MODE": os.environ.get("WANDB_MODE", "offline"),
               "VERL_FILE_LOGGER_PATH": str(log_path.resolve())}
        launch(cmd, overrides, env, runner=runner, unset=(NOSET_CUDA_VISIBLE_DEVICES,))
        logs = [*old_logs, log_path]
    rows = vlogs.sft_rows(vlogs.read_file_logs(logs))
    vlogs.write_tsv(curves_path, rows, vlogs.SFT_COLUMNS)
    ckpt = _publish(ckpt_dir, out_model_dir, None, run, python, runner, target_steps=steps)
    val = [r["val_loss"] for r in rows if r.get("val_loss") is not None]
    return {
        "engine": "verl",
        "attention": attention_record(profile),
        "steps": rows[-1]["step"] if rows else 0,
        "val_loss": val[-1] if val else None,
        "checkpoint": portable_path(ckpt, run),
        **vlogs.summarise(rows, "loss"),
    }


def _publish(
    ckpt_dir: Path, out_model_dir: str | Path, role: str | None, run: Path, python: str, runner: Runner,
    target_steps: int | None = None,
) -> str:
    """Merge the last checkpoint into ``out_model_dir`` atomically, with a record of the run beside the weights:
    ``verl_overrides.txt`` (:func:`portable_overrides` of the run's) and ``verl_merge.json`` (the checkpoint merged,
    as ``<run>/…``). The exact, machine-specific ``verl_command.sh`` and ``verl_overrides.txt`` stay in the run folder.
    Once published, the run keeps only its newest checkpoint's model (the optimizer state and older checkpoints are
    deleted: :func:`rlvr.train.verl.checkpoints.drop_optimizer`) and is marked finished for ``target_steps``
    (:func:`rlvr.train.verl.resume.mark_finished`). Returns the checkpoint's absolute path."""
    with atomic_dir(out_model_dir) as tmp:
        cmd = merge(ckpt_dir, tmp, role=role, python=python, runner=runner)
        overrides = (run / "verl_overrides.txt").read_text(encoding="utf-8").splitlines()
        atomic_write_text(tmp / "verl_overrides.txt", "\n".join(portable_overrides(overrides, run)) + "\n")
        local_dir = cmd[cmd.index("--local_dir") + 1]
        atomic_write_json(tmp / "verl_merge.json", {"checkpoint": portable_path(local_dir, run),
                                                    "merger": "verl.model_merger fsdp"})
    freed = drop_optimizer(ckpt_dir)
    if freed:
        print(f"verl: published; dropped {freed / 1e9:.1f} GB of optimizer state and older checkpoints from {ckpt_dir}",
              file=sys.stderr)
    mark_finished(run, ckpt_dir, target_steps)
    return local_dir

