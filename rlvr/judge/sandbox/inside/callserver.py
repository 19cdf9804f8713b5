"""The child side of function calls: load the submission once, then answer call requests (inside the sandbox).

Runs in a child forked by the runner, under the test limits; it is the submission's own process (it executes the
submission's module code), so nothing here is trusted: every answer is a literal the receiver parses with its own
bounded parser (:mod:`literal`) and compares with its own operators, so a forged answer can only claim a value the
submission could have returned honestly.

Requests (frames on ``cmd_fd``, see :mod:`wire`): ``{"k": seq, "target": null | ["name", str] | ["attr", handle,
str], "args": literal, "kwargs": literal, "getattr": bool}``. ``target`` null is the problem's entry point (evaluated
once after loading, e.g. ``Solution().twoSum``). A call whose callee is a class returns a *handle* (the instance stays
here; the driver refers to it as ``__handle__(n)``). Answers (records on the nonce channel): ``{"k", "ok": true, "v":
literal}``, ``{"k", "h": n}`` (also, with ``truth``/``tname``/``unser``, for a value that is not plain),
``{"k", "callable": true}`` (``getattr`` of a method), ``{"k", "e": type, "m": message}``; first
``{"loaded": true}`` or ``{"fatal": true, "e", "m"}``.
"""

import builtins
import os

import proc
import wire
from literal import parse_literal


def serve(code_obj, setup_obj, entry, cmd_fd, chan):
    """Load the submission (``code_obj``, then the dataset's ``setup_obj``) and answer calls until EOF; never
    returns."""
    ns = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(code_obj, ns)
        if setup_obj is not None:
            exec(setup_obj, ns)
        fn = eval(entry, ns) if entry else None
    except BaseException as exc:
        kind, msg = proc.describe(exc)
        proc.flush()
        chan.put(fatal=True, e=kind, m=msg)
        os._exit(1)
    chan.put(loaded=True)
    handles = []

    def objects(name):
        cls = ns.get(name)
        if not isinstance(cls, type):
            raise ValueError(f"no class {name!r} in the submission")
        return object.__new__(cls)

    def handle(n):
        if type(n) is str:  # one of the submission's globals (a name test_setup defined here, e.g. MBPP's ``root``)
            if n not in ns:
                raise ValueError(f"name {n!r} is not defined")
            return ns[n]
        if not 0 <= n < len(handles):
            raise ValueError("remote object lost (the submission's process was restarted)")
        return handles[n]

    while True:
        msg = wire.recv(cmd_fd)
        if msg is None:
            proc.flush()
            os._exit(0)
        k = msg.get("k")
        try:
            target = msg.get("target")
            if target is None:
                if fn is None:
                    raise NameError("the problem has no entry point")
                f = fn
            elif target[0] == "name":
                if target[1] not in ns:
                    raise NameError(f"name {target[1]!r} is not defined")
                f = ns[target[1]]
            else:
                f = getattr(handle(target[1]), target[2])
            if msg.get("getattr"):
                if callable(f):
                    chan.put(k=k, callable=True)
                else:
                    chan.put(k=k, ok=True, v=wire.encode(f, objects=True))
                continue
            args = parse_literal(msg.get("args", "[]"), objects, handle)
            kwargs = parse_literal(msg.get("kwargs", "{}"), objects, handle)
            value = None
            value = f(*args, **kwargs) if isinstance(args, (list, tuple)) else f(args, **kwargs)
            if isinstance(f, type):
                handles.append(value)
                chan.put(k=k, h=len(handles) - 1)
            else:
                chan.put(k=k, ok=True, v=wire.encode(value, objects=True))
        except wire.Unserialisable as exc:
            # the value stays here as a remote object; its truth value is a plain bool the submission could have
            # returned directly, so reporting it gives nothing away (``assert f(x)`` on a re.Match works)
            try:
                truth = bool(value)
            except BaseException:
                truth = None
            handles.append(value)
            chan.put(k=k, h=len(handles) - 1, truth=truth, tname=type(value).__name__[:100], unser=str(exc)[:300])
        except BaseException as exc:
            kind, m = proc.describe(exc)
            chan.put(k=k, e=kind, m=m)
