"""Prometheus metrics of the judge server (``GET /metrics``).

Text exposition format 0.0.4 (``prometheus_client``, one registry per app): ``rlvr_judge_requests_total{endpoint,
status}``, ``rlvr_judge_verdicts_total{endpoint,verdict}``, ``rlvr_judge_inflight``, ``rlvr_judge_queue_depth``,
``rlvr_judge_queue_capacity``, ``rlvr_judge_workers``, ``rlvr_judge_rejected_total{endpoint}``, histograms
``rlvr_judge_request_duration_seconds{endpoint}`` and ``rlvr_judge_queue_wait_seconds``. With ``serve(workers>1)``
each process has its own registry (scrape each, or run one process per port).
"""

from __future__ import annotations

from rlvr.judge.api.admission import AdmissionGate

__all__ = ["LATENCY_BUCKETS", "Metrics"]

#: Histogram buckets of the latency metrics, seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    """The app's Prometheus collectors, in a registry of its own (several apps can live in one process)."""

    def __init__(self, gate: AdmissionGate) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "rlvr_judge_requests", "HTTP requests by endpoint and status code", ["endpoint", "status"], registry=r
        )
        self.verdicts = Counter(
            "rlvr_judge_verdicts", "Verdicts returned (submission-level; run_code: the run's)", ["endpoint", "verdict"],
            registry=r,
        )
        self.rejected = Counter(
            "rlvr_judge_rejected", "Requests answered 503 because the queue was full", ["endpoint"], registry=r
        )
        self.duration = Histogram(
            "rlvr_judge_request_duration_seconds", "Request latency, seconds (queue wait included)", ["endpoint"],
            buckets=LATENCY_BUCKETS, registry=r,
        )
        self.queue_wait = Histogram(
            "rlvr_judge_queue_wait_seconds", "Time admitted requests waited for a worker, seconds",
            buckets=LATENCY_BUCKETS, registry=r,
        )
        Gauge("rlvr_judge_inflight", "Judge calls running now", registry=r).set_function(lambda: gate.running)
        Gauge("rlvr_judge_queue_depth", "Requests waiting for a worker", registry=r).set_function(lambda: gate.waiting)
        Gauge("rlvr_judge_queue_capacity", "Most requests allowed to wait", registry=r).set(gate.max_queue)
        Gauge("rlvr_judge_workers", "Concurrent judge calls (sandboxes)", registry=r).set(gate.workers)

    def exposition(self) -> bytes:
        """The registry in Prometheus text format (bytes)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)
