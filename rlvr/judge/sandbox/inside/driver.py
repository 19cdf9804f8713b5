"""The assert-test driver: runs a problem's test code with the candidate as a REMOTE function (inside the separate
driver sandbox; standard library only).

The test code (HumanEval ``check(candidate)``, MBPP ``assert f(x) == y``, LeetCode asserts) runs here, in a process
that shares nothing with the submission: another bubblewrap sandbox, another host uid, its own interpreter image. Its
namespace holds real builtins and only trusted code: the problem's ``solution_prefix`` (imports, ``ListNode``/
``TreeNode`` helpers), its prompt (``starter_code``: HumanEval/32 ``poly``, /38 ``encode_cyclic`` come from here, not
from the submission) and ``test_setup``. The entry point, ``candidate`` and every other name the test reads that the
trusted code does not define are :class:`Remote` proxies: calling one writes the arguments as a literal
(:func:`wire.encode`), the host relays it to the submission's runner, and the answer comes back as a literal this
process parses with its bounded parser (:func:`literal.parse_literal`), rebuilding objects only as instances of its
own trusted classes. So ``set = lambda *a: 1`` in the submission cannot touch the ``set`` the test reads, and no
expected value ever exists in a process the submission can reach.

Frames to the host: ``{"t": "begin", "i"}``, ``{"t": "call", "k", "target", "args", "kwargs", "getattr"}`` (answered
by ``{"t": "ret", "k", "rec"}``, see :mod:`calls`), ``{"t": "result", "i", "rec"}``; the runner adds ``done``.
"""

import builtins
import importlib
import sys

import wire
from literal import parse_literal


class RemoteTimeout(BaseException):
    """The candidate call exceeded the test's time budget (not catchable by ``except Exception`` in test code)."""


class RemoteFailure(BaseException):
    """The submission's process died or failed to load; carries the runner's record."""

    def __init__(self, rec):
        super().__init__(rec.get("message", ""))
        self.rec = rec


class RemoteUnserialisable(BaseException):
    """The candidate returned a value that is not a plain value (or an instance of a trusted class)."""


class RemoteError(Exception):
    """The candidate raised an exception whose type is not a builtin one (type name in ``kind``)."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


class _Link:
    def __init__(self, send, recv, trusted):
        self.send, self.recv, self.trusted, self.k = send, recv, trusted, 0

    def objects(self, name):
        cls = self.trusted.get(name)
        if cls is None:
            raise ValueError(f"returned an instance of {name}, which the problem does not define")
        return object.__new__(cls)

    @staticmethod
    def special(x):
        if type(x) is not Remote:
            return None
        if x._h is not None:
            return f"__handle__({x._h})"
        if x._target is not None and x._target[0] == "name":
            return f"__handle__({x._target[1]!r})"
        return None

    def call(self, target, args, kwargs, getattr_=False):
        self.k += 1
        try:
            a = wire.encode(list(args), objects=True, special=self.special)
            kw = wire.encode(dict(kwargs), objects=True, special=self.special)
        except wire.Unserialisable as exc:
            raise TypeError(f"argument cannot cross to the candidate: {exc}") from None
        msg = {"t": "call", "k": self.k, "target": target, "args": a, "kwargs": kw}
        if getattr_:
            msg["getattr"] = True
        self.send(msg)
        ans = self.recv()
        if ans is None or ans.get("t") != "ret" or ans.get("k") != self.k:
            raise RemoteFailure({"status": "no_result", "message": "the host ended the call"})
        rec = ans.get("rec") or {}
        status = rec.get("status")
        if status == "ok":
            try:
                return parse_literal(rec.get("value", ""), objects=self.objects)
            except ValueError as exc:
                raise RemoteUnserialisable(str(exc)[:300]) from None
        if status == "handle":
            return Remote(self, None, h=int(rec["h"]), truth=rec.get("truth"))
        if status == "callable":
            return Remote(self, target)
        if status == "timeout":
            raise RemoteTimeout()
        if status == "unserialisable":
            raise RemoteUnserialisable(rec.get("message", ""))
        if status == "exception" and not rec.get("fatal"):
            kind, message = rec.get("exc_type", "Exception"), rec.get("message", "")
            text = message.split(": ", 1)[1] if message.startswith(kind + ": ") else ""
            cls = getattr(builtins, kind, None)
            if isinstance(cls, type) and issubclass(cls, Exception):
                try:
                    raise cls(text)
                except TypeError:
                    pass
            raise RemoteError(kind, message)
        raise RemoteFailure(rec)


class Remote:
    """A name of the submission: calling it (or a method of a remote object) runs in the submission's sandbox."""

    def __init__(self, link, target, h=None, attr=None, truth=None):
        self._link, self._target, self._h, self._attr, self._truth = link, target, h, attr, truth

    def __bool__(self):
        return True if self._truth is None else bool(self._truth)

    def __call__(self, *args, **kwargs):
        return self._link.call(self._target, args, kwargs)

    def __getattr__(self, name):
        if name.startswith("__") or self._h is None:
            raise AttributeError(name)
        return self._link.call(["attr", self._h, name], (), {}, getattr_=True)

    def __repr__(self):
        return f"<remote {self._target or 'entry point'}>"


