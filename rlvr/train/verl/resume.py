"""Resume, don't restart: what a verl run's resume key hashes, and when a run is already finished.

The run folder (:func:`rlvr.train.local.runs.run_dir`) is keyed by a hash of the params given to it; a verl stage
gives only the values that change the trajectory (:func:`trajectory_params`): the model (hashed by content), the data,
the algorithm and optimizer values, the batch, the lengths, the reward and the seed. Left out, because they change
where, how often or how fast the same run is recorded, not what it computes:

* ``verl``: ``profile`` (the hardware recipe: GPU count, micro batches, offload, TP), ``save_freq``, ``test_freq``,
  ``max_ckpt_to_keep``, ``loggers``, ``project_name``, the judge pool (``judge_pool*``), the reward call's plumbing
  (``reward_function``, ``reward_manager``, ``reward_max_concurrent``, ``reward_timeout_s``) and
  ``total_training_steps``;
* the stage section (``grpo``, ``sft``, ``repair.train``): ``max_steps`` and the local engine's
  ``per_device_train_batch_size``/``gradient_accumulation_steps`` (under verl they must agree with the profile's
  micro batch and verl's global batch, which is hashed: :mod:`rlvr.train.verl.mapping`).

So turning on W&B, changing the checkpoint cadence or the GPU count resumes the run; raising ``max_steps`` continues
it from its last checkpoint (verl's ``resume_mode=auto``; the learning-rate schedule is then the new length's).
A run whose last checkpoint reached its steps and that was published (:func:`mark_finished`) does not start verl again
(:func:`finished`): the stage merges the kept checkpoint once more.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.io import atomic_write_json
from rlvr.train.verl.checkpoints import (
    checkpoint_steps,
    disk_preflight,
    load_contents_override,
    prune_checkpoints,
    saves_optimizer,
)
from rlvr.train.verl.params import VerlParams

__all__ = ["FINISHED_FILE", "GRPO_LOAD_CONTENTS", "NON_TRAJECTORY_STAGE", "NON_TRAJECTORY_VERL", "SFT_LOAD_CONTENTS",
           "finished", "mark_finished", "pre_launch", "sft_steps", "trajectory_params"]

NON_TRAJECTORY_VERL = frozenset({
    "profile", "save_freq", "test_freq", "max_ckpt_to_keep", "loggers", "project_name",
    "judge_pool", "judge_pool_workers", "judge_pool_shards",
    "reward_function", "reward_manager", "reward_max_concurrent", "reward_timeout_s",
    "total_training_steps",
})
"""``verl`` section fields left out of the resume key (module doc)."""
NON_TRAJECTORY_STAGE = frozenset({"max_steps", "per_device_train_batch_size", "gradient_accumulation_steps"})
"""Stage section fields (``grpo``, ``sft``, ``repair.train``) left out of the resume key (module doc)."""
FINISHED_FILE = "finished.json"


def trajectory_params(stage: Mapping[str, Any], verl: Mapping[str, Any], **rest: Any) -> dict[str, Any]:
    """The params a verl run's resume key hashes: ``{"engine": "verl", "stage": <stage minus
    NON_TRAJECTORY_STAGE>, "verl": <verl minus NON_TRAJECTORY_VERL>, **rest}`` (``rest``: the reward mode and shaping,
    the repair environment…, hashed as given). ``stage``/``verl`` are the sections' ``model_dump()``."""
    return {"engine": "verl",
            "stage": {k: v for k, v in stage.items() if k not in NON_TRAJECTORY_STAGE},
            "verl": {k: v for k, v in verl.items() if k not in NON_TRAJECTORY_VERL},
            **rest}


