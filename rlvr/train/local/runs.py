"""Run folders, resume and tracking of the local (TRL) training engine (conventions: :mod:`rlvr.train.local.common`).

Intermediate checkpoints live under ``$RLVR_CACHE_DIR/train/<stage>[/seed-<n>]/<key>`` (outside DVC outputs);
``key`` hashes the resolved params, the input model's content hash and the training problems.
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

__all__ = ["checkpoint_step", "resume_checkpoint", "run_dir", "setup_tracking"]


def _model_identity(model_dir: str | Path) -> str:
    """Identity of the input model: the sha256 of its weights, config and tokenizer files
    (:func:`rlvr.eval.provenance.model_hash`, the hash the evaluations key on), so a retrained input model of the same
    shape never resumes the previous run's checkpoints. A Hub id (no local folder) is its own identity."""
    from rlvr.eval.provenance import model_hash

    p = Path(model_dir)
    return model_hash(p)["sha256"] if p.is_dir() else str(model_dir)


def run_dir(stage: str, params: Mapping[str, Any], model_dir: str | Path, seed: int | None = None,
            problems: Sequence[Problem] = ()) -> Path:
    """Intermediate-checkpoint folder of a run: ``$RLVR_CACHE_DIR/train/<stage>[/seed-<seed>]/<key>``.

    ``key`` = first 16 hex chars of sha256 over the JSON of ``params`` (sorted keys), the input model's content
    hash and the training problems (sorted ``(id, Problem.content_sha256())`` pairs), so an identical re-run finds
    its checkpoints and any changed hyperparameter, input model or training set starts afresh."""
    data = sorted((p.id, p.content_sha256()) for p in problems)
    blob = json.dumps({"params": params, "model": _model_identity(model_dir), "problems": data}, sort_keys=True,
                      default=str)
    key = hashlib.sha256(blob.encode()).hexdigest()[:16]
    base = Path(RuntimeSettings().cache_dir) / "train" / stage
    if seed is not None:
        base = base / f"seed-{seed}"
    return base / key


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
