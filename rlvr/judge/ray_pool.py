"""Judge scale-out on Ray: one judge actor per node (each a pool of warm sandboxes), batches spread across them.

verl already runs a Ray cluster for rollouts, so the judge joins it instead of needing its own fleet: create a
:class:`RayJudge` inside the trainer's driver (``ray.init(address="auto")`` has been called by verl) and pass it
wherever a judge is expected — it has the embedded judge's interface (``judge``, ``judge_many``, ``run_code``,
``call_outputs``). Actors are placed with Ray's ``SPREAD`` scheduling strategy so that N actors land on N nodes when
the cluster has them (Ray docs, "Scheduling strategies"). Ray is imported lazily: importing this module is free.

Failures: an exception the judge raises inside an actor reaches the caller as that exception (Ray's ``RayTaskError``
is an instance of its cause); a dead or unreachable actor (any other ``ray.exceptions.RayError``) is infrastructure and
raises :class:`~rlvr.judge.sandbox.SandboxError`, which the rewards retry and then count as ``sandbox_error`` — never
as the submission's failure.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

from rlvr.data.schema import Problem
from rlvr.judge.core import RunResult
from rlvr.judge.sandbox import SandboxError
from rlvr.judge.verdict import JudgeResult

__all__ = ["NODE_JUDGE_PREFIX", "NodeJudge", "RayJudge", "node_workers"]


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


class NodeJudge:
    """Judge interface (``judge``, ``judge_many``, ``run_code``) backed by the one judge actor of this Ray node.

    Every process on a node that builds a ``NodeJudge`` (verl's reward workers: ``reward.num_workers`` of them, each
    awaiting up to 64 ``compute_score`` calls) reaches the same named actor ``rlvr-node-judge-<node id>`` in the job's
    namespace, created by the first caller (``get_if_exists``) on this node (hard node affinity, ``num_cpus=0`` so it
    never waits for a CPU verl's workers hold). The actor judges at most ``workers`` submissions at once
    (:func:`node_workers`; its own ``workers`` sandboxes), so a node's judge load is bounded by its cores instead of
    by reward workers × their concurrency, and programs do not time out from CPU contention between sandboxes.
    Waiting in the actor's queue is not program time (time limits apply to the running program only), but it does
    count against the reward's per-request timeout (:class:`rlvr.reward.scoring.ScoringOptions`).

    Must be built inside a Ray worker or driver (``ray.is_initialized()``); raises ``RuntimeError`` otherwise.
    ``factory``: ``"module:callable"`` building the actor's judge from ``workers=`` (tests pass a fake).
    A lost actor raises :class:`SandboxError` (rewards count it as ``sandbox_error``).
    """

    def __init__(self, workers: int | None = None, factory: str = "rlvr.judge.core:Judge") -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if not ray.is_initialized():
            raise RuntimeError("NodeJudge needs a Ray worker or driver (ray.init() not called)")
        node_id = ray.get_runtime_context().get_node_id()
        self.workers = node_workers(workers)
        self.actor = _node_actor_class().options(
            name=NODE_JUDGE_PREFIX + node_id, get_if_exists=True, num_cpus=0, max_concurrency=self.workers,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
        ).remote(self.workers, factory)

    def judge_many(self, items: Sequence[tuple[Problem, str]], language: str = "python") -> list[JudgeResult]:
        """Judge ``items`` on the node's actor (one call, one slot of its budget)."""
        return _get(self.actor.judge_many.remote(list(items), language))

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        """Judge one submission on the node's actor."""
        return self.judge_many([(problem, solution)], language)[0]

    def run_code(self, code: str, stdin: str = "", timeout_s: float = 10.0, memory_limit_mb: int = 1024,
                 **kwargs: Any) -> RunResult:
        """SandboxFusion ``/run_code`` semantics (as :meth:`rlvr.judge.core.Judge.run_code`) on the node's actor."""
        return _get(self.actor.run_code.remote({"code": code, "stdin": stdin, "timeout_s": timeout_s,
                                                "memory_limit_mb": memory_limit_mb, **kwargs}))

    def stats(self) -> dict[str, int]:
        """The actor's ``{"workers", "calls", "peak"}``."""
        return _get(self.actor.stats.remote())
