"""verl reward function: ``compute_score`` (sync) and ``compute_score_async`` for verl 0.9.x reward managers.

verl (0.9.1) loads it with ``verl.trainer.ppo.reward.get_custom_reward_fn`` from
``reward.custom_reward_function.{path,name,reward_kwargs}`` (the pre-0.7.1 top-level ``custom_reward_function`` is
migrated there by ``migrate_legacy_reward_impl``); ``path`` may be ``pkg://rlvr.reward.verl`` (a module import, no file
path). ``reward_kwargs`` are merged into every call's keyword arguments. The reward managers ``naive`` and
``rate_limited`` (``verl.experimental.reward_loop.reward_manager``) call it once per sample as
``compute_score(data_source=…, solution_str=…, ground_truth=…, extra_info=…)``: a coroutine function is awaited on the
reward worker's event loop, a plain one runs in the loop's default thread pool. From a dict return they take
``result["score"]`` as the reward and put every key into ``reward_extra_info`` (one array per key, keys from the first
sample, so every sample returns the same keys; string values such as ``status`` are skipped by the validation metrics).

Hydra overrides (GRPO, verl 0.9.1; what :func:`rlvr.train.verl.overrides.grpo_overrides` writes)::

    reward.custom_reward_function.path=pkg://rlvr.reward.verl
    reward.custom_reward_function.name=compute_score_async      # or compute_score
    +reward.custom_reward_function.reward_kwargs.reward_mode=sparse
    +reward.custom_reward_function.reward_kwargs.mask_excluded=True       # with algorithm.adv_estimator=rlvr_grpo
    +reward.custom_reward_function.reward_kwargs.judge_pool=node          # one judge per node (use_node_pool)
    reward.reward_manager.source=importlib                        # rlvr.reward.verl_manager: verl's naive or
    reward.reward_manager.module.path=pkg://rlvr.reward.verl_manager      # rate_limited + the response length
    reward.reward_manager.name=RLVRNaiveRewardManager

verl's plain ``reward.reward_manager.name=naive`` (or ``rate_limited``) also works, without the length term.

``ground_truth`` is the JSON string of :func:`rlvr.data.schema.ground_truth` (``reward_model.ground_truth`` column of
the verl parquet).

Example (a fake judge; a real run uses the sandbox judge):

>>> from rlvr.judge.verdict import JudgeResult
>>> from rlvr.reward.scorer import set_default_judge
>>> class AllPass:
...     def judge_many(self, items):
...         return [JudgeResult(verdict="accepted", passed=len(p.tests), total=len(p.tests), pass_ratio=1.0,
...                             judge_s=0.01) for p, _ in items]
>>> _ = set_default_judge(AllPass())
>>> gt = '{"tests": [{"kind": "stdio", "stdin": "1 2", "stdout": "3"}]}'
>>> r = compute_score("demo", "```python\\nprint(sum(map(int, input().split())))\\n```", gt, reward_mode="sparse")
>>> r["score"], r["acc"], r["status"], r["n_tests"]
(1.0, True, 'accepted', 1)
>>> _ = set_default_judge(None)
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import functools
import logging
import math
import threading
import weakref
from pathlib import Path
from typing import Any

from rlvr.config import ConfigError
from rlvr.reward import judge_log, step_guard
from rlvr.reward.modes import RewardConfig, RewardOutcome, RewardShaping, load_reward_config
from rlvr.reward.scorer import RewardScorer, ScoreItem
from rlvr.reward.scoring import ScoringOptions

__all__ = [
    "FINAL_ANSWER_KEY",
    "RESPONSE_LENGTH_KEY",
    "REWARD_MANAGERS",
    "REWARD_MANAGER_MODULE",
    "TOOL_PARSE_FAILURES_KEY",
    "TOOL_REWARDS_KEY",
    "TOOL_SANDBOX_ERRORS_KEY",
    "compute_score",
    "compute_score_async",
    "default_config",
    "use_node_pool",
]

log = logging.getLogger(__name__)

# Concurrency bound for compute_score_async, shared by every call of the process: verl awaits one call per sample
# (all of a worker's chunk at once), so a per-call bound would not bound anything.
_OPTIONS = ScoringOptions(max_concurrency=64, batch_size=1, request_timeout_s=300.0, max_retries=2)
_pool_lock = threading.Lock()
_pool: cf.ThreadPoolExecutor | None = None
_semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=1)
def default_config(path: str = "params.yaml") -> RewardConfig:
    """The reward configuration from ``params.yaml`` (``reward`` + ``reward_shaping``) in the working directory,
    or the built-in defaults (``dense``) when there is no such file. A present but invalid file raises
    :class:`rlvr.config.ConfigError`."""
    if not Path(path).is_file():
        log.warning("rlvr.reward.verl: %s not found, using default reward config (dense)", path)
        return RewardConfig()
    try:
        return load_reward_config(path)
    except ConfigError:
        raise


def _config(kwargs: dict[str, Any]) -> RewardConfig:
    mode = kwargs.get("reward_mode")
    shaping = kwargs.get("reward_shaping")
    if mode is None and shaping is None:
        return default_config()
    base = default_config()
    return RewardConfig(
        mode=mode or base.mode,
        shaping=RewardShaping.model_validate(dict(shaping)) if shaping is not None else base.shaping,
    )


FINAL_ANSWER_KEY = "final_answer"
"""``extra_info`` key of a multi-turn episode's last assistant turn (written by
:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop` into the sample's ``extra_fields``)."""


RESPONSE_LENGTH_KEY = "response_length"
"""``extra_info`` key of the response's length in tokens (set by :mod:`rlvr.reward.verl_manager`'s reward managers
from the response's attention mask, the length verl's own managers decode)."""

TOOL_REWARDS_KEY = "tool_rewards"
"""``extra_info`` key of the tool step rewards of a multi-turn episode (verl's ``ToolAgentLoop`` puts
``agent_data.tool_rewards`` into the sample's ``extra_fields``, which the reward managers merge into ``extra_info``)."""

REWARD_MANAGER_MODULE = "pkg://rlvr.reward.verl_manager"
REWARD_MANAGERS: dict[str, str] = {"naive": "RLVRNaiveRewardManager", "rate_limited": "RLVRRateLimitedRewardManager"}
"""verl manager name → rlvr's subclass in :mod:`rlvr.reward.verl_manager` (verl's manager plus ``response_length``),
loaded with ``reward.reward_manager.source=importlib`` from :data:`REWARD_MANAGER_MODULE`."""

TOOL_PARSE_FAILURES_KEY = "tool_parse_failures"
#: ``extra_info`` key (an agent loop's ``extra_fields``): the episode's tool calls that failed for the infrastructure's
#: reasons (the judge answered ``sandbox_error``, or the tool raised), counted by
#: :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop` and reported back per sample like ``tool_parse_failures``.
TOOL_SANDBOX_ERRORS_KEY = "tool_sandbox_errors"
"""``extra_info`` key of the episode's tool calls that failed to parse (set by
:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`)."""


