"""The judge server's front door: what a connection may cost before the app sees a request.

uvicorn's own knobs do part of it (:func:`uvicorn_options`): ``limit_concurrency`` (running requests),
``timeout_keep_alive`` (idle keep-alive), ``h11_max_incomplete_event_size`` (the header cap of the pure-Python
stack). What uvicorn does not do is done by :class:`GuardedHttpTools` / :class:`GuardedH11`, its two HTTP/1.1
protocols with a guard (:class:`Guard`) that, per connection:

* keeps at most ``RLVR_SANDBOX_MAX_CONNECTIONS`` connections open: the server's descriptors stay well under the
  open-file limit (raised to its hard limit at start, :func:`raise_nofile_limit`), so a client holding connections
  cannot starve the sandboxes of pipes (an admitted request failing as ``sandbox_error``), nor stop the server
  accepting. A connection accepted over the limit makes room by closing the oldest connection still waiting for a
  request's headers (idle: closed silently, as a keep-alive timeout does; part-sent: **408**), so idle or slowloris
  connections cannot lock other clients out; only when every connection has a request in flight is the new one
  refused (**503**, ``Retry-After: 1``, closed);
* gives a request's line and headers ``RLVR_SANDBOX_HEADER_TIMEOUT_S`` seconds from the connection (or from the
  previous answer on a kept-alive one), whatever trickles in meanwhile (**408** and closed: slowloris), and at most
  ``RLVR_SANDBOX_MAX_HEADER_KB`` KiB (**431** and closed): uvicorn arms no deadline before a connection's first request
  and its httptools stack has no header cap.

The body's deadline (``RLVR_SANDBOX_BODY_TIMEOUT_S``, from admission) and admission before the body is read are the
app's (:func:`rlvr.judge.api.admission.admitted`); ``X-Request-ID`` is checked by the app's ``Observe`` middleware
(:func:`rlvr.judge.api.common.check_request_id`).
"""

from __future__ import annotations

import asyncio
import json
import math
import resource
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # no httptools wheel: the h11 stack serves (uvicorn_stack)
    HttpToolsProtocol = H11Protocol  # type: ignore[misc, assignment]

__all__ = [
    "FrontDoor",
    "Guard",
    "GuardedH11",
    "GuardedHttpTools",
    "raise_nofile_limit",
    "raw_response",
    "uvicorn_options",
    "uvicorn_stack",
]

@dataclass(frozen=True)
class FrontDoor:
    """The front door's limits: ``max_connections`` (open connections), ``max_header_bytes`` (request line +
    headers, bytes), ``header_timeout_s`` (seconds to receive them), ``keep_alive_s`` (idle keep-alive, seconds).
    :meth:`from_settings` reads them from ``RLVR_*`` (:class:`rlvr.config.RuntimeSettings`)."""

    max_connections: int = 256
    max_header_bytes: int = 16 << 10
    header_timeout_s: float = 10.0
    keep_alive_s: float = 5.0

    @classmethod
    def from_settings(cls) -> FrontDoor:
        """The limits of ``RLVR_SANDBOX_MAX_CONNECTIONS`` (default :func:`default_max_connections`),
        ``RLVR_SANDBOX_MAX_HEADER_KB``, ``RLVR_SANDBOX_HEADER_TIMEOUT_S`` and ``RLVR_SANDBOX_KEEP_ALIVE_S``. Raises
        ``ValueError`` naming the setting for a value out of range."""
        from rlvr.config import RuntimeSettings

        s = RuntimeSettings()
        conns = s.sandbox_max_connections or default_max_connections()
        checks = (("RLVR_SANDBOX_MAX_CONNECTIONS", conns), ("RLVR_SANDBOX_MAX_HEADER_KB", s.sandbox_max_header_kb),
                  ("RLVR_SANDBOX_HEADER_TIMEOUT_S", s.sandbox_header_timeout_s),
                  ("RLVR_SANDBOX_KEEP_ALIVE_S", s.sandbox_keep_alive_s))
        for name, v in checks:
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name}: expected a positive number, got {v!r}")
        return cls(int(conns), int(s.sandbox_max_header_kb * 1024), s.sandbox_header_timeout_s, s.sandbox_keep_alive_s)


