"""Test helpers for live judge servers: uvicorn serving an app on a free loopback port in a thread (:func:`serving`),
``rlvr sandbox serve`` in a process of its own (:func:`sandbox_serve`), and for the front door (issue 43, item 4):
a server behind :func:`rlvr.judge.api.frontdoor.uvicorn_options` (:func:`live_server`), a fake judge, raw-socket
reads, and the other tenant whose requests must keep succeeding while hostile clients run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from rlvr.data.schema import Problem, StdioTest
from rlvr.judge.api.app import create_app
from rlvr.judge.api.frontdoor import FrontDoor, uvicorn_options
from rlvr.judge.verdict import JudgeResult, TestResult, summarise

HOST = "127.0.0.1"
PROBLEM = Problem(id="door/echo", source="door", split="test", statement="", tests=[StdioTest(stdin="1", stdout="1")])


class DoorJudge:
    """A fake judge: ``GOOD`` in the solution is accepted, anything else wrong_answer; each call takes ``delay_s``;
    ``raises``: an exception every call raises instead. Records every solution it was given."""

    def __init__(self, workers: int = 2, delay_s: float = 0.02, raises: BaseException | None = None) -> None:
        self.workers = workers
        self.delay_s = delay_s
        self.raises = raises
        self.solutions: list[str] = []
        self._lock = threading.Lock()

    def judge(self, problem: Problem, solution: str, language: str = "python") -> JudgeResult:
        with self._lock:
            self.solutions.append(solution)
        time.sleep(self.delay_s)
        if self.raises is not None:
            raise self.raises
        v = "accepted" if "GOOD" in solution else "wrong_answer"
        return summarise([TestResult(index=i, verdict=v) for i in range(len(problem.tests))], self.delay_s, "")

    def run_code(self, code: str, **kwargs: Any) -> Any:
        from rlvr.judge.core import RunResult

        with self._lock:
            self.solutions.append(code)
        if self.raises is not None:
            raise self.raises
        return RunResult(status="Finished", verdict="accepted", exit_code=0, stdout=kwargs.get("stdin", ""))

    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]:
        with self._lock:
            self.solutions.append(solution)
        if self.raises is not None:
            raise self.raises
        return []


@dataclass
class Live:
    """A running server: ``addr`` (host, port), ``url``, the uvicorn ``server``, its ``judge`` and ``door``."""

    addr: tuple[str, int]
    url: str
    server: uvicorn.Server
    judge: DoorJudge
    door: FrontDoor

    def connections(self) -> int:
        """Connections the server holds now."""
        return len(self.server.server_state.connections)

    def requests(self) -> int:
        """Requests in flight now (uvicorn's request tasks)."""
        return len(self.server.server_state.tasks)


def free_port() -> int:
    """A TCP port free on loopback now (bound and released: another process could take it before the server does)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@contextmanager
def serving(app: Any, log_level: str = "warning", **config: Any) -> Iterator[tuple[uvicorn.Server, str]]:
    """uvicorn serving ``app`` on a free loopback port in a thread (``config``: more ``uvicorn.Config`` keywords);
    yields ``(server, url)`` once it has started (an ``AssertionError`` when it has not within 20 s) and stops it at
    exit."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level=log_level, **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.02)
    try:
        yield server, f"http://{HOST}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def sandbox_serve(log_path: Path, env: dict[str, str], start_s: float = 60.0,
                  preexec_fn: Callable[[], None] | None = None) -> Iterator[str]:
    """``python -m rlvr.cli sandbox serve`` on a free loopback port in a process of its own, with environment ``env``
    and its output in ``log_path``; yields its URL once ``/v1/ping`` answers ``pong`` (an ``AssertionError`` holding
    the log when the process ends first, or after ``start_s`` seconds) and stops it at exit (SIGINT, then a kill
    after 30 s)."""
    port = free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "rlvr.cli", "sandbox", "serve", "--port", str(port),
                                 "--log-level", "warning"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=preexec_fn)
    try:
        url = f"http://{HOST}:{port}"
        deadline = time.monotonic() + start_s
        while True:
            assert proc.poll() is None, Path(log_path).read_text()
            try:
                if httpx.get(f"{url}/v1/ping", timeout=2).json() == "pong":
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not come up"
            time.sleep(0.2)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def serve_env(**settings: str) -> dict[str, str]:
    """This process's environment with ``settings`` (``RLVR_SANDBOX_*`` variables) and without
    ``RLVR_SANDBOX_URL`` (the server is the judge, not a client of another)."""
    env = {**os.environ, **settings}
    env.pop("RLVR_SANDBOX_URL", None)
    return env


