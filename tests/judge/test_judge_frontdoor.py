"""The judge server's front door (issue 43, item 4): request ids checked before anything runs, file-descriptor
exhaustion answered 503, ``/metrics`` without verdicts unless asked for, admission before a body is read, a body
deadline, and the guarded uvicorn protocols (header cap, header deadline, connection limit) on a live loopback server.

Bounds on time here are generous guards against a hang (the server must close a stalled connection within seconds
of its deadline), not speed targets."""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from door_server import DoorJudge, judge_body, live_server, read_answer
from fastapi.testclient import TestClient

from rlvr.judge.api.app import create_app
from rlvr.judge.api.frontdoor import FrontDoor, raw_response, uvicorn_options

EMFILE = OSError(errno.EMFILE, "Too many open files")
RUN_BODY = {"code": "GOOD", "language": "python"}
SCALEBOX_BODY = {"completion": "```python\nGOOD = 1\n```", "config": {"language": "python", "provided_data": {
    "test_cases": {"type": "stdin_stdout", "input": ["1"], "output": ["1"]}}}}


# ------------------------------------------------------------------------------------------------- request ids
@pytest.mark.parametrize("rid", [b"\xc3\xa9t\xc3\xa9", b"a\x01b", b"\x7f", b"x" * 129, b""],
                         ids=["utf8", "control", "del", "too-long", "empty"])
def test_bad_request_id_header_is_400_before_the_judge_runs(rid: bytes) -> None:
    judge = DoorJudge()
    with TestClient(create_app(judge)) as c:
        r = c.post("/rlvr/judge", json=judge_body("GOOD"), headers=[(b"X-Request-ID", rid)])
        assert r.status_code == 400 and "X-Request-ID" in r.json()["detail"], r.text[:300]
        assert "x-request-id" not in r.headers
        r = c.post("/run_code", json=RUN_BODY, headers=[(b"X-Request-ID", rid)])
        assert r.status_code == 400
    assert judge.solutions == []  # nothing ran


@pytest.mark.parametrize("rid", ["\u00e9t\u00e9", "\u2028", "a\r\nSet-Cookie: x=1", "a\nb", "\x00", "x" * 129, ""],
                         ids=["latin1", "non-latin1", "crlf", "lf", "nul", "too-long", "empty"])
def test_bad_body_request_id_is_422_before_the_judge_runs(rid: str) -> None:
    """Before: the program ran, then echoing the id as a header failed (500) or cut the connection."""
    judge = DoorJudge()
    with TestClient(create_app(judge)) as c:
        for path in ("/rlvr/judge", "/rlvr/call_outputs"):
            r = c.post(path, json=judge_body("GOOD", rid))
            assert r.status_code == 422 and "request_id" in r.json()["message"], r.text[:300]
    assert judge.solutions == []


def test_good_request_ids_are_echoed() -> None:
    with TestClient(create_app(DoorJudge())) as c:
        r = c.post("/rlvr/judge", json=judge_body("GOOD", "id with spaces ~!"))
        assert r.status_code == 200 and r.json()["request_id"] == "id with spaces ~!"
        assert r.headers["x-request-id"] == "id with spaces ~!"
        r = c.post("/run_code", json=RUN_BODY, headers={"X-Request-ID": "abc-123"})
        assert r.status_code == 200 and r.headers["x-request-id"] == "abc-123"


# ------------------------------------------------------------------------------------ out of file descriptors
@pytest.mark.parametrize(("path", "body"), [("/rlvr/judge", judge_body()), ("/rlvr/call_outputs", judge_body()),
                                            ("/run_code", RUN_BODY), ("/common_evaluate_batch", SCALEBOX_BODY)])
def test_emfile_is_503_with_retry_after_never_sandbox_error(path: str, body: dict) -> None:
    """Before: 500 ``sandbox_error`` (/rlvr/*, ScaleBox) or 200 ``SandboxError`` (/run_code)."""
    with TestClient(create_app(DoorJudge(raises=EMFILE))) as c:
        r = c.post(path, json=body)
    assert r.status_code == 503, r.text[:300]
    assert "file descriptors" in r.json()["detail"] and int(r.headers["retry-after"]) >= 1


def test_a_sandbox_error_verdict_caused_by_emfile_is_503() -> None:
    class Judge(DoorJudge):
        def judge(self, problem, solution, language="python"):
            from rlvr.judge.verdict import TestResult, summarise

            msg = "sandbox failure: OSError: [Errno 24] Too many open files"
            return summarise([TestResult(index=0, verdict="sandbox_error", message=msg)], 0.0, msg)

    with TestClient(create_app(Judge())) as c:
        assert c.post("/rlvr/judge", json=judge_body()).status_code == 503
    with TestClient(create_app(DoorJudge(raises=OSError(errno.EPIPE, "Broken pipe")))) as c:  # other OS errors
        r = c.post("/rlvr/judge", json=judge_body())
        assert r.status_code == 500 and r.json()["detail"].startswith("sandbox_error")


