"""Progress bars for the long loops (generation, judging, training): counts, rate and ETA on a terminal, silent in CI.

:func:`progress_enabled` is the one switch: bars show only when stderr is a terminal and ``CI`` is not set to a true
value (GitHub Actions, GitLab and most CI systems set ``CI=true``); ``RLVR_PROGRESS=1`` forces them on, ``0`` off
(where/how, not a hyperparameter). :func:`progress` returns a ``tqdm`` bar that is a no-op when disabled, so callers
never branch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from tqdm import tqdm

__all__ = ["progress", "progress_enabled"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def progress_enabled(stream: TextIO | None = None) -> bool:
    """Whether to draw progress bars on ``stream`` (default stderr): ``RLVR_PROGRESS`` when set to a true/false word,
    else ``True`` iff ``stream`` is a TTY and the ``CI`` variable is not a true word."""
    forced = os.environ.get("RLVR_PROGRESS", "").strip().lower()
    if forced in _TRUE:
        return True
    if forced in _FALSE:
        return False
    if os.environ.get("CI", "").strip().lower() in _TRUE:
        return False
    s = stream if stream is not None else sys.stderr
    try:
        return bool(s.isatty())
    except (AttributeError, ValueError):  # closed or replaced streams (pytest capture, notebooks)
        return False


def progress(iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "",
             unit: str = "it", leave: bool = False) -> Any:
    """A ``tqdm`` bar (count, rate, ETA) over ``iterable`` and/or ``total`` units, drawn on stderr, disabled when
    :func:`progress_enabled` is false. Use as an iterator, or as a context manager with ``.update(n)``."""
    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, file=sys.stderr, dynamic_ncols=True,
                disable=not progress_enabled(), mininterval=0.5)
