"""The judge server never works on request content on its event loop (issue 28, item 3): ``/v1/ping`` stays fast
while hostile requests are being judged.

A server runs in a subprocess (so this test's clients do not share its interpreter lock) with a judge stand-in that
answers every test ``wrong_answer`` with undecodable output, as a hostile program's output is reported, and every
``/run_code`` with 16 MB of undecodable output. Two clients keep it busy with ScaleBox requests that are expensive to
take apart on the host (tens of thousands of stdio test cases, a completion made of thousands of fenced blocks,
megabytes of body), a third with ``/run_code``; meanwhile a fourth pings. The p99 of the
pings' latency must stay under 100 ms (the issue's bound) and far under one hostile request's duration (so the
bound is not met merely because the work is quick on this machine). A second round of pings is taken only when the
first misses the bound (a load spike of a shared 2-core machine); a loop blocked on content misses both by seconds."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from door_server import free_port

SERVER = r'''
import sys
import uvicorn
from rlvr.judge.api.app import create_app
from rlvr.judge.verdict import TestResult, summarise


class HostileOutputs:
    """Every test ``wrong_answer`` with undecodable output (surrogate escapes), instantly."""

    workers = 2

    def judge(self, problem, solution, language="python"):
        out = "\udcff\udcfe" * 8
        res = [TestResult(index=i, verdict="wrong_answer", stdout=out, stderr=out) for i in range(len(problem.tests))]
        return summarise(res, 0.0, "wrong")

    def run_code(self, code, **kw):
        """16 MB of undecodable output (the judge's output cap), as a hostile program writes it."""
        from rlvr.judge.core import RunResult

        return RunResult(status="Finished", verdict="accepted", exit_code=0, stdout="\udcff" * (16 << 20))


app = create_app(HostileOutputs(), max_queue=4, tune_gc=True)  # as serve() does (it owns its judge)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="error")
'''

LOAD = r'''
import sys, threading, time
import httpx

body = open(sys.argv[2], "rb").read()


def hostile():
    with httpx.Client(base_url=sys.argv[1], timeout=120) as c:
        while True:
            t0 = time.monotonic()
            r = c.post("/common_evaluate_batch", content=body, headers={"content-type": "application/json"})
            ok = r.status_code == 200 and b'"verdict":"wrong_answer"' in r.content[-4000:]
            print(f"{time.monotonic() - t0:.3f}" if ok else f"error {r.status_code} {r.content[:200]!r}", flush=True)


def big_output():
    with httpx.Client(base_url=sys.argv[1], timeout=120) as c:
        while True:
            r = c.post("/run_code", json={"code": "x"})
            if r.status_code != 200 or len(r.content) < 16 << 20:
                print(f"error {r.status_code} {r.content[:200]!r}", flush=True)


threading.Thread(target=big_output, daemon=True).start()
for _ in range(2):
    threading.Thread(target=hostile, daemon=True).start()
time.sleep(600)
'''

N_CASES = 40_000
N_FENCES = 20_000
N_PINGS = 100
ROUNDS = 2


def _hostile_body() -> bytes:
    completion = "Some prose.\n```python\nprint(input())\n```\n" * N_FENCES
    cases = {"type": "stdin_stdout", "input": [f"{i} {i}\n" for i in range(N_CASES)],
             "output": [f"{2 * i}\n" for i in range(N_CASES)]}
    body = {"id": 1, "completion": completion, "config": {"language": "python", "provided_data": {"test_cases": cases}}}
    return json.dumps(body).encode()


def _p99(samples: list[float]) -> float:
    """Nearest-rank 99th percentile."""
    ordered = sorted(samples)
    return ordered[math.ceil(0.99 * len(ordered)) - 1]


@pytest.mark.slow
def test_ping_stays_fast_while_hostile_requests_are_judged(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "load.py").write_text(LOAD)
    (tmp_path / "body.json").write_bytes(_hostile_body())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    server = subprocess.Popen([sys.executable, str(tmp_path / "server.py"), str(port)], env=env)
    load = None
    try:
        with httpx.Client(base_url=base, timeout=120) as c:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if c.get("/v1/ping").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline and server.poll() is None, "server did not start"
                time.sleep(0.1)
            # the hostile clients run in a process of their own, so that reading their answers does not compete
            # with this client for the interpreter lock
            load = subprocess.Popen([sys.executable, str(tmp_path / "load.py"), base, str(tmp_path / "body.json")],
                                    env=env, stdout=subprocess.PIPE, text=True)
            first = load.stdout.readline().strip()  # one hostile request done: the work is under way
            assert first and not first.startswith("error"), first
            for _ in range(ROUNDS):  # a second round only when the first met a load spike of this shared machine
                pings = []
                for _ in range(N_PINGS):
                    t0 = time.monotonic()
                    assert c.get("/v1/ping").json() == "pong"
                    pings.append(time.monotonic() - t0)
                    time.sleep(0.01)
                if _p99(pings) < 0.1:
                    break
    finally:
        if load is not None:
            load.kill()
        server.terminate()
        server.wait(timeout=30)
    lines = [first, *(load.stdout.read().split())] if load is not None else []
    assert not any(x.startswith("error") for x in lines), lines
    work = min(float(x) for x in lines if not x.startswith("error"))
    p99 = _p99(pings)
    print(f"ping p50 {sorted(pings)[len(pings) // 2] * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, max "
          f"{max(pings) * 1e3:.1f} ms; hostile request {work:.2f} s ({len(lines)} done)")
    assert p99 < 0.1, f"ping p99 {p99 * 1e3:.0f} ms while a hostile request takes {work:.2f} s"
    assert p99 < work / 10, f"ping p99 {p99 * 1e3:.0f} ms is not far under a hostile request's {work:.2f} s"


# ------------------------------------------------------------------------------- the off-loop helpers, in-process
def test_render_json_in_chunks_matches_one_call_and_replaces_undecodable_text() -> None:
    from rlvr.judge.api.common import CHUNK, render_json
    from rlvr.judge.verdict import TestResult, summarise

    jr = summarise([TestResult(index=i, verdict="accepted", stdout="\udcff") for i in range(3 * CHUNK + 1)], 0.5)
    whole = json.loads(json.dumps(jr.model_dump(mode="json")).replace("\\udcff", "\\ufffd"))
    assert json.loads(render_json(jr)) == whole
    assert json.loads(render_json({"outputs": ["1"] * (CHUNK + 5), "request_id": None}))["outputs"] == ["1"] * 261
    assert render_json({}) == b"{}" and json.loads(render_json([0] * (2 * CHUNK))) == [0] * (2 * CHUNK)
    assert render_json(jr, size_hint=1000) == render_json(jr)  # the one-call path for small answers: same bytes


def test_long_test_lists_are_validated_in_chunks_naming_the_bad_one() -> None:
    from fastapi.testclient import TestClient

    from rlvr.judge.api.app import create_app
    from rlvr.judge.verdict import TestResult, summarise

    class Echo:
        workers = 1

        def judge(self, problem, solution, language="python"):
            return summarise([TestResult(index=i, verdict="accepted") for i in range(len(problem.tests))], 0.0)

    tests = [{"kind": "stdio", "stdin": f"{i}\n", "stdout": f"{i}\n"} for i in range(1000)]
    problem = {"id": "t/x", "source": "t", "split": "test", "statement": "", "tests": tests}
    with TestClient(create_app(Echo())) as c:
        r = c.post("/rlvr/judge", json={"problem": problem, "solution": "print(input())"})
        assert r.status_code == 200 and r.json()["total"] == 1000, r.text
        r = c.post("/rlvr/judge", json={"ground_truth": json.dumps({"tests": tests}), "solution": "x"})
        assert r.status_code == 200 and r.json()["passed"] == 1000, r.text
        bad = [*tests[:700], {"kind": "stdio", "stdin": 3}, *tests[700:]]
        r = c.post("/rlvr/judge", json={"problem": {**problem, "tests": bad}, "solution": "x"})
        assert r.status_code == 422 and "field 'problem.tests.700" in r.json()["message"], r.text
        r = c.post("/rlvr/judge", json={"ground_truth": {"tests": bad}, "solution": "x"})
        assert r.status_code == 400 and "ground_truth.tests.700" in r.json()["detail"], r.text


def test_shed_empties_long_lists_reachable_from_the_roots() -> None:
    from rlvr.judge.api.common import CHUNK, shed
    from rlvr.judge.verdict import TestResult, summarise

    jr = summarise([TestResult(index=i, verdict="accepted") for i in range(CHUNK * 4)], 0.0)
    payload = {"a": [[1] * (CHUNK + 1)], "b": ("x", list(range(CHUNK * 2)))}
    short = [1, 2, 3]
    shed(jr, payload, short)
    assert jr.tests == [] and payload["a"] == [[]] and payload["b"][1] == [] and short == [1, 2, 3]


def test_collector_runs_full_collections_when_idle_or_overdue() -> None:
    from rlvr.judge.api.app import create_app
    from rlvr.judge.api.collector import Collector

    c = Collector(idle_s=60.0, max_s=300.0)  # idle_s well above a full collection's own time in a big test process
    c.last -= 61.0
    assert c.due(running=0) and not c.due(running=3)  # idle: yes; busy, not overdue: no
    c.last -= 300.0
    assert c.due(running=3)  # overdue even under load
    c.collect()
    assert c.collections == 1 and not c.due(running=0)
    assert create_app(object()).state.collector is None  # process-wide tuning only for a server owning its process
    assert create_app(None, workers=1).state.collector is not None
    assert create_app(object(), tune_gc=True).state.collector is not None
