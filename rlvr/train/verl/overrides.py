"""Hydra override lists for verl 0.9.1: GRPO (``verl.trainer.main_ppo``) and SFT (``verl.trainer.sft_trainer``).

Inputs are three layers, each with one home:

* hyperparameters of the stage: rlvr's ``grpo`` / ``sft`` sections (the local engine's ``GRPOParams`` /
  ``SFTParams``, read here by attribute: ``learning_rate``, ``num_generations``, ``beta``, ``epsilon``… so both
  engines train from the same numbers);
* verl-only hyperparameters: the ``verl`` section (:class:`VerlParams`: prompts per step, lengths, reward manager…);
* hardware: a profile file ``profiles/*.yaml`` (:class:`VerlProfile`: GPUs, tensor parallel size, micro batches,
  memory utilisation, offload).

Every key below was checked against verl 0.9.1's own config (``verl/trainer/config/ppo_trainer.yaml`` and its
``_generated_ppo_trainer.yaml``; ``sft_trainer_engine.yaml``); the boundary tests compose the lists with Hydra against
the installed verl. Notable 0.9.1 facts:

* the reward function lives under ``reward.custom_reward_function.{path,name}`` (the top-level
  ``custom_reward_function`` is the pre-0.7.1 legacy key); ``reward_kwargs`` is not in verl's schema, so it is added
  with ``+`` (read by ``verl.trainer.ppo.reward.get_custom_reward_fn``);
* GRPO puts KL in the loss (``actor.use_kl_loss``/``kl_loss_coef``/``kl_loss_type``, Shao et al. 2024), not in the
  reward (``algorithm.use_kl_in_reward=False``);
* the SFT trainer is ``verl.trainer.sft_trainer`` (config ``sft_trainer_engine``; ``fsdp_sft_trainer`` is gone), run
  under ``torchrun``; its data is a ``messages`` parquet read by ``MultiTurnSFTDataset`` and its model key is
  ``model.path`` (not ``model.partial_pretrain``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvr.config import ConfigError
from rlvr.reward.verl import REWARD_MANAGER_MODULE, REWARD_MANAGERS
from rlvr.train.verl.compat import RAY_HOOK_OVERRIDE
from rlvr.train.verl.mapping import (
    epochs_for,
    fit_micro_batch,
    local_or_id,
    ray_env_override,
    resolve_attention,
    resolve_dynamic_bsz,
    save_freq_for,
    scheduler_for,
    steps_for,
)
from rlvr.train.verl.params import VerlParams, VerlProfile, load_profile

__all__ = [
    "ADV_ESTIMATOR",
    "LOSS_AGG_MODE",
    "REWARD_FUNCTION_PATH",
    "VerlParams",
    "VerlProfile",
    "epochs_for",
    "grpo_overrides",
    "load_profile",
    "local_or_id",
    "ray_env_override",
    "resolve_attention",
    "save_freq_for",
    "scheduler_for",
    "sft_overrides",
    "steps_for",
]

REWARD_FUNCTION_PATH = "pkg://rlvr.reward.verl"
ADV_ESTIMATOR = "rlvr_grpo"
"""``algorithm.adv_estimator``: :mod:`rlvr.train.verl.advantage` (verl's GRPO; NaN-scored samples left out)."""

# rlvr/TRL loss_type -> verl actor.loss_agg_mode (verl core_algos.agg_loss):
#   grpo    per-sequence mean of token means (Shao et al. 2024)               -> seq-mean-token-mean
#   dr_grpo constant normaliser (Liu et al. 2025, "Dr. GRPO")                 -> seq-mean-token-sum-norm
#   dapo    token mean over the batch (Yu et al. 2025)                        -> token-mean
#   bnpo    token mean over the (mini-)batch, as TRL's bnpo                   -> token-mean
LOSS_AGG_MODE: dict[str, str] = {
    "grpo": "seq-mean-token-mean",
    "dr_grpo": "seq-mean-token-sum-norm",
    "dapo": "token-mean",
    "bnpo": "token-mean",
}


def _v(x: Any) -> str:
    """A Hydra override value: booleans as True/False, None as null, strings quoted when Hydra would misparse."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, list | tuple):
        return "[" + ",".join(_v(i) for i in x) + "]"
    if isinstance(x, dict):
        return "{" + ",".join(f"{k}:{_v(v)}" for k, v in x.items()) + "}"
    s = str(x)
    if any(c in s for c in " ,[]{}()='\"\\:$") and not s.startswith("pkg://"):
        return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return s


def _kv(pairs: list[tuple[str, Any]]) -> list[str]:
    return [f"{k}={_v(v)}" for k, v in pairs]


def _loggers(verl: VerlParams) -> list[str]:
    return ["console", "file", *[x for x in verl.loggers if x not in ("console", "file")]]


def micro_batches(profile: VerlProfile, use_remove_padding: bool, seq_tokens: int, mini_rows_per_gpu: int,
                  batch_rows_per_gpu: int) -> tuple[bool, int, int]:
    """``(use_dynamic_bsz, ppo_micro_batch_size_per_gpu, log_prob_micro_batch_size_per_gpu)`` for a GRPO run (the
    ``grpo`` stage or repair's training) whose rows are at most ``seq_tokens`` tokens (prompt + response caps):
    packing follows :func:`rlvr.train.verl.mapping.resolve_dynamic_bsz`; with packing the profile's row counts go
    to verl as they are (they then size nothing, the token budgets do); without it each is
    :func:`rlvr.train.verl.mapping.fit_micro_batch` of the profile's count, its token budget
    (``ppo_max_token_len_per_gpu``; ``log_prob_max_token_len_per_gpu``, default the former) and the rows it splits:
    an update's mini batch per GPU (``mini_rows_per_gpu``) or a step's whole batch per GPU (``batch_rows_per_gpu``,
    log-probs). Lowering a micro batch changes only how a step is split (verl scales each micro batch's loss by its
    share of the mini batch), not the gradient. Raises :class:`ConfigError` when one row is over a budget."""
    dyn = resolve_dynamic_bsz(profile, use_remove_padding)
    if dyn:
        return True, profile.ppo_micro_batch_size_per_gpu, profile.log_prob_micro_batch_size_per_gpu
    lp_budget = profile.log_prob_max_token_len_per_gpu or profile.ppo_max_token_len_per_gpu
    lp_name = ("log_prob_max_token_len_per_gpu" if profile.log_prob_max_token_len_per_gpu
               else "ppo_max_token_len_per_gpu")
    return (False,
            fit_micro_batch(profile.ppo_micro_batch_size_per_gpu, profile.ppo_max_token_len_per_gpu, seq_tokens,
                            max(1, mini_rows_per_gpu), "ppo_max_token_len_per_gpu"),
            fit_micro_batch(profile.log_prob_micro_batch_size_per_gpu, lp_budget, seq_tokens,
                            max(1, batch_rows_per_gpu), lp_name))


def grpo_overrides(
    grpo: Any,
    verl: VerlParams,
    profile: VerlProfile,
    *,
    train_files: str | Path,
    val_files: str | Path,
    model_path: str | Path,
    reward_mode: str,
    ckpt_dir: str | Path,
    experiment_name: str,
    rollout_data_dir: str | Path | None = None,
    reward_shaping: Mapping[str, Any] | None = None,
    judge_log_dir: str | Path | None = None,
    section: str = "grpo",
    ray_env: Mapping[str, str] | None = None,
) -> list[str]:
    """The Hydra overrides (``key=value`` strings, in order) for ``python -m verl.trainer.main_ppo`` running GRPO.

    Args:
        grpo: the ``grpo`` params section (``rlvr.train.local.grpo.GRPOParams`` or any object with its fields:
            ``learning_rate, num_generations, beta, entropy_coef, epsilon, epsilon_high, loss_type, scale_rewards,
            temperature, top_p, num_iterations, warmup_ratio, weight_decay, max_grad_norm, seed, lora_r,
            lora_alpha``).
        verl / profile: see :class:`VerlParams`, :class:`VerlProfile`.
        train_files / val_files: verl RL parquet files (``data/manifests/verl/{train,val}.parquet``).
        model_path: the policy to start from (Hub id or HF folder).
        reward_mode: ``sparse | dense | shaped`` → ``reward_kwargs.reward_mode`` of :mod:`rlvr.reward.verl`.
        ckpt_dir: verl's ``trainer.default_local_dir`` (intermediate checkpoints, outside DVC outputs; verl resumes
            from it with ``resume_mode=auto``).
        experiment_name: ``trainer.experiment_name`` (e.g. ``grpo-seed1``).
        rollout_data_dir: where verl dumps each step's rollouts (``<step>.jsonl``: score, uid) for the
            reward-std / zero-std curves; ``None`` = no dump.
        reward_shaping: the ``reward_shaping`` section as a dict (``RewardShaping.model_dump()``), passed as
            ``reward_kwargs.reward_shaping`` so Ray reward workers (whose working directory is not the repo) do not
            depend on finding ``params.yaml``; ``None`` = let :mod:`rlvr.reward.verl` read ``params.yaml``.
        judge_log_dir: absolute folder for the per-sample judge log (``reward_kwargs.judge_log``, see
            :mod:`rlvr.reward.judge_log`), from which the curves' ``judge_s`` column is computed; ``None`` = no log.
        section: the params section ``grpo`` came from (``grpo`` or ``repair.train``), named in errors.
        ray_env: environment variables every Ray worker gets (:func:`ray_env_override`; the launcher passes
            :func:`rlvr.train.verl.environ.propagated_env`); ``None`` or empty = none added.

    Raises:
        ConfigError: a value verl cannot express (``scale_rewards: batch``, unknown ``loss_type``,
            ``mask_truncated_completions``), or batch sizes that do not divide.
    """
    if grpo.loss_type not in LOSS_AGG_MODE:
        raise ConfigError(f"grpo.loss_type: {grpo.loss_type!r} has no verl loss_agg_mode ({', '.join(LOSS_AGG_MODE)})")
    if grpo.scale_rewards == "batch":
        raise ConfigError("grpo.scale_rewards: 'batch' is not available in verl's GRPO estimator (use group or none)")
    if getattr(grpo, "mask_truncated_completions", False):
        raise ConfigError("grpo.mask_truncated_completions: not available in verl 0.9.1 GRPO (set it false)")
    if verl.train_batch_size % verl.ppo_mini_batch_size:
        raise ConfigError(
            f"verl.ppo_mini_batch_size={verl.ppo_mini_batch_size} must divide "
            f"verl.train_batch_size={verl.train_batch_size}"
        )
    n_gpus = profile.n_gpus_per_node * profile.nnodes
    if (verl.train_batch_size * grpo.num_generations) % n_gpus:
        raise ConfigError(
            f"verl.train_batch_size*grpo.num_generations={verl.train_batch_size * grpo.num_generations} "
            f"must be divisible by the profile's {n_gpus} GPUs"
        )
    if verl.ppo_mini_batch_size * grpo.num_generations % n_gpus:
        raise ConfigError(
            f"verl.ppo_mini_batch_size*{section}.num_generations={verl.ppo_mini_batch_size * grpo.num_generations} "
            f"must be divisible by the profile's {n_gpus} GPUs"
        )
    if n_gpus % profile.rollout_tp:
        raise ConfigError(f"profile rollout_tp={profile.rollout_tp} must divide the {n_gpus} GPUs")
    a = "actor_rollout_ref"
    use_kl = grpo.beta > 0
    where = section
    seq = verl.max_prompt_length + verl.max_response_length
    # one sequence at the caps must fit a micro batch's token budget: verl's rearrange_micro_batches asserts it
    # when packing, and fixed micro batches are sized to hold it (fit_micro_batch)
    caps = [("ppo_max_token_len_per_gpu", profile.ppo_max_token_len_per_gpu)]
    if profile.log_prob_max_token_len_per_gpu is not None:
        caps.append(("log_prob_max_token_len_per_gpu", profile.log_prob_max_token_len_per_gpu))
    for name, cap in caps:
        if cap < seq:
            raise ConfigError(f"profile {name}={cap} tokens < verl.max_prompt_length + max_response_length = {seq} "
                              f"({where}): one sequence would not fit a micro batch")
    steps = steps_for(verl.total_training_steps, getattr(grpo, "max_steps", None), where)
    attn, rmpad = resolve_attention(profile)
    dyn, micro, lp_micro = micro_batches(profile, rmpad, seq, verl.ppo_mini_batch_size * grpo.num_generations // n_gpus,
                                         verl.train_batch_size * grpo.num_generations // n_gpus)
    pairs: list[tuple[str, Any]] = [
        ("algorithm.adv_estimator", ADV_ESTIMATOR),  # verl's GRPO, unscored samples left out
        ("algorithm.norm_adv_by_std_in_grpo", grpo.scale_rewards == "group"),
        ("algorithm.use_kl_in_reward", False),
        ("data.train_files", str(train_files)),
        ("data.val_files", str(val_files)),
        ("data.prompt_key", "prompt"),
        ("data.reward_fn_key", "data_source"),
        ("data.max_prompt_length", verl.max_prompt_length),
        ("data.max_response_length", verl.max_response_length),
        ("data.train_batch_size", verl.train_batch_size),
        ("data.filter_overlong_prompts", True),
        ("data.truncation", "error"),
        ("data.seed", grpo.seed),
        (f"{a}.model.path", local_or_id(model_path)),
        (f"{a}.model.enable_gradient_checkpointing", profile.gradient_checkpointing),
        (f"{a}.model.use_remove_padding", rmpad),
        (f"+{a}.model.override_config.attn_implementation", attn),
        (f"{a}.model.lora_rank", grpo.lora_r),
        (f"{a}.model.lora_alpha", grpo.lora_alpha),
        (f"{a}.actor.optim.lr", float(grpo.learning_rate)),
        (f"{a}.actor.optim.lr_warmup_steps_ratio", float(grpo.warmup_ratio)),
        (f"{a}.actor.optim.lr_scheduler_type", scheduler_for(grpo.lr_scheduler_type, where)),
        (f"{a}.actor.optim.weight_decay", float(grpo.weight_decay)),
        (f"{a}.actor.optim.clip_grad", float(grpo.max_grad_norm)),
        (f"{a}.actor.ppo_mini_batch_size", verl.ppo_mini_batch_size),
        (f"{a}.actor.ppo_micro_batch_size_per_gpu", micro),
        (f"{a}.actor.use_dynamic_bsz", dyn),
        (f"{a}.actor.ppo_max_token_len_per_gpu", profile.ppo_max_token_len_per_gpu),
        (f"{a}.actor.ppo_epochs", grpo.num_iterations),
        (f"{a}.actor.data_loader_seed", grpo.seed),
        (f"{a}.actor.use_kl_loss", use_kl),
        (f"{a}.actor.kl_loss_coef", float(grpo.beta)),
        (f"{a}.actor.kl_loss_type", verl.kl_loss_type),
        (f"{a}.actor.entropy_coeff", float(grpo.entropy_coef)),
        (f"{a}.actor.clip_ratio_low", float(grpo.epsilon)),
        (f"{a}.actor.clip_ratio_high", float(grpo.epsilon_high if grpo.epsilon_high is not None else grpo.epsilon)),
        (f"{a}.actor.loss_agg_mode", LOSS_AGG_MODE[grpo.loss_type]),
        (f"{a}.actor.fsdp_config.param_offload", profile.param_offload),
        (f"{a}.actor.fsdp_config.optimizer_offload", profile.optimizer_offload),
        (f"{a}.rollout.name", "vllm"),
        (f"{a}.rollout.n", grpo.num_generations),
        (f"{a}.rollout.temperature", float(grpo.temperature)),
        (f"{a}.rollout.top_p", float(grpo.top_p)),
        (f"{a}.rollout.seed", grpo.seed),
        (f"{a}.rollout.tensor_model_parallel_size", profile.rollout_tp),
        (f"{a}.rollout.gpu_memory_utilization", float(profile.gpu_memory_utilization)),
        (f"{a}.rollout.max_num_batched_tokens", profile.max_num_batched_tokens),
        (f"{a}.rollout.max_num_seqs", profile.max_num_seqs),
        (f"{a}.rollout.log_prob_micro_batch_size_per_gpu", lp_micro),
        (f"{a}.ref.log_prob_micro_batch_size_per_gpu", lp_micro),
        (f"{a}.ref.fsdp_config.param_offload", profile.ref_param_offload),
        *([(f"{a}.rollout.log_prob_max_token_len_per_gpu", profile.log_prob_max_token_len_per_gpu),
           (f"{a}.ref.log_prob_max_token_len_per_gpu", profile.log_prob_max_token_len_per_gpu)]
          if profile.log_prob_max_token_len_per_gpu is not None else []),
        ("reward.num_workers", profile.reward_num_workers),
        ("reward.custom_reward_function.path", REWARD_FUNCTION_PATH),
        ("reward.custom_reward_function.name", verl.reward_function),
        ("+reward.custom_reward_function.reward_kwargs.reward_mode", reward_mode),
        # an excluded sandbox error scores NaN, which the rlvr_grpo estimator leaves out (rlvr.train.verl.advantage)
        ("+reward.custom_reward_function.reward_kwargs.mask_excluded", True),
        # one judge budget per node, shared by the node's reward workers (rlvr.judge.ray_pool.NodeJudge)
        ("+reward.custom_reward_function.reward_kwargs.judge_pool", verl.judge_pool),
        ("+reward.custom_reward_function.reward_kwargs.judge_pool_workers", verl.judge_pool_workers),
        ("+reward.custom_reward_function.reward_kwargs.judge_pool_shards", verl.judge_pool_shards),
        *([("+reward.custom_reward_function.reward_kwargs.reward_shaping", dict(reward_shaping))]
          if reward_shaping is not None else []),
        *([("+reward.custom_reward_function.reward_kwargs.judge_log", str(judge_log_dir))]
          if judge_log_dir is not None else []),
        # verl's manager plus the response's token count in extra_info (rlvr.reward.verl_manager)
        ("reward.reward_manager.source", "importlib"),
        ("reward.reward_manager.module.path", REWARD_MANAGER_MODULE),
        ("reward.reward_manager.name", REWARD_MANAGERS[verl.reward_manager]),
    ]
    if verl.filter_groups.enable:  # off: no key at all, so the override list of a run without it is unchanged
        fg = verl.filter_groups
        pairs += [("algorithm.filter_groups.enable", True), ("algorithm.filter_groups.metric", fg.metric),
                  ("algorithm.filter_groups.max_inflight_gen_batches", fg.max_inflight_gen_batches)]
    if verl.reward_manager == "rate_limited":
        pairs += [("+reward.max_concurrent", verl.reward_max_concurrent), ("+reward.timeout", verl.reward_timeout_s)]
    pairs += [
        ("trainer.n_gpus_per_node", profile.n_gpus_per_node),
        ("trainer.nnodes", profile.nnodes),
        ("trainer.total_epochs", epochs_for(verl.total_epochs, steps)),
        ("trainer.total_training_steps", steps),
        ("trainer.save_freq", save_freq_for(verl.save_freq, steps)),
        ("trainer.test_freq", verl.test_freq),
        ("trainer.val_before_train", True),
        ("trainer.logger", _loggers(verl)),
        ("trainer.project_name", verl.project_name),
        ("trainer.experiment_name", experiment_name),
        ("trainer.default_local_dir", str(ckpt_dir)),
        ("trainer.resume_mode", "auto"),
        ("trainer.max_actor_ckpt_to_keep", verl.max_ckpt_to_keep),
        ("trainer.rollout_data_dir", None if rollout_data_dir is None else str(rollout_data_dir)),
    ]
    # every Ray worker first fixes verl's TRL check (rlvr.train.verl.compat: verl 0.9.1 + TRL 1.x) and gets the
    # driver's where/how settings (RLVR_*, WANDB_*…) through the job's runtime_env, on a local or an existing cluster
    return [*_kv(pairs), RAY_HOOK_OVERRIDE, *([ray_env_override(ray_env)] if ray_env else []),
            *profile.extra_overrides]


def sft_overrides(
    sft: Any,
    verl: VerlParams,
    profile: VerlProfile,
    *,
    train_files: str | Path,
    val_files: str | Path | None,
    model_path: str | Path,
    ckpt_dir: str | Path,
    experiment_name: str,
    steps_hint: int | None = None,
) -> list[str]:
    """The Hydra overrides for ``torchrun … -m verl.trainer.sft_trainer`` (config ``sft_trainer_engine``).

    Args:
        sft: the ``sft`` params section (``rlvr.train.local.sft.SFTParams`` or any object with ``learning_rate,
            epochs, max_steps, warmup_ratio, weight_decay, max_grad_norm, seed, lora_r, lora_alpha``).
        train_files / val_files: ``messages`` parquet files (:func:`rlvr.train.verl.data.write_sft_parquet`).
        model_path: base model (Hub id or HF folder). ckpt_dir: ``trainer.default_local_dir``.
        steps_hint: the run's optimizer steps when epochs decide them (rows // batch x epochs), for
            ``save_freq: auto`` (:func:`save_freq_for`; verl's SFT trainer keeps ``-1`` = never, last step saved).

    Raises:
        ConfigError: ``sft.epochs`` is fractional (verl counts whole epochs; use ``max_steps``).
    """
    if sft.max_steps is None or sft.max_steps <= 0:
        if float(sft.epochs) != int(sft.epochs):
            raise ConfigError(f"sft.epochs={sft.epochs}: verl needs whole epochs (or set sft.max_steps)")
    attn, rmpad = resolve_attention(profile)
    dyn = resolve_dynamic_bsz(profile, rmpad)
    n_gpus = profile.n_gpus_per_node * profile.nnodes
    sft_micro = profile.sft_micro_batch_size_per_gpu if dyn else fit_micro_batch(
        profile.sft_micro_batch_size_per_gpu, profile.sft_max_token_len_per_gpu, verl.sft_max_length,
        max(1, verl.sft_train_batch_size // n_gpus), "sft_max_token_len_per_gpu")
    pairs: list[tuple[str, Any]] = [
        ("data.train_files", str(train_files)),
        ("data.val_files", None if val_files is None else str(val_files)),
        ("data.messages_key", "messages"),
        ("data.train_batch_size", verl.sft_train_batch_size),
        ("data.micro_batch_size_per_gpu", sft_micro),
        ("data.max_token_len_per_gpu", profile.sft_max_token_len_per_gpu),
        ("data.use_dynamic_bsz", dyn),
        ("data.max_length", verl.sft_max_length),
        ("data.truncation", "error"),
        ("model.path", local_or_id(model_path)),
        ("model.enable_gradient_checkpointing", profile.gradient_checkpointing),
        ("model.use_remove_padding", rmpad),
        ("+model.override_config.attn_implementation", attn),
        ("model.lora_rank", sft.lora_r),
        ("model.lora_alpha", sft.lora_alpha),
        ("engine.param_offload", profile.param_offload),
        ("engine.optimizer_offload", profile.optimizer_offload),
        ("engine.seed", sft.seed),
        ("optim.lr", float(sft.learning_rate)),
        ("optim.lr_warmup_steps_ratio", float(sft.warmup_ratio)),
        ("optim.lr_scheduler_type", scheduler_for(sft.lr_scheduler_type, "sft")),
        ("optim.weight_decay", float(sft.weight_decay)),
        ("optim.clip_grad", float(sft.max_grad_norm)),
        ("trainer.n_gpus_per_node", profile.n_gpus_per_node),
        ("trainer.nnodes", profile.nnodes),
        ("trainer.total_epochs", max(1, int(sft.epochs))),
        ("trainer.total_training_steps", sft.max_steps if sft.max_steps and sft.max_steps > 0 else None),
        ("trainer.save_freq", save_freq_for(verl.save_freq, sft.max_steps if sft.max_steps and sft.max_steps > 0
                                            else steps_hint, last_only=-1)),
        ("trainer.test_freq", verl.test_freq if val_files is not None else -1),
        ("trainer.logger", _loggers(verl)),
        ("trainer.project_name", verl.project_name),
        ("trainer.experiment_name", experiment_name),
        ("trainer.default_local_dir", str(ckpt_dir)),
        ("trainer.resume_mode", "auto"),
        ("trainer.max_ckpt_to_keep", verl.max_ckpt_to_keep),
        ("trainer.seed", sft.seed),
    ]
    return _kv(pairs) + list(profile.extra_overrides)