def raise_nofile_limit() -> int:
    """Raise this process's ``RLIMIT_NOFILE`` soft limit to its hard limit (capped at 1,048,576); returns the soft
    limit now in force. Never raises (a limit that cannot be raised stays as it was)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard if hard != resource.RLIM_INFINITY else 1 << 20, 1 << 20)
    if want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft


def default_max_connections() -> int:
    """Default connection limit: a quarter of the open-file soft limit (the rest is the sandboxes' pipes, the
    judge's files and headroom), at least 16, at most 1024."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(16, min(1024, soft // 4))


_REASONS = {408: "Request Timeout", 431: "Request Header Fields Too Large", 503: "Service Unavailable"}


def raw_response(status: int, detail: str, retry_after_s: int | None = None) -> bytes:
    """A complete ``connection: close`` HTTP/1.1 answer with a JSON ``{"detail": …}`` body, as bytes (for the
    protocol level, where no ASGI app runs)."""
    body = json.dumps({"detail": detail}).encode("ascii")
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", "content-type: application/json",
            f"content-length: {len(body)}", "connection: close"]
    if retry_after_s is not None:
        head.append(f"retry-after: {retry_after_s}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


def _header_end(data: bytes) -> int:
    """Index just past the blank line ending a request's headers in ``data`` (CRLF CRLF, or LF LF), -1 if none."""
    ends = [i + n for i, n in ((data.find(b"\r\n\r\n"), 4), (data.find(b"\n\n"), 2)) if i >= 0]
    return min(ends) if ends else -1


@lru_cache(maxsize=1)
def _settings_door() -> FrontDoor:
    return FrontDoor.from_settings()


class Guard:
    """Mixin for uvicorn's HTTP/1.1 protocol classes (see the module docstring): the connection limit at accept, the
    header deadline and the header size cap. ``door``: the limits (class attribute; ``None`` = from the ``RLVR_*``
    settings, read once per process). A request's headers are complete when the protocol starts its
    request/response cycle (``self.cycle`` changes), for both of uvicorn's parsers."""

    door: FrontDoor | None = None
    # provided by the uvicorn protocol class this is mixed into
    connections: set[Any]
    server_state: Any
    cycle: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Accept the connection (uvicorn), then refuse it (503) if it is over the limit, else arm the header
        deadline."""
        super().connection_made(transport)  # type: ignore[misc]
        self._limits = self.door or _settings_door()
        self._head = 0
        self._tail = b""
        self._deadline: asyncio.TimerHandle | None = None
        waiting = self._waiting()
        if len(self.connections) > self._limits.max_connections:
            if not waiting:  # every connection has a request in flight
                self._refuse(503, f"too many connections (more than {self._limits.max_connections}, "
                                  "RLVR_SANDBOX_MAX_CONNECTIONS)", retry_after_s=1)
                return
            oldest = next(iter(waiting))  # idle, or still sending its headers: it makes room
            limit = self._limits.max_connections
            oldest._refuse(408 if oldest._head else None, "evicted: request headers not received before the "
                           f"connection limit was reached (RLVR_SANDBOX_MAX_CONNECTIONS={limit})")
        self._arm()

    def _waiting(self) -> dict[Guard, None]:
        """This server's connections waiting for a request's headers, oldest first (kept on uvicorn's server
        state, which every connection of one server shares)."""
        state = self.server_state
        waiting: dict[Guard, None] | None = getattr(state, "rlvr_awaiting_headers", None)
        if waiting is None:
            waiting = state.rlvr_awaiting_headers = {}
        return waiting

    def _arm(self) -> None:
        self._head = 0
        self._tail = b""
        self._deadline = self.loop.call_later(self._limits.header_timeout_s, self._expired)
        self._waiting()[self] = None

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
            self._waiting().pop(self, None)

    def _expired(self) -> None:
        self._deadline = None
        self._refuse(408, f"request headers not received within {self._limits.header_timeout_s:g} s "
                          "(RLVR_SANDBOX_HEADER_TIMEOUT_S)")

    def _refuse(self, status: int | None, detail: str, retry_after_s: int | None = None) -> None:
        """Answer ``status`` (``None``: nothing, as an idle keep-alive connection is closed) and close."""
        self._disarm()
        self.connections.discard(self)  # counted out now, not when the loop gets to its connection_lost
        if not self.transport.is_closing():
            if status is not None:
                self.transport.write(raw_response(status, detail, retry_after_s))
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        """While a request's headers are awaited, count their bytes (up to the blank line that ends them, which may
        arrive in the same read as the body) against the cap, before the parser sees them; then parse (uvicorn)."""
        if self._deadline is not None:
            probe = self._tail + data
            end = _header_end(probe)
            size = self._head + (end - len(self._tail) if end >= 0 else len(data))
            if size > self._limits.max_header_bytes:
                self._refuse(431, f"request line and headers larger than {self._limits.max_header_bytes} bytes "
                                  "(RLVR_SANDBOX_MAX_HEADER_KB)")
                return
            self._head = size
            self._tail = probe[-3:]
        cycle = self.cycle
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not cycle:  # a request's headers are complete: the body's deadline is the app's
            self._disarm()

    def on_response_complete(self) -> None:
        """After an answer (uvicorn), re-arm the header deadline for the connection's next request unless one is
        already in flight (pipelined) or the connection is closing."""
        super().on_response_complete()  # type: ignore[misc]
        if self.transport.is_closing() or self._deadline is not None:
            return
        if self.cycle is None or self.cycle.response_complete:
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadline, then uvicorn's clean-up."""
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]


