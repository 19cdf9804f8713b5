"""Run folders, resume and tracking of the local (TRL) training engine (conventions: :mod:`rlvr.train.local.common`).

Intermediate checkpoints live under ``<cache>/train/<stage>[/seed-<n>]/<key>`` (outside DVC outputs; ``<cache>`` =
:func:`cache_root`, absolute); ``key`` hashes the resolved params, the input model's content hash and the training data,
and its inputs are written beside the checkpoints (``resume_key.json``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.config import RuntimeSettings
from rlvr.data.schema import Problem

__all__ = ["DVC_TEMP_PARTS", "cache_root", "checkpoint_step", "dvc_temp_root", "resume_checkpoint", "rows_sha256",
           "run_dir", "setup_tracking"]


def _model_identity(model_dir: str | Path) -> str:
    """Identity of the input model: the sha256 of its weights, config and tokenizer files
    (:func:`rlvr.eval.provenance.model_hash`, the hash the evaluations key on), so a retrained input model of the same
    shape never resumes the previous run's checkpoints. A Hub id (no local folder) is its own identity."""
    from rlvr.eval.provenance import model_hash

    p = Path(model_dir)
    return model_hash(p)["sha256"] if p.is_dir() else str(model_dir)


DVC_TEMP_PARTS = (".dvc", "tmp", "exps")
"""Path parts of the throw-away workspace ``dvc exp run --temp`` and ``dvc exp run --queue`` run an experiment in
(DVC's ``TempDirExecutor``: ``<repo>/.dvc/tmp/exps/<tmp…>``, deleted when the experiment ends)."""


def dvc_temp_root(cwd: str | Path | None = None) -> Path | None:
    """The repository a DVC temporary experiment workspace belongs to, when ``cwd`` (default: the working directory)
    lies in one (:data:`DVC_TEMP_PARTS`), else ``None``."""
    parts = Path(cwd if cwd is not None else os.getcwd()).absolute().parts
    n = len(DVC_TEMP_PARTS)
    for i in range(len(parts) - n, -1, -1):
        if parts[i:i + n] == DVC_TEMP_PARTS:
            return Path(*parts[:i])
    return None


