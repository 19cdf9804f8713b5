"""The judge server's garbage collection timing (:class:`Collector`): full collections when no judge call runs.

Part of "the event loop never works on request content" (``docs/judge/api.md``): a full collection over a large
request's objects would pause the loop, so a server that owns its process (:func:`rlvr.judge.api.app.create_app` with
``tune_gc``) installs a :class:`Collector` and the gated endpoints (:func:`rlvr.judge.api.admission.admitted`) run
its collection after the last admitted request.
"""

from __future__ import annotations

import sys
import time

__all__ = ["Collector"]


class Collector:
    """The server process's cyclic garbage collection, moved to moments when no judge call runs.

    CPython's full (generation-2) collection walks every live object while holding the interpreter lock: with the
    objects of a large request alive (tens of thousands of tests, their results and the answer being built), one
    pass takes hundreds of milliseconds, during which the event loop cannot answer anyone (measured: 240–490 ms
    pauses judging a 40,000-test ScaleBox request; 16–22 ms without them). :meth:`install` freezes the objects that
    exist at startup (``gc.freeze``: modules, the app) and sets the generation-2 threshold out of reach, so
    automatic collections are young-generation only (cheap: they walk recent objects); :meth:`collect` then runs the
    full collection when the last admitted request finished (at most every ``idle_s`` seconds), and at least every
    ``max_s`` seconds even under continuous load, so cyclic garbage cannot pile up. It also sets the interpreter's
    thread switch interval to ``switch_s`` (1 ms instead of 5): the event loop gives the lock up at every
    ``select`` and a ping takes about ten loop turns, each waiting up to one interval for a busy request thread to
    hand the lock back (measured p50 of ``/v1/ping`` under two hostile requests: 52 ms at 5 ms). Process-wide:
    installed only by servers that own their process (:func:`rlvr.judge.api.app.create_app` with ``tune_gc``)."""

    def __init__(self, idle_s: float = 1.0, max_s: float = 300.0, switch_s: float = 0.001) -> None:
        self.idle_s, self.max_s, self.switch_s = idle_s, max_s, switch_s
        self.last = time.monotonic()
        self.collections = 0

    def install(self) -> None:
        """Freeze the startup heap and keep automatic collections to the young generations (see the class)."""
        import gc

        gc.collect()
        gc.freeze()
        g0, g1, _ = gc.get_threshold()
        gc.set_threshold(g0, g1, 1 << 30)
        sys.setswitchinterval(self.switch_s)

    def due(self, running: int) -> bool:
        """True when a full collection should run now: nothing running and ``idle_s`` passed, or ``max_s`` passed."""
        since = time.monotonic() - self.last
        return (running == 0 and since >= self.idle_s) or since >= self.max_s

    def collect(self) -> None:
        """One full collection (generation 2)."""
        import gc

        self.last = time.monotonic()
        gc.collect()
        self.collections += 1