class GuardedHttpTools(Guard, HttpToolsProtocol):
    """uvicorn's httptools (C parser) HTTP/1.1 protocol behind the front door's :class:`Guard` (where httptools does
    not import, the h11 one: :func:`uvicorn_stack` then picks h11 anyway)."""


class GuardedH11(Guard, H11Protocol):
    """uvicorn's h11 (pure Python) HTTP/1.1 protocol behind the front door's :class:`Guard`."""


def uvicorn_options(door: FrontDoor | None = None, http: str | None = None) -> dict[str, Any]:
    """``uvicorn.Config`` keyword arguments of the front door: the event loop and the guarded protocol class for
    ``http`` (``"httptools"`` or ``"h11"``; default: :func:`uvicorn_stack`'s choice),
    ``limit_concurrency`` one above the connection limit (uvicorn answers 503 to a request beyond it: running
    requests, which the connection limit already bounds), ``timeout_keep_alive``, ``h11_max_incomplete_event_size``
    (the header cap). ``door``: the limits (default :meth:`FrontDoor.from_settings`); a door other than the
    settings' gets protocol subclasses of its own (for an in-process server, e.g. in tests)."""
    stack = uvicorn_stack()
    http = http or stack["http"]
    base: type[Guard] = GuardedHttpTools if http == "httptools" else GuardedH11
    d = door or _settings_door()
    if door is not None:
        base = type(base.__name__, (base,), {"door": door, "__module__": __name__})
    return {
        "loop": stack["loop"], "http": base, "limit_concurrency": d.max_connections + 1,
        "timeout_keep_alive": d.keep_alive_s, "h11_max_incomplete_event_size": d.max_header_bytes,
    }


def uvicorn_stack() -> dict[str, str]:
    """uvicorn's event loop and HTTP/1.1 implementation for the server, as ``uvicorn.Config`` keyword arguments:
    ``uvloop`` and ``httptools`` (C: 0.3–0.55 ms less CPU of the server process per ``/common_evaluate_batch``
    request of 10 stdio tests than the pure-Python stack, on a 2-core VM) when they import, else ``asyncio`` and
    ``h11``, each on its own. Both are project dependencies; the fallback keeps a
    machine without their wheels serving. Neither moves a bound: the body limit, admission and the off-loop work are
    ASGI middleware and endpoint code above either stack, and the front door's guard is mixed into
    either protocol class (:func:`uvicorn_options`)."""
    out = {}
    for key, fast, plain in (("loop", "uvloop", "asyncio"), ("http", "httptools", "h11")):
        try:
            __import__(fast)
            out[key] = fast
        except ImportError:
            out[key] = plain
    return out
