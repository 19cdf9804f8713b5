"""Stop a training run whose judge fails part of the time: the ``sandbox_error`` share of every one of the last
``window`` training steps above ``judge.max_sandbox_error_share`` (issue 42, item 5).

:mod:`rlvr.reward.step_guard` stops a run whose judge is *dead* (every judged sample of two steps in a row a
``sandbox_error``). A judge that fails part of the time (one node's sandboxes broken, a judge server shedding load, a
tool that times out under load) is not dead, and such a run trains on a reward that is missing, under
``reward_shaping.sandbox_error: exclude``, or wrong, under ``zero`` (a wrong-answer score for an infrastructure
failure), for a share of its samples, with nothing said. :class:`ShareWindow` bounds that: it sees each training
step's ``(judged, sandbox_errors)`` (the same windows the step guard sees: samples sent to the judge, the
``sandbox_error`` ones among them) and, when each of the last ``window`` steps that reached the judge had a share
above ``max_share``, returns the one-line reason the guard raises (:class:`rlvr.reward.step_guard.JudgeDied`).
Steps where nothing reached the judge neither count nor break the run of steps; a step at or below the share does.

Params (``judge`` section, :class:`rlvr.judge.preflight.JudgeParams`): ``max_sandbox_error_share`` (the same
ceiling a stage applies to the verdicts it judges itself) and ``sandbox_error_window_steps`` (0 = off). Why every
step of a window and not the pooled share: one bad step (a node restarting, a burst of timeouts on giant programs)
must not stop a healthy run, and a judge that stays broken fails every step.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping

__all__ = ["SHARE_ENV", "ShareWindow", "share_env", "share_window_from_env"]

SHARE_ENV = "RLVR_STEP_GUARD_SHARE"
"""Not a user setting: how the verl launcher hands ``judge.max_sandbox_error_share`` and
``judge.sandbox_error_window_steps`` (``"<share>,<steps>"``) to verl's trainer process, where the ``rlvr_grpo``
estimator runs the step guard (:mod:`rlvr.train.verl.advantage`); it reaches it through the job's ``runtime_env``
(:func:`rlvr.train.verl.environ.worker_env`). The params themselves live in ``params.yaml``."""


def share_env(max_share: float, window: int) -> dict[str, str]:
    """``{SHARE_ENV: "<max_share>,<window>"}`` for a job's environment."""
    return {SHARE_ENV: f"{float(max_share)!r},{int(window)}"}


def share_window_from_env(environ: Mapping[str, str] | None = None) -> ShareWindow:
    """The :class:`ShareWindow` that :data:`SHARE_ENV` of ``environ`` (default ``os.environ``) describes; off
    (window 0) when unset. Raises ``ValueError`` naming the variable when it is not ``"<share>,<steps>"``."""
    raw = (os.environ if environ is None else environ).get(SHARE_ENV, "").strip()
    if not raw:
        return ShareWindow()
    try:
        share, steps = raw.split(",")
        return ShareWindow(float(share), int(steps))
    except ValueError as exc:
        raise ValueError(f"{SHARE_ENV}={raw!r}: expected '<share 0-1>,<steps>' ({exc})") from exc


class ShareWindow:
    """The last ``window`` judged steps' ``(step, judged, sandbox_errors)``; see the module doc.

    ``max_share``: fraction 0-1; ``window``: steps (0 = never stops). Raises ``ValueError`` for a share outside 0-1
    or a negative window."""

    def __init__(self, max_share: float = 1.0, window: int = 0) -> None:
        if not 0.0 <= float(max_share) <= 1.0 or int(window) < 0:
            raise ValueError(f"ShareWindow: max_share must be in 0-1 and window >= 0, got {max_share}, {window}")
        self.max_share = float(max_share)
        self.window = int(window)
        self.done: deque[tuple[int | str, int, int]] = deque(maxlen=max(self.window, 1))

    def finish(self, step: int | str, judged: int, errors: int) -> None:
        """Record the final counts of a finished step (ignored when nothing of it reached the judge)."""
        if judged > 0:
            self.done.append((step, int(judged), int(errors)))

    def verdict(self, step: int | str, judged: int, errors: int, engine: str = "training") -> str | None:
        """The one-line reason to stop when the current ``step`` (counts so far) and the finished steps before it make
        ``window`` judged steps in a row each above ``max_share``; else ``None``."""
        if self.window < 1 or judged <= 0:
            return None
        before = list(self.done)[-(self.window - 1):] if self.window > 1 else []
        steps = [*before, (step, int(judged), int(errors))]
        if len(steps) < self.window or any(e / j <= self.max_share for _, j, e in steps):
            return None
        shares = ", ".join(f"step {s} {e}/{j} ({e / j:.0%})" for s, j, e in steps)
        return (f"{engine} step {step}: the sandbox_error share of the samples sent to the judge stayed above "
                f"judge.max_sandbox_error_share={self.max_share:g} for judge.sandbox_error_window_steps="
                f"{self.window} steps ({shares}): the judge fails part of the time, so part of every reward is "
                f"missing or wrong; stopping the run.")
