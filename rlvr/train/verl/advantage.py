"""``rlvr_grpo``: verl's GRPO advantage with unscored samples (NaN reward) left out, as TRL leaves them out.

A sandbox error under ``reward_shaping.sandbox_error: exclude`` has no reward: the judge failed, the policy did not.
TRL 1.16 turns a ``None`` reward into NaN, computes the group mean/std with ``nanmean``/``nanstd`` and gives that
completion advantage 0 (``GRPOTrainer._generate_and_score_completions``). verl 0.9.1's reward managers need a float,
so :func:`rlvr.reward.verl.compute_score` (reward kwarg ``mask_excluded``) scores such a sample NaN and this estimator,
registered under verl's ``register_adv_est`` and selected with ``algorithm.adv_estimator=rlvr_grpo``, does what TRL
does: per group (verl's ``uid``), mean and std over the scored samples only; the unscored ones get advantage 0. A
group with no scored sample, or only one scored sample of several, has no baseline and all its advantages are 0.
Without a NaN in the batch it returns verl's own ``compute_grpo_outcome_advantage`` unchanged.

Advantage 0 alone would leave an unscored sample's tokens in the loss (the token-mean normaliser, the KL and entropy
terms), and this estimator cannot mask them: verl's v1 ``TrainerBase._compute_advantage`` passes it a padded copy of
``response_mask`` read from TransferQueue and writes back only ``advantages``/``returns``, while the actor's
``ppo_loss`` reads ``response_mask`` and the FSDP engine's normaliser ``loss_mask`` from TransferQueue. They are masked
earlier, where verl's agent loop stores the sample: :mod:`rlvr.train.verl.mask` (``response_mask`` = ``loss_mask``
all 0 for a NaN score, as verl's own padding rows). The NaN reward on its last token still marks the sample here.

verl 0.9.1 calls it from ``verl.trainer.ppo.ray_trainer.compute_advantage`` (via the v1 trainer's
``compute_advantage_for_multi_trajectories``, which hands any estimator but ``grpo`` the whole batch) as
``fn(token_level_rewards=, response_mask=, config=, index=)``. It must be registered in the process that computes
advantages (verl's ``TaskRunner`` Ray actor): :func:`rlvr.train.verl.compat.worker_setup` (the Ray
``worker_process_setup_hook`` every rlvr launch sets) imports this module.

What else sees the NaN: verl's logged ``critic/score/*`` and ``critic/rewards/*`` of a step with an excluded sample
(``torch.mean``), and the validation means; :mod:`rlvr.train.verl.logs` computes those curves from the rollout dump
with the unscored samples left out.

A dead judge stops the run here: being the rlvr function verl calls at every training step in the trainer process,
the estimator first runs the step guard (:class:`rlvr.reward.step_guard.StepGuard`: the samples the reward workers
sent to the judge since the previous step, read from Ray's key-value store, are the step's window), and also reports a
batch whose every reward is NaN (every sample an excluded sandbox error; this needs no counts) to the same guard as a
dead window of the same step. :data:`~rlvr.reward.step_guard.DEAD_STEPS` (2) consecutive steps whose samples sent to
the judge all came back ``sandbox_error`` raise :class:`~rlvr.reward.step_guard.JudgeDied`, whatever
``reward_shaping.sandbox_error`` is (one such step may be a few timed-out calls in a healthy run). The exception ends
verl's ``fit`` loop before the step's update; the message names verl's global steps.

The step is verl's global step (:func:`current_step`), not this function's call: verl 0.9.1's v1 trainer
(``TrainerBase.step``) calls ``_step_once`` — and so this estimator — once per mini-batch when
``trainer.v1.<trainer_mode>.parameter_sync_step`` > 1, all under one global step. Only the first call of a step takes
a counts window; a later call of the same step adds only its all-NaN verdict to that step, so a step never counts
twice towards the consecutive steps.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from rlvr.reward.share_window import share_window_from_env
from rlvr.reward.step_guard import StepGuard

__all__ = ["ESTIMATOR", "STEP_GUARD", "compute_rlvr_grpo_advantage", "current_step"]

ESTIMATOR = "rlvr_grpo"

STEP_GUARD = StepGuard("verl GRPO", share=share_window_from_env())
"""This process's step guard (verl's ``TaskRunner`` computes every step's advantages in one process), keyed on
:func:`current_step`; its partial-failure bound (``judge.max_sandbox_error_share`` over
``judge.sandbox_error_window_steps`` steps) comes from the launcher (:data:`rlvr.reward.share_window.SHARE_ENV`)."""


def current_step() -> int | None:
    """verl's global training step in this process: ``verl.utils.skip.SkipManager.step``, which the v1 trainer's
    ``fit`` sets at every step (a resumed run included); ``None`` when it is not set (< 1) or not importable."""
    try:
        from verl.utils.skip import SkipManager
    except ImportError:
        return None
    step = getattr(SkipManager, "step", -1)
    return step if isinstance(step, int) and step >= 1 else None


@core_algos.register_adv_est(ESTIMATOR)
def compute_rlvr_grpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool | None = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO outcome advantage (Shao et al. 2024, verl's ``compute_grpo_outcome_advantage``) over the scored samples.

    Args:
        token_level_rewards: ``(batch, response_length)``; a sample's reward is the row sum (NaN = unscored).
        response_mask: ``(batch, response_length)``, 1 on the policy's tokens.
        index: ``(batch,)`` group ids (verl's ``uid``).
        epsilon: added to the std before dividing.
        norm_adv_by_std_in_grpo: divide by the group std (GRPO) or not (Dr. GRPO); ``None`` = ``config``'s
            ``norm_adv_by_std_in_grpo`` (default True).
        config: verl's ``AlgoConfig`` (read for ``norm_adv_by_std_in_grpo`` only).

    Returns:
        ``(advantages, returns)``, both ``(batch, response_length)``, equal, zero off the mask and for unscored rows.

    Raises:
        rlvr.reward.step_guard.JudgeDied: this step and the previous judged one (:data:`STEP_GUARD`, keyed on verl's
            global step) each had every sample sent to the judge come back ``sandbox_error``, or every reward of its
            batch NaN.
    """
    STEP_GUARD.check(current_step())  # a no-op after the first call of the same global step
    scores = token_level_rewards.sum(dim=-1)
    nan = torch.isnan(scores)
    if scores.numel() and bool(nan.all()):  # every sample an excluded sandbox error, whatever the counts say
        STEP_GUARD.observe(scores.numel(), scores.numel(), STEP_GUARD.step, failed_batch=True)
    if norm_adv_by_std_in_grpo is None:
        norm_adv_by_std_in_grpo = bool(getattr(config, "norm_adv_by_std_in_grpo", True)) if config is not None \
            else True
    if not bool(nan.any()):
        return core_algos.compute_grpo_outcome_advantage(
            token_level_rewards=token_level_rewards, response_mask=response_mask, index=index, epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config,
        )
    groups: dict[Any, list[int]] = defaultdict(list)
    for i in range(scores.shape[0]):
        groups[index[i]].append(i)
    adv = torch.zeros_like(scores)
    with torch.no_grad():
        for rows in groups.values():
            valid = [i for i in rows if not bool(nan[i])]
            if len(rows) == 1 and valid:  # a group of one (rollout.n = 1): verl's mean 0, std 1
                adv[valid[0]] = scores[valid[0]]
                continue
            if len(valid) < 2:  # no baseline from the scored samples: no signal
                continue
            s = scores[valid]
            centred = s - s.mean()
            adv[valid] = centred / (s.std() + epsilon) if norm_adv_by_std_in_grpo else centred
    out = adv.unsqueeze(-1) * response_mask
    return out, out