def cache_root(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Path:
    """The absolute cache folder intermediate checkpoints go under.

    ``RLVR_CACHE_DIR`` when set: absolute as given; relative, resolved against ``cwd``, except in a DVC temporary
    experiment workspace (:func:`dvc_temp_root`), where a relative folder would be deleted with the workspace and a
    crashed run could not resume: :class:`rlvr.config.ConfigError` then. Unset: ``<repo>/.cache`` of the repository
    (in a temporary workspace, of the repository it belongs to), so checkpoints survive the workspace."""
    from rlvr.config import ConfigError

    env = os.environ if environ is None else environ
    here = Path(cwd if cwd is not None else os.getcwd()).absolute()
    temp = dvc_temp_root(here)
    given = env.get("RLVR_CACHE_DIR", "").strip()
    if given:
        p = Path(given).expanduser()
        if p.is_absolute():
            return p
        if temp is not None:
            raise ConfigError(f"RLVR_CACHE_DIR={given}: a relative cache folder inside DVC's temporary experiment "
                              f"workspace ({here}) is deleted with it, and a crashed run could not resume; give an "
                              "absolute path")
        return here / p
    return (temp if temp is not None else here) / RuntimeSettings.model_fields["cache_dir"].default


def _digest(problems: Sequence[Problem], data_files: Sequence[str | Path]) -> dict[str, Any]:
    """What the key hashes of the training data: the sorted ``(id, content sha256)`` of ``problems`` and the
    sha256 of each of ``data_files`` (by name; ``None`` for a file not there)."""
    data = sorted((p.id, p.content_sha256()) for p in problems)
    out: dict[str, Any] = {"problems": data}
    if data_files:
        out["files"] = {Path(f).name: hashlib.sha256(Path(f).read_bytes()).hexdigest() if Path(f).is_file() else None
                        for f in data_files}
    return out


def rows_sha256(rows: Sequence[Mapping[str, Any]]) -> str:
    """sha256 (hex) of the JSON of ``rows`` (sorted keys; non-JSON values by ``str``): what a trainer is fed, as
    rendered (prompts, feedback turns, completions), so a change of prompt text is a change of data."""
    return hashlib.sha256(json.dumps(list(rows), sort_keys=True, default=str).encode()).hexdigest()


def run_dir(stage: str, params: Mapping[str, Any], model_dir: str | Path, seed: int | None = None,
            problems: Sequence[Problem] = (), data_files: Sequence[str | Path] = (),
            rows: Sequence[Mapping[str, Any]] | None = None) -> Path:
    """Intermediate-checkpoint folder of a run: ``<cache>/train/<stage>[/seed-<seed>]/<key>``, ``<cache>`` =
    :func:`cache_root` (absolute). Writes the key's inputs beside the checkpoints, ``<folder>/resume_key.json``
    (``params``, ``model``, ``problems`` as a sha256 of their list, ``files``, ``key``), so a user can see why a run
    resumed or started afresh.

    ``key`` = first 16 hex chars of sha256 over the JSON of ``params`` (sorted keys), the input model's content
    hash, the training problems (sorted ``(id, Problem.content_sha256())`` pairs) and, when given, the sha256 of each
    of ``data_files`` (a verl parquet) and :func:`rows_sha256` of ``rows`` (the rows the trainer is fed, as rendered),
    so an identical re-run finds its checkpoints and any changed hyperparameter, input model, training set or prompt
    text starts afresh (the 2026-11-29 repro: a repair-protocol prompt change left the key as it was, and the stage
    published the run trained under the old prompt). Raises :class:`rlvr.config.ConfigError` from
    :func:`cache_root`."""
    data = _digest(problems, data_files)
    model = _model_identity(model_dir)
    body: dict[str, Any] = {"params": params, "model": model, "problems": data["problems"]}
    if "files" in data:
        body["files"] = data["files"]
    if rows is not None:
        body["rows"] = rows_sha256(rows)
    blob = json.dumps(body, sort_keys=True, default=str)
    key = hashlib.sha256(blob.encode()).hexdigest()[:16]
    base = cache_root() / "train" / stage
    if seed is not None:
        base = base / f"seed-{seed}"
    out = base / key
    record = {**json.loads(blob), "problems": hashlib.sha256(json.dumps(data["problems"]).encode()).hexdigest(),
              "key": key}
    rec_path = out / "resume_key.json"
    try:
        same = json.loads(rec_path.read_text(encoding="utf-8")) == record
    except (OSError, ValueError):
        same = False
    if not same:
        from rlvr.io import atomic_write_json

        atomic_write_json(rec_path, record)
    return out


def resume_checkpoint(out_dir: str | Path) -> str | None:
    """The last ``checkpoint-<step>`` folder under ``out_dir`` to resume from, or ``None`` (fresh start)."""
    from transformers.trainer_utils import get_last_checkpoint

    p = Path(out_dir)
    return get_last_checkpoint(str(p)) if p.is_dir() else None


def _git_short_sha() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip() or "local"
    except (OSError, subprocess.SubprocessError):
        return "local"


def setup_tracking(stage: str, report_to: Sequence[str], seed: int | None = None) -> list[str]:
    """Prepare experiment tracking for one stage and return the ``report_to`` list to pass to TRL.

    WandB: ``WANDB_MODE`` defaults to ``offline`` (never the network unless asked), ``WANDB_PROJECT`` to ``rlvr``,
    ``WANDB_RUN_GROUP`` to ``rlvr-<git short sha>`` (one group per pipeline run), ``WANDB_JOB_TYPE`` = ``stage``,
    ``WANDB_NAME`` = ``stage[-seed<n>]``, ``WANDB_DIR`` = ``$RLVR_CACHE_DIR/wandb`` (outside DVC outputs). With
    ``WANDB_MODE=disabled`` wandb is dropped from the list (no service process is started)."""
    reports = [r for r in report_to if r != "none"]
    if "wandb" in reports:
        os.environ.setdefault("WANDB_MODE", "offline")
        if os.environ["WANDB_MODE"] == "disabled":
            reports.remove("wandb")
        else:
            wandb_dir = Path(RuntimeSettings().cache_dir) / "wandb"
            wandb_dir.mkdir(parents=True, exist_ok=True)
            os.environ.setdefault("WANDB_DIR", str(wandb_dir))
            os.environ.setdefault("WANDB_PROJECT", "rlvr")
            os.environ.setdefault("WANDB_RUN_GROUP", f"rlvr-{_git_short_sha()}")
            os.environ["WANDB_JOB_TYPE"] = stage
            os.environ["WANDB_NAME"] = stage if seed is None else f"{stage}-seed{seed}"
    return reports or ["none"]


def checkpoint_step(ckpt: str | None) -> int:
    """The global step of a ``checkpoint-<step>`` folder path (0 for ``None``)."""
    if not ckpt:
        return 0
    tail = Path(ckpt).name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0
