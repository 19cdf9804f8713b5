"""``rlvr_grpo``: verl's GRPO advantage with unscored samples (NaN reward) left out, as TRL leaves them out.

A sandbox error under ``reward_shaping.sandbox_error: exclude`` has no reward: the judge failed, the policy did not.
TRL 1.16 turns a ``None`` reward into NaN, computes the group mean/std with ``nanmean``/``nanstd`` and gives that
completion advantage 0 (``GRPOTrainer._generate_and_score_completions``). verl 0.9.1's reward managers need a float,
so :func:`rlvr.reward.verl.compute_score` (reward kwarg ``mask_excluded``) scores such a sample NaN and this estimator,
registered under verl's ``register_adv_est`` and selected with ``algorithm.adv_estimator=rlvr_grpo``, does what TRL
does: per group (verl's ``uid``), mean and std over the scored samples only; the unscored ones get advantage 0, so
they add nothing to the policy-gradient loss (their tokens still count in the loss's normaliser and in the KL and
entropy terms, as any zero-advantage sample's do). A group with no scored sample, or only one scored sample of
several, has no baseline and all its advantages are 0. Without a NaN in the batch it returns verl's own
``compute_grpo_outcome_advantage`` unchanged.

verl 0.9.1 calls it from ``verl.trainer.ppo.ray_trainer.compute_advantage`` (via the v1 trainer's
``compute_advantage_for_multi_trajectories``, which hands any estimator but ``grpo`` the whole batch) as
``fn(token_level_rewards=, response_mask=, config=, index=)``. It must be registered in the process that computes
advantages (verl's ``TaskRunner`` Ray actor): :func:`rlvr.train.verl.compat.worker_setup` (the Ray
``worker_process_setup_hook`` every rlvr launch sets) imports this module.

What else sees the NaN: verl's logged ``critic/score/*`` and ``critic/rewards/*`` of a step with an excluded sample
(``torch.mean``), and the validation means; :mod:`rlvr.train.verl.logs` computes those curves from the rollout dump
with the unscored samples left out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

__all__ = ["ESTIMATOR", "compute_rlvr_grpo_advantage"]

ESTIMATOR = "rlvr_grpo"


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
    """
    if norm_adv_by_std_in_grpo is None:
        norm_adv_by_std_in_grpo = bool(getattr(config, "norm_adv_by_std_in_grpo", True)) if config is not None \
            else True
    scores = token_level_rewards.sum(dim=-1)
    nan = torch.isnan(scores)
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