def drive(req, send, recv):
    """Run ``req["tests"]`` (test code strings) against the remote candidate; stream ``begin``/``result`` frames."""
    ns = {"__name__": "__main__", "__builtins__": builtins}
    for part in req.get("prelude", []):
        try:
            exec(compile(part["code"], "<trusted>", "exec", dont_inherit=True), ns)
        except BaseException as exc:
            if not part.get("optional"):
                send({"t": "error", "msg": f"trusted prelude failed: {type(exc).__name__}: {exc}"[:1000]})
                return
    trusted = {k: v for k, v in ns.items() if isinstance(v, type) and k != "__builtins__"}
    link = _Link(send, recv, trusted)
    bindings = {"candidate": Remote(link, None)}
    entry = req.get("entry_point") or ""
    if entry.isidentifier():
        bindings[entry] = bindings["candidate"]
    stdlib = getattr(sys, "stdlib_module_names", ())
    for name in req.get("remote_names", []):
        if name in ns:  # a name the trusted code binds (star imports included) stays trusted
            continue
        if name in stdlib:  # a module the test reads (``sys.getsizeof``): the driver's own import
            try:
                bindings[name] = importlib.import_module(name)
                continue
            except ImportError:
                pass
        bindings.setdefault(name, Remote(link, ["name", name]))
    max_timeouts = int(req.get("max_timeouts", 0))
    timeouts = 0
    for i, code in enumerate(req["tests"]):
        if max_timeouts and timeouts >= max_timeouts:
            send({"t": "result", "i": i, "rec": {"status": "skipped", "message": "not run after repeated timeouts"}})
            continue
        send({"t": "begin", "i": i})
        tns = dict(ns)
        tns.update(bindings)
        try:
            exec(compile(code, "<test>", "exec", dont_inherit=True), tns)
            rec = {"status": "ok"}
        except RemoteTimeout:
            rec = {"status": "timeout"}
            timeouts += 1
        except RemoteFailure as exc:
            rec = dict(exc.rec)
            timeouts += rec.get("status") == "timeout"
        except RemoteUnserialisable as exc:
            rec = {"status": "exception", "exc_type": "Unserialisable", "message":
                   f"unserialisable return value: {exc}"[:500]}
        except RemoteError as exc:
            rec = {"status": "exception", "exc_type": exc.kind, "message": str(exc)[:1000]}
        except BaseException as exc:
            kind = type(exc).__name__
            try:
                text = str(exc)
            except BaseException:
                text = ""
            rec = {"status": "exception", "exc_type": kind, "message": (f"{kind}: {text}" if text else kind)[:1000]}
        send({"t": "result", "i": i, "rec": rec})