def _latest(ckpt_dir: Path) -> int | None:
    """verl's ``latest_checkpointed_iteration.txt`` step, else the newest ``global_step_<n>``, else ``None``."""
    try:
        return int((ckpt_dir / "latest_checkpointed_iteration.txt").read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        steps = checkpoint_steps(ckpt_dir)
        return steps[-1][0] if steps else None


def mark_finished(run_dir: str | Path, ckpt_dir: str | Path, target_steps: int | None) -> dict[str, Any]:
    """Write ``<run_dir>/finished.json`` = ``{"step": <last checkpoint>, "target_steps": target_steps}`` after a
    successful publish; returns it."""
    rec = {"step": _latest(Path(ckpt_dir)), "target_steps": target_steps}
    atomic_write_json(Path(run_dir) / FINISHED_FILE, rec)
    return rec


def finished(run_dir: str | Path, ckpt_dir: str | Path, target_steps: int | None) -> bool:
    """Whether the run in ``run_dir`` is done for ``target_steps`` (``None`` = epoch-bounded): it was published
    (:func:`mark_finished`) at the checkpoint still newest in ``ckpt_dir``, that checkpoint exists, and it reached
    ``target_steps`` (an epoch-bounded run: it was epoch-bounded then too). A raised ``max_steps`` is not finished:
    verl resumes and continues."""
    try:
        rec = json.loads((Path(run_dir) / FINISHED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    latest = _latest(Path(ckpt_dir))
    if not isinstance(rec, dict) or latest is None or rec.get("step") != latest:
        return False
    if not any(step == latest for step, _ in checkpoint_steps(ckpt_dir)):
        return False
    if target_steps is None:
        return rec.get("target_steps") is None
    return latest >= target_steps


GRPO_LOAD_CONTENTS = "actor_rollout_ref.actor.checkpoint.load_contents"
SFT_LOAD_CONTENTS = "checkpoint.load_contents"


def sft_steps(train_files: str | Path, batch: int, epochs: float) -> int | None:
    """Optimizer steps of an epoch-bounded verl SFT run: ``rows // batch`` (verl's SFT loader drops the last partial
    batch) times ``ceil(epochs)``, at least 1; ``None`` when the parquet cannot be read."""
    try:
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(str(train_files)).metadata.num_rows
    except Exception:  # a missing file or no pyarrow: the caller falls back to save_freq_for's default
        return None
    return max(1, rows // batch) * max(1, math.ceil(epochs))


def pre_launch(run: Path, ckpt_dir: Path, out_model_dir: str | Path, model_path: str | Path, verl: VerlParams,
               steps: int | None, save_freq: int, load_key: str,
               extra_overrides: Sequence[str] = ()) -> tuple[bool, list[str]]:
    """What every verl launch does first: ``(finished, extra overrides)``.

    ``finished``: the run was published at its last checkpoint and reached ``steps``
    (:func:`rlvr.train.verl.resume.finished`): the caller merges it again instead of starting verl. Otherwise the
    checkpoints below the newest ``verl.max_ckpt_to_keep`` are deleted (verl forgets those of earlier attempts), the
    free space is checked for the checkpoints ``extra_overrides`` (the profile's) make verl save
    (:func:`rlvr.train.verl.checkpoints.disk_preflight`: raises
    :class:`rlvr.config.ConfigError` naming the path and the shortfall; the sizes are printed to stderr), and, when
    the newest checkpoint lost its optimizer state at an earlier publish, ``[<load_key>=[model,extra]]`` is returned
    so verl continues from it (:func:`rlvr.train.verl.checkpoints.load_contents_override`)."""
    if finished(run, ckpt_dir, steps):
        print(f"verl: {run} is finished at its last checkpoint (steps {steps}); publishing it without starting verl",
              file=sys.stderr)
        return True, []
    for gone in prune_checkpoints(ckpt_dir, verl.max_ckpt_to_keep):
        print(f"verl: pruned {gone} (below the newest {verl.max_ckpt_to_keep})", file=sys.stderr)
    # the profile's checkpoint contents (the lent profiles save [model] only: 4 B/param, not 12)
    optimizer = saves_optimizer(extra_overrides, load_key.replace("load_contents", "save_contents"))
    plan = disk_preflight(ckpt_dir, out_model_dir, model_path, verl.max_ckpt_to_keep, steps, save_freq,
                          optimizer=optimizer)
    if plan is not None:
        print(f"verl disk: {plan.line()}", file=sys.stderr)
    extra = load_contents_override(ckpt_dir, load_key)
    if extra:
        print(f"verl: the newest checkpoint in {ckpt_dir} has no optimizer state (dropped after a publish); "
              "continuing with fresh Adam moments", file=sys.stderr)
    return False, extra
