"""Prometheus metrics of the judge server (``GET /metrics``).

Text exposition format 0.0.4 (``prometheus_client``, one registry per app): ``rlvr_judge_requests_total{endpoint,
status}``, ``rlvr_judge_verdicts_total{endpoint,verdict}``, ``rlvr_judge_inflight``, ``rlvr_judge_queue_depth``,
``rlvr_judge_queue_capacity``, ``rlvr_judge_workers``, ``rlvr_judge_rejected_total{endpoint}``, histograms
``rlvr_judge_request_duration_seconds{endpoint}`` and ``rlvr_judge_queue_wait_seconds``. With ``serve(workers>1)``
each process has its own registry (scrape each, or run one process per port).

The verdict counters are per-tenant detail: on a shared server, the difference of two scrapes around another
tenant's request tells its verdict. They are exposed only when asked for: ``RLVR_SANDBOX_METRICS_VERDICTS=1`` (every
caller, a trusted network), or to a caller presenting ``RLVR_SANDBOX_METRICS_TOKEN`` as ``Authorization: Bearer
<token>``; every other caller gets the other series (counts by endpoint and status, latencies, queue gauges).
"""

from __future__ import annotations

from rlvr.judge.api.admission import AdmissionGate

__all__ = ["LATENCY_BUCKETS", "Metrics"]

#: Histogram buckets of the latency metrics, seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class Metrics:
    """The app's Prometheus collectors, in a registry of its own (several apps can live in one process)."""

    def __init__(self, gate: AdmissionGate, verdicts_public: bool = False, token: str = "") -> None:
        """``verdicts_public``: every caller sees the verdict counters; ``token``: a caller presenting it (``Bearer``)
        sees them (empty: no token)."""
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.verdicts_public = verdicts_public
        self._token = token.encode("utf-8")
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.verdict_registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "rlvr_judge_requests", "HTTP requests by endpoint and status code", ["endpoint", "status"], registry=r
        )
        self.verdicts = Counter(
            "rlvr_judge_verdicts", "Verdicts returned (submission-level; run_code: the run's)", ["endpoint", "verdict"],
            registry=self.verdict_registry,
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

    def shows_verdicts(self, authorization: str | None) -> bool:
        """Whether a caller with this ``Authorization`` header value (``None``: none) sees the verdict counters:
        when they are public, or when it is ``Bearer <token>`` with the configured token (compared in constant
        time)."""
        import hmac

        if self.verdicts_public:
            return True
        if not self._token or not authorization:
            return False
        scheme, _, given = authorization.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode("utf-8"), self._token)

    def exposition(self, verdicts: bool = False) -> bytes:
        """The registry in Prometheus text format (bytes); ``verdicts``: with the verdict counters."""
        from prometheus_client import generate_latest

        out = generate_latest(self.registry)
        return out + generate_latest(self.verdict_registry) if verdicts else out
