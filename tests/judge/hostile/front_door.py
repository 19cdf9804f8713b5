"""Hostile HTTP clients of the judge server's front door (issue 43, items 4 and 6).

Not programs: clients that attack the server itself on loopback, each bounded in count and time and stopping by
itself: idle and slowloris connections, oversized headers, bodies declared and never sent or sent slowly, a flood of
large bodies, request ids that cannot be echoed, connection churn, pipelined floods, ``Expect: 100-continue`` holds and
a ``/metrics`` verdict oracle. Each returns what it saw (:class:`Seen`); ``tests/judge/test_adversarial_front_door.py``
runs each against a live server while another tenant's requests and ``/v1/ping`` must keep succeeding.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

Addr = tuple[str, int]
#: The marker in every hostile request's code or solution: the judge must never be handed one that carries a bad id.
MARK = "HOSTILE-FRONT-DOOR"


@dataclass
class Seen:
    """What a hostile client saw: the HTTP status of each answer it read (``None``: the server closed or reset the
    connection without one) and ``violations``: what it found that the server must not allow (one line each)."""

    statuses: list[int | None] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, status: int | None) -> None:
        with self._lock:
            self.statuses.append(status)


@dataclass(frozen=True)
class HostileClient:
    """One hostile client: ``name``, ``attempt`` (one line), ``run(addr, duration_s) -> Seen``, ``allowed``: the
    statuses it may see (``None`` = closed without an answer), and ``required``: those it must see at least once (the
    front door acting: a deadline, a cap, a refusal)."""

    name: str
    attempt: str
    run: Callable[[Addr, float], Seen]
    allowed: frozenset[int | None]
    required: frozenset[int | None] = frozenset()


def _status(data: bytes) -> int | None:
    return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.") else None


def _answer(sock: socket.socket, timeout_s: float) -> int | None:
    """The status of the first answer on ``sock`` (skipping ``100 Continue``), or ``None`` if it closed first."""
    sock.settimeout(timeout_s)
    data = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if data.startswith(b"HTTP/1.1 100") and b"\r\n\r\n" in data:
                data = data.split(b"\r\n\r\n", 1)[1]
            if b"\r\n\r\n" in data:
                break
    except OSError:
        pass
    return _status(data)


def _connect(addr: Addr) -> socket.socket | None:
    try:
        return socket.create_connection(addr, timeout=5)
    except OSError:
        return None


def _exchange(addr: Addr, seen: Seen, send: bytes | Callable[[socket.socket], None], timeout_s: float) -> bool:
    """One hostile request on a fresh connection: ``send`` (bytes, or a function that writes to the socket; an
    ``OSError`` while sending is the server cutting the client off, not an error of the client), then the status of the
    answer (:func:`_answer`, waiting up to ``timeout_s`` seconds) added to ``seen``. Returns False when the connection
    could not be opened (nothing is added then)."""
    s = _connect(addr)
    if s is None:
        return False
    try:
        if callable(send):
            send(s)
        else:
            s.sendall(send)
    except OSError:
        pass
    seen.add(_answer(s, timeout_s))
    s.close()
    return True


def _threads(n: int, fn: Callable[[int], None]) -> None:
    ts = [threading.Thread(target=fn, args=(i,), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)


def _request(path: str, body: bytes = b"", headers: bytes = b"", length: int | None = None) -> bytes:
    n = len(body) if length is None else length
    return (f"POST {path} HTTP/1.1\r\nHost: judge\r\ncontent-type: application/json\r\ncontent-length: {n}\r\n"
            .encode() + headers + b"\r\n" + body)


def _run_code_body(code: str) -> bytes:
    return json.dumps({"code": code, "language": "python"}).encode()


# ------------------------------------------------------------------------------------------------------ clients
def idle_flood(addr: Addr, duration_s: float) -> Seen:
    """Hold three times the connection limit open without sending a byte, reopening what the server closes."""
    seen, held, opened = Seen(), [], 0
    end = time.monotonic() + duration_s
    while time.monotonic() < end and opened < 1500:
        while len(held) < 150 and opened < 1500:
            s = _connect(addr)
            opened += 1
            if s is not None:
                s.setblocking(False)
                held.append(s)
        time.sleep(0.1)
        alive = []
        for s in held:
            try:
                gone = s.recv(1) == b""
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if gone:
                seen.add(None)
                s.close()
            else:
                alive.append(s)
        held = alive
    for s in held:
        s.close()
    return seen


def slowloris_headers(addr: Addr, duration_s: float) -> Seen:
    """Forty connections each trickle one header line every 0.25 s, never finishing their headers."""
    seen = Seen()

    def trickle(s: socket.socket) -> None:
        end = time.monotonic() + duration_s
        s.sendall(b"POST /run_code HTTP/1.1\r\nHost: judge\r\n")
        while time.monotonic() < end:
            s.sendall(b"X-Slow: 1\r\n")
            time.sleep(0.25)

    _threads(40, lambda _: _exchange(addr, seen, trickle, 2))
    return seen


def oversized_headers(addr: Addr, duration_s: float) -> Seen:
    """Requests with 1 MiB of header lines (the httptools stack buffered them without bound)."""
    seen = Seen()
    filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"h" * 4000) for i in range(256))
    end = time.monotonic() + duration_s
    for _ in range(30):
        if time.monotonic() > end:
            break
        _exchange(addr, seen, b"GET /v1/ping HTTP/1.1\r\nHost: judge\r\n" + filler + b"\r\n", 5)
    return seen


def unread_bodies(addr: Addr, duration_s: float) -> Seen:
    """Thirty requests declare a 30 MB body, send 1 KiB of it and hold, twice: many held bodies added GBs."""
    seen = Seen()

    def one(_: int) -> None:
        for _round in range(2):
            _exchange(addr, seen, _request("/run_code", b'{"code": "' + b"#" * 1024, length=30_000_000),
                      duration_s + 10)

    _threads(30, one)
    return seen


def slow_bodies(addr: Addr, duration_s: float) -> Seen:
    """Ten requests send a 1 MB body 100 bytes every 0.2 s."""
    seen = Seen()

    def trickle(s: socket.socket) -> None:
        end = time.monotonic() + duration_s
        s.sendall(_request("/rlvr/judge", b'{"solution": "', length=1_000_000))
        while time.monotonic() < end:
            s.sendall(b"x" * 100)
            time.sleep(0.2)

    _threads(10, lambda _: _exchange(addr, seen, trickle, 5))
    return seen


def body_flood(addr: Addr, duration_s: float) -> Seen:
    """Twelve clients each post complete 8 MiB bodies, three times, as fast as they can (more than the body places)."""
    seen = Seen()
    body = _run_code_body(f"# {MARK}\n" + "#" * (8 << 20))

    def one(_: int) -> None:
        end = time.monotonic() + duration_s
        for _round in range(3):
            if time.monotonic() > end:
                return
            _exchange(addr, seen, _request("/run_code", body), 30)

    _threads(12, one)
    return seen


BAD_HEADER_IDS = [b"\xc3\xa9t\xc3\xa9", b"\xff\xfe", b"a\x01b", b"x" * 4000, b"\x7f"]
BAD_BODY_IDS = ["\u00e9t\u00e9", "\u2028", "a\r\nSet-Cookie: x=1", "a\nb", "\x00", "x" * 200]


def bad_request_ids(addr: Addr, duration_s: float) -> Seen:
    """Request ids that cannot be echoed (non-Latin-1, CR/LF, controls, oversized), in the header and in the body:
    each must be a 4xx before the program runs (a 500 or a cut connection after it ran, before)."""
    seen = Seen()
    end = time.monotonic() + duration_s
    problem = {"id": "h/p", "source": "h", "split": "test", "statement": "",
               "tests": [{"kind": "stdio", "stdin": "1", "stdout": "1"}]}
    for _round in range(3):
        for rid in BAD_HEADER_IDS:
            if time.monotonic() > end:
                return seen
            rid_header = b"X-Request-ID: " + rid + b"\r\n"
            _exchange(addr, seen, _request("/run_code", _run_code_body(f"print('{MARK}')"), headers=rid_header), 10)
        for rid in BAD_BODY_IDS:
            body = json.dumps({"problem": problem, "solution": f"print('{MARK}')", "request_id": rid}).encode()
            _exchange(addr, seen, _request("/rlvr/judge", body), 10)
    return seen


def connection_churn(addr: Addr, duration_s: float) -> Seen:
    """Open and reset 1,500 connections as fast as possible."""
    seen = Seen()
    end = time.monotonic() + duration_s
    for _ in range(1500):
        if time.monotonic() > end:
            break
        s = _connect(addr)
        if s is not None:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()
    return seen


def pipelined_flood(addr: Addr, duration_s: float) -> Seen:
    """Three connections each write 500 pipelined pings without reading, then read what comes back."""
    seen = Seen()

    def one(_: int) -> None:
        s = _connect(addr)
        if s is None:
            return
        try:
            s.sendall(b"GET /v1/ping HTTP/1.1\r\nHost: judge\r\n\r\n" * 500)
        except OSError:
            pass
        s.settimeout(duration_s + 5)
        data, end = b"", time.monotonic() + duration_s + 5
        try:
            while time.monotonic() < end and data.count(b"HTTP/1.1 ") < 500:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        for part in data.split(b"HTTP/1.1 ")[1:]:
            seen.add(int(part[:3]))
        s.close()

    _threads(3, one)
    return seen


def expect_continue_hold(addr: Addr, duration_s: float) -> Seen:
    """Twenty requests ask for ``100 Continue`` on a 10 MB body and never send it."""
    seen = Seen()

    hold = _request("/run_code", length=10_000_000, headers=b"Expect: 100-continue\r\n")
    _threads(20, lambda _: _exchange(addr, seen, hold, duration_s + 10))
    return seen


def verdict_oracle(addr: Addr, duration_s: float) -> Seen:
    """Scrape ``/metrics`` while the other tenant is judged: per-verdict counters would tell its verdicts."""
    seen = Seen()
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        s = _connect(addr)
        if s is None:
            continue
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: judge\r\nConnection: close\r\n\r\n")
        s.settimeout(10)
        data = b""
        try:
            while chunk := s.recv(65536):
                data += chunk
        except OSError:
            pass
        s.close()
        seen.add(_status(data))
        if b"rlvr_judge_verdicts" in data or b"accepted" in data:
            seen.violations.append("/metrics showed verdict counters to an anonymous client")
            break
        time.sleep(0.2)
    return seen


_CLOSE = frozenset({None})
CLIENTS = [
    HostileClient("idle_flood", "hold 3x the connection limit open, silent", idle_flood, _CLOSE | {408},
                  required=_CLOSE),
    HostileClient("slowloris_headers", "trickle header lines forever", slowloris_headers, _CLOSE | {408},
                  required=frozenset({408})),
    HostileClient("oversized_headers", "1 MiB of headers", oversized_headers, _CLOSE | {431},
                  required=frozenset({431})),
    HostileClient("unread_bodies", "declare 30 MB bodies, send 1 KiB, hold", unread_bodies, _CLOSE | {408, 503},
                  required=frozenset({408, 503})),
    HostileClient("slow_bodies", "send a 1 MB body 500 B/s", slow_bodies, _CLOSE | {408, 503},
                  required=frozenset({408})),
    HostileClient("body_flood", "twelve clients posting 8 MiB bodies", body_flood, _CLOSE | {200, 503},
                  required=frozenset({503})),
    HostileClient("bad_request_ids", "request ids that cannot be echoed", bad_request_ids, frozenset({400, 422}),
                  required=frozenset({400, 422})),
    HostileClient("connection_churn", "open and reset 1,500 connections", connection_churn, _CLOSE),
    HostileClient("pipelined_flood", "500 pipelined pings per connection, unread", pipelined_flood, _CLOSE | {200},
                  required=frozenset({200})),
    HostileClient("expect_continue_hold", "Expect: 100-continue, then nothing", expect_continue_hold,
                  _CLOSE | {408, 503}, required=frozenset({408, 503})),
    HostileClient("verdict_oracle", "scrape /metrics for other tenants' verdicts", verdict_oracle, frozenset({200}),
                  required=frozenset({200})),
]
