"""TRL reward functions (``GRPOTrainer(reward_funcs=…)``, TRL 1.16).

TRL calls each reward function once per generation batch as
``f(prompts=…, completions=…, completion_ids=…, **columns, trainer_state=…, log_extra=…, log_metric=…)`` where every
extra dataset column arrives as a list aligned with ``completions``; it expects ``list[float | None]`` of the same
length, turns ``None`` into NaN (that completion is left out of the group baseline and gets advantage 0), and awaits
``async`` functions on its own event loop (``GRPOTrainer._calculate_rewards``).

Each reward function keeps a per-step dead-judge guard (:class:`rlvr.reward.step_guard.StepGuard`, keyed on TRL's
``global_step``): when every completion sent to the judge came back ``sandbox_error`` in
:data:`~rlvr.reward.step_guard.DEAD_STEPS` (2) consecutive training steps (steps where nothing reached the judge
skipped), the call raises :class:`rlvr.reward.step_guard.JudgeDied` (the judge died: the run stops there instead of
training on no reward to the end). Batches of the same step (generation and evaluation) add up to one step.

Completions are plain strings (standard datasets) or message lists ``[{"role": "assistant", "content": …}]``
(conversational datasets); both are handled. The dataset needs a ``ground_truth`` column
(:func:`rlvr.data.schema.ground_truth`) and may have ``data_source``. All completions of a call are judged
concurrently (bounded, per-request timeout, retries on transport errors only, see :mod:`rlvr.reward.scoring`).

Example (a fake judge; in training ``judge=None`` uses the sandbox judge):

>>> from rlvr.judge.verdict import JudgeResult
>>> class HalfPass:
...     def judge_many(self, items):
...         return [JudgeResult(verdict="wrong_answer", passed=1, total=2, pass_ratio=0.5, judge_s=0.01)
...                 for _ in items]
>>> gt = '{"tests": [{"kind": "stdio", "stdin": "1", "stdout": "1"}, {"kind": "stdio", "stdin": "2", "stdout": "4"}]}'
>>> [dense] = make_reward_funcs("dense", judge=HalfPass())
>>> dense(prompts=["p", "p"], completions=["```python\\nprint(input())\\n```", "no code here"],
...       ground_truth=[gt, gt])
[0.5, 0.0]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from rlvr.reward.extract import clean_completion
from rlvr.reward.modes import REWARD_MODES, RewardConfig, RewardMode, RewardOutcome, RewardShaping
from rlvr.reward.scorer import RewardScorer, ScoreItem
from rlvr.reward.scoring import JudgeLike, ScoringOptions
from rlvr.reward.share_window import ShareWindow
from rlvr.reward.step_guard import LOCAL_HINT, StepGuard, step_counts

__all__ = ["AsyncCodeReward", "CodeReward", "completion_text", "group_extremes", "make_reward_funcs"]


def completion_text(completion: Any) -> str:
    """The answer text of a TRL completion: the string itself, or the concatenated ``content`` of the assistant
    messages of a conversational completion (content may be a string or a list of ``{"type": "text", "text": …}``
    blocks). Never raises: anything else (a non-dict message, a non-text block) contributes nothing, and the text is
    made valid Unicode (:func:`rlvr.reward.extract.clean_completion`)."""
    if isinstance(completion, str) or completion is None or isinstance(completion, (bytes, bytearray)):
        return clean_completion(completion)
    parts: list[str] = []
    try:
        for msg in completion:
            if not isinstance(msg, dict) or msg.get("role", "assistant") != "assistant":
                continue
            content = msg.get("content") or ""
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    except TypeError:  # not iterable
        return clean_completion(completion)
    return clean_completion("\n".join(parts))


class CodeReward:
    """Synchronous TRL reward function scoring code completions with the judge (see module docstring).

    Args:
        config: reward mode and shaping coefficients.
        judge: object with ``judge_many``; ``None`` = the process-wide sandbox judge (lazy).
        options: concurrency / per-request timeout / retries.
    The instance's ``__name__`` (``code_<mode>``) is the name TRL logs the reward under (``rewards/code_dense/mean``);
    ``guard`` is its per-step dead-judge guard (module doc), one per reward function and run; when ``judge`` is a
    stage's :class:`rlvr.judge.preflight.GuardedJudge` the guard also bounds partial failure with its
    ``max_share`` over ``window_steps`` steps (``judge.max_sandbox_error_share``,
    ``judge.sandbox_error_window_steps``: :class:`rlvr.reward.share_window.ShareWindow`).
    """

    def __init__(
        self, config: RewardConfig, judge: JudgeLike | None = None, options: ScoringOptions | None = None
    ) -> None:
        self.scorer = RewardScorer(config, judge, options)
        share = ShareWindow(getattr(judge, "max_share", 1.0), getattr(judge, "window_steps", 0)) \
            if isinstance(getattr(judge, "window_steps", None), int) else None
        self.guard = StepGuard("TRL GRPO", totals=None, hint=LOCAL_HINT, share=share)
        self.__name__ = f"code_{config.mode}"

    def _items(
        self,
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]] | None,
        ground_truth: Sequence[str] | None,
        data_source: Sequence[str] | None,
    ) -> list[ScoreItem]:
        if ground_truth is None:
            raise ValueError("reward dataset has no 'ground_truth' column (see rlvr.data.schema.ground_truth)")
        if len(ground_truth) != len(completions):
            raise ValueError(f"ground_truth has {len(ground_truth)} rows for {len(completions)} completions")
        sources = list(data_source) if data_source is not None else ["unknown"] * len(completions)
        return [
            ScoreItem(
                ground_truth=gt,
                data_source=str(src),
                completion=completion_text(c),
                n_tokens=len(completion_ids[i]) if completion_ids is not None else None,
            )
            for i, (c, gt, src) in enumerate(zip(completions, ground_truth, sources, strict=True))
        ]

    def _guard(self, outcomes: list[RewardOutcome], trainer_state: Any) -> None:
        """Add one batch's outcomes to the per-step dead-judge guard (:attr:`guard`); the step is TRL's
        ``global_step + 1`` (the step this batch is generated for) when TRL passes its state, else each call is a
        step of its own. Raises :class:`rlvr.reward.step_guard.JudgeDied` (module doc)."""
        step = getattr(trainer_state, "global_step", None)
        self.guard.observe(*step_counts(outcomes), step=step + 1 if isinstance(step, int) else None)

    @staticmethod
    def _log(outcomes: list[RewardOutcome], log_extra: Callable | None, log_metric: Callable | None,
             groups: Sequence[Any] = ()) -> None:
        if log_extra is not None:
            log_extra("status", [o.status for o in outcomes])
            log_extra("pass_ratio", [o.pass_ratio for o in outcomes])
        if log_metric is not None and outcomes:
            n = len(outcomes)
            counts = Counter(o.status for o in outcomes)
            log_metric("reward/accepted", sum(o.acc for o in outcomes) / n)
            log_metric("reward/pass_ratio", sum(o.pass_ratio for o in outcomes) / n)
            log_metric("reward/no_code", sum(not o.has_code for o in outcomes) / n)
            log_metric("reward/sandbox_error", counts.get("sandbox_error", 0) / n)
            judged, errors = step_counts(outcomes)
            if judged:  # the share of the samples sent to the judge: the curves' sandbox_error_share
                log_metric("reward/sandbox_error_share", errors / judged)
            log_metric("reward/timeout", sum(o.timed_out for o in outcomes) / n)
            log_metric("reward/judge_s", sum(o.judge_s for o in outcomes) / n)
            if groups:
                all_pass, all_fail = group_extremes(groups, [o.score for o in outcomes])
                log_metric("reward/all_pass_frac", all_pass)
                log_metric("reward/all_fail_frac", all_fail)

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        completion_ids: Sequence[Sequence[int]] | None = None,
        ground_truth: Sequence[str] | None = None,
        data_source: Sequence[str] | None = None,
        log_extra: Callable | None = None,
        log_metric: Callable | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """Score ``completions`` (one reward per completion, ``None`` = not scorable: sandbox error under
        ``exclude``). Never raises for anything a completion contains or the judge does on some completions; raises
        ``ValueError`` when ``ground_truth`` is missing or invalid (a dataset bug) and
        :class:`rlvr.reward.step_guard.JudgeDied` when every completion sent to the judge came back
        ``sandbox_error`` in this step and the previous judged one (a dead judge: the run stops at this step, in
        either ``sandbox_error`` mode)."""
        outcomes = self.scorer.score(self._items(completions, completion_ids, ground_truth, data_source))
        self._log(outcomes, log_extra, log_metric, _group_keys(prompts, ground_truth))
        self._guard(outcomes, kwargs.get("trainer_state"))
        return [o.score for o in outcomes]


class AsyncCodeReward(CodeReward):
    """:class:`CodeReward` as a coroutine function: TRL awaits it on its async loop (concurrently with other async
    reward functions); judging runs in worker threads."""

    async def __call__(  # type: ignore[override]
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        completion_ids: Sequence[Sequence[int]] | None = None,
        ground_truth: Sequence[str] | None = None,
        data_source: Sequence[str] | None = None,
        log_extra: Callable | None = None,
        log_metric: Callable | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        """Async :meth:`CodeReward.__call__` (same errors)."""
        outcomes = await self.scorer.score_async(self._items(completions, completion_ids, ground_truth, data_source))
        self._log(outcomes, log_extra, log_metric, _group_keys(prompts, ground_truth))
        self._guard(outcomes, kwargs.get("trainer_state"))
        return [o.score for o in outcomes]


def _group_keys(prompts: Sequence[Any] | None, ground_truth: Sequence[str] | None) -> list[str]:
    """One key per completion naming its GRPO group: the prompt (a repair context is a prompt of its own) and the
    problem's ground_truth; ``[]`` without ground_truth."""
    if ground_truth is None:
        return []
    ps = list(prompts) if prompts is not None else [""] * len(ground_truth)
    return [f"{p!r}\x00{gt}" for p, gt in zip(ps, ground_truth, strict=False)]


