"""Judge server operations: admission gate / 503 + Retry-After backpressure, /metrics, JSON request logs."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from door_server import serving
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from rlvr.data.schema import Problem, StdioTest
from rlvr.judge.client import RemoteJudge
from rlvr.judge.core import RunResult
from rlvr.judge.server import AdmissionGate, JsonLogFormatter, Saturated, create_app
from rlvr.judge.verdict import JudgeResult, TestResult, summarise

PROBLEM = Problem(id="t/echo", source="t", split="test", statement="", tests=[StdioTest(stdin="1\n", stdout="1\n")])


class SlowJudge:
    """A fake judge whose calls take ``delay_s`` seconds; ``GOOD`` in the solution → accepted, else wrong_answer.
    Records the most calls that ever ran at once."""

    def __init__(self, delay_s: float = 0.0, workers: int = 1) -> None:
        self.delay_s = delay_s
        self.workers = workers
        self.now = self.peak = self.calls = 0
        self._lock = threading.Lock()

    def _enter(self) -> None:
        with self._lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)

    def _leave(self) -> None:
        with self._lock:
            self.now -= 1

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        self._enter()
        try:
            time.sleep(self.delay_s)
            v = "accepted" if "GOOD" in solution else "wrong_answer"
            return summarise([TestResult(index=i, verdict=v) for i in range(len(problem.tests))], self.delay_s)
        finally:
            self._leave()

    def run_code(self, code: str, stdin: str = "", timeout_s: float = 10.0, memory_limit_mb: int = 1024,
                 files: Any = None, language: str = "python") -> RunResult:
        self._enter()
        try:
            time.sleep(self.delay_s)
            return RunResult(status="Finished", verdict="accepted", exit_code=0, stdout=stdin)
        finally:
            self._leave()


# ------------------------------------------------------------------------------------------------------ the gate
def test_gate_admits_workers_queues_fifo_then_rejects_with_retry_after() -> None:
    async def scenario() -> list[str]:
        gate = AdmissionGate(workers=1, max_queue=1, retry_after_max_s=7)
        order: list[str] = []
        release_first = asyncio.Event()

        async def hold(name: str, until: asyncio.Event | None = None) -> None:
            async with gate.slot() as wait_s:
                order.append(f"{name}:{'queued' if wait_s > 0.005 else 'direct'}")
                if until is not None:
                    await until.wait()

        first = asyncio.create_task(hold("a", release_first))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(hold("b"))
        await asyncio.sleep(0.01)
        assert (gate.running, gate.waiting) == (1, 1)
        with pytest.raises(Saturated) as exc:
            async with gate.slot():
                pass
        assert 1 <= exc.value.retry_after_s <= 7
        release_first.set()
        await asyncio.gather(first, second)
        assert (gate.running, gate.waiting) == (0, 0)
        return order

    assert asyncio.run(scenario()) == ["a:direct", "b:queued"]


def test_gate_survives_a_cancelled_waiter() -> None:
    async def scenario() -> None:
        gate = AdmissionGate(workers=1, max_queue=2)
        go = asyncio.Event()

        async def hold() -> None:
            async with gate.slot():
                await go.wait()

        holder = asyncio.create_task(hold())
        await asyncio.sleep(0.01)
        waiter = asyncio.create_task(hold())
        await asyncio.sleep(0.01)
        waiter.cancel()
        await asyncio.sleep(0.01)
        assert gate.waiting == 0
        go.set()
        await holder
        assert gate.running == 0
        async with gate.slot() as wait_s:  # the slot is free again
            assert wait_s < 0.005 and gate.running == 1

    asyncio.run(scenario())


def test_gate_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="workers"):
        AdmissionGate(workers=0, max_queue=1)


def test_queue_size_comes_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLVR_SANDBOX_QUEUE_FACTOR", "3")
    assert create_app(SlowJudge(workers=2)).state.gate.max_queue == 6
    monkeypatch.setenv("RLVR_SANDBOX_MAX_QUEUE", "0")
    assert create_app(SlowJudge(workers=2)).state.gate.max_queue == 0
    assert create_app(SlowJudge(workers=2), max_queue=5).state.gate.max_queue == 5


# ------------------------------------------------------------------------------------------------ live backpressure
@pytest.fixture
def slow_server() -> Iterator[tuple[str, SlowJudge]]:
    """uvicorn on 127.0.0.1 serving a 0.3 s-per-call judge with 1 worker and a queue of 1."""
    judge = SlowJudge(delay_s=0.3, workers=1)
    with serving(create_app(judge, max_queue=1)) as (_, url):
        yield url, judge


def test_saturated_server_answers_503_with_retry_after(slow_server: tuple[str, SlowJudge]) -> None:
    url, judge = slow_server
    body = {"problem": PROBLEM.model_dump(mode="json"), "solution": "GOOD"}
    with httpx.Client(base_url=url, timeout=30) as http:

        def post(_: int) -> httpx.Response:
            return http.post("/rlvr/judge", json=body)

        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(post, range(6)))
        codes = sorted(r.status_code for r in answers)
        assert codes.count(200) >= 2 and codes.count(503) >= 1 and set(codes) <= {200, 503}
        for r in answers:
            if r.status_code == 503:
                assert int(r.headers["Retry-After"]) >= 1 and "saturated" in r.json()["detail"]
        assert judge.peak == 1  # never more concurrent judge calls than workers
        metrics = http.get("/metrics").text
        assert 'rlvr_judge_requests_total{endpoint="/rlvr/judge",status="503"}' in metrics
        assert http.get("/v1/ping").json() == "pong"  # ungated endpoints still answer


def test_remote_judge_completes_everything_through_backpressure(slow_server: tuple[str, SlowJudge]) -> None:
    url, judge = slow_server
    with RemoteJudge(url, concurrency=6, retries=0, max_backoff_s=2.0) as rj:
        results = rj.judge_many([(PROBLEM, "GOOD" if i % 2 else "bad") for i in range(10)])
        assert [r.verdict for r in results] == ["wrong_answer", "accepted"] * 5
        assert rj.backpressure_waits >= 1  # retries=0: only Retry-After waits can have saved the 503s
    assert judge.calls == 10 and judge.peak == 1


# --------------------------------------------------------------------------------------------- metrics and logs
def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_requests_verdicts_and_latency() -> None:
    with TestClient(create_app(SlowJudge(workers=2), metrics_token="s3cret")) as c:
        body = {"problem": PROBLEM.model_dump(mode="json")}
        for sol in ("GOOD", "GOOD", "bad"):
            assert c.post("/rlvr/judge", json={**body, "solution": sol}).status_code == 200
        assert c.post("/run_code", json={"code": "print(1)", "stdin": "x"}).json()["verdict"] == "accepted"
        assert c.post("/rlvr/judge", json={"solution": "x"}).status_code == 400
        resp = c.get("/metrics", headers={"Authorization": "Bearer s3cret"})
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
        m = _samples(resp.text)
        # without the token (or with a wrong one): no per-tenant verdict detail (issue 43)
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
            public = c.get("/metrics", headers=auth).text
            assert "rlvr_judge_requests_total" in public and "rlvr_judge_verdicts" not in public, auth
    ep = ("endpoint", "/rlvr/judge")
    assert m[("rlvr_judge_requests_total", (ep, ("status", "200")))] == 3
    assert m[("rlvr_judge_requests_total", (ep, ("status", "400")))] == 1
    assert m[("rlvr_judge_verdicts_total", (ep, ("verdict", "accepted")))] == 2
    assert m[("rlvr_judge_verdicts_total", (ep, ("verdict", "wrong_answer")))] == 1
    assert m[("rlvr_judge_verdicts_total", (("endpoint", "/run_code"), ("verdict", "accepted")))] == 1
    assert m[("rlvr_judge_request_duration_seconds_count", (ep,))] == 4
    assert m[("rlvr_judge_request_duration_seconds_bucket", (ep, ("le", "+Inf")))] == 4
    # every gated request is admitted before its body is parsed, off the event loop (issue 28): the 400 too
    assert m[("rlvr_judge_queue_wait_seconds_count", ())] == 5
    assert m[("rlvr_judge_inflight", ())] == 0 and m[("rlvr_judge_queue_depth", ())] == 0
    assert m[("rlvr_judge_workers", ())] == 2 and m[("rlvr_judge_queue_capacity", ())] == 4


def test_one_structured_log_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rlvr.judge.server"), TestClient(create_app(SlowJudge())) as c:
        c.post("/rlvr/judge", json={"problem": PROBLEM.model_dump(mode="json"), "solution": "bad"})
        c.get("/v1/ping")
    recs = [r for r in caplog.records if r.name == "rlvr.judge.server"]
    assert len(recs) == 1  # the ping is not logged
    line = json.loads(JsonLogFormatter().format(recs[0]))
    assert line["endpoint"] == "/rlvr/judge" and line["status"] == 200 and line["verdict"] == "wrong_answer"
    assert line["duration_s"] >= 0 and line["queue_wait_s"] >= 0 and line["msg"] == "request"


class BrokenJudge(SlowJudge):
    """A fake judge whose ``judge`` raises what no exception handler of the app takes (``KeyError`` is not
    infrastructure and ``judge_program`` would score it; a ``LookupError`` subclass raised by ``call_outputs`` is not
    caught there)."""

    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]:
        raise LookupError("boom")


def test_gated_requests_keep_the_app_behaviour_on_the_direct_lane(caplog: pytest.LogCaptureFixture) -> None:
    """A POST to a gated endpoint skips the router (``GatedLane``) but not what the app does around it: the request id
    echo, metrics and the log line (``Observe``), the app's exception handlers (400 with the body's detail), a 500
    for an exception no handler takes, and the router for every other method or path."""
    body = {"problem": PROBLEM.model_dump(mode="json"), "solution": "GOOD"}
    with caplog.at_level(logging.INFO, logger="rlvr.judge.server"), \
            TestClient(create_app(BrokenJudge()), raise_server_exceptions=False) as c:
        ok = c.post("/rlvr/judge", json=body, headers={"X-Request-ID": "rq-7"})
        assert ok.status_code == 200 and ok.json()["verdict"] == "accepted"
        assert ok.headers["x-request-id"] == "rq-7"
        bad = c.post("/common_evaluate_batch", content=b"{bad", headers={"X-Request-ID": "rq-8"})
        assert bad.status_code == 400 and "not valid JSON" in bad.json()["detail"]
        assert bad.headers["x-request-id"] == "rq-8"
        assert c.post("/run_code", json={"code": "x", "run_timeout": 0}).status_code == 422
        assert c.post("/rlvr/call_outputs", json=body).status_code == 500
        assert c.get("/rlvr/judge").status_code == 405  # not POST: the router answers
        assert c.post("/rlvr/judge/", json=body, follow_redirects=False).status_code == 307  # the router redirects
        m = _samples(c.get("/metrics").text)
    assert m[("rlvr_judge_requests_total", (("endpoint", "/rlvr/call_outputs"), ("status", "500")))] == 1
    assert m[("rlvr_judge_requests_total", (("endpoint", "/common_evaluate_batch"), ("status", "400")))] == 1
    lines = [json.loads(JsonLogFormatter().format(r)) for r in caplog.records if r.name == "rlvr.judge.server"]
    assert [(x["endpoint"], x["status"]) for x in lines if x.get("msg") == "request"][:4] == [
        ("/rlvr/judge", 200), ("/common_evaluate_batch", 400), ("/run_code", 422), ("/rlvr/call_outputs", 500)]
