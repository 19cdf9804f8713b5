"""Stop a training run at the first step whose judged samples were all ``sandbox_error``.

A dead judge must fail, not score 0. Once the judge stops running programs (its actors lost, bubblewrap gone, the
judge server down), every judged sample is ``sandbox_error``: under ``reward_shaping.sandbox_error: exclude`` it is
left out of the loss (advantage 0), under ``zero`` it scores 0 like a wrong answer. Either way the steps that follow
learn nothing from the judge, and :func:`rlvr.reward.judge_log.require_judged` would refuse the run only hours later,
and only if every sample of the whole run failed. So each training step checks its own samples (:func:`check_step`):
at least one sample reached the judge (a completion with code; one without is scored without the judge) and every
one of them came back ``sandbox_error`` → ``RuntimeError`` (:class:`JudgeDied`) naming the step and what to check.
No threshold: a step where the judge answered even once goes on (transient errors are already retried by
:mod:`rlvr.reward.scoring`, and the stage's own share check, ``judge.max_sandbox_error_share``, still applies to what
the stage judges itself).

Where each engine checks:

* local (TRL): :class:`rlvr.reward.trl.CodeReward` sees a whole generation batch's outcomes and calls
  :func:`check_step` itself; the exception leaves ``GRPOTrainer.train`` and fails the stage.
* verl 0.9.1: the reward is computed per sample in Ray reward workers, and raising there would not stop the run: the
  v1 agent loop (``AgentLoopWorkerTQ._run_prompt``) logs a session's exception, marks the prompt's group failed, and
  training goes on without it. The one rlvr code that runs once per training step in the trainer process is the
  ``rlvr_grpo`` advantage estimator (:mod:`rlvr.train.verl.advantage`), and it sees rewards only — NaN for an excluded
  sandbox error but 0.0 under ``zero``, and a finite score for a completion without code, so it cannot tell which
  samples were judged. The reward function therefore counts, per process, the samples it sent to the judge and the
  ``sandbox_error`` ones among them (:func:`record`; rlvr's ``rate_limited`` manager counts a call that timed out as
  one), and publishes the running totals in Ray's cluster key-value
  store (GCS), one key per process under the job's id; :class:`StepGuard` (in the estimator) sums them at each step
  and checks the difference since the previous step. The window between two steps also holds the validation samples
  judged in between; a judge that dies part-way through a step is caught at the next one.

The store holds one key of ~50 bytes per reward process and run (namespace :data:`KV_NAMESPACE`), left in place: on a
cluster started for the run it ends with the run; on a long-lived one (``RAY_ADDRESS``) it stays until the cluster
stops.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["KV_NAMESPACE", "LOCAL_HINT", "VERL_HINT", "JudgeDied", "StepGuard", "check_step", "job_totals", "record",
           "step_counts"]

log = logging.getLogger(__name__)

KV_NAMESPACE = "rlvr-judged"
"""Ray key-value namespace of the per-process counts; keys ``<job id>/<node id>-<pid>``, values
``{"judged": int, "sandbox_error": int}`` (JSON)."""


class JudgeDied(RuntimeError):
    """Every sample a training step sent to the judge came back ``sandbox_error``; the message is one line naming the
    step, the count, the judge and what to check."""


LOCAL_HINT = "bubblewrap (`rlvr check`), or the judge server at RLVR_SANDBOX_URL when set, and the stage's log"
"""What :func:`check_step` says to check under the local engine (one process, its own judge)."""

VERL_HINT = ("bubblewrap on every node (`rlvr check`), or the judge server at RLVR_SANDBOX_URL when set, the node "
             "judge actors rlvr-node-judge-* in the Ray logs, and the run's per-sample judge log (<run>/judge)")
"""What :func:`check_step` says to check under verl (Ray reward workers on every node, node judge actors)."""


def check_step(judged: int, sandbox_errors: int, step: int | str, engine: str, hint: str = LOCAL_HINT,
               where: str | None = None) -> None:
    """Raise :class:`JudgeDied` when ``judged`` > 0 samples reached the judge in training step ``step`` and all of them
    (``sandbox_errors`` == ``judged``) were ``sandbox_error``; otherwise return.

    ``engine`` names the trainer in the message (``"verl GRPO"``, ``"TRL GRPO"``), ``hint`` what to check
    (:data:`LOCAL_HINT`, :data:`VERL_HINT`); ``where`` the judge's location (default
    :func:`rlvr.judge.preflight.judge_location`: ``RLVR_SANDBOX_URL`` or ``embedded``)."""
    if judged <= 0 or sandbox_errors < judged:
        return
    if where is None:
        from rlvr.judge.preflight import judge_location

        where = judge_location()
    raise JudgeDied(
        f"{engine} step {step}: all {judged} samples sent to the judge ({where}) came back sandbox_error, so the "
        f"judge stopped working and training would go on with no reward signal; stopping the run. Check {hint}")


def step_counts(outcomes: Iterable[Any]) -> tuple[int, int]:
    """``(judged, sandbox_errors)`` of reward outcomes (objects or dicts with ``has_code`` and ``status``): the ones
    that reached the judge (``has_code``), and the ``sandbox_error`` ones among those."""
    judged = errors = 0
    for o in outcomes:
        get = o.get if isinstance(o, dict) else lambda k, o=o: getattr(o, k, None)
        if get("has_code") is False:
            continue
        judged += 1
        errors += get("status") == "sandbox_error"
    return judged, errors


# ----------------------------------------------------------------------------- per-process counts (reward side)
_lock = threading.Lock()
_state: dict[str, Any] = {"job": None, "key": None, "judged": 0, "sandbox_error": 0}
_warned = False


def _ray_kv() -> Any | None:
    """Ray's internal key-value module when this process is a connected Ray worker or driver, else ``None``. Ray is
    looked up in ``sys.modules`` only, so a process that never imported Ray (TRL, tests) pays nothing."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None
    from ray.experimental import internal_kv

    return internal_kv if internal_kv._internal_kv_initialized() else None


