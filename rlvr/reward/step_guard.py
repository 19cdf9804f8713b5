"""Stop a training run once the judge has answered nothing for :data:`DEAD_STEPS` (2) consecutive training steps.

A dead judge must fail, not score 0. Once the judge stops running programs (its actors lost, bubblewrap gone, the
judge server down), every judged sample is ``sandbox_error``: under ``reward_shaping.sandbox_error: exclude`` it is
left out of the loss (advantage 0), under ``zero`` it scores 0 like a wrong answer. Either way the steps that follow
learn nothing from the judge, and :func:`rlvr.reward.judge_log.require_judged` would refuse the run only hours later,
and only if every sample of the whole run failed. So each training step looks at its own window of samples
(:class:`StepGuard`): a step is *dead* when at least one sample reached the judge (a completion with code; one without
is scored without the judge) and every one of them came back ``sandbox_error``; *alive* when the judge answered at
least once; *empty* when nothing reached the judge. :data:`DEAD_STEPS` consecutive dead steps raise
:class:`JudgeDied` (a ``RuntimeError``) naming the steps and what to check; an alive step resets the count, an empty
one neither counts nor resets it (steps 3 dead, 4 empty, 5 dead stop the run at step 5).

Why two steps and not one: a healthy step can have very few judged samples (a weak or early policy that rarely writes
code, repair episodes without a final program), and a sample whose reward call timed out under load counts as a judged
``sandbox_error`` (rlvr's ``rate_limited`` manager, :mod:`rlvr.reward.verl_manager`), so one step of one or two such
samples would stop a healthy run. A dead judge stays dead, so waiting for a second step costs one training step with no
reward signal. The number is a module constant, not a ``params.yaml`` parameter: it is an infrastructure guard, the
same for both engines. Beyond that, no threshold: transient errors are retried by :mod:`rlvr.reward.scoring`, and the
stage's own share check, ``judge.max_sandbox_error_share``, still applies to what the stage judges itself.

A step is keyed on the trainer's step number: several windows of the same step are one step (TRL: generation or
evaluation batches of the same ``global_step``, their counts summed; verl: see below), so a step never counts twice.

Where each engine checks:

* local (TRL): :class:`rlvr.reward.trl.CodeReward` sees a whole generation batch's outcomes and feeds its own
  :class:`StepGuard` (:meth:`StepGuard.observe`); the exception leaves ``GRPOTrainer.train`` and fails the stage.
* verl 0.9.1: the reward is computed per sample in Ray reward workers, and raising there would not stop the run: the
  v1 agent loop (``AgentLoopWorkerTQ._run_prompt``) logs a session's exception, marks the prompt's group failed, and
  training goes on without it. The rlvr code that runs in the trainer process at every training step is the
  ``rlvr_grpo`` advantage estimator (:mod:`rlvr.train.verl.advantage`), and it sees rewards only — NaN for an excluded
  sandbox error but 0.0 under ``zero``, and a finite score for a completion without code, so it cannot tell which
  samples were judged. The reward function therefore counts, per process, the samples it sent to the judge and the
  ``sandbox_error`` ones among them (:func:`record`; rlvr's ``rate_limited`` manager counts a call that timed out as
  one, and a sample is counted once even when its abandoned call finishes later), and a background thread publishes
  the running totals in Ray's cluster key-value store (GCS), one key per process under the job's id, at most once per
  :data:`PUBLISH_INTERVAL_S` (1 s) — never on the reward worker's event loop. :class:`StepGuard` (in the estimator)
  sums them (:meth:`StepGuard.check`) and takes the difference since the previous step as the step's window. The
  window also holds the validation samples judged in between, and a sample scored less than ~1 s before the check is
  not published yet and falls into the next step's window (windows shift, no count is lost; a judge that dies
  part-way through a step shows at the next one). The estimator also refuses a batch whose every reward is NaN (every
  sample an excluded sandbox error; this needs no counts) through the same guard, as a dead window of the same step.
  verl's v1 trainer calls the estimator once per mini-batch when ``trainer.v1.<mode>.parameter_sync_step`` > 1
  (``_step_once`` per mini-batch, all under one global step), so the guard keys on verl's global step
  (:func:`rlvr.train.verl.advantage.current_step`): only the first call of a step takes a counts window; later calls
  of the same step add only their all-NaN verdict to that step.

The store holds one key of ~50 bytes per reward process and run (namespace :data:`KV_NAMESPACE`), left in place: on a
cluster started for the run it ends with the run; on a long-lived one (``RAY_ADDRESS``) it stays until the cluster
stops.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading
from collections.abc import Iterable, MutableMapping
from typing import Any

from rlvr.reward.share_window import ShareWindow

__all__ = ["DEAD_STEPS", "KV_NAMESPACE", "LOCAL_HINT", "ONCE_KEY", "PUBLISH_INTERVAL_S", "VERL_HINT", "JudgeDied",
           "StepGuard", "expect_once", "flush", "job_totals", "record", "step_counts"]

log = logging.getLogger(__name__)

DEAD_STEPS = 2
"""Consecutive dead training steps (every sample sent to the judge came back ``sandbox_error``; steps where nothing
reached the judge skipped) that stop the run. Not a parameter: see the module doc."""

PUBLISH_INTERVAL_S = 1.0
"""Seconds between two publishes of a process's counts to Ray's key-value store (the background publisher's tick);
also the most a recorded sample waits before the trainer can see it."""

KV_NAMESPACE = "rlvr-judged"
"""Ray key-value namespace of the per-process counts; keys ``<job id>/<node id>-<pid>``, values
``{"judged": int, "sandbox_error": int}`` (JSON)."""

ONCE_KEY = "_rlvr_counted"
"""``extra_info`` key that makes :func:`record` count a sample at most once (set by :func:`expect_once`)."""


class JudgeDied(RuntimeError):
    """Every sample sent to the judge in :data:`DEAD_STEPS` consecutive training steps came back ``sandbox_error``;
    the message is one line naming the steps, the counts, the judge and what to check."""


LOCAL_HINT = "bubblewrap (`rlvr check`), or the judge server at RLVR_SANDBOX_URL when set, and the stage's log"
"""What :class:`StepGuard` says to check under the local engine (one process, its own judge)."""

VERL_HINT = ("bubblewrap on every node (`rlvr check`), or the judge server at RLVR_SANDBOX_URL when set, the node "
             "judge actors rlvr-node-judge-* in the Ray logs, and the run's per-sample judge log (<run>/judge)")
"""What :class:`StepGuard` says to check under verl (Ray reward workers on every node, node judge actors)."""


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


def _process_key(job: str) -> str:
    """This process's key under ``job``: ``<job id>/<node id (16 hex)>-<pid>``."""
    import ray

    return f"{job}/{ray.get_runtime_context().get_node_id()[:16]}-{os.getpid()}"


class _Counts:
    """This process's judged counts and their publisher.

    :meth:`add` only updates memory (under a lock held for microseconds, never across a GCS call) and starts, once,
    a daemon thread that calls :meth:`flush` every ``interval_s`` seconds; :meth:`flush` puts the totals into Ray's
    key-value store when they changed since the last put (one put at a time, so a newer total is never overwritten by
    an older one). :meth:`close` (registered with ``atexit`` when the thread starts) stops the thread and flushes."""

    def __init__(self, interval_s: float | None = None) -> None:
        self.interval_s = PUBLISH_INTERVAL_S if interval_s is None else float(interval_s)
        self._lock = threading.Lock()
        self._publish_lock = threading.Lock()
        self._stop = threading.Event()
        self.job: str | None = None
        self.key: str | None = None
        self.judged = 0
        self.sandbox_error = 0
        self.published: tuple[str | None, int, int] | None = None
        self.thread: threading.Thread | None = None
        self.warned = False

    def add(self, sandbox_error: bool) -> None:
        """Count one judged sample of the current Ray job (``sandbox_error``: its verdict was one). Raises what Ray's
        runtime context raises (the caller, :func:`record`, logs it)."""
        job = _job_id()
        with self._lock:
            if self.job != job:  # first sample of this process, or a driver that started another job
                self.job, self.key, self.judged, self.sandbox_error = job, _process_key(job), 0, 0
            self.judged += 1
            self.sandbox_error += bool(sandbox_error)
            start = self.thread is None
            if start:
                self.thread = threading.Thread(target=self._run, name="rlvr-judged-counts", daemon=True)
        if start:
            self.thread.start()
            atexit.register(self.close)

    def flush(self) -> bool:
        """Publish the totals now if they changed since the last publish; returns whether it put them. Blocks on the
        GCS call (~0.3 ms, longer under load): never call it on an event loop. Never raises: a failed put is logged
        once and retried at the next flush."""
        with self._publish_lock:
            with self._lock:
                snap = (self.key, self.judged, self.sandbox_error)
            if snap[0] is None or snap == self.published:
                return False
            try:
                kv = _ray_kv()
                if kv is None:
                    return False
                kv._internal_kv_put(snap[0], json.dumps({"judged": snap[1], "sandbox_error": snap[2]}),
                                    overwrite=True, namespace=KV_NAMESPACE)
            except Exception as exc:  # a lost publish must not fail anything; the next flush retries
                self._warn("publish", exc)
                return False
            self.published = snap
            return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.flush()

    def close(self) -> None:
        """Stop the publisher thread and publish what is left (the final flush; at interpreter exit)."""
        self._stop.set()
        self.flush()

    def _warn(self, what: str, exc: BaseException) -> None:
        if not self.warned:
            self.warned = True
            log.warning("rlvr.reward.step_guard: cannot %s judged counts (%s: %s)", what, type(exc).__name__, exc)


_COUNTS = _Counts()
_once_lock = threading.Lock()


def expect_once(extra_info: MutableMapping[str, Any]) -> None:
    """Make :func:`record` count the sample whose ``extra_info`` this is at most once (sets :data:`ONCE_KEY`).

    For a caller that may record the sample itself while its reward call goes on: rlvr's ``rate_limited`` manager
    counts a timed-out call as a ``sandbox_error``, and the abandoned call of the sync ``compute_score`` (running in a
    thread verl does not stop) records again when it finishes. Only on a dict private to one sample (the managers'
    copy, :func:`rlvr.reward.verl_manager.with_response_length`): verl shares one ``extra_info`` dict over a GRPO
    group."""
    extra_info[ONCE_KEY] = False


def _first(sample: Any) -> bool:
    """Whether this is the first :func:`record` of ``sample`` (always True without :data:`ONCE_KEY`)."""
    if not isinstance(sample, MutableMapping) or ONCE_KEY not in sample:
        return True
    with _once_lock:
        if sample[ONCE_KEY]:
            return False
        sample[ONCE_KEY] = True
        return True


def record(status: Any, has_code: Any = True, sample: Any = None) -> None:
    """Count one scored sample of this process (``has_code``: it reached the judge; ``status``: its verdict) for the
    job's step guard, inside Ray only (outside it does nothing). ``sample``: the sample's ``extra_info``; when
    :func:`expect_once` marked it, only the first record of the sample counts.

    Cheap and non-blocking (memory only, a process-wide lock held for microseconds): a background thread publishes the
    totals within :data:`PUBLISH_INTERVAL_S` (:func:`flush` publishes now). Never raises: a failure is logged once."""
    if not _first(sample) or has_code is False or _ray_kv() is None:
        return
    try:
        _COUNTS.add(status == "sandbox_error")
    except Exception as exc:  # a lost count must not fail a reward
        _COUNTS._warn("count", exc)


def flush() -> bool:
    """Publish this process's counts now, blocking on the GCS call (what the background publisher does every
    :data:`PUBLISH_INTERVAL_S`); returns whether it put anything. For tests and shutdown, not for an event loop."""
    return _COUNTS.flush()


def job_totals() -> tuple[int, int] | None:
    """``(judged, sandbox_errors)`` summed over every process of this Ray job that published, or ``None`` when this
    process is not in Ray or no process has published yet. A process's samples of the last
    :data:`PUBLISH_INTERVAL_S` may be missing (not published yet)."""
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


# ----------------------------------------------------------------------------- the guard (trainer side)
class StepGuard:
    """Per-step windows of judged samples; :data:`DEAD_STEPS` consecutive dead steps raise :class:`JudgeDied`.

    Feed it with :meth:`observe` (counts the caller computed: TRL's batch outcomes, verl's all-NaN batch) or
    :meth:`check` (verl: the job's published totals since the previous step). Every call names its training step;
    calls with the same step number add to one step, a call with another number (or ``None``: "a new step", numbered
    by the guard) starts the next. A step is dead when an all-failed batch was observed in it or its summed window has
    judged > 0 samples all ``sandbox_error``; alive when its window has a judged sample that was not; else empty (it
    neither counts nor resets).

    ``engine``: the trainer's name in the message (``"verl GRPO"``, ``"TRL GRPO"``); ``hint``: what it says to check
    (:data:`VERL_HINT`, :data:`LOCAL_HINT`); ``totals``: the totals source of :meth:`check` (default
    :func:`job_totals`; tests pass their own); ``where``: the judge's location in the message (default
    :func:`rlvr.judge.preflight.judge_location`: ``RLVR_SANDBOX_URL`` or ``embedded``); ``share``: the partial
    failure bound (:class:`rlvr.reward.share_window.ShareWindow`, default off): :meth:`observe` also raises
    :class:`JudgeDied` when the ``sandbox_error`` share stayed above its ``max_share`` for its ``window`` steps."""

    def __init__(self, engine: str = "verl GRPO", totals: Any = job_totals, hint: str = VERL_HINT,
                 where: str | None = None, share: ShareWindow | None = None) -> None:
        self.share = share if share is not None else ShareWindow()
        self.engine = engine
        self.hint = hint
        self.where = where
        self._totals = totals
        self._seen = (0, 0)
        self.step: int | str | None = None  # the current step: the last one a call named, or the guard's number
        self.steps = 0  # steps started so far
        self._cur: dict[str, int] | None = None
        self._dead: list[tuple[int | str, int]] = []  # (step, samples) of the dead steps in a row before the current

    def _at(self, step: int | str | None) -> bool:
        """Make ``step`` the current step; returns whether it is a new one (the previous one's verdict is then
        final)."""
        if step is not None and self._cur is not None and step == self.step:
            return False
        if self._cur is not None:
            self.share.finish(self.step, self._cur["judged"], self._cur["sandbox_error"])  # type: ignore[arg-type]
            verdict = self._verdict()
            if verdict is not None and verdict[0]:
                self._dead.append((self.step, verdict[1]))  # type: ignore[arg-type]
            elif verdict is not None:
                self._dead.clear()
        self.steps += 1
        self.step = self.steps if step is None else step
        self._cur = {"judged": 0, "sandbox_error": 0, "failed_batch": 0}
        return True

    def _verdict(self) -> tuple[bool, int] | None:
        """``(dead, samples)`` of the current step, ``None`` when empty."""
        c = self._cur or {}
        j, e, b = c.get("judged", 0), c.get("sandbox_error", 0), c.get("failed_batch", 0)
        window_dead = j > 0 and e >= j
        if b or window_dead:
            return True, max(j if window_dead else 0, b)
        return (False, j) if j > 0 else None

    def observe(self, judged: int, sandbox_errors: int, step: int | str | None = None, *,
                failed_batch: bool = False) -> None:
        """Add a window of ``judged`` samples sent to the judge, ``sandbox_errors`` of them ``sandbox_error``, to
        training step ``step`` (see the class doc), then raise :class:`JudgeDied` when this step is the
        :data:`DEAD_STEPS`-th dead one in a row, or when its share (so far) and the steps before it keep the
        ``sandbox_error`` share above the bound of :attr:`share` (:class:`rlvr.reward.share_window.ShareWindow`).
        ``failed_batch``: the ``judged`` samples are a batch known from its
        rewards to be all ``sandbox_error`` (verl's all-NaN batch); it makes the step dead whatever its counts
        window says."""
        self._at(step)
        assert self._cur is not None
        if failed_batch:
            self._cur["failed_batch"] = max(self._cur["failed_batch"], int(judged))
        else:
            self._cur["judged"] += max(int(judged), 0)
            self._cur["sandbox_error"] += max(int(sandbox_errors), 0)
        verdict = self._verdict()
        if verdict is not None and verdict[0] and len(self._dead) + 1 >= DEAD_STEPS:
            raise JudgeDied(self._message([*self._dead[len(self._dead) + 1 - DEAD_STEPS:],
                                           (self.step, verdict[1])]))  # type: ignore[list-item]
        partial = self.share.verdict(self.step, self._cur["judged"], self._cur["sandbox_error"],  # type: ignore[arg-type]
                                     self.engine)
        if partial is not None:
            raise JudgeDied(f"{partial} Check {self.hint}")

    def check(self, step: int | None = None) -> tuple[int, int] | None:
        """Take the samples judged since the previous window (:func:`job_totals` now minus at the previous window) as
        training step ``step``'s window and :meth:`observe` it. A second call for the same ``step`` takes no window
        and returns ``None`` (verl calls the estimator once per mini-batch of a step). Returns ``(judged,
        sandbox_errors)`` of the window, or ``None`` when no counts are available (not in Ray, or no reward process
        published yet). Raises :class:`JudgeDied` (:meth:`observe`); a failure to read the counts is logged and
        skipped (it must not stop a healthy run)."""
        if not self._at(step) or self._totals is None:
            return None
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
        self._seen = (now[0], now[1])
        self.observe(*window, step=self.step)
        return window

    def _message(self, dead: list[tuple[int | str, int]]) -> str:
        where = self.where
        if where is None:
            from rlvr.judge.preflight import judge_location

            where = judge_location()
        (step, n), earlier = dead[-1], dead[:-1]
        before = "".join(f", as did all {m} of step {s}" for s, m in reversed(earlier))
        k = len(dead)
        return (f"{self.engine} step {step}: all {n} samples sent to the judge ({where}) came back sandbox_error"
                f"{before}: no answer from the judge for {k} consecutive step{'s' if k != 1 else ''}, so it stopped "
                f"working and training would go on with no reward signal; stopping the run. Check {self.hint}")