@contextmanager
def live_server(judge: DoorJudge | None = None, door: FrontDoor | None = None, http: str | None = None,
                **app_kwargs: Any) -> Iterator[Live]:
    """uvicorn serving ``create_app(judge, **app_kwargs)`` behind the front door ``door`` on a free loopback port, in
    a thread; stopped at exit."""
    judge = judge or DoorJudge()
    door = door or FrontDoor(max_connections=48, max_header_bytes=16 << 10, header_timeout_s=1.5, keep_alive_s=2.0)
    with serving(create_app(judge, **app_kwargs), log_level="critical", access_log=False,
                 **uvicorn_options(door, http)) as (server, url):
        yield Live((HOST, server.config.port), url, server, judge, door)


def read_answer(sock: socket.socket, timeout_s: float = 10.0) -> tuple[int | None, bytes]:
    """Read from ``sock`` until the server closes it or ``timeout_s`` passes; returns the HTTP status of the first
    answer (``None``: none came) and every byte read."""
    sock.settimeout(timeout_s)
    data = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    except (TimeoutError, ConnectionError, OSError):
        pass
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    return status, data


def judge_body(solution: str = "GOOD", request_id: str | None = None) -> dict[str, Any]:
    """A ``/rlvr/judge`` body on :data:`PROBLEM`."""
    body: dict[str, Any] = {"problem": PROBLEM.model_dump(mode="json"), "solution": solution}
    if request_id is not None:
        body["request_id"] = request_id
    return body


@dataclass
class Tenant:
    """The other tenant: judges correct programs (retrying a 503 or a refused connection, as
    :class:`~rlvr.judge.client.RemoteJudge` does) and pings, until :meth:`stop`; records what it saw.

    ``accepted``: judged requests answered 200 ``accepted``; ``failed``: the others' reasons (a request that got no
    200 within ``request_deadline_s``, or a wrong answer); ``ping_s``: each ping's latency (seconds) and
    ``ping_failed`` the pings that got no ``pong``."""

    url: str
    request_deadline_s: float = 45.0
    accepted: int = 0
    failed: list[str] = field(default_factory=list)
    ping_s: list[float] = field(default_factory=list)
    ping_failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> Tenant:
        self._threads = [threading.Thread(target=self._judge_loop, daemon=True),
                         threading.Thread(target=self._ping_loop, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=self.request_deadline_s + 15)

    def _judge_loop(self) -> None:
        http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=20)  # a connection per request
        n = 0
        while not self._stop.is_set() or n < 3:
            n += 1
            rid = f"tenant-{n}"
            deadline = time.monotonic() + self.request_deadline_s
            why = "no answer"
            while time.monotonic() < deadline:
                try:
                    r = http.post(f"{self.url}/rlvr/judge", json=judge_body("GOOD", rid))
                except httpx.TransportError as exc:
                    why = f"{type(exc).__name__}: {exc}"
                    time.sleep(0.1)
                    continue
                if r.status_code == 503:
                    why = "503"
                    time.sleep(min(float(r.headers.get("retry-after", 1)), 0.5))
                    continue
                ok = r.status_code == 200 and r.json().get("verdict") == "accepted" and r.json()["request_id"] == rid
                why = "" if ok else f"{r.status_code} {r.text[:200]}"
                break
            if why:
                self.failed.append(why)
            else:
                self.accepted += 1
            time.sleep(0.05)

    def _ping_loop(self) -> None:
        http = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=30)
        n = 0
        while not self._stop.is_set() or n < 3:
            n += 1
            t0 = time.monotonic()
            try:
                r = http.get(f"{self.url}/v1/ping")
                if r.status_code != 200 or r.json() != "pong":
                    self.ping_failed.append(f"{r.status_code} {r.text[:100]}")
            except httpx.TransportError as exc:
                self.ping_failed.append(f"{type(exc).__name__}: {exc}")
            self.ping_s.append(time.monotonic() - t0)
            time.sleep(0.1)
