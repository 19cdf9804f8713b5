"""Judge scale-out on Ray: one judge actor per node (each a pool of warm sandboxes), batches spread across them.

verl already runs a Ray cluster for rollouts, so the judge joins it instead of needing its own fleet: create a
:class:`RayJudge` inside the trainer's driver (``ray.init(address="auto")`` has been called by verl) and pass it
wherever a judge is expected — it has the embedded judge's interface (``judge``, ``judge_many``, ``run_code``,
``call_outputs``). Actors are placed with Ray's ``SPREAD`` scheduling strategy so that N actors land on N nodes when
the cluster has them (Ray docs, "Scheduling strategies"). Ray is imported lazily: importing this module is free.

Failures: an exception the judge raises inside an actor reaches the caller as that exception (Ray's ``RayTaskError``
is an instance of its cause); a dead or unreachable actor (any other ``ray.exceptions.RayError``) is infrastructure and
raises :class:`~rlvr.judge.sandbox.SandboxError`, which the rewards retry and then count as ``sandbox_error`` — never
as the submission's failure. :class:`NodeJudge` first replaces a dead node actor by name and retries the call once
(see its docstring: the node actors fate-share with whichever process created them).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Sequence
from typing import Any

from rlvr.data.schema import Problem
from rlvr.judge.core import RunResult
from rlvr.judge.sandbox import SandboxError
from rlvr.judge.verdict import JudgeResult

__all__ = ["NODE_JUDGE_PREFIX", "SANDBOXES_PER_SHARD", "NodeJudge", "RayJudge", "node_actor_name", "node_shards",
           "node_workers"]

log = logging.getLogger(__name__)


def _get(refs: Any) -> Any:
    """``ray.get(refs)``; a Ray infrastructure failure (dead actor, lost object) raises :class:`SandboxError`."""
    import ray

    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError:  # the judge's own exception, raised as an instance of its cause
        raise
    except ray.exceptions.RayError as exc:
        raise SandboxError(f"Ray judge actor failed: {type(exc).__name__}: {exc}"[:2000]) from exc


def _actor_class() -> Any:
    import ray

    @ray.remote
    class JudgeActor:
        """A Ray actor wrapping one embedded :class:`~rlvr.judge.core.Judge` (``workers`` sandboxes)."""

        def __init__(self, workers: int | None) -> None:
            from rlvr.judge.core import Judge
            from rlvr.judge.sandbox import enable_child_subreaper

            enable_child_subreaper()  # the actor process only judges: reap orphaned sandbox processes here
            self.judge = Judge(workers=workers)
            self.judged = 0

        def judge_many(self, items: list[tuple[Problem, str]], language: str) -> list[JudgeResult]:
            self.judged += len(items)
            return self.judge.judge_many(items, language)

        def count(self) -> int:
            """Submissions this actor has judged."""
            return self.judged

        def run_code(self, kwargs: dict[str, Any]) -> RunResult:
            return self.judge.run_code(**kwargs)

        def call_outputs(self, problem: Problem, solution: str) -> list[str | None]:
            return self.judge.call_outputs(problem, solution)

        def close(self) -> None:
            self.judge.close()

    return JudgeActor


class RayJudge:
    """Judge interface backed by ``num_actors`` Ray actors with ``workers_per_actor`` sandboxes each.

    Args:
        num_actors: judge actors (typically one per node). workers_per_actor: sandboxes per actor (default: the
            node's CPU count). num_cpus_per_actor: CPUs Ray reserves for each actor. address: a Ray cluster address;
            when Ray is not initialised, ``ray.init(address=address)`` is called (``None`` starts a local cluster).
        chunk: submissions per actor call; larger chunks amortise Ray's per-call overhead (~1 ms).
    """

    def __init__(
        self,
        num_actors: int = 1,
        workers_per_actor: int | None = None,
        num_cpus_per_actor: float = 1.0,
        address: str | None = None,
        chunk: int = 16,
    ) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        actor = _actor_class().options(num_cpus=num_cpus_per_actor, scheduling_strategy="SPREAD")
        self.actors = [actor.remote(workers_per_actor) for _ in range(num_actors)]
        self.chunk = max(1, chunk)
        self._rr = itertools.cycle(range(num_actors))
        self._lock = threading.Lock()

    def _next(self) -> Any:
        with self._lock:
            return self.actors[next(self._rr)]

    def judge_many(self, items: Sequence[tuple[Problem, str]], language: str = "python") -> list[JudgeResult]:
        """Split ``items`` into chunks, spread them round-robin over the actors, gather results in input order.
        Raises :class:`SandboxError` when an actor is lost."""
        refs = [
            self._next().judge_many.remote(list(items[i : i + self.chunk]), language)
            for i in range(0, len(items), self.chunk)
        ]
        return [r for chunk in _get(refs) for r in chunk]

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        """Judge one submission on the next actor."""
        return self.judge_many([(problem, solution)], language)[0]

    def run_code(self, code: str, **kwargs: Any) -> RunResult:
        """SandboxFusion ``/run_code`` semantics on the next actor (keyword arguments as ``Judge.run_code``)."""
        return _get(self._next().run_code.remote({"code": code, **kwargs}))

    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]:
        """As :meth:`rlvr.judge.core.Judge.call_outputs`, on the next actor."""
        return _get(self._next().call_outputs.remote(problem, solution))

    def close(self) -> None:
        """Stop the actors' sandboxes and the actors."""
        import ray

        ray.get([a.close.remote() for a in self.actors])
        for a in self.actors:
            ray.kill(a)
        self.actors = []


# ----------------------------------------------------------------------------- one judge budget per node
NODE_JUDGE_PREFIX = "rlvr-node-judge-"


def node_actor_name(node_id: str, i: int, n: int, max_timeouts: int = 3) -> str:
    """The Ray name of a node's judge actor ``i`` of ``n`` whose judges stop a submission after ``max_timeouts``
    timed-out tests: ``rlvr-node-judge-<node id>-<i>of<n>`` at the judge's default 3 (the name it always had),
    ``rlvr-node-judge-<node id>-max_timeouts_<m>-<i>of<n>`` at another value. Callers reach the actors by name
    (``get_if_exists``), so with one name for every value the first caller's judges would judge every caller's
    submissions under its rule; with the rule in the name, callers of different values (another
    ``reward_shaping.max_timeouts``, :mod:`rlvr.reward.timeouts`) get actors of their own each."""
    tag = "" if max_timeouts == 3 else f"max_timeouts_{max_timeouts}-"
    return f"{NODE_JUDGE_PREFIX}{node_id}-{tag}{i}of{n}"


def _node_actor_class() -> Any:
    import ray

    @ray.remote
    class NodeJudgeActor:
        """The node's judge: one embedded judge (``workers`` sandboxes) behind a threaded Ray actor whose
        ``max_concurrency`` equals ``workers``, so at most ``workers`` submissions are judged at once on the node,
        whatever the number of callers; the others wait in the actor's queue (Ray docs, "Threaded actors")."""

        def __init__(self, workers: int, factory: str) -> None:
            import importlib
            import threading

            from rlvr.judge.sandbox import enable_child_subreaper

            enable_child_subreaper()
            module, _, name = factory.partition(":")
            self.judge = getattr(importlib.import_module(module), name)(workers=workers)
            self.workers = workers
            self._lock = threading.Lock()
            self.in_flight = 0
            self.peak = 0
            self.calls = 0

        def judge_many(self, items: list[tuple[Problem, str]], language: str) -> list[JudgeResult]:
            with self._lock:
                self.in_flight += 1
                self.calls += 1
                self.peak = max(self.peak, self.in_flight)
            try:
                return self.judge.judge_many(items, language)
            finally:
                with self._lock:
                    self.in_flight -= 1

        def run_code(self, kwargs: dict[str, Any]) -> RunResult:
            with self._lock:
                self.in_flight += 1
                self.calls += 1
                self.peak = max(self.peak, self.in_flight)
            try:
                return self.judge.run_code(**kwargs)
            finally:
                with self._lock:
                    self.in_flight -= 1

        def stats(self) -> dict[str, int]:
            """``{"workers", "calls", "peak"}``: the bound, calls served, most calls judged at once."""
            return {"workers": self.workers, "calls": self.calls, "peak": self.peak}

    return NodeJudgeActor


def node_workers(workers: int | None = None) -> int:
    """The node's judge budget: ``workers`` when positive, else ``RLVR_SANDBOX_WORKERS``, else this node's CPU
    count (the embedded judge's own default)."""
    import os

    from rlvr.config import RuntimeSettings

    return int(workers or RuntimeSettings().sandbox_workers or os.cpu_count() or 1)


#: sandboxes per judge actor process when ``shards`` is automatic: on the lent 4 x H100 node (64 cores) one actor with
#: all 64 sandboxes ran at ~100 % of one core and judged 1,024 HumanEval+ references in 312 s with one false timeout,
#: while 8 processes of 8 sandboxes took 92 s with none (bench/gpu/results_4gpu.json, ``judge_load``): the host-side
#: work of a submission (Ray argument transfer, output comparison) is Python, one core per process.
SANDBOXES_PER_SHARD = 8


def node_shards(workers: int, shards: int | None = None) -> list[int]:
    """How the node's ``workers`` sandboxes split over its judge actor processes: one count per actor, each >= 1,
    summing to ``workers``. ``shards`` when positive (capped at ``workers``), else ``ceil(workers / 8)``
    (:data:`SANDBOXES_PER_SHARD`). E.g. ``node_shards(64) == [8] * 8``, ``node_shards(10, 3) == [4, 3, 3]``.
    Raises ``ValueError`` when ``workers`` < 1."""
    if workers < 1:
        raise ValueError(f"node judge: workers must be >= 1, got {workers}")
    n = min(workers, shards) if shards and shards > 0 else -(-workers // SANDBOXES_PER_SHARD)
    return [workers // n + (1 if i < workers % n else 0) for i in range(n)]


class NodeJudge:
    """Judge interface (``judge``, ``judge_many``, ``run_code``) backed by the judge actors of this Ray node.

    Every process on a node that builds a ``NodeJudge`` (verl's reward workers: ``reward.num_workers`` of them, each
    awaiting up to 64 ``compute_score`` calls; the repair tools) with the same ``max_timeouts`` reaches the same named
    actors ``rlvr-node-judge-<node id>-<i>of<n>`` (:func:`node_actor_name`: a value other than 3 is part of the name,
    so callers of another value get actors of their own) in the job's namespace, created by the first caller
    (``get_if_exists``)
    on this node (hard node affinity, ``num_cpus=0`` so they never wait for a CPU verl's workers hold). The node's
    ``workers`` sandboxes (:func:`node_workers`) are split over ``n`` actor processes (:func:`node_shards`; 8
    sandboxes each by default), actor ``i`` judging at most its share at once, so the node's judge load is bounded by
    ``workers`` whatever the number of callers, and the host-side work of judging runs on ``n`` cores instead of one.
    A caller sends each call to the next actor in its own rotation (started at a per-process offset), so callers
    spread evenly; a call waits in its actor's queue while that actor is full even when another has a free slot.
    Waiting in a queue is not program time (time limits apply to the running program only), but it does count
    against the reward's per-request timeout (:class:`rlvr.reward.scoring.ScoringOptions`).

    Lost actors are recovered. The actors are not detached, so Ray ties each one's life to the process that created
    it (its owner: the first reward or tool worker of the node to build a ``NodeJudge``); when that one process dies
    or is restarted, its actors die with it and every other process's handles point at dead actors. A call that
    fails with a Ray actor error (``RayActorError``: died, or unavailable) therefore re-acquires that actor by name
    with the same options (``get_if_exists``: a live actor of that name if another caller already replaced it, else
    a fresh one, owned by this process) and is retried once on it; a second failure raises :class:`SandboxError`
    (rewards count it as ``sandbox_error``). Judging is a pure function of the submission, so a call that was in
    flight on the lost actor is simply judged again. A replaced actor's :meth:`stats` start from zero;
    ``recovered`` counts this handle's re-acquisitions.

    Why not ``lifetime="detached"`` (actors owned by Ray itself, fate-sharing with no worker): a detached actor
    outlives the job. On a local cluster started by verl's ``ray.init`` that ends with the driver anyway, but on an
    existing cluster (``RAY_ADDRESS``) every run would leave its node judges alive, holding their sandbox processes,
    and nothing is placed to kill them: reward and tool workers do not know when the run ends, verl's driver does not
    know the actors exist, and the stage process that launched verl is not a Ray driver. A later run in the same
    namespace would even reuse them (``get_if_exists``) with the old run's ``workers``, judge factory and code.
    Non-detached actors end with their job; recovery covers the loss of their owner.

    Must be built inside a Ray worker or driver (``ray.is_initialized()``); raises ``RuntimeError`` otherwise.
    ``shards``: actor processes (``None``/0 = automatic). ``factory``: ``"module:callable"`` building each actor's
    judge from ``workers=`` (tests pass a fake, whose actors then serve every caller of the same name).
    ``max_timeouts``: the timeout rule of the judges ``factory`` builds (:func:`rlvr.reward.timeouts.node_factory`
    makes the two agree); it names the actors and is this handle's ``max_timeouts``. Every process of a node must use
    the same ``workers`` and ``shards`` (the launcher passes them to all reward workers); callers of different
    ``max_timeouts`` each bound their own actors by ``workers``.
    """

    def __init__(self, workers: int | None = None, factory: str = "rlvr.judge.core:Judge",
                 shards: int | None = None, max_timeouts: int = 3) -> None:
        import os

        import ray

        if not ray.is_initialized():
            raise RuntimeError("NodeJudge needs a Ray worker or driver (ray.init() not called)")
        self._node_id = ray.get_runtime_context().get_node_id()
        self._factory = factory
        self.max_timeouts = max_timeouts
        self.workers = node_workers(workers)
        self.shards = node_shards(self.workers, shards)
        n = len(self.shards)
        self.actors = [self._acquire(i) for i in range(n)]
        self.recovered = 0
        self._rr = itertools.cycle([*range(os.getpid() % n, n), *range(os.getpid() % n)])
        self._lock = threading.Lock()
        self._shard_locks = [threading.Lock() for _ in range(n)]

    def actor_name(self, i: int) -> str:
        """The Ray name of this node's actor ``i``: :func:`node_actor_name` of its node, share count and rule."""
        return node_actor_name(self._node_id, i, len(self.shards), self.max_timeouts)

    def _acquire(self, i: int) -> Any:
        """A handle on actor ``i``: the live actor of that name, or a new one owned by this process (same options
        whoever creates it: hard affinity to this node, ``num_cpus=0``, ``max_concurrency`` = its share)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return _node_actor_class().options(
            name=self.actor_name(i), get_if_exists=True, num_cpus=0, max_concurrency=self.shards[i],
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=self._node_id, soft=False),
        ).remote(self.shards[i], self._factory)

    def _reacquire(self, i: int, lost: Any, died: bool) -> Any:
        """Replace ``lost`` (the handle of actor ``i`` a call just failed on) by the live actor of that name, once
        per loss: concurrent callers that saw the same loss share the first one's replacement. ``died``: Ray reported
        the actor dead (not merely unavailable), so a name that still resolves to it is waited on (≤ 5 s) until it
        names a new actor."""
        import time

        with self._shard_locks[i]:
            if self.actors[i] is not lost:  # another thread of this process replaced it already
                return self.actors[i]
            fresh = self._acquire(i)
            deadline = time.monotonic() + 5.0
            while died and fresh._actor_id == lost._actor_id and time.monotonic() < deadline:
                time.sleep(0.2)
                fresh = self._acquire(i)
            self.actors[i] = fresh
            self.recovered += 1
            return fresh

    def _call(self, i: int, method: str, *args: Any) -> Any:
        """``actor i.method(*args)``, retried once on a re-acquired actor when the actor is lost (class doc)."""
        import ray

        actor = self.actors[i]
        try:
            return _get(getattr(actor, method).remote(*args))
        except SandboxError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ray.exceptions.RayActorError):
                raise
            log.warning("node judge actor %s lost (%s); re-acquiring it and retrying once", self.actor_name(i),
                        type(cause).__name__)
        died = isinstance(cause, ray.exceptions.ActorDiedError)
        return _get(getattr(self._reacquire(i, actor, died), method).remote(*args))

    @property
    def actor(self) -> Any:
        """The first actor (a node judge of one shard has only this one)."""
        return self.actors[0]

    def _next(self) -> int:
        with self._lock:
            return next(self._rr)

    def judge_many(self, items: Sequence[tuple[Problem, str]], language: str = "python") -> list[JudgeResult]:
        """Judge ``items`` on the next of the node's actors (one call, one slot of that actor's share). Raises
        :class:`SandboxError` when the actor is lost and its replacement fails too."""
        return self._call(self._next(), "judge_many", list(items), language)

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        """Judge one submission on the next of the node's actors."""
        return self.judge_many([(problem, solution)], language)[0]

    def run_code(self, code: str, stdin: str = "", timeout_s: float = 10.0, memory_limit_mb: int = 1024,
                 **kwargs: Any) -> RunResult:
        """SandboxFusion ``/run_code`` semantics (as :meth:`rlvr.judge.core.Judge.run_code`) on the next actor
        (seconds, MB). Raises :class:`SandboxError` as :meth:`judge_many`."""
        return self._call(self._next(), "run_code", {"code": code, "stdin": stdin, "timeout_s": timeout_s,
                                                     "memory_limit_mb": memory_limit_mb, **kwargs})

    def stats(self) -> dict[str, Any]:
        """``{"workers", "shards", "calls", "peak", "peak_per_shard"}``: the node's bound, the actors' shares, calls
        served, and the most calls each actor judged at at once (``peak``: their sum, an upper bound of the node's
        peak, since the actors' peaks need not coincide). Counts of a replaced actor restart at zero."""
        per = [self._call(i, "stats") for i in range(len(self.actors))]
        return {"workers": sum(s["workers"] for s in per), "shards": [s["workers"] for s in per],
                "calls": sum(s["calls"] for s in per), "peak": sum(s["peak"] for s in per),
                "peak_per_shard": [s["peak"] for s in per]}