def group_extremes(groups: Sequence[Any], scores: Sequence[float | None]) -> tuple[float, float]:
    """``(all_pass, all_fail)``: the fractions of GRPO groups (completions sharing a ``groups`` key; groups of one
    scored completion are not groups and are left out) whose scored completions all have reward ≥ 1 (every
    rollout accepted) / all ≤ 0 (every rollout failed): two kinds of zero-variance group, whose advantage is 0 and
    which carry no gradient (TRL logs their sum with any other equal-reward group as ``frac_reward_zero_std``).
    ``None`` scores (an excluded sandbox error) are left out. ``(0.0, 0.0)`` when there is no group.
    Raises ``ValueError`` when the two sequences differ in length."""
    if len(groups) != len(scores):
        raise ValueError(f"group_extremes: {len(groups)} group keys for {len(scores)} scores")
    by: dict[Any, list[float]] = {}
    for g, s in zip(groups, scores, strict=True):
        if s is not None:
            by.setdefault(g, []).append(float(s))
    sized = [v for v in by.values() if len(v) > 1]
    if not sized:
        return 0.0, 0.0
    return (sum(all(x >= 1.0 - 1e-9 for x in v) for v in sized) / len(sized),
            sum(all(x <= 0.0 for x in v) for v in sized) / len(sized))


