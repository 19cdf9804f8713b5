"""Unscored samples (NaN reward) out of verl's loss: zero ``response_mask``/``loss_mask`` where verl stores them.

An excluded sandbox error (``reward_shaping.sandbox_error: exclude``) scores NaN under the reward kwarg
``mask_excluded`` (:func:`rlvr.reward.verl.compute_score`). The estimator ``rlvr_grpo``
(:mod:`rlvr.train.verl.advantage`) gives it advantage 0, but that alone leaves its tokens in the loss: in verl 0.9.1's
v1 trainer (``trainer.use_v1``, the default) the actor update reads two per-token masks from TransferQueue, both
written once by the agent loop (``AgentLoopWorkerTQ._agent_loop_postprocess``, ``verl/trainer/ppo/v1/agent_loop_tq.py``
lines 160 and 199: score, then ``field["loss_mask"] = field["response_mask"]`` and ``tq.async_kv_batch_put``):

* ``loss_mask``: the token-mean normaliser, ``batch_num_tokens = data["loss_mask"].sum()`` all-reduced over the
  data-parallel group (``FSDPEngine.forward_backward_batch``, ``verl/workers/engine/fsdp/transformer_impl.py`` 730);
* ``response_mask``: the mask of the policy-gradient, entropy and KL terms (``ppo_loss``,
  ``verl/workers/utils/losses.py`` 93-140, each through ``core_algos.agg_loss``).

The advantage step cannot change either: ``TrainerBase._compute_advantage`` (``verl/trainer/ppo/v1/trainer_base.py``
1743-1802) hands the estimator a padded copy read from TransferQueue and writes back only ``advantages``/``returns``
(``response_mask`` only under ``algorithm.rollout_correction``, and ``loss_mask`` never), so an estimator zeroing its
``response_mask`` argument in place changes nothing the actor reads.

So the mask is zeroed where verl first has the reward: :func:`patch_agent_loop` wraps
``AgentLoopWorker._compute_score`` (``verl/experimental/agent_loop/agent_loop.py`` 967; the reward loop's score lands
in ``outputs[-1].reward_score``) so that a trajectory whose score is NaN leaves it with every output's
``response_mask`` all 0 — as verl's own batch-padding rows (``construct_minimal_padding_template``,
``verl/trainer/ppo/padding_utils.py`` 101-123: ``response_mask`` = ``loss_mask`` = zeros). Downstream, every use of
the mask sees the sample as absent: old/ref log-prob extraction uses the lengths only (``response_from_nested``), the
logged ``actor/entropy`` and ``critic/advantages/*`` are masked means without it, and ``response_length/*`` is still
its true length (v1 metrics take it from ``responses``). Under ``seq-mean-token-mean`` and
``seq-mean-token-sum-norm`` the sequence denominator is verl's fixed ``global_batch_size`` (the mini-batch's rows,
``TrainerBase._update_actor``), so the masked row still counts there, with 0 in the numerator, as verl's padding rows
do; under ``token-mean`` it is left out of the normaliser too. A mini-batch whose every row is masked has
``batch_num_tokens`` 0: its token-mean loss is NaN and the FSDP engine skips that optimizer step
(``FSDPEngine.optimizer_step``: ``if not torch.isfinite(grad_norm)`` → ``zero_grad``).

:func:`patch_agent_loop` runs in every Ray worker process through :func:`rlvr.train.verl.compat.worker_setup`
(the agent-loop workers are Ray actors); without a NaN score it changes nothing.
"""

from __future__ import annotations

import functools
import math
from typing import Any

__all__ = ["mask_unscored", "patch_agent_loop"]

_PATCHED = "_rlvr_masks_unscored"


def _is_nan(x: Any) -> bool:
    try:
        return x is not None and math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def mask_unscored(outputs: list[Any]) -> bool:
    """Zero the ``response_mask`` of every ``AgentLoopOutput`` of one trajectory whose final ``reward_score`` is NaN
    (unscored: an excluded sandbox error). Returns whether it masked."""
    if not outputs or not _is_nan(getattr(outputs[-1], "reward_score", None)):
        return False
    for out in outputs:
        out.response_mask = [0] * len(out.response_mask)
    return True


def patch_agent_loop() -> bool:
    """Wrap verl's ``AgentLoopWorker._compute_score`` (inherited by the v1 ``AgentLoopWorkerTQ``) with
    :func:`mask_unscored`; returns whether it patched now (False: already patched). Idempotent."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    original = AgentLoopWorker._compute_score
    if getattr(original, _PATCHED, False):
        return False

    @functools.wraps(original)
    async def _compute_score(self: Any, outputs: list[Any], kwargs: dict) -> None:
        await original(self, outputs, kwargs)
        mask_unscored(outputs)

    setattr(_compute_score, _PATCHED, True)
    AgentLoopWorker._compute_score = _compute_score
    return True
