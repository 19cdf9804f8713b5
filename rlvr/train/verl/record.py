"""The portable record of a verl run kept beside its merged weights (a DVC output): the launched overrides with this
machine's paths and where/how settings replaced, so the same inputs give the same record anywhere."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["RUN_PLACEHOLDER", "WORKER_ENV_RECORD", "portable_overrides", "portable_path"]


RUN_PLACEHOLDER = "<run>"
"""What :func:`portable_overrides` writes for the run folder (``$RLVR_CACHE_DIR/train/<stage>/<key>``)."""

WORKER_ENV_RECORD = "<this machine's where/how settings: see <run>/verl_overrides.txt>"
"""What :func:`portable_overrides` writes for the value of the Ray workers' environment override."""


def portable_path(value: str, run: str | Path, root: str | Path | None = None) -> str:
    """``value`` (a path, or a line holding paths) with the run folder's absolute path as :data:`RUN_PLACEHOLDER`
    and the repository's (``root``, default the working directory) as ``.``, each replaced only where a whole path
    starts there (followed by ``/``, a quote, a separator or the end; a root of ``/`` is left alone)."""
    end = r"(?=[/'\",}\]\s]|$)"
    value = re.sub(re.escape(str(Path(run).resolve())) + end, RUN_PLACEHOLDER, value)
    root_s = str(Path(root if root is not None else Path.cwd()).resolve())
    return value if root_s == "/" else re.sub(re.escape(root_s) + end, ".", value)


def portable_overrides(overrides: Sequence[str], run: str | Path, root: str | Path | None = None) -> list[str]:
    """The record of a verl run kept beside its weights, which are a DVC output: the same inputs on another machine or
    cache folder give the same lines. ``overrides``: one ``key=value`` each, as launched. The run folder's absolute
    path becomes :data:`RUN_PLACEHOLDER`, the repository's (``root``, default the working directory) becomes ``.``
    (:func:`portable_path`), and the Ray workers' environment (``…runtime_env.env_vars=…``: where/how settings of this
    machine and the attempt's log path, :func:`rlvr.train.verl.environ.worker_env`) becomes :data:`WORKER_ENV_RECORD`.
    The launched lines, exact, are in ``<run>/verl_overrides.txt`` and ``<run>/verl_command.sh``."""
    out = []
    for line in overrides:
        key, sep, _value = line.partition("=")
        if sep and key.endswith("runtime_env.env_vars"):
            out.append(f"{key}={WORKER_ENV_RECORD}")
        else:
            out.append(portable_path(line, run, root))
    return out