# ---------------------------------------------------------------------------------------------------- /metrics
def test_metrics_verdicts_are_public_only_when_asked_for(monkeypatch) -> None:
    with TestClient(create_app(DoorJudge())) as c:
        c.post("/rlvr/judge", json=judge_body("GOOD"))
        text = c.get("/metrics").text
        assert 'rlvr_judge_requests_total{endpoint="/rlvr/judge",status="200"} 1.0' in text
        assert "rlvr_judge_verdicts" not in text and "accepted" not in text
    monkeypatch.setenv("RLVR_SANDBOX_METRICS_VERDICTS", "1")
    with TestClient(create_app(DoorJudge())) as c:
        c.post("/rlvr/judge", json=judge_body("GOOD"))
        assert 'rlvr_judge_verdicts_total{endpoint="/rlvr/judge",verdict="accepted"} 1.0' in c.get("/metrics").text
    monkeypatch.delenv("RLVR_SANDBOX_METRICS_VERDICTS")
    monkeypatch.setenv("RLVR_SANDBOX_METRICS_TOKEN", "tok")
    with TestClient(create_app(DoorJudge())) as c:
        c.post("/rlvr/judge", json=judge_body("bad"))
        assert "wrong_answer" not in c.get("/metrics").text
        assert "wrong_answer" in c.get("/metrics", headers={"Authorization": "Bearer tok"}).text