def _number(x: Any) -> float | None:
    """A finite real number as float (``bool`` excluded; numpy scalars included), else ``None``."""
    if isinstance(x, bool):
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _item(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any) -> ScoreItem:
    n_tokens = None
    completion: Any = solution_str
    if isinstance(extra_info, dict):
        n = _number(extra_info.get(RESPONSE_LENGTH_KEY))
        if n is not None and n >= 0:
            n_tokens = int(n)
        if isinstance(extra_info.get(FINAL_ANSWER_KEY), str):  # a multi-turn episode: score its last turn only
            completion = extra_info[FINAL_ANSWER_KEY]
    return ScoreItem(
        ground_truth=ground_truth, data_source=str(data_source), completion=completion, n_tokens=n_tokens
    )


_node_pool_checked = False


def use_node_pool(kwargs: dict[str, Any]) -> bool:
    """With ``kwargs["judge_pool"] == "node"``, make this process's reward judge the node's shared judge
    (:class:`rlvr.judge.ray_pool.NodeJudge`, ``judge_pool_workers`` concurrent submissions per node over
    ``judge_pool_shards`` actor processes, judging under ``reward_shaping.max_timeouts``:
    :func:`rlvr.reward.timeouts.node_judge`) — once per
    process, and only inside Ray, when no reward judge was set already and ``RLVR_SANDBOX_URL`` is empty (a judge
    server is the shared pool then). Returns whether this call installed it."""
    global _node_pool_checked
    if kwargs.get("judge_pool") != "node" or _node_pool_checked:
        return False
    with _pool_lock:
        if _node_pool_checked:
            return False
        _node_pool_checked = True
        from rlvr.config import RuntimeSettings
        from rlvr.reward import scorer

        if scorer._default_judge is not None or RuntimeSettings().sandbox_url.strip():
            return False
        try:
            import ray
        except ImportError:
            return False
        if not ray.is_initialized():
            return False
        from rlvr.reward.timeouts import node_judge

        scorer.set_default_judge(node_judge(int(kwargs.get("judge_pool_workers") or 0) or None,
                                            int(kwargs.get("judge_pool_shards") or 0) or None,
                                            _config(kwargs).shaping.max_timeouts))
        return True


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Score one completion for verl (blocking).

    Args:
        data_source: the dataset name (``Problem.source``), verl's ``data_source`` column.
        solution_str: the decoded response.
        ground_truth: JSON string (or dict) from :func:`rlvr.data.schema.ground_truth`.
        extra_info: verl's ``extra_info`` column (with the sample's ``extra_fields`` merged in by verl's managers).
            ``response_length`` (tokens; set by the :mod:`rlvr.reward.verl_manager` managers) enables the shaped
            length term. A str ``final_answer`` (set by the multi-turn repair loop,
            :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`) is scored instead of ``solution_str``, which then
            also holds earlier turns and the tool's answers: the reward is the verdict on the final answer alone.
            ``tool_rewards`` (verl's ``ToolAgentLoop``: one step reward per tool call, ``-turn_penalty`` per
            ``run_tests`` call) are added to the score, as the local engine's repair reward subtracts
            ``turn_penalty`` × calls; ``tool_parse_failures`` (int) is reported back.
        **kwargs: ``reward_mode`` (``sparse``/``dense``/``shaped``) and ``reward_shaping`` (a dict of
            :class:`RewardShaping` fields, ``max_timeouts`` included: the judge's timeout rule,
            :mod:`rlvr.reward.timeouts`) from ``custom_reward_function.reward_kwargs``; default: ``params.yaml``.
            ``judge_log`` (a folder): append the sample's judge seconds there (:mod:`rlvr.reward.judge_log`, the
            source of the curves' ``judge_s`` column). ``mask_excluded`` (bool): an excluded sandbox error
            (``reward_shaping.sandbox_error: exclude``) scores NaN instead of 0.0: verl's agent loop, patched by
            :func:`rlvr.train.verl.mask.patch_agent_loop`, then stores the sample with ``response_mask`` =
            ``loss_mask`` all 0 (out of the policy-gradient, entropy and KL terms of ``ppo_loss`` and out of the
            token-mean normaliser), and the ``rlvr_grpo`` advantage estimator (:mod:`rlvr.train.verl.advantage`)
            leaves it out of its group's baseline and gives it advantage 0; only set it together with that
            estimator. Other keys (verl's ``reward_router_address`` …)
            are ignored. ``judge_pool`` (``node``/``process``) and ``judge_pool_workers``: see
            :func:`use_node_pool`. Inside Ray every call is also counted for the estimator's per-step dead-judge
            guard (:mod:`rlvr.reward.step_guard`).

    Returns:
        ``{"score": float, "acc": bool, "pass_ratio": float, "status": verdict, "n_tests": int, "judge_s": float,
        "has_code": bool, "timed_out": bool, "valid": bool, "tool_reward": float, "tool_parse_failures": int,
        "tool_sandbox_errors": int}``;
        a sandbox error gives ``valid`` False and ``score`` 0.0 (NaN with ``mask_excluded`` under ``exclude``).

    Raises:
        ValueError: ``ground_truth`` is not a ground_truth payload, or ``reward_mode`` is unknown (configuration and
            data errors, the same for every sample). Never raises for anything ``solution_str`` contains or the judge
            does: an un-decodable, giant or extractor-crashing completion and a judge exception on it score as a
            failure, infrastructure failures as ``sandbox_error`` (see :mod:`rlvr.reward.modes`).
    """
    use_node_pool(kwargs)
    scorer = RewardScorer(_config(kwargs), options=_OPTIONS)
    out = _verl_result(scorer.score([_item(data_source, solution_str, ground_truth, extra_info)])[0], extra_info,
                       kwargs)
    return _logged(out, extra_info, kwargs)


def _verl_result(outcome: RewardOutcome, extra_info: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The dict verl gets: :meth:`RewardOutcome.verl_dict` plus the episode's tool step rewards (added to a scored
    sample), ``tool_reward``/``tool_parse_failures``/``tool_sandbox_errors`` keys, and NaN for an excluded sample
    under ``mask_excluded``."""
    out = outcome.verl_dict()
    info = extra_info if isinstance(extra_info, dict) else {}
    raw = info.get(TOOL_REWARDS_KEY)
    tool = sum(v for v in (_number(x) for x in (raw if isinstance(raw, list | tuple) or hasattr(raw, "tolist")
                                                  else []))
               if v is not None)
    fails = _number(info.get(TOOL_PARSE_FAILURES_KEY))
    tool_errors = _number(info.get(TOOL_SANDBOX_ERRORS_KEY))
    out["tool_reward"] = float(tool)
    out[TOOL_PARSE_FAILURES_KEY] = int(fails) if fails is not None and fails > 0 else 0
    out[TOOL_SANDBOX_ERRORS_KEY] = int(tool_errors) if tool_errors is not None and tool_errors > 0 else 0
    if outcome.score is None:  # sandbox_error under `exclude`: no reward at all
        if kwargs.get("mask_excluded"):
            out["score"] = math.nan
    else:
        out["score"] = float(outcome.score) + tool
    return out


def _logged(out: dict[str, Any], extra_info: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``out``, after counting it for the per-step guard (:func:`rlvr.reward.step_guard.record`: inside Ray only, in
    memory, published by a background thread; not at all when rlvr's ``rate_limited`` manager already counted this
    sample as a timed-out ``sandbox_error``, :func:`rlvr.reward.step_guard.expect_once`) and appending it to the judge
    log when ``kwargs["judge_log"]`` names one."""
    step_guard.record(out.get("status"), out.get("has_code"), sample=extra_info)
    if kwargs.get("judge_log"):
        judge_log.append_record(str(kwargs["judge_log"]), extra_info, out)
    return out


def _shared() -> tuple[cf.ThreadPoolExecutor, asyncio.Semaphore]:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = cf.ThreadPoolExecutor(max_workers=_OPTIONS.max_concurrency, thread_name_prefix="rlvr-verl-reward")
        loop = asyncio.get_running_loop()
        sem = _semaphores.get(loop)
        if sem is None:
            sem = _semaphores[loop] = asyncio.Semaphore(_OPTIONS.max_concurrency)
        return _pool, sem


async def compute_score_async(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Async :func:`compute_score` (same arguments and return value). verl awaits it on the reward worker's event
    loop; the judge runs in a process-wide pool of 64 threads, so concurrent calls are bounded together."""
    use_node_pool(kwargs)
    scorer = RewardScorer(_config(kwargs), options=_OPTIONS)
    pool, sem = _shared()
    out = await scorer.score_async(
        [_item(data_source, solution_str, ground_truth, extra_info)], executor=pool, semaphore=sem
    )
    return _logged(_verl_result(out[0], extra_info, kwargs), extra_info, kwargs)
