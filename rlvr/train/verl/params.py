"""The verl engine's two settings sections: :class:`VerlParams` (``params.yaml`` section ``verl``: hyperparameters only
the verl engine needs) and :class:`VerlProfile` (a hardware recipe, ``profiles/*.yaml``), and :func:`load_profile`.

:mod:`rlvr.train.verl.overrides` turns them (with the stage's ``grpo``/``sft`` section) into verl 0.9.1's Hydra
overrides; its docstring says which verl key each field feeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from rlvr.config import ConfigError, Section

__all__ = ["FilterGroups", "VerlParams", "VerlProfile", "load_profile"]


class FilterGroups(Section):
    """``verl.filter_groups``: DAPO's dynamic sampling (Yu et al. 2025, section 3.2), verl 0.9.1's
    ``algorithm.filter_groups`` as its V1 trainer (``trainer.use_v1``, the default) implements it in
    ``verl/trainer/ppo/v1/replay_buffer.py``: a finished group whose ``metric`` is the same for every rollout (all
    pass or all fail: zero GRPO advantage, no gradient) is evicted from the replay buffer and a fresh prompt is
    generated in its place, until ``data.train_batch_size`` groups with signal are ready. verl logs the evicted
    groups of a step as ``training/filter_groups/evicted_samples`` (rlvr's curve column ``filtered_groups``).

    Fields [verl key under ``algorithm.filter_groups``]:
        enable: on/off [``enable``]; off (the default) emits no override at all.
        metric: ``reward`` = the sequence reward (verl's canonical ``rm_scores``: the reward mode's score, so in
            ``dense`` mode a group whose pass_ratios are all equal is filtered), or a ``reward_extra_info`` field of
            :mod:`rlvr.reward.verl`: ``acc`` (accepted, DAPO's choice) or ``pass_ratio`` [``metric``].
        max_inflight_gen_batches: prompt batches (in ``train_batch_size`` units) generated concurrently while
            refilling [``max_inflight_gen_batches``]. verl 0.9.1's V1 buffer has no cap on how many generation
            batches one step may draw: ``max_num_gen_batches`` (the DAPO recipe's cap) is read and ignored with a
            warning there, so rlvr does not offer it; a set with no signal left draws the whole epoch.
    """

    enable: bool = False
    metric: Literal["reward", "acc", "pass_ratio"] = "reward"
    max_inflight_gen_batches: int = Field(1, gt=0)


class VerlProfile(Section):
    """A hardware recipe (``profiles/*.yaml``); all sizes per GPU unless said otherwise.

    Fields (verl 0.9.1 key in brackets, ``a.`` = ``actor_rollout_ref.``):
        model: default model (Hub id or local path) [``a.model.path``], used when ``verl.model`` is unset.
        n_gpus_per_node / nnodes [``trainer.*``].
        use_dynamic_bsz [``a.actor.*``, ``a.rollout.*``, ``a.ref.*``; SFT ``data.*``]: token-packed micro batches of
            at most ppo_max_token_len_per_gpu *unpadded* tokens; ``auto`` (default) = on exactly with padding
            removal (:func:`rlvr.train.verl.mapping.resolve_dynamic_bsz`). Without padding removal verl pads each
            micro batch to its longest row, so a packed micro batch holds (longest / mean row length) x the budget
            in padded tokens: with a policy that writes short and long programs, several times the budget (random
            weights, whose rows all run to the cap, never show it). Off, a micro batch is a fixed number of rows,
            which :func:`rlvr.train.verl.mapping.fit_micro_batch` lowers until it fits the token budget padded to
            the length caps, so memory is bounded whatever the policy writes.
        ppo_micro_batch_size_per_gpu [``a.actor.*``]; log_prob_micro_batch_size_per_gpu [``a.rollout.*``,
            ``a.ref.*``]: rows per micro batch (at most; :func:`rlvr.train.verl.mapping.fit_micro_batch` without
            ``use_dynamic_bsz``); log_prob_max_token_len_per_gpu [``a.rollout.*``, ``a.ref.*``; ``None`` = verl's
            default, ``ppo_max_token_len_per_gpu``]: tokens per log-prob micro batch. Each micro batch materialises fp32
            logits of tokens x vocabulary (16,384 x 152,064 x 4 B = 10 GB for Qwen2.5-7B, twice over in the
            log-softmax: the lent 2 x H100 run died on an 18 GB allocation there), so large vocabularies need it small.
        gradient_checkpointing [``a.model.enable_gradient_checkpointing``].
        attn_implementation [``+a.model.override_config.attn_implementation``; SFT ``+model.override_config.*``]:
            ``auto`` = ``flash_attention_2`` where the ``flash_attn`` package is importable, else ``sdpa``
            (:func:`rlvr.train.verl.overrides.resolve_attention`; the choice is logged and recorded in the stage's
            metrics). use_remove_padding [``a.model.*``]: ``None`` = on with flash-attn, and with SDPA where
            transformers masks packed sequences (>= 4.56; :func:`rlvr.train.verl.mapping.resolve_attention`);
            ``true`` where neither holds is an error.
        param_offload / optimizer_offload [``a.actor.fsdp_config.*``]; ref_param_offload [``a.ref.fsdp_config.*``].
        rollout_tp [``a.rollout.tensor_model_parallel_size``]; gpu_memory_utilization (fraction of GPU memory vLLM
            may take) / max_num_batched_tokens / max_num_seqs [``a.rollout.*``].
        reward_num_workers [``reward.num_workers``].
        sft_micro_batch_size_per_gpu / sft_max_token_len_per_gpu [SFT ``data.*``].
        extra_overrides: further Hydra overrides appended verbatim (last one wins).
    """

    model: str
    n_gpus_per_node: int = Field(8, gt=0)
    nnodes: int = Field(1, gt=0)
    use_dynamic_bsz: bool | Literal["auto"] = "auto"
    ppo_max_token_len_per_gpu: int = Field(16384, gt=0)
    ppo_micro_batch_size_per_gpu: int = Field(4, gt=0)
    log_prob_micro_batch_size_per_gpu: int = Field(8, gt=0)
    log_prob_max_token_len_per_gpu: int | None = Field(None, gt=0)
    gradient_checkpointing: bool = True
    attn_implementation: Literal["auto", "sdpa", "flash_attention_2", "eager"] = "auto"
    use_remove_padding: bool | None = None
    param_offload: bool = False
    optimizer_offload: bool = False
    ref_param_offload: bool = True
    rollout_tp: int = Field(1, gt=0)
    gpu_memory_utilization: float = Field(0.6, gt=0, le=1)
    max_num_batched_tokens: int = Field(8192, gt=0)
    max_num_seqs: int = Field(256, gt=0)
    reward_num_workers: int = Field(8, gt=0)
    sft_micro_batch_size_per_gpu: int = Field(4, gt=0)
    sft_max_token_len_per_gpu: int = Field(8192, gt=0)
    extra_overrides: list[str] = Field(default_factory=list)


class VerlParams(Section):
    """``params.yaml`` section ``verl``: what only the verl engine needs (hyperparameters; hardware is the profile).

    Fields:
        profile: path of the hardware recipe (``profiles/*.yaml``).
        model: model to start from (Hub id or path); ``None`` = the profile's ``model``. The sft stage trains it; the
            grpo stage starts from the sft/dpo output the stage passes in.
        train_batch_size: prompts per GRPO step [``data.train_batch_size``]; each gets ``num_generations`` rollouts.
        ppo_mini_batch_size: prompts per optimizer update [``actor.ppo_mini_batch_size``]; must divide
            ``train_batch_size``.
        max_prompt_length / max_response_length: tokens [``data.*``]; longer prompts are filtered out.
        kl_loss_type: verl's KL estimator for the KL loss (``low_var_kl`` = Schulman's k3, as in GRPO).
        total_epochs / total_training_steps: passes over the training prompts; steps (``None`` = the stage's
            ``max_steps``: ``grpo.max_steps``, ``repair.train.max_steps``; both set and different is an error).
        The learning-rate schedule is the stage's own ``lr_scheduler_type`` (``constant`` | ``cosine``, the only two
        verl 0.9.1 has; any other is an error under verl).
        save_freq / test_freq: steps between checkpoints / validations (-1 = never; verl always saves the last step,
            and with test_freq > 0 validates it too). ``save_freq: auto`` (default) = every 5 % of the run's steps, so
            a crash loses at most ~5 % (:func:`rlvr.train.verl.mapping.save_freq_for`). GRPO's ``dev`` score is
            verl's validation after the last step
            (:func:`rlvr.train.verl.validation.validation_scores`): with test_freq -1 the stage writes none.
        max_ckpt_to_keep: checkpoints kept on disk (``None`` = all); rlvr prunes the ones a resumed verl forgets and,
            after publishing, keeps only the newest one's model (:mod:`rlvr.train.verl.checkpoints`, sizes there).
        reward_function: ``compute_score_async`` (awaited on the reward loop) or ``compute_score``.
        reward_manager: ``naive`` or ``rate_limited`` (then ``reward_max_concurrent`` requests and
            ``reward_timeout_s`` seconds per call).
        judge_pool: ``node`` = all reward workers of a node share one judge of ``judge_pool_workers`` sandboxes
            (:class:`rlvr.judge.ray_pool.NodeJudge`, a Ray actor per node; ignored when ``RLVR_SANDBOX_URL`` names a
            judge server, which is then the shared pool) or ``process`` = each reward worker its own judge.
        judge_pool_workers: the node judge's concurrent submissions (0 = ``RLVR_SANDBOX_WORKERS``, else the node's
            CPU count). judge_pool_shards: the actor processes they are split over (0 = one per 8 sandboxes,
            :func:`rlvr.judge.ray_pool.node_shards`): one process's host-side judging saturates one core.
        project_name: tracking project [``trainer.project_name``]; the experiment name is set per run.
        loggers: ``trainer.logger`` backends besides ``console`` and ``file`` (which are always on; ``file`` feeds
            the DVC plots), e.g. ``["wandb"]``.
        sft_train_batch_size: SFT sequences per optimizer step [``data.train_batch_size``]; sft_max_length: tokens
            per SFT sample [``data.max_length``].
        filter_groups: DAPO's dynamic sampling (Yu et al. 2025, :class:`FilterGroups`), for GRPO and repair alike.
    """

    profile: str = "profiles/qwen7b_8xh100.yaml"
    model: str | None = None
    train_batch_size: int = Field(128, gt=0)
    ppo_mini_batch_size: int = Field(32, gt=0)
    max_prompt_length: int = Field(1024, gt=0)
    max_response_length: int = Field(2048, gt=0)
    kl_loss_type: Literal["kl", "abs", "mse", "low_var_kl", "full"] = "low_var_kl"
    total_epochs: int = Field(1, gt=0)
    total_training_steps: int | None = Field(None, gt=0)
    save_freq: int | Literal["auto"] = "auto"
    test_freq: int = 10
    max_ckpt_to_keep: int | None = Field(2, gt=0)
    reward_function: Literal["compute_score_async", "compute_score"] = "compute_score_async"
    reward_manager: Literal["naive", "rate_limited"] = "naive"
    reward_max_concurrent: int = Field(64, gt=0)
    reward_timeout_s: float = Field(600.0, gt=0)
    judge_pool: Literal["node", "process"] = "node"
    judge_pool_workers: int = Field(0, ge=0)
    judge_pool_shards: int = Field(0, ge=0)
    project_name: str = "rlvr"
    loggers: list[str] = Field(default_factory=list)
    sft_train_batch_size: int = Field(64, gt=0)
    sft_max_length: int = Field(3072, gt=0)
    filter_groups: FilterGroups = Field(default_factory=FilterGroups)


def load_profile(path: str | Path) -> VerlProfile:
    """Read and validate a hardware recipe: a plain recipe file (the fields of :class:`VerlProfile` at top level), or
    a scale profile (:mod:`rlvr.config.profiles`), whose ``hardware`` block (``base`` chain merged) is the recipe.

    Raises :class:`ConfigError` naming the file and field."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: verl profile not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        if isinstance(data, dict) and ("hardware" in data or "params" in data or "base" in data):
            from rlvr.config.profiles import ProfileError, load_scale_profile

            try:
                data = load_scale_profile(p)["hardware"]
            except ProfileError as exc:
                raise ConfigError(str(exc)) from exc
        return VerlProfile.model_validate(data)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: invalid YAML: {exc}") from exc
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{p}: {errs}") from exc
