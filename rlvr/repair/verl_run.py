"""Repair training on verl: the run folder, the overrides and the launch of ``verl.trainer.main_ppo`` with the agent
loop running the repair protocol; the rows and configs it writes are :mod:`rlvr.repair.verl_tool`'s."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr.data.schema import Problem
from rlvr.repair.verl_tool import (
    episode_budget,
    repair_overrides,
    write_agent_loop_config,
    write_repair_parquet,
)

__all__ = ["run_repair_verl"]


def run_repair_verl(cfg: Any, params_path: str | Path, model_path: str, train: Sequence[Problem],
                    val: Sequence[Problem], out_model_dir: str | Path, curves_path: str | Path,
                    runner: Any = None, python: str = sys.executable,
                    check: Any = "default", reward_shaping: Any = None) -> dict[str, Any]:
    """Repair training on verl (engine ``verl``): GRPO through verl's agent loop running the repair protocol
    (:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`: judge feedback as user turns, the last program graded).

    ``cfg``: the ``repair`` section (:class:`rlvr.repair.eval.RepairParams`; ``cfg.train`` supplies the GRPO fields,
    ``cfg.env()`` the environment); the ``verl`` section is read from ``params_path``. In the run folder
    ``$RLVR_CACHE_DIR/train/repair/<key>``: ``data/{train,val}.parquet``
    (:func:`rlvr.repair.verl_tool.write_repair_parquet`), ``agent_loops.yaml``
    (:func:`~rlvr.repair.verl_tool.write_agent_loop_config`, with the environment settings and the judge pool of
    the ``verl`` section, and ``cfg.turn_tokens``: the agent loop caps every assistant turn at that many tokens),
    ``verl_overrides.txt`` / ``verl_command.sh`` (the GRPO
    overrides of :func:`rlvr.train.verl.overrides.grpo_overrides` with reward mode ``sparse`` = the final hidden
    verdict, plus :func:`rlvr.repair.verl_tool.repair_overrides`). The run folder's key is
    :func:`rlvr.train.verl.resume.trajectory_params` of the sections plus the training problems, and
    :func:`rlvr.train.verl.resume.pre_launch` runs first, as for GRPO (a finished run is published again without
    verl; pruning, the disk check, the resume contents). Then launches ``python -m verl.trainer.main_ppo``
    through ``runner`` (:func:`rlvr.train.verl.commands.launch`; ``None``: :func:`rlvr.train.verl.commands.run_teed`;
    tests pass a fake), writes the curves TSV and merges
    the last actor checkpoint into ``out_model_dir``. Before launching, ``check(env, None)`` (default
    :func:`rlvr.train.verl.preflight.preflight`; ``None`` skips it) fails the stage when the judge is unreachable;
    the driver's ``RLVR_*``/``WANDB_*``/``HF_*`` settings reach every Ray worker through the job's ``runtime_env``
    (:func:`rlvr.train.verl.environ.propagated_env`, :func:`rlvr.train.verl.environ.worker_env`). ``reward_shaping``:
    the ``reward_shaping`` section (dict) for the Ray reward workers, whose working directory is not the repository;
    its ``max_timeouts`` (the judge's timeout rule, :mod:`rlvr.reward.timeouts`) also reaches the agent loop's
    feedback judge and, when not the default 3, the run folder's key.
    Before launching, it prints the attention backend (:func:`rlvr.train.verl.launch.log_attention`) to stderr.
    Returns ``{engine, method, attention: {attn_implementation, use_remove_padding, use_dynamic_bsz}
    (:func:`rlvr.train.verl.launch.attention_record` of the profile, as for ``run_grpo_verl``), steps, checkpoint,
    reward_first, reward_last}``.
    Raises :class:`rlvr.config.ConfigError` first when ``repair.train``'s batch or precision params disagree with
    verl's (:func:`rlvr.train.verl.mapping.check_grpo_batch`).
    Raises ``subprocess.CalledProcessError`` when verl fails (:class:`rlvr.reward.step_guard.JudgeDied` when the judge
    step guard stopped it), ``FileNotFoundError`` when no checkpoint appears."""
    from rlvr.config import load_section
    from rlvr.judge.preflight import load_judge_params
    from rlvr.model import resolve_model_ref
    from rlvr.reward.timeouts import trajectory_key
    from rlvr.train.local.common import run_dir
    from rlvr.train.verl import commands
    from rlvr.train.verl import launch as vlaunch
    from rlvr.train.verl import logs as vlogs
    from rlvr.train.verl.commands import grpo_command, write_overrides
    from rlvr.train.verl.environ import propagated_env, ray_env, worker_env
    from rlvr.train.verl.mapping import check_grpo_batch, save_freq_for, steps_for
    from rlvr.train.verl.overrides import VerlParams, grpo_overrides, load_profile
    from rlvr.train.verl.record import portable_path
    from rlvr.train.verl.resume import GRPO_LOAD_CONTENTS, pre_launch, trajectory_params

    runner = runner or commands.run_teed
    vcfg = load_section("verl", VerlParams, params_path)
    hw = load_profile(vcfg.profile)
    check_grpo_batch(cfg.train, vcfg, hw, "repair.train")  # before any file is written
    if getattr(cfg, "turn_tokens", None):  # the episode budget from the per-turn one (RepairParams.turn_tokens)
        vcfg = vcfg.model_copy(update={"max_response_length": episode_budget(cfg.env(), cfg.turn_tokens)})
    env = cfg.env()
    max_timeouts = _max_timeouts(reward_shaping)
    # the resume key hashes what changes the trajectory (rlvr.train.verl.resume.trajectory_params, as GRPO's) and
    # the training problems, so another set or a rehearsal's never shares a run folder with this one; the judge's
    # timeout rule changes the feedback's passed/total counts (only when not the default: a default run's key stays)
    run = run_dir("repair", trajectory_params(cfg.train.model_dump(), vcfg.model_dump(),
                                              env=env.model_dump(mode="json"),
                                              turn_tokens=getattr(cfg, "turn_tokens", None),
                                              **trajectory_key(max_timeouts)),
                  model_path, problems=[*train, *(val or [])])
    train_f, val_f = run / "data" / "train.parquet", run / "data" / "val.parquet"
    write_repair_parquet(train, env, train_f)
    write_repair_parquet(val or train, env, val_f)
    loops = write_agent_loop_config(run / "agent_loops.yaml", turn_tokens=getattr(cfg, "turn_tokens", None),
                                    env=env, judge_pool=vcfg.judge_pool, judge_pool_workers=vcfg.judge_pool_workers,
                                    judge_pool_shards=vcfg.judge_pool_shards, judge_max_timeouts=max_timeouts)
    ckpt_dir, rollouts = run / "checkpoints", run / "rollouts"
    steps = steps_for(vcfg.total_training_steps, cfg.train.max_steps, "repair.train")
    # as every verl launch: a finished run is published again without verl, older checkpoints pruned, the disk
    # checked, and a checkpoint without optimizer state resumed with the contents it has
    done, extra = pre_launch(run, ckpt_dir, out_model_dir, resolve_model_ref(model_path), vcfg, steps,
                             save_freq_for(vcfg.save_freq, steps), GRPO_LOAD_CONTENTS, hw.extra_overrides)
    log_path, old_logs = vlaunch.next_attempt_log(run)
    overrides = grpo_overrides(
        cfg.train, vcfg, hw, train_files=train_f.resolve(), val_files=val_f.resolve(),
        model_path=resolve_model_ref(model_path), reward_mode="sparse", ckpt_dir=ckpt_dir.resolve(),
        experiment_name="repair", rollout_data_dir=rollouts.resolve(), judge_log_dir=(run / "judge").resolve(),
        reward_shaping=reward_shaping,
        section="repair.train",
        ray_env=worker_env(log_path, hw, load_judge_params(params_path)),
    ) + repair_overrides(None, env, agent_loop_config_path=loops.resolve()) + extra
    cmd = grpo_command(python)
    logs = old_logs
    if not done:
        write_overrides(run, cmd, overrides)
        vlaunch.log_attention(hw)
        if check == "default":
            check = vlaunch.preflight
        if check is not None:
            check(propagated_env(), None)
        commands.launch(cmd, overrides, {**ray_env(n_gpus=hw.n_gpus_per_node * hw.nnodes),
                                         "VERL_FILE_LOGGER_PATH": str(log_path.resolve())}, runner=runner)
        logs = [*old_logs, log_path]
    rows = vlogs.step_rows(logs, run, "sparse", train_f, val_f)
    vlogs.write_tsv(curves_path, rows, vlogs.GRPO_COLUMNS)
    ckpt = vlaunch._publish(ckpt_dir, out_model_dir, "actor", run, python, runner, target_steps=steps)
    return {"engine": "verl", "method": "verl agent loop, repair protocol (feedback user turns, last program graded)",
            "attention": vlaunch.attention_record(hw),
            "steps": rows[-1]["step"] if rows else 0, "checkpoint": portable_path(ckpt, run),
            **{k.replace("reward_mean", "reward"): v for k, v in vlogs.summarise(rows, "reward_mean").items()},
            **vlogs.judge_failures(rows)}


def _max_timeouts(reward_shaping: Any) -> int:
    """``reward_shaping``'s ``max_timeouts`` (default 3 when the section or the key is absent). Raises
    :class:`rlvr.config.ConfigError` naming the section when the section is invalid."""
    from rlvr.config import ConfigError
    from rlvr.reward.modes import RewardShaping

    try:
        return RewardShaping.model_validate(dict(reward_shaping or {})).max_timeouts
    except Exception as exc:  # pydantic ValidationError -> one line naming the section
        raise ConfigError(f"reward_shaping: {exc}".replace("\n", " ")) from exc
