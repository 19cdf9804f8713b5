"""The training judge's timeout rule: ``reward_shaping.max_timeouts`` reaching every judge that scores rollouts.

The judge stops a submission after ``max_timeouts`` timed-out tests: the rest are not run and count as timeouts
(0 = run every test; :class:`rlvr.judge.Judge`, default 3). A looping rollout costs ``max_timeouts`` × the problem's
time limit of judge time (LeetCode 15 s per test → 45 s at 3, MBPP 6 s → 18 s, CodeContests 10 s → 30 s) where the
median sample takes 0.02 s; the 1-GPU rehearsal measured the judge at 59–82 % of a GRPO step
(docs/training/rehearsal.md), so the 7B profiles set 1. ``accepted`` does not change with the rule (any timeout is not
accepted); ``pass_ratio`` of a submission that times out counts the tests after the N-th timeout as failed, where at
3 some of them might have passed.

Training judges only; evaluation keeps the judge's default. Where the rule is applied:

* :func:`reward_judge` — the reward's judge (:class:`rlvr.reward.scorer.RewardScorer`: the local engine's TRL reward
  and verl's ``compute_score``), the local repair loop's feedback judge and verl repair's feedback judge
  (:func:`rlvr.repair.verl_tool._judge`): the embedded judge and a remote judge get a view of the same pool with the
  rule changed (:func:`rlvr.judge.rule.with_max_timeouts`: a shallow copy, same workers or connections, another
  ``max_timeouts``); a judge that already applies the value is used as it is. A remote judge in SandboxFusion
  fallback mode applies the rule on this side; an rlvr judge server (``RLVR_SANDBOX_URL`` naming one) is sent the
  value with each ``/rlvr/judge`` request and applies it to that submission (:mod:`rlvr.judge.api.native`), which it
  can for 1 to its own judge's value (3 for ``rlvr sandbox serve``): 0, a value above the server's, or a server
  older than the field (its ``/rlvr/info`` does not say its rule) is a :class:`~rlvr.config.ConfigError` naming the
  key, the value, the server's and its URL, raised here (the local engine calls this at stage start; verl's reward
  workers at their first score). A judge of unknown kind asked for another value than its own is an error too.
* :func:`node_judge` — the node's shared judge under verl (:class:`rlvr.judge.ray_pool.NodeJudge`): its actors build
  their judges from :func:`node_factory`'s ``"module:callable"`` (``rlvr.reward.timeouts:judge_max_timeouts_<n>``,
  resolved by this module's ``__getattr__``). The actors are shared by name and their names carry the value
  (:func:`rlvr.judge.ray_pool.node_actor_name`), so callers on a node that pass different values (the reward and
  the repair tools both pass ``reward_shaping.max_timeouts``) get actors of their own value each, never another
  caller's.
"""

from __future__ import annotations

import copy
import functools
import re
import threading
import weakref
from pathlib import Path
from typing import Any

from rlvr.config import ConfigError
from rlvr.judge.rule import with_max_timeouts

__all__ = ["DEFAULT_MAX_TIMEOUTS", "load_max_timeouts", "node_factory", "node_judge", "reward_judge",
           "trajectory_key"]

DEFAULT_MAX_TIMEOUTS = 3
"""The judge's own rule (:class:`rlvr.judge.Judge`, :class:`rlvr.judge.client.RemoteJudge`, the judge server)."""

_FACTORY_NAME = re.compile(r"judge_max_timeouts_(\d+)")
_views: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()
_views_lock = threading.Lock()


def load_max_timeouts(path: str | Path = "params.yaml") -> int:
    """``reward_shaping.max_timeouts`` of ``params.yaml`` (the default 3 without the section or the key; the
    ``reward`` mode is not needed: the repair stage's reward is always ``sparse``). Raises
    :class:`rlvr.config.ConfigError` naming the file and the section when the section is invalid."""
    from rlvr.config import load_params
    from rlvr.reward.modes import RewardShaping

    raw = load_params(path).get("reward_shaping") or {}
    try:
        return RewardShaping.model_validate(raw).max_timeouts
    except Exception as exc:  # pydantic ValidationError -> ConfigError naming the section
        raise ConfigError(f"{path}: reward_shaping: {exc}") from exc


def _check(max_timeouts: Any) -> int:
    """``max_timeouts`` as an int >= 0; ``ConfigError`` naming the key otherwise (``bool`` refused)."""
    if isinstance(max_timeouts, bool) or not isinstance(max_timeouts, int) or max_timeouts < 0:
        raise ConfigError(f"reward_shaping.max_timeouts: expected an integer >= 0 (0 = run every test), "
                          f"got {max_timeouts!r}")
    return max_timeouts


