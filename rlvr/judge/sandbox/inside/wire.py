"""Framing and value serialisation used inside the sandboxes (standard library only; never imports rlvr).

Frames: 8-byte big-endian length, then a UTF-8 JSON object; a reader refuses frames above ``FRAME_CAP`` bytes.

Values: :func:`encode` writes a value as a Python literal that :func:`literal.parse_literal` reads back. Builtin value
types (``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``list``, ``tuple``, ``dict``,
``set``, ``frozenset``) are written from their *base-type* methods (``int.__repr__``, ``list.__iter__``…), so a
subclass with a forged ``__eq__``/``__repr__``/``__iter__`` is written as the plain value it really holds (a
namedtuple as a tuple, a ``Counter`` as a dict): whatever the sender's code does, the receiver only ever holds plain
values its own parser built and compares them with its own operators. numpy scalars/arrays are written from
``tolist()``. With ``objects=True`` an instance of a user class with a ``__dict__`` is written as
``__obj__(n, 'Cls', {attrs})`` (``__ref__(n)`` when met again: shared structure and cycles); the *receiver* rebuilds it
only as an instance of its own trusted class of that name. Anything else raises :class:`Unserialisable`.
"""

import builtins
import json
import os
import struct

FRAME_CAP = 64 << 20  # bytes of one frame, either way; a longer claimed length ends the session (host: session.py)
VALUE_CAP = 16 << 20
MAX_DEPTH = 100


class Unserialisable(Exception):
    """The value cannot be written as a plain literal (type name in the message)."""


def read_exact(fd, n):
    """``n`` bytes from ``fd`` (blocking), or None at EOF."""
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def recv(fd):
    """One frame from ``fd`` as a dict, or None at EOF / on an oversized or malformed frame."""
    head = read_exact(fd, 8)
    if head is None:
        return None
    size = struct.unpack(">Q", head)[0]
    if size > FRAME_CAP:
        return None
    body = read_exact(fd, size)
    if body is None:
        return None
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def send(fd, obj, _dumps=json.dumps, _pack=struct.pack, _write=os.write):
    """Write ``obj`` (JSON-able dict) as one frame to ``fd``."""
    data = _dumps(obj).encode()
    view = memoryview(_pack(">Q", len(data)) + data)
    while view:
        view = view[_write(fd, view) :]


def encode(value, objects=False, cap=VALUE_CAP, special=None):
    """``value`` as a literal string (see module docstring); raises :class:`Unserialisable`. ``special``: optional
    callable ``value -> literal text or None`` consulted first (the driver writes remote handles with it)."""
    parts = []
    size = [0]
    memo = {}

    def put(s):
        size[0] += len(s)
        if size[0] > cap:
            raise Unserialisable(f"value larger than {cap} characters")
        parts.append(s)

    def seq(items, depth):
        first = True
        for v in items:
            if not first:
                put(", ")
            first = False
            enc(v, depth + 1)

    def enc(x, depth):
        if depth > MAX_DEPTH:
            raise Unserialisable("value nested too deeply")
        t = type(x)
        if special is not None:
            text = special(x)
            if text is not None:
                put(text)
                return
        if x is None or t is bool:
            put("None" if x is None else ("True" if x else "False"))
        elif isinstance(x, int):
            put(int.__repr__(x))
        elif isinstance(x, float):
            put(float.__repr__(x))
        elif isinstance(x, complex):
            put(complex.__repr__(x))
        elif isinstance(x, str):
            put(str.__repr__(x))
        elif isinstance(x, (bytes, bytearray)):
            put(bytes.__repr__(bytes(x)))
        elif isinstance(x, list):
            put("[")
            seq(list.__iter__(x), depth)
            put("]")
        elif isinstance(x, tuple):
            items = list(tuple.__iter__(x))
            put("(")
            seq(items, depth)
            put(",)" if len(items) == 1 else ")")
        elif isinstance(x, dict):
            put("{")
            first = True
            for k, v in dict.items(x):
                if not first:
                    put(", ")
                first = False
                enc(k, depth + 1)
                put(": ")
                enc(v, depth + 1)
            put("}")
        elif isinstance(x, (set, frozenset)):
            base = set if isinstance(x, set) else frozenset
            items = list(base.__iter__(x))
            if not items:
                put("set()" if base is set else "frozenset()")
                return
            put("{" if base is set else "frozenset({")
            seq(items, depth)
            put("}" if base is set else "})")
        elif isinstance(x, type) and getattr(builtins, getattr(x, "__name__", ""), None) is x:
            put(f"__builtin__({x.__name__!r})")
        elif (t.__module__ or "").split(".")[0] == "numpy" and hasattr(x, "tolist"):
            enc(x.tolist(), depth + 1)
        elif objects and hasattr(x, "__dict__") and isinstance(getattr(t, "__name__", None), str):
            if id(x) in memo:
                put(f"__ref__({memo[id(x)]})")
                return
            memo[id(x)] = n = len(memo)
            attrs = object.__getattribute__(x, "__dict__")
            if type(attrs) is not dict:
                raise Unserialisable(f"{t.__name__} has no plain __dict__")
            put(f"__obj__({n}, {t.__name__!r}, ")
            enc({k: v for k, v in dict.items(attrs) if type(k) is str}, depth + 1)
            put(")")
        else:
            raise Unserialisable(f"return value of type {getattr(t, '__name__', '?')} is not a plain value")

    enc(value, 0)
    return "".join(parts)
