"""The host's end of one submission's channel to its runner in the sandbox (:class:`Session`).

Per submission the host makes two fresh pipes (:meth:`rlvr.judge.sandbox.host.Sandbox.open`): a request pipe the host
writes and a response pipe it reads. Frames are an 8-byte big-endian length and a UTF-8 JSON object carrying the
request's id (the runner's side: :mod:`rlvr.judge.sandbox.inside.wire`); a response frame is capped at
:data:`FRAME_CAP` bytes, and a frame that is too long, not JSON, or of another id ends the session, so no output can
cross requests.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

from rlvr.judge.sandbox.inside.wire import FRAME_CAP  # one cap for both ends of the channel

__all__ = ["FRAME_CAP", "Session", "SessionTimeout"]



def _frame_int(text: str) -> int:
    """A frame's JSON integer: the runner's own fields are small, and ``int()`` of a long digit string is quadratic
    (``literal.py`` lifts the interpreter's digit limit process-wide), so a forged frame holding one is refused
    (``ValueError``: the frame is malformed) instead of converted. Only integer tokens reach this, never strings."""
    if len(text) > 64:
        raise ValueError(f"integer of {len(text)} digits in a frame")
    return int(text)


class SessionTimeout(Exception):
    """The runner did not answer before the deadline (the sandbox is then restarted)."""


class Session:
    """The host's end of one submission's channel: a request pipe (host writes) and a response pipe (host reads).

    :meth:`recv` returns the next frame with this session's id, or ``None`` when the runner is gone (EOF), sent a
    frame over :data:`FRAME_CAP` bytes or a frame that is not JSON, or sent another id; all of them end the session."""

    def __init__(self, rid: str, w: int, r: int) -> None:
        self.rid, self._w, self._r = rid, w, r
        self._buf = bytearray()
        self.broken = False
        self.eof = False  # the runner's end of the response pipe closed (it exited or was killed)

    def send(self, obj: dict[str, Any]) -> bool:
        """Write one frame (adds the id); False when the runner is gone."""
        if self.broken:
            return False
        data = json.dumps({**obj, "id": self.rid}).encode()
        view = memoryview(struct.pack(">Q", len(data)) + data)
        try:
            while view:
                view = view[os.write(self._w, view) :]
        except OSError:
            self.broken = True
            return False
        return True

    def _read(self, n: int, deadline: float) -> bytes | None:
        buf = self._buf
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._r], [], [], remaining)[0]:
                raise SessionTimeout("the submission's runner did not answer in time")
            chunk = os.read(self._r, max(n - len(buf), 1 << 16))  # what is there: usually several frames at once
            if not chunk:
                self.eof = True
                return None
            buf += chunk
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def recv(self, deadline: float) -> dict[str, Any] | None:
        """Next frame before ``deadline`` (monotonic seconds); raises :class:`SessionTimeout` after it."""
        if self.broken:
            return None
        head = self._read(8, deadline)
        size = struct.unpack(">Q", head)[0] if head is not None else FRAME_CAP + 1
        body = self._read(size, deadline) if size <= FRAME_CAP else None
        try:
            obj = json.loads(body, parse_int=_frame_int) if body is not None else None
        except ValueError:
            obj = None
        if not isinstance(obj, dict) or obj.get("id") != self.rid:
            self.broken = True
            return None
        return obj

    def close(self) -> None:
        """Close both pipes (idempotent)."""
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._w = self._r = -1
        self.broken = True