def _job_id() -> str:
    import ray

    return ray.get_runtime_context().get_job_id()


def record(status: Any, has_code: Any = True) -> None:
    """Count one scored sample of this process (``has_code``: it reached the judge; ``status``: its verdict) and,
    inside Ray, publish this process's totals for the job under ``<job id>/<node id>-<pid>`` (one put, ~0.3 ms).
    Outside Ray it does nothing. Never raises: a failed put is logged once (the step guard then sees older totals)."""
    global _warned
    if has_code is False:
        return
    kv = _ray_kv()
    if kv is None:
        return
    try:
        with _lock:
            job = _job_id()
            if _state["job"] != job:  # first sample of this process, or a driver that started another job
                import ray

                node = ray.get_runtime_context().get_node_id()[:16]
                _state.update(job=job, key=f"{job}/{node}-{os.getpid()}", judged=0, sandbox_error=0)
            _state["judged"] += 1
            _state["sandbox_error"] += status == "sandbox_error"
            value = json.dumps({"judged": _state["judged"], "sandbox_error": _state["sandbox_error"]})
            kv._internal_kv_put(_state["key"], value, overwrite=True, namespace=KV_NAMESPACE)
    except Exception as exc:  # a lost count must not fail a reward
        if not _warned:
            _warned = True
            log.warning("rlvr.reward.step_guard: cannot publish judged counts (%s: %s)", type(exc).__name__, exc)


def job_totals() -> tuple[int, int] | None:
    """``(judged, sandbox_errors)`` summed over every process of this Ray job that :func:`record`-ed, or ``None``
    when this process is not in Ray or no process has recorded yet."""
    kv = _ray_kv()
    if kv is None:
        return None
    keys = kv._internal_kv_list(f"{_job_id()}/", namespace=KV_NAMESPACE)
    if not keys:
        return None
    judged = errors = 0
    for k in keys:
        raw = kv._internal_kv_get(k, namespace=KV_NAMESPACE)
        if raw is None:
            continue
        c = json.loads(raw)
        judged += int(c.get("judged", 0))
        errors += int(c.get("sandbox_error", 0))
    return judged, errors


class StepGuard:
    """The trainer-side check under verl: :meth:`check` once per training step reads :func:`job_totals`, takes the
    difference since its previous call (the samples judged since the previous step) and applies :func:`check_step`.

    ``engine``: the trainer's name in the message; ``hint``: what it says to check. ``totals``: the totals source
    (default :func:`job_totals`; tests pass their own)."""

    def __init__(self, engine: str = "verl GRPO", totals: Any = job_totals, hint: str = VERL_HINT) -> None:
        self.engine = engine
        self.hint = hint
        self._totals = totals
        self._seen = (0, 0)
        self.calls = 0

    def check(self, step: int | None = None) -> tuple[int, int] | None:
        """Check the samples judged since the previous call; ``step`` names the training step (default: this
        guard's call count). Returns ``(judged, sandbox_errors)`` of the window, or ``None`` when no counts are
        available (not in Ray, or no reward process recorded). Raises :class:`JudgeDied` (class doc); a failure to
        read the counts is logged and skipped (it must not stop a healthy run)."""
        self.calls += 1
        try:
            now = self._totals()
        except Exception as exc:
            log.warning("rlvr.reward.step_guard: cannot read judged counts (%s: %s)", type(exc).__name__, exc)
            return None
        if now is None:
            return None
        if now[0] < self._seen[0] or now[1] < self._seen[1]:  # totals of another job (a driver's second ray.init)
            self._seen = (0, 0)
        window = (now[0] - self._seen[0], now[1] - self._seen[1])
        self._seen = now
        check_step(*window, step=self.calls if step is None else step, engine=self.engine, hint=self.hint)
        return window