def make_reward_funcs(
    mode: RewardMode | RewardConfig | None = None,
    judge: JudgeLike | None = None,
    *,
    shaping: RewardShaping | None = None,
    options: ScoringOptions | None = None,
    use_async: bool = False,
) -> list[CodeReward]:
    """The ``reward_funcs`` list for ``trl.GRPOTrainer``.

    Args:
        mode: ``"sparse" | "dense" | "shaped"``, a full :class:`RewardConfig`, or ``None`` = read ``params.yaml``
            (``reward`` + ``reward_shaping``) via :func:`rlvr.reward.modes.load_reward_config`.
        judge: the judge (``None`` = process-wide sandbox judge, created at the first reward call).
        shaping: shaping coefficients when ``mode`` is a string (default :class:`RewardShaping`).
        options: concurrency / timeout / retry policy.
        use_async: return an :class:`AsyncCodeReward` (awaited by TRL) instead of a :class:`CodeReward`.
    Raises ``ValueError`` for an unknown mode, :class:`rlvr.config.ConfigError` for a bad ``params.yaml``.
    """
    if isinstance(mode, RewardConfig):
        config = mode
    elif mode is None:
        from rlvr.reward.modes import load_reward_config

        config = load_reward_config()
    elif mode in REWARD_MODES:
        config = RewardConfig(mode=mode, shaping=shaping or RewardShaping())
    else:
        raise ValueError(f"reward mode {mode!r} is not one of {', '.join(REWARD_MODES)}")
    cls = AsyncCodeReward if use_async else CodeReward
    return [cls(config, judge, options)]
