"""verl 0.9.1 reward managers that also hand the reward function the response's length in tokens.

verl's ``naive`` and ``rate_limited`` managers (``verl/experimental/reward_loop/reward_manager/naive.py``,
``limited.py``: ``run_single``) call ``compute_score(data_source, solution_str, ground_truth, extra_info)`` with the
decoded response only; the token count they decode (``attention_mask[-response_length:].sum()``) never reaches the
reward, so the ``shaped`` mode's overlong term (DAPO's soft overlong punishment) could not apply. These subclasses
put that count into ``extra_info["response_length"]`` (a copy: verl repeats one ``extra_info`` dict over a GRPO
group) and then run verl's own ``run_single`` unchanged. In the agent-loop reward path (verl 0.9's default: the reward
is computed per sample inside the agent loop, ``AgentLoopWorker._compute_score``) the attention mask is all ones over
``prompt_ids + response_ids``, so the count is the episode's response tokens: the policy's tokens of a single-turn
answer; in a multi-turn episode also the tool answers between turns (the same tokens ``data.max_response_length``
caps).

Loaded by verl's ``resolve_reward_manager_cls`` with ``source: importlib`` (the launcher's overrides,
:data:`rlvr.reward.verl.REWARD_MANAGERS`)::

    reward.reward_manager.source=importlib
    reward.reward_manager.module.path=pkg://rlvr.reward.verl_manager
    reward.reward_manager.name=RLVRNaiveRewardManager          # or RLVRRateLimitedRewardManager

This module imports verl (only verl's processes load it); :mod:`rlvr.reward.verl` does not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.limited import RateLimitedRewardManager
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

from rlvr.reward import step_guard
from rlvr.reward.verl import RESPONSE_LENGTH_KEY

__all__ = ["RLVRNaiveRewardManager", "RLVRRateLimitedRewardManager", "unscored_extra_info", "with_response_length"]


def with_response_length(data: DataProto) -> DataProto:
    """The last row of ``data`` (what verl's managers score) with ``extra_info`` copied and its
    ``response_length`` set to the response's token count (``attention_mask[-responses.shape[-1]:].sum()``, as
    verl's managers compute it)."""
    data = data[-1:]
    item = data[0]
    n = int(item.batch["attention_mask"][-item.batch["responses"].shape[-1]:].sum())
    info = item.non_tensor_batch.get("extra_info")
    info = dict(info) if isinstance(info, dict) else {}
    info[RESPONSE_LENGTH_KEY] = n
    extra = np.empty(1, dtype=object)
    extra[0] = info
    data.non_tensor_batch["extra_info"] = extra
    return data


class RLVRNaiveRewardManager(NaiveRewardManager):
    """verl's ``naive`` manager; ``extra_info`` carries ``response_length`` (tokens)."""

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        """verl's ``NaiveRewardManager.run_single`` on :func:`with_response_length` ``(data)``."""
        return await super().run_single(with_response_length(data))


def unscored_extra_info(mask_excluded: bool) -> dict[str, Any]:
    """The ``reward_extra_info`` of a sample whose reward call never returned (verl's ``rate_limited`` timeout or
    exception): every key :func:`rlvr.reward.verl.compute_score` returns, as a ``sandbox_error``."""
    return {"score": math.nan if mask_excluded else 0.0, "acc": False, "pass_ratio": 0.0, "status": "sandbox_error",
            "n_tests": 0, "judge_s": 0.0, "has_code": True, "timed_out": False, "valid": False, "tool_reward": 0.0,
            "tool_parse_failures": 0, "tool_sandbox_errors": 0}


class RLVRRateLimitedRewardManager(RateLimitedRewardManager):
    """verl's ``rate_limited`` manager (``reward.max_concurrent``, ``reward.timeout``…); ``extra_info`` carries
    ``response_length`` (tokens).

    One more change: when the reward call times out (``reward.timeout``) or raises, verl 0.9.1 scores the sample 0.0
    with ``reward_extra_info`` ``{"timeout"/"error", "acc"}`` only. That is an infrastructure failure, not the
    policy's: it becomes a ``sandbox_error`` (score NaN under the launcher's ``mask_excluded``, so the ``rlvr_grpo``
    estimator leaves it out; 0.0 otherwise) with every key the other samples have — verl builds one array per key
    from the first sample's keys, so a sample with other keys would fail the whole batch (``KeyError``) — and counts
    as a judged ``sandbox_error`` for the per-step dead-judge guard (:mod:`rlvr.reward.step_guard`). Each sample
    counts once: with the sync ``compute_score`` the timed-out call goes on in verl's thread pool and would count again
    when it finishes; the sample's ``extra_info`` copy is marked (:func:`rlvr.reward.step_guard.expect_once`), so
    whichever of the two records first counts and the other does not."""

    async def run_single(self, data: DataProto) -> dict[str, Any]:
        """verl's ``RateLimitedRewardManager.run_single`` on :func:`with_response_length` ``(data)``."""
        data = with_response_length(data)
        sample = data.non_tensor_batch["extra_info"][0]  # the dict verl hands compute_score (this sample's copy)
        step_guard.expect_once(sample)
        out = await super().run_single(data)
        info = out.get("reward_extra_info") or {}
        if "status" not in info and ("timeout" in info or "error" in info):
            fn = self.config.reward.get("custom_reward_function") or {}
            mask = bool((fn.get("reward_kwargs") or {}).get("mask_excluded", False))
            out = {"reward_score": math.nan if mask else 0.0, "reward_extra_info": unscored_extra_info(mask)}
            # the judge did not answer: counted for the per-step guard, unless the late call already was
            step_guard.record("sandbox_error", True, sample=sample)
        return out