def _capped_inner(judge: Any, max_timeouts: int) -> Any:
    """The unwrapped judge under ``max_timeouts`` (see :func:`reward_judge`)."""
    from rlvr.judge.client import RemoteJudge
    from rlvr.judge.core import Judge

    own = getattr(judge, "max_timeouts", None)
    if own == max_timeouts or (own is None and max_timeouts == DEFAULT_MAX_TIMEOUTS):
        return judge  # it applies the value already (a judge without the attribute: its own default, today's rule)
    if isinstance(judge, RemoteJudge):
        view = with_max_timeouts(judge, max_timeouts)
        if view.is_native():  # the server applies it per request: fail now when it cannot
            view.native_max_timeouts("reward_shaping.max_timeouts")
        return view
    if isinstance(judge, Judge):
        return with_max_timeouts(judge, max_timeouts)
    raise ConfigError(f"reward_shaping.max_timeouts={max_timeouts}: the training judge "
                      f"({type(judge).__module__}.{type(judge).__qualname__}, max_timeouts={own!r}) cannot apply it")


def reward_judge(judge: Any, max_timeouts: int) -> Any:
    """``judge`` judging under the timeout rule ``max_timeouts`` (int >= 0; module doc).

    ``judge``: the embedded :class:`rlvr.judge.Judge`, a :class:`rlvr.judge.client.RemoteJudge`, a judge that
    already has ``max_timeouts`` equal to the value (:func:`node_judge`'s), or a stage's
    :class:`rlvr.judge.preflight.GuardedJudge` around one of them (the result then counts its verdicts into the same
    guard). Returns ``judge`` itself when it applies the value already (always for the default, 3, on a judge that
    does not say: today's rule); else a view of the same pool (not to be closed: the stage closes its judge).
    Raises :class:`rlvr.config.ConfigError` (one line) for a bad value, a judge server (native ``/rlvr/*`` endpoints)
    that cannot apply the value (:meth:`rlvr.judge.client.RemoteJudge.native_max_timeouts`: a server older than
    per-request ``max_timeouts``, or a value not in 1 … the server's own), or a judge of another kind asked for
    another value; :class:`rlvr.judge.client.RemoteUnavailable` when a remote judge's server cannot be reached."""
    max_timeouts = _check(max_timeouts)
    from rlvr.judge.preflight import GuardedJudge

    if isinstance(judge, GuardedJudge):
        inner = _capped_inner(judge.inner, max_timeouts)
        if inner is judge.inner:
            return judge
        with _views_lock:
            per = _views.setdefault(judge, {})
            if max_timeouts not in per:
                guard = copy.copy(judge)  # shares the counts, their lock and examples: one guard for the stage
                guard._inner = inner
                per[max_timeouts] = guard
            return per[max_timeouts]
    return _capped_inner(judge, max_timeouts)


def node_factory(max_timeouts: int) -> str:
    """The :class:`~rlvr.judge.ray_pool.NodeJudge` factory (``"module:callable"``, called with ``workers=``) whose
    judges stop after ``max_timeouts`` timed-out tests: the default judge at 3, else
    ``rlvr.reward.timeouts:judge_max_timeouts_<n>``. Raises ``ConfigError`` for a bad value."""
    max_timeouts = _check(max_timeouts)
    if max_timeouts == DEFAULT_MAX_TIMEOUTS:
        return "rlvr.judge.core:Judge"
    return f"{__name__}:judge_max_timeouts_{max_timeouts}"


def node_judge(workers: int | None, shards: int | None, max_timeouts: int) -> Any:
    """The node's shared judge (:class:`rlvr.judge.ray_pool.NodeJudge` of ``workers`` sandboxes over ``shards``
    actors; ``None`` = automatic) whose actors judge under ``max_timeouts`` (:func:`node_factory`); the handle's
    ``max_timeouts`` says so, so :func:`reward_judge` uses it as it is. Raises ``RuntimeError`` outside Ray,
    ``ConfigError`` for a bad value."""
    from rlvr.judge.ray_pool import NodeJudge

    return NodeJudge(workers=workers, shards=shards, factory=node_factory(max_timeouts), max_timeouts=max_timeouts)


def trajectory_key(max_timeouts: int) -> dict[str, int]:
    """The resume key's entry for the rule: ``{"max_timeouts": n}``, empty at the default (the key of a run at
    today's rule stays what it was)."""
    return {} if _check(max_timeouts) == DEFAULT_MAX_TIMEOUTS else {"max_timeouts": max_timeouts}


def __getattr__(name: str) -> Any:
    """``judge_max_timeouts_<n>``: :class:`rlvr.judge.Judge` with ``max_timeouts=n`` (a factory for
    :func:`node_factory`'s strings, PEP 562); ``AttributeError`` for any other name."""
    m = _FACTORY_NAME.fullmatch(name)
    if m is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rlvr.judge.core import Judge

    return functools.partial(Judge, max_timeouts=int(m.group(1)))