# --------------------------------------------------------------------------------------------- open-file limit
def test_serve_raises_the_open_file_soft_limit() -> None:
    code = ("import resource\nfrom rlvr.judge.api.frontdoor import raise_nofile_limit, default_max_connections\n"
            "s, h = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (64, h))\n"
            "print(raise_nofile_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], h, default_max_connections())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    now, soft, hard, conns = map(int, out.split())
    assert now == soft == min(hard, 1 << 20) and soft > 64
    assert 16 <= conns <= min(1024, soft // 4)


def test_front_door_settings_are_read_and_checked(monkeypatch) -> None:
    monkeypatch.setenv("RLVR_SANDBOX_MAX_CONNECTIONS", "77")
    monkeypatch.setenv("RLVR_SANDBOX_MAX_HEADER_KB", "8")
    monkeypatch.setenv("RLVR_SANDBOX_HEADER_TIMEOUT_S", "3")
    door = FrontDoor.from_settings()
    assert (door.max_connections, door.max_header_bytes, door.header_timeout_s) == (77, 8192, 3.0)
    opts = uvicorn_options(door)
    assert opts["limit_concurrency"] == 78 and opts["h11_max_incomplete_event_size"] == 8192
    assert opts["http"].door is door
    monkeypatch.setenv("RLVR_SANDBOX_HEADER_TIMEOUT_S", "0")
    with pytest.raises(ValueError, match="RLVR_SANDBOX_HEADER_TIMEOUT_S"):
        FrontDoor.from_settings()
    with pytest.raises(ValueError, match="RLVR_SANDBOX_BODY_TIMEOUT_S"):
        create_app(DoorJudge(), body_timeout_s=float("nan"))
    with pytest.raises(ValueError, match="RLVR_SANDBOX_MAX_BODIES"):
        create_app(DoorJudge(), max_bodies=0)
    assert raw_response(431, "x").startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")


# ------------------------------------------------------------------------------------- live server, both stacks
STACKS = ["httptools", "h11"]


def _send(addr, data: bytes) -> socket.socket:
    s = socket.create_connection(addr, timeout=10)
    s.sendall(data)
    return s


def _closed(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (without answering), waiting at most a second."""
    s.settimeout(1.0)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


@pytest.mark.parametrize("http", STACKS)
def test_oversized_headers_are_431_and_closed(http: str) -> None:
    """Before: the httptools stack buffered headers without bound (this request was answered 200)."""
    with live_server(http=http) as live:
        filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"a" * 1000) for i in range(64))
        s = _send(live.addr, b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n" + filler + b"\r\n")
        status, data = read_answer(s)
        s.close()
        assert status in (431, 400), data[:300]  # h11 answers its own 400 at its incomplete-event cap
        assert httpx.get(f"{live.url}/v1/ping", timeout=10).json() == "pong"


@pytest.mark.parametrize("http", STACKS)
@pytest.mark.parametrize("partial", [b"", b"POST /run_code HTTP/1.1\r\nHost: x\r\n"], ids=["idle", "half-sent"])
def test_a_connection_without_complete_headers_is_closed_at_the_header_deadline(http: str, partial: bytes) -> None:
    """Before: a new connection that sent nothing, or half its headers, stayed open for good."""
    with live_server(http=http) as live:
        s = _send(live.addr, partial)
        t0 = time.monotonic()
        status, data = read_answer(s, timeout_s=live.door.header_timeout_s + 10)
        s.close()
        assert time.monotonic() - t0 < live.door.header_timeout_s + 8, "never closed"
        assert status == 408 and b"RLVR_SANDBOX_HEADER_TIMEOUT_S" in data, data[:300]


def test_slowloris_trickle_does_not_extend_the_header_deadline() -> None:
    with live_server() as live:
        s = _send(live.addr, b"POST /run_code HTTP/1.1\r\n")
        stop = threading.Event()

        def trickle() -> None:
            while not stop.is_set():
                try:
                    s.sendall(b"X-a: b\r\n")
                except OSError:
                    return
                time.sleep(0.2)

        th = threading.Thread(target=trickle, daemon=True)
        th.start()
        status, data = read_answer(s, timeout_s=live.door.header_timeout_s + 10)
        stop.set()
        th.join(timeout=5)
        s.close()
        assert status == 408, data[:300]


def test_a_body_is_not_read_before_admission() -> None:
    """With every body place taken, a request is answered 503 (connection closed) at once, without its body.
    Before: the server read (and held) the whole body first, so this request got no answer at all."""
    judge = DoorJudge(workers=1, delay_s=3.0)
    with live_server(judge, max_queue=0, max_bodies=1) as live:
        holder = threading.Thread(target=lambda: httpx.post(f"{live.url}/rlvr/judge", json=judge_body(), timeout=30))
        holder.start()
        deadline = time.monotonic() + 10
        while not judge.solutions and time.monotonic() < deadline:
            time.sleep(0.02)
        s = _send(live.addr, b"POST /run_code HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                             b"content-length: 30000000\r\n\r\n")
        status, data = read_answer(s, timeout_s=10)
        s.close()
        holder.join(timeout=30)
        assert status == 503 and b"retry-after" in data.lower() and b"connection: close" in data.lower(), data[:300]


def test_a_body_that_stalls_is_408_at_the_body_deadline() -> None:
    judge = DoorJudge()
    with live_server(judge, body_timeout_s=1.0) as live:
        s = _send(live.addr, b"POST /rlvr/judge HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                             b"content-length: 1000\r\n\r\n{\"solution\": ")
        status, data = read_answer(s, timeout_s=12)
        s.close()
        assert status == 408 and b"RLVR_SANDBOX_BODY_TIMEOUT_S" in data, data[:300]
        assert judge.solutions == []
        # the body place is free again
        assert httpx.post(f"{live.url}/rlvr/judge", json=judge_body(), timeout=10).json()["verdict"] == "accepted"


def test_idle_connections_over_the_limit_make_room_and_busy_ones_refuse() -> None:
    """Connections waiting for headers are evicted oldest first when the limit is reached; a new connection is refused
    (503) only when every connection has a request in flight. Before: no limit at all."""
    door = FrontDoor(max_connections=8, header_timeout_s=30.0, keep_alive_s=30.0)
    with live_server(DoorJudge(workers=4, delay_s=3.0), door=door, max_queue=20, max_bodies=20) as live:
        idle = [_send(live.addr, b"") for _ in range(20)]
        deadline = time.monotonic() + 10
        while live.connections() > door.max_connections:  # evicted ones close on the loop's next turns
            assert time.monotonic() < deadline, f"{live.connections()} connections held"
            time.sleep(0.05)
        closed = sum(_closed(s) for s in idle[:12])
        assert closed >= 12 - door.max_connections, "the oldest idle connections were not closed"
        assert httpx.get(f"{live.url}/v1/ping", timeout=10).json() == "pong"  # gets in by evicting an idle one
        for s in idle:
            s.close()
        # every connection busy: judge requests in flight
        busy = [threading.Thread(target=lambda: httpx.post(f"{live.url}/rlvr/judge", json=judge_body(), timeout=60))
                for _ in range(door.max_connections)]
        for t in busy:
            t.start()
        deadline = time.monotonic() + 60
        while live.connections() < door.max_connections or live.requests() < door.max_connections:
            assert time.monotonic() < deadline, "the busy requests never arrived"
            time.sleep(0.05)
        s = _send(live.addr, b"")
        status, data = read_answer(s, timeout_s=10)
        s.close()
        assert status == 503 and b"RLVR_SANDBOX_MAX_CONNECTIONS" in data, data[:300]
        for t in busy:
            t.join(timeout=60)


def test_front_door_answers_stay_json() -> None:
    body = raw_response(503, "too many", retry_after_s=1).split(b"\r\n\r\n", 1)[1]
    assert json.loads(body) == {"detail": "too many"}
