"""The judge's timeout rule, changed per caller: a view of a judge that shares its sandboxes under another
``max_timeouts``.

A judge (:class:`rlvr.judge.Judge`, :class:`rlvr.judge.client.RemoteJudge`) stops a submission after
``max_timeouts`` timed-out tests: the rest are not run and count as timeouts (0 = run every test; default 3). Two
callers use another value on the same pool: the training reward (``reward_shaping.max_timeouts``,
:mod:`rlvr.reward.timeouts`) and the judge server answering a request that asks for a lower value
(``/rlvr/judge``'s ``max_timeouts``, :mod:`rlvr.judge.api.native`). Both get :func:`with_max_timeouts`'s view.
"""

from __future__ import annotations

import copy
import threading
import weakref
from typing import Any, TypeVar

__all__ = ["lowers", "with_max_timeouts"]

_J = TypeVar("_J")
_views: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def lowers(server: int, asked: int) -> bool:
    """True when a judge whose own timeout rule is ``server`` may judge a request under ``asked`` (ints >= 0): a
    request may only lower what a submission costs, so ``1 <= asked <= server``, or anything when ``server`` is 0
    (it runs every test already). The one rule behind :func:`rlvr.judge.api.limits.check_max_timeouts` (the server)
    and :meth:`rlvr.judge.client.RemoteJudge.native_max_timeouts` (the client)."""
    return server == 0 or 1 <= asked <= server


def with_max_timeouts(judge: _J, max_timeouts: int) -> _J:
    """``judge`` itself when its ``max_timeouts`` is already ``max_timeouts``, else a view of it judging under
    ``max_timeouts`` (int >= 0): a shallow copy (the same sandbox pool, HTTP connections and state; only the
    attribute differs), cached per judge and value, never to be closed (the owner closes ``judge``). ``judge`` must
    read ``self.max_timeouts`` when it judges (the embedded judge and the remote client do) and be weak-referenceable.
    Thread-safe."""
    if getattr(judge, "max_timeouts", None) == max_timeouts:
        return judge
    with _lock:
        per = _views.setdefault(judge, {})
        if max_timeouts not in per:
            view = copy.copy(judge)
            view.max_timeouts = max_timeouts  # type: ignore[attr-defined]
            per[max_timeouts] = view
        return per[max_timeouts]  # type: ignore[no-any-return]
