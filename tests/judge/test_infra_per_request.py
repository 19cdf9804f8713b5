"""Infrastructure failures are counted per request, retried per request, and never inflate the share that fails a
run (issue: 4 failed HTTP requests out of 152 became 9 of 66 failed verdicts and failed the run at 5 %).

A scripted rlvr judge server (``httpx.MockTransport``) answers ``/rlvr/info``, ``/rlvr/call_outputs`` and
``/rlvr/judge``; the client's backoff sleeps are skipped."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from rlvr.cli import main
from rlvr.data.schema import CallTest, Problem, write_problems
from rlvr.judge.client import RemoteJudge
from rlvr.judge.preflight import GuardedJudge, SandboxErrorShareExceeded
from rlvr.judge.verdict import TestResult, summarise


class Server:
    """``/rlvr/call_outputs`` of the problems in ``unreachable`` never answers (connection refused on every
    attempt); ``/rlvr/judge`` answers ``sandbox_error`` (the server's sandbox failed) to the first attempt of each
    solution containing ``#flaky``, and judges a problem with a test lacking ``expected`` ``sandbox_error`` (as the
    server does); everything else is accepted."""

    def __init__(self, unreachable: set[str]) -> None:
        self.unreachable = unreachable
        self.attempts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        rid = request.headers.get("x-request-id")
        headers = {"x-request-id": rid} if rid else {}
        if request.url.path == "/rlvr/info":
            return httpx.Response(200, json={"name": "rlvr"}, headers=headers)
        body = json.loads(request.content)
        problem = body["problem"]
        if request.url.path == "/rlvr/call_outputs":
            with self.lock:
                self.attempts[f"fill {problem['id']}"] += 1
            if problem["id"] in self.unreachable:
                raise httpx.ConnectError("connection refused", request=request)
            outs = [repr(sum(json.loads(t["args"]))) for t in problem["tests"]]
            return httpx.Response(200, json={"outputs": outs, "request_id": rid}, headers=headers)
        with self.lock:
            self.attempts[body["solution"]] += 1
            first = self.attempts[body["solution"]] == 1
        tests = problem["tests"]
        bad = ("#flaky" in body["solution"] and first) or any(
            t.get("kind") == "call" and t.get("expected") is None for t in tests)
        verdict = "sandbox_error" if bad else "accepted"
        res = summarise([TestResult(index=i, verdict=verdict) for i in range(len(tests))], 0.01)
        return httpx.Response(200, json={**res.model_dump(mode="json"), "request_id": rid}, headers=headers)


def _remote(server: Server) -> RemoteJudge:
    j = RemoteJudge("http://judge.test:8080", transport=httpx.MockTransport(server), concurrency=4)
    j._sleep = lambda s: None  # no backoff waits in a unit test
    return j


def _problems(tmp_path: Path, n: int) -> Path:
    d = tmp_path / "problems"
    probs = [Problem(id=f"humaneval/HumanEval/{i}", source="humaneval", split="test", statement="add",
                     entry_point="add", tests=[CallTest(args="[1, 2]"), CallTest(args="[3, 4]")],
                     solutions=["def add(a, b):\n    return a + b\n"]) for i in range(n)]
    write_problems(d / "humaneval.jsonl", probs)
    return d


@pytest.fixture(autouse=True)
def _no_preflight(monkeypatch):
    monkeypatch.setattr("rlvr.judge.preflight.preflight", lambda judge, *a, **k: None)


def test_failed_reference_runs_count_once_not_per_sample(tmp_path, monkeypatch):
    """30 problems, 66 samples; the reference runs of 4 problems (9 samples) fail on every attempt. The run passes
    (4 failed of 30 + 57 requests, under 5 %); the 9 samples are sandbox_error without being sent to the judge."""
    monkeypatch.chdir(tmp_path)
    unreachable = {f"humaneval/HumanEval/{i}" for i in range(4)}
    server = Server(unreachable)
    judge = _remote(server)
    monkeypatch.setattr("rlvr.judge.client.get_judge", lambda: judge)
    per_task = [3, 2, 2, 2] + [2] * 21 + [3] * 5
    lines = [{"task_id": f"HumanEval/{i}", "solution": f"def add(a, b):\n    return a + b  # {i}.{k}\n"}
             for i, n in enumerate(per_task) for k in range(n)]
    assert len(lines) == 66 and sum(per_task[:4]) == 9
    samples = tmp_path / "s.jsonl"
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = CliRunner().invoke(main, ["judge", "--dataset", "humaneval", "--samples", str(samples), "--problems-dir",
                                  str(_problems(tmp_path, 30))])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (tmp_path / "s_verdicts.jsonl").read_text().splitlines()]
    assert Counter(x["verdict"] for x in rows) == {"accepted": 57, "sandbox_error": 9}
    assert "4 problem(s) without expected outputs" in r.output
    sent, failed = judge.request_counts()
    assert failed == 4 and sent == 1 + 30 + 57  # /rlvr/info, one fill per problem, one judge request per sample
    assert not any(k.startswith("def add") and "# 0." in k for k in server.attempts)  # unfilled: never sent


def test_an_infrastructure_answer_is_retried_as_that_request():
    server = Server(set())
    judge = _remote(server)
    p = Problem(id="x/1", source="x", split="test", statement="s", entry_point="add",
                tests=[CallTest(args="[1, 2]", expected="3")])
    res = judge.judge_many([(p, "def add(a, b):\n    return a + b  #flaky\n"), (p, "def add(a, b): return 3\n")])
    assert [r.verdict for r in res] == ["accepted", "accepted"]
    assert server.attempts["def add(a, b):\n    return a + b  #flaky\n"] == 2
    assert judge.request_counts() == (3, 0)  # /rlvr/info + two requests, none failed: retries are not requests


def test_a_request_failing_every_attempt_counts_once():
    def always(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"status": "SandboxError", "message": "sandbox died"})

    plain = RemoteJudge("http://judge.test:8080", transport=httpx.MockTransport(always), native=False, retries=2)
    plain._sleep = lambda s: None
    r = plain.run_code("print(1)")
    assert r.verdict == "sandbox_error" and plain.request_counts() == (1, 1)


class Counting:
    """A judge that keeps its own request count (as :class:`RemoteJudge` does) and answers ``verdicts``."""

    def __init__(self, sent: int, failed: int) -> None:
        self.counts = (sent, failed)
        self.workers = 1

    def request_counts(self) -> tuple[int, int]:
        return self.counts

    def judge_many(self, items, language: str = "python"):
        return [summarise([TestResult(index=0, verdict="sandbox_error")], 0.0) for _ in items]


def test_the_share_is_per_request_not_per_verdict():
    p = Problem(id="x/1", source="x", split="test", statement="s", entry_point="f", tests=[CallTest(args="[1]")])
    g = GuardedJudge(Counting(152, 4), max_share=0.05, where="http://judge.test:8080")
    g.judge_many([(p, "x")] * 9)  # 9 sandbox_error verdicts out of these 9 (and of a run's 66)
    g.check_sandbox_errors()  # 4 of 152 requests: 2.6 %
    g.check_verdicts(["sandbox_error"] * 9 + ["accepted"] * 57, "eval base/humaneval")
    assert g.sandbox_error_share() == pytest.approx(4 / 152)
    g._inner.counts = (152, 9)
    with pytest.raises(SandboxErrorShareExceeded, match=r"^eval base/humaneval: 9 of 152 judge requests \(5\.9%\)"):
        g.check_verdicts([], "eval base/humaneval")


def test_embedded_reference_failures_count_as_requests():
    """Without a request count of its own (the embedded judge), a failed call_outputs run is one failed request."""
    from rlvr.judge.sandbox import SandboxError

    class Embedded:
        def call_outputs(self, problem, solution):
            raise SandboxError("worker died")

    g = GuardedJudge(Embedded(), max_share=0.05, where="embedded")
    with pytest.raises(SandboxError):
        g.call_outputs(None, "x")
    assert g.request_counts() == (1, 1)
    with pytest.raises(SandboxErrorShareExceeded, match="first error: worker died"):
        g.check_sandbox_errors()


def test_concurrent_first_requests_probe_the_server_once():
    """The CI failure of the twenty-fourth session: two pool threads both saw the server kind unknown and both sent
    ``GET /rlvr/info``, so ``request_counts`` read 4 requests where 3 were made by the caller."""
    probes: list[str] = []
    entered = threading.Barrier(4, timeout=5)

    def slow_info(request: httpx.Request) -> httpx.Response:
        probes.append(request.url.path)
        threading.Event().wait(0.3)  # every thread reaches is_native while the first probe is in flight
        return httpx.Response(200, json={"name": "rlvr"})

    judge = RemoteJudge("http://judge.test:8080", transport=httpx.MockTransport(slow_info), concurrency=4)

    def ask() -> bool:
        entered.wait()
        return judge.is_native()

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert probes == ["/rlvr/info"] and judge.request_counts() == (1, 0)
