"""Completions in, rewards out: the one scoring path shared by the verl and TRL adapters.

``RewardScorer.score(items)`` takes ``(ground_truth, data_source, completion, n_tokens)`` tuples, rebuilds each
problem from its ``ground_truth`` JSON (:func:`rlvr.data.schema.from_ground_truth`, cached), extracts the program
(:mod:`rlvr.reward.extract`), judges all programs concurrently (:mod:`rlvr.reward.scoring`) and applies the reward
mode (:mod:`rlvr.reward.modes`). Completions without code are never sent to the judge.

Nothing a completion contains can make scoring raise or reach ``sandbox_error`` (:mod:`rlvr.reward.extract`,
:mod:`rlvr.reward.scoring`). The judge is resolved lazily on first use (``rlvr.judge.client.get_judge()``: the
embedded sandbox judge, or the remote one when ``RLVR_SANDBOX_URL`` is set), so importing this module starts nothing
and touches no network.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.data.schema import Problem, from_ground_truth
from rlvr.reward.extract import safe_program_for
from rlvr.reward.modes import RewardConfig, RewardOutcome, outcome_from
from rlvr.reward.scoring import JudgeLike, ScoringOptions, judge_all, judge_all_async

__all__ = ["RewardScorer", "ScoreItem", "default_judge", "problem_from_ground_truth", "set_default_judge"]

_judge_lock = threading.Lock()
_default_judge: JudgeLike | None = None


def default_judge() -> JudgeLike:
    """The process-wide judge for rewards: ``rlvr.judge.client.get_judge()``, created on first call (thread-safe)."""
    global _default_judge
    with _judge_lock:
        if _default_judge is None:
            try:
                from rlvr.judge.client import get_judge
            except ImportError:  # client not built yet: the embedded judge
                from rlvr.judge import Judge as get_judge
            _default_judge = get_judge()
        return _default_judge


def set_default_judge(judge: JudgeLike | None) -> JudgeLike | None:
    """Replace the process-wide reward judge (tests, or a launcher that built its own); returns the previous one."""
    global _default_judge
    with _judge_lock:
        prev, _default_judge = _default_judge, judge
        return prev


@functools.lru_cache(maxsize=8192)
def _problem_cached(gt: str, data_source: str) -> Problem:
    return from_ground_truth(gt, data_source)


def problem_from_ground_truth(gt: str | dict[str, Any], data_source: str = "unknown") -> Problem:
    """Rebuild the judgeable problem from a ``ground_truth`` payload (JSON string cached: a GRPO group repeats it).

    Raises ``ValueError`` naming the data source and the field when the payload is not a ground_truth object (a
    data bug: it must fail loudly, never silently score 0)."""
    try:
        if isinstance(gt, str):
            return _problem_cached(gt, data_source)
        return from_ground_truth(gt, data_source)
    except Exception as exc:
        head = (gt if isinstance(gt, str) else repr(gt))[:80]
        raise ValueError(f"ground_truth of data_source={data_source!r} is invalid ({exc}); starts {head!r}") from exc


@dataclass(frozen=True)
class ScoreItem:
    """One completion to score: its problem's ``ground_truth`` JSON, ``data_source``, the completion text and its
    length in tokens (``None`` when unknown)."""

    ground_truth: str | dict[str, Any]
    data_source: str
    completion: str
    n_tokens: int | None = None


class RewardScorer:
    """Score batches of completions under one :class:`RewardConfig`.

    Args:
        config: reward mode, shaping coefficients and the judge's timeout rule (``shaping.max_timeouts``).
        judge: an object with ``judge_many`` (``rlvr.judge.Judge``, the remote client, a fake); ``None`` = the
            process-wide :func:`default_judge`, resolved at the first call.
        options: concurrency / timeout / retry policy (:class:`ScoringOptions`).
    """

    def __init__(
        self, config: RewardConfig, judge: JudgeLike | None = None, options: ScoringOptions | None = None
    ) -> None:
        self.config = config
        self._judge = judge
        self.options = options or ScoringOptions()

    @property
    def judge(self) -> JudgeLike:
        """The judge in use (resolved lazily), under ``config.shaping.max_timeouts``
        (:func:`rlvr.reward.timeouts.reward_judge`: the judge itself at its own rule, else a view of its pool).
        Raises :class:`rlvr.config.ConfigError` when the judge cannot apply that rule."""
        from rlvr.reward.timeouts import reward_judge

        return reward_judge(self._judge if self._judge is not None else default_judge(),
                            self.config.shaping.max_timeouts)

    def _prepare(self, items: Sequence[ScoreItem]) -> tuple[list[Problem], list[str | None]]:
        problems = [problem_from_ground_truth(it.ground_truth, it.data_source) for it in items]
        programs = [safe_program_for(p, it.completion) for p, it in zip(problems, items, strict=True)]
        return problems, programs

    def _finish(self, items, problems, programs, results) -> list[RewardOutcome]:
        it_res = iter(results)
        out = []
        for it, p, prog in zip(items, problems, programs, strict=True):
            res = None if prog is None else next(it_res)
            out.append(outcome_from(self.config, res, n_tests=len(p.tests), n_tokens=it.n_tokens))
        return out

    def score(self, items: Sequence[ScoreItem]) -> list[RewardOutcome]:
        """Score ``items`` (order preserved). Blocking; concurrent inside.

        Never raises for anything a completion contains or the judge does (see :mod:`rlvr.reward.scoring`): a
        completion the extractor crashes on scores as having no code, a judge exception on one submission as
        ``wrong_answer``, infrastructure failures as ``sandbox_error``. Raises ``ValueError`` only for a bad
        ``ground_truth`` payload (a data bug, the same for every sample of that problem: it must fail loudly, never
        silently score 0)."""
        items = list(items)
        problems, programs = self._prepare(items)
        todo = [(p, prog) for p, prog in zip(problems, programs, strict=True) if prog is not None]
        results = judge_all(self.judge, todo, self.options) if todo else []
        return self._finish(items, problems, programs, results)

    async def score_async(
        self,
        items: Sequence[ScoreItem],
        *,
        executor: concurrent.futures.Executor | None = None,
        semaphore: asyncio.Semaphore | None = None,
    ) -> list[RewardOutcome]:
        """Async :meth:`score`: judging runs in worker threads, the event loop stays free. ``executor``/``semaphore``
        are passed to :func:`rlvr.reward.scoring.judge_all_async` (shared bounds across concurrent calls)."""
        items = list(items)
        problems, programs = self._prepare(items)
        todo = [(p, prog) for p, prog in zip(problems, programs, strict=True) if prog is not None]
        results = (
            await judge_all_async(self.judge, todo, self.options, executor=executor, semaphore=semaphore)
            if todo
            else []
        )
        return self._finish(items, problems, programs, results)
