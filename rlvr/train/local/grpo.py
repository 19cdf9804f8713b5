"""Online GRPO with the judge reward (local engine, TRL ``GRPOTrainer``).

Each step samples ``num_generations`` completions (the group) per prompt, scores them with the judge through
:func:`rlvr.reward.trl.make_reward_funcs` (mode ``sparse | dense | shaped``, the top-level ``params.yaml`` key
``reward``), normalises rewards within the group (GRPO, Shao et al. 2024; ``scale_rewards``) and takes a clipped
policy-gradient step (``epsilon``/``epsilon_high``) with an optional KL penalty to the input model (``beta``) and an
optional entropy bonus (``entropy_coef``; TRL 1.16 ``GRPOConfig.entropy_coef``). Loss aggregation ``loss_type``:
``grpo`` (per-sequence mean), ``dr_grpo`` (Liu et al. 2025, constant normaliser), ``dapo`` (Yu et al. 2025, token
mean over the batch), as documented in ``GRPOConfig``.

Curves (one TSV row per logging step, from TRL's logged metrics, see :data:`GRPO_CURVES`): reward mean/std, accepted
rate, pass_ratio, zero-std group fraction (and its all-pass / all-fail parts,
:func:`rlvr.reward.trl.group_extremes`), KL, entropy, completion length, clip ratio; the judge wall seconds per step
(``judge_step_s``) go to the TSV's cost mirror ``metrics/cost/grpo/seed-<n>.tsv`` (:func:`rlvr.layout.write_curves`).

Run through the stage: ``python stages/grpo.py --seed 1``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from rlvr.data.schema import Problem
from rlvr.train.local.common import (
    OptimParams,
    TrainCommon,
    TsvCurves,
    evaluate_accepted,
    fit,
    grpo_rows,
    lora_config,
    reward_quarters,
    run_dir,
    set_seed,
    setup_tracking,
    trainer_kwargs,
)

__all__ = ["GRPO_CURVES", "GRPOParams", "TimedReward", "grpo_config", "run_grpo"]

# TSV column → key in TRL's GRPOTrainer logs (``reward/*`` are logged by rlvr.reward.trl via ``log_metric``;
# ``judge_step_s`` by :class:`TimedReward`).
GRPO_CURVES = {
    "reward_mean": "reward",
    "reward_std": "reward_std",
    "accepted": "reward/accepted",
    "pass_ratio": "reward/pass_ratio",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "all_pass_frac": "reward/all_pass_frac",
    "all_fail_frac": "reward/all_fail_frac",
    "kl": "kl",
    "entropy": "entropy",
    "completion_length": "completions/mean_length",
    "clipped_completions": "completions/clipped_ratio",
    "clip_ratio": "clip_ratio/region_mean",
    "sandbox_error_share": "reward/sandbox_error_share",
    "judge_step_s": "judge/step_s",
    "loss": "loss",
    "learning_rate": "learning_rate",
}


class GRPOParams(OptimParams):
    """``params.yaml`` section ``grpo`` (optimiser fields: :class:`rlvr.train.local.common.OptimParams`).

    Fields (TRL ``GRPOConfig`` names in brackets):
        num_generations: group size G (verl ``rollout.n``) [``num_generations``].
        beta: KL coefficient to the reference (input) model; 0 = no reference model [``beta``].
        entropy_coef: entropy bonus coefficient [``entropy_coef``].
        epsilon / epsilon_high: PPO clip range (``epsilon_high`` None = symmetric; DAPO's clip-higher when set).
        loss_type: ``grpo`` | ``dr_grpo`` | ``dapo`` (and TRL's others) [``loss_type``].
        scale_rewards: ``group`` | ``batch`` | ``none`` (Dr. GRPO recommends ``none``) [``scale_rewards``].
        temperature / top_p: rollout sampling.
        num_iterations: policy updates per generation batch (μ in the GRPO paper).
        mask_truncated_completions: drop truncated completions from the loss (DAPO).
    ``per_device_train_batch_size * gradient_accumulation_steps`` must be a multiple of ``num_generations``
    (completions per optimizer step; prompts per step = that / G).
    """

    learning_rate: float = Field(1e-5, gt=0)
    lr_scheduler_type: str = "constant"  # verl's and the GRPO papers' default; verl has only constant | cosine
    num_generations: int = Field(8, ge=2)
    beta: float = Field(0.0, ge=0)
    entropy_coef: float = Field(0.0, ge=0)
    epsilon: float = Field(0.2, gt=0)
    epsilon_high: float | None = None
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo"] = "dapo"
    scale_rewards: Literal["group", "batch", "none"] = "group"
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    num_iterations: int = Field(1, ge=1)
    mask_truncated_completions: bool = False

    @model_validator(mode="after")
    def _check_batch(self) -> GRPOParams:
        n = self.per_device_train_batch_size * self.gradient_accumulation_steps
        if n % self.num_generations:
            raise ValueError(
                f"per_device_train_batch_size*gradient_accumulation_steps={n} is not a multiple of "
                f"num_generations={self.num_generations}"
            )
        return self


class TimedReward:
    """Wrap a TRL reward function to log its wall time per call (``judge/step_s``, seconds: judging one generation
    batch) through TRL's ``log_metric``; keeps the wrapped function's ``__name__`` (TRL's reward log name)."""

    def __init__(self, fn: Callable[..., list[float | None]]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "reward")

    def __call__(self, **kwargs: Any) -> list[float | None]:
        """Call the wrapped reward function with TRL's keyword arguments and log its wall seconds."""
        t0 = time.perf_counter()
        out = self.fn(**kwargs)
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("judge/step_s", time.perf_counter() - t0)
        return out


def grpo_config(cfg: GRPOParams, common: TrainCommon, out: str | Path, report_to: list[str]) -> Any:
    """TRL ``GRPOConfig`` for ``cfg`` (group size ``num_generations``, clip ``epsilon``/``epsilon_high``, KL coef
    ``beta``, loss aggregation ``loss_type``, group reward scaling ``scale_rewards``; field meanings as in TRL 1.16's
    ``GRPOConfig``) on top of :func:`rlvr.train.local.common.trainer_kwargs` (output dir ``out``, steps, lr, logging,
    ``report_to``); completions are capped at ``common.max_completion_length`` tokens. Shared by the ``grpo`` and
    ``repair`` stages so both train under the same GRPO settings."""
    from trl import GRPOConfig

    return GRPOConfig(
        **trainer_kwargs(cfg, common, out, report_to),
        num_generations=cfg.num_generations,
        max_completion_length=common.max_completion_length,
        beta=cfg.beta,
        entropy_coef=cfg.entropy_coef,
        epsilon=cfg.epsilon,
        epsilon_high=cfg.epsilon_high,
        loss_type=cfg.loss_type,
        scale_rewards=cfg.scale_rewards,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        num_iterations=cfg.num_iterations,
        mask_truncated_completions=cfg.mask_truncated_completions,
        log_completions=False,
    )


def run_grpo(
    cfg: GRPOParams,
    common: TrainCommon,
    model_dir: str | Path,
    train_problems: Sequence[Problem],
    eval_problems: Sequence[Problem],
    judge: Any,
    out_model_dir: str | Path,
    curves_path: str | Path,
    reward_mode: str = "dense",
    reward_funcs: Sequence[Callable[..., Any]] | None = None,
    max_timeouts: int = 3,
    shaping: Any = None,
) -> dict[str, Any]:
    """Train GRPO from ``model_dir`` on ``train_problems`` with the judge reward and publish the final model to
    ``out_model_dir``; returns metrics (``train_loss``, ``steps``, ``train_runtime_s``, reward curve summary:
    ``reward_first``/``reward_last`` = mean reward over the first/last quarter of logged steps, ``dev`` accepted@1).

    ``reward_funcs`` overrides the judge reward (tests); by default
    ``rlvr.reward.trl.make_reward_funcs(reward_mode, judge=judge)``, each wrapped in :class:`TimedReward`, judging
    under ``max_timeouts`` (``reward_shaping.max_timeouts``, :mod:`rlvr.reward.timeouts`; the ``dev`` check keeps
    ``judge``'s own rule; hashed into the run folder's key when not the default 3). ``shaping``: the
    ``reward_shaping`` section (:class:`rlvr.reward.modes.RewardShaping`: the ``shaped`` mode's coefficients and the
    sandbox-error policy of every mode; default: the class defaults), its ``max_timeouts`` replaced by
    ``max_timeouts``; a value that differs from the class default is hashed into the run folder's key. Raises
    :class:`rlvr.config.ConfigError` when ``judge`` cannot apply ``max_timeouts``."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from rlvr.reward.modes import RewardShaping
    from rlvr.reward.timeouts import trajectory_key

    set_seed(cfg.seed, common.cpu_threads)
    shaping = (shaping or RewardShaping()).model_copy(update={"max_timeouts": max_timeouts})
    default = RewardShaping().model_dump()
    shaping_key = {k: v for k, v in shaping.model_dump().items() if k != "max_timeouts" and v != default[k]}
    if reward_funcs is None:
        from rlvr.reward.timeouts import reward_judge
        from rlvr.reward.trl import make_reward_funcs

        reward_judge(judge, max_timeouts)  # fails now, not at the first step, when the judge cannot apply it
        reward_funcs = make_reward_funcs(reward_mode, judge=judge, shaping=shaping)  # type: ignore[arg-type]
    funcs = [TimedReward(f) for f in reward_funcs]
    rows = [{k: v for k, v in r.items() if k != "id"} for r in grpo_rows(train_problems)]
    ds = Dataset.from_list(rows)
    out = run_dir("grpo", {"grpo": cfg.model_dump(), "train": common.model_dump(), "reward": reward_mode,
                           **trajectory_key(max_timeouts),
                           **({"reward_shaping": shaping_key} if shaping_key else {})}, model_dir,
                  seed=cfg.seed, problems=train_problems, rows=rows)
    report_to = setup_tracking("grpo", common.report_to, seed=cfg.seed)
    args = grpo_config(cfg, common, out, report_to)
    curves = TsvCurves(curves_path, GRPO_CURVES, mirror=Path(out) / "curves.tsv")
    _, fitted = fit(GRPOTrainer, model_dir, args, ds, curves, out, out_model_dir, lora_config(cfg), reward_funcs=funcs)
    metrics: dict[str, Any] = {"reward_mode": reward_mode, **fitted, **reward_quarters(curves)}
    if common.eval_max_new_tokens > 0 and eval_problems:
        metrics["dev"] = evaluate_accepted(out_model_dir, eval_problems, judge, common.eval_max_new_tokens)
    return metrics
