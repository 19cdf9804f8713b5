"""verl checkpoints that fit and survive: their size, a free-space check before a launch, pruning below the newest K,
and the optimizer state dropped once the run is published.

verl 0.9.1 writes ``<ckpt_dir>/global_step_<n>/`` (GRPO: an ``actor/`` folder in it; SFT: the files directly) with
``checkpoint.save_contents`` = ``[model, optimizer, extra]``: one ``model_world_size_<w>_rank_<r>.pt``,
``optim_world_size_<w>_rank_<r>.pt`` and ``extra_state_world_size_<w>_rank_<r>.pt`` per rank
(``verl/utils/checkpoint/fsdp_checkpoint_manager.py``), and ``latest_checkpointed_iteration.txt`` beside them.
Sizes (FSDP mixed precision: fp32 master weights, Adam's two fp32 moments):

* model: 4 B/parameter (30.5 GB for Qwen2.5-7B's 7.6 B parameters); optimizer: 8 B/parameter (61 GB); extra (lr
  scheduler, RNG, dataloader state): under a MB. A full checkpoint is 12 B/parameter, 91 GB at 7B.
* verl keeps ``max_ckpt_to_keep`` of them, but only those its own process saved (``previous_saved_paths`` starts
  empty on a resume, ``checkpoint_manager.register_checkpoint``), so the ones before a resume stay on disk forever:
  :func:`prune_checkpoints` removes every ``global_step_*`` below the newest K before and after each launch. During a
  save the previous one is still there (``ensure_checkpoint_capacity`` keeps K-1 before saving, 1 when K is 1): the
  peak is ``max(K, 2)`` checkpoints (:func:`checkpoint_plan`).
* after the merged model is published (bf16: 2 B/parameter, 15 GB at 7B) the optimizer files are deleted and only
  the newest checkpoint's model is kept (:func:`drop_optimizer`): 30.5 GB at 7B, enough to publish again or to
  continue with a raised ``max_steps`` (then with fresh Adam moments: :func:`load_contents_override`).

LoRA runs are sized as full ones (an upper bound). Every function takes plain paths; nothing here imports verl.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rlvr.config import ConfigError

__all__ = [
    "MODEL_BYTES_PER_PARAM",
    "OPTIMIZER_BYTES_PER_PARAM",
    "PUBLISHED_BYTES_PER_PARAM",
    "CheckpointPlan",
    "check_free_space",
    "checkpoint_plan",
    "checkpoint_steps",
    "dir_bytes",
    "disk_preflight",
    "drop_optimizer",
    "has_optimizer",
    "load_contents_override",
    "model_params",
    "prune_checkpoints",
    "saves_optimizer",
]

MODEL_BYTES_PER_PARAM = 4
"""fp32 master weights in a verl FSDP checkpoint (``model_world_size_*``)."""
OPTIMIZER_BYTES_PER_PARAM = 8
"""Adam's ``exp_avg`` and ``exp_avg_sq``, fp32 (``optim_world_size_*``)."""
PUBLISHED_BYTES_PER_PARAM = 2
"""The merged HF model the stage publishes (bf16)."""
GB = 1e9

_STEP_DIR = re.compile(r"global_step_(\d+)$")
_OPTIM_FILE = "optim_world_size_*_rank_*.pt"
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8}


def model_params(model: str | Path) -> int | None:
    """Parameter count of a local HF model folder: the safetensors' byte total (the index's ``metadata.total_size``,
    else the ``*.safetensors`` files' sizes) over the bytes per element of ``config.json``'s ``torch_dtype``/``dtype``
    (bf16 when absent). A Hub id is sized from its snapshot in the Hugging Face cache when there; ``None`` for one
    not downloaded, a folder without safetensors, or an unknown dtype."""
    p = Path(model)
    if not p.is_dir():
        p = _hub_cache_dir(str(model))
        if p is None:
            return None
    total = 0
    index = p / "model.safetensors.index.json"
    if index.is_file():
        try:
            total = int(json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"])
        except (ValueError, KeyError, TypeError):
            total = 0
    if not total:
        total = sum(f.stat().st_size for f in p.glob("*.safetensors"))
    if not total:
        return None
    dtype = "bfloat16"
    try:
        cfg = json.loads((p / "config.json").read_text(encoding="utf-8"))
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or dtype).removeprefix("torch.")
    except (OSError, ValueError, AttributeError):
        pass
    width = _DTYPE_BYTES.get(dtype)
    return total // width if width else None


def _hub_cache_dir(repo_id: str) -> Path | None:
    """The local snapshot folder of a Hub model already in the Hugging Face cache (``config.json`` found by
    ``huggingface_hub.try_to_load_from_cache``, no network), else ``None``."""
    if repo_id.count("/") != 1:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache

        hit = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # not a valid repo id, or no huggingface_hub
        return None
    return Path(hit).parent if isinstance(hit, str) else None


@dataclass(frozen=True)
class CheckpointPlan:
    """Disk a verl run needs, in bytes: ``full`` one ``[model, optimizer, extra]`` checkpoint, ``peak`` the most
    checkpoints on disk at once (``peak_count`` of them), ``published`` the merged bf16 model, ``after_publish``
    what stays in the run folder once :func:`drop_optimizer` ran."""

    n_params: int
    full: int
    peak_count: int
    peak: int
    published: int
    after_publish: int

    def line(self) -> str:
        """One human line: ``12.0 B/param x 7.6e9 = 91.2 GB per checkpoint, 2 at peak = 182.4 GB; …``."""
        per = self.full / self.n_params if self.n_params else 0
        return (f"{self.full / GB:.1f} GB per checkpoint ({self.n_params / 1e9:.2f} B params x {per:.0f} B), "
                f"{self.peak_count} at peak = {self.peak / GB:.1f} GB; published model {self.published / GB:.1f} GB; "
                f"{self.after_publish / GB:.1f} GB kept after publishing")


def saves_optimizer(extra_overrides: Sequence[str], save_key: str) -> bool:
    """Whether a run's checkpoints hold the optimizer state: ``False`` when ``extra_overrides`` (the profile's
    ``hardware.extra_overrides``) set ``save_key`` (verl's ``…checkpoint.save_contents``, with or without a ``+``/``++``
    prefix) to a list without ``optimizer`` (the lent profiles save ``[model]``), else ``True`` (verl's default
    ``[model, optimizer, extra]``)."""
    for o in extra_overrides:
        key, _, value = str(o).lstrip("+").partition("=")
        if key.strip() == save_key:
            return "optimizer" in value
    return True


def checkpoint_plan(n_params: int, keep: int | None, steps: int | None = None, save_freq: int | None = None,
                    optimizer: bool = True) -> CheckpointPlan:
    """The sizes of a verl run of ``n_params`` parameters keeping ``keep`` checkpoints (``None`` = all: the number
    of saves, ``ceil(steps / save_freq)`` plus the last, when both are known, else 2 is assumed). See the module doc
    for the bytes per parameter and the ``max(K, 2)`` peak. ``optimizer``: the checkpoints hold the Adam moments
    (:func:`saves_optimizer`; ``False``: 4 B/param model-only checkpoints, as the lent profiles save)."""
    full = n_params * (MODEL_BYTES_PER_PARAM + (OPTIMIZER_BYTES_PER_PARAM if optimizer else 0))
    if keep is None:
        count = (-(-steps // save_freq) + 1) if steps and save_freq and save_freq > 0 else 2
    else:
        count = keep
    count = max(count, 2)
    return CheckpointPlan(n_params=n_params, full=full, peak_count=count, peak=count * full,
                          published=n_params * PUBLISHED_BYTES_PER_PARAM,
                          after_publish=n_params * MODEL_BYTES_PER_PARAM)


def dir_bytes(path: str | Path) -> int:
    """Bytes of the regular files under ``path`` (0 when it does not exist; symlinks not followed)."""
    p = Path(path)
    if not p.exists():
        return 0
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file() and not f.is_symlink())


def _existing(path: Path) -> Path:
    """``path`` or its nearest existing ancestor (``shutil.disk_usage`` needs one)."""
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_free_space(needs: dict[str | Path, int], free: dict[str, int] | None = None) -> None:
    """Raise :class:`rlvr.config.ConfigError` (one line naming the path, the bytes needed and the shortfall, in GB)
    when a file system has less free space than ``needs`` (path → bytes to be written there) adds up to on it.

    Paths on one file system (same ``st_dev`` of their nearest existing ancestor) are summed. ``free`` maps a path
    (as given in ``needs``) to its free bytes, for tests; default ``shutil.disk_usage(...).free``."""
    by_dev: dict[int, tuple[Path, int, int]] = {}
    for raw, need in needs.items():
        p = _existing(Path(raw))
        dev = p.stat().st_dev
        have = free[str(raw)] if free is not None else shutil.disk_usage(p).free
        if dev in by_dev:
            first, total, have0 = by_dev[dev]
            by_dev[dev] = (first, total + max(need, 0), have0)
        else:
            by_dev[dev] = (Path(raw), max(need, 0), have)
    for path, need, have in by_dev.values():
        if need > have:
            raise ConfigError(f"{path}: {have / GB:.1f} GB free, the verl run needs {need / GB:.1f} GB there "
                              f"(short by {(need - have) / GB:.1f} GB); free space, lower verl.max_ckpt_to_keep, or "
                              "point RLVR_CACHE_DIR at a larger disk")


def checkpoint_steps(ckpt_dir: str | Path) -> list[tuple[int, Path]]:
    """``[(step, folder)]`` of the ``global_step_<n>`` folders under ``ckpt_dir``, oldest first."""
    d = Path(ckpt_dir)
    if not d.is_dir():
        return []
    out = [(int(m.group(1)), p) for p in d.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name))]
    return sorted(out)


def prune_checkpoints(ckpt_dir: str | Path, keep: int | None) -> list[Path]:
    """Delete every ``global_step_<n>`` folder under ``ckpt_dir`` but the newest ``keep`` (``None`` = keep all);
    returns the folders deleted. The step named in ``latest_checkpointed_iteration.txt`` is always kept."""
    if keep is None:
        return []
    steps = checkpoint_steps(ckpt_dir)
    latest = _latest_step(ckpt_dir)
    gone = []
    for step, path in steps[: max(len(steps) - keep, 0)]:
        if step == latest:
            continue
        shutil.rmtree(path)
        gone.append(path)
    return gone


def _latest_step(ckpt_dir: str | Path) -> int | None:
    """The step in verl's ``latest_checkpointed_iteration.txt`` (``None`` when missing or not a number)."""
    try:
        return int((Path(ckpt_dir) / "latest_checkpointed_iteration.txt").read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def has_optimizer(step_dir: str | Path) -> bool:
    """Whether a ``global_step_<n>`` folder still holds optimizer shards (``optim_world_size_*_rank_*.pt``)."""
    return any(Path(step_dir).rglob(_OPTIM_FILE))


def drop_optimizer(ckpt_dir: str | Path) -> int:
    """After a successful publish: keep only the newest checkpoint, and of it only the model and extra state (delete
    its ``optim_world_size_*`` files). Returns the bytes freed."""
    before = dir_bytes(ckpt_dir)
    prune_checkpoints(ckpt_dir, 1)
    for f in Path(ckpt_dir).rglob(_OPTIM_FILE) if Path(ckpt_dir).is_dir() else ():
        f.unlink()
    return before - dir_bytes(ckpt_dir)


_EXTRA_FILE = "extra_state_world_size_*_rank_*.pt"


def load_contents_override(ckpt_dir: str | Path, key: str) -> list[str]:
    """``[f"{key}=[model,extra]"]`` (``[model]`` when the checkpoint has no ``extra_state`` files either: the lent
    profiles save ``[model]`` only) when the checkpoint verl will resume from (the newest ``global_step_<n>``) has no
    optimizer shards (:func:`drop_optimizer` ran after an earlier publish, or the profile never saves them), else
    ``[]``. ``key`` is verl's ``checkpoint.load_contents`` (GRPO: ``actor_rollout_ref.actor.checkpoint.load_contents``;
    SFT: ``checkpoint.load_contents``); without it verl would fail opening a missing file (verl 0.9.1
    ``FSDPCheckpointManager.load_checkpoint`` loads every listed kind). The run then continues from the saved
    weights (and the scheduler and RNG where ``extra`` was saved) with fresh Adam moments."""
    steps = checkpoint_steps(ckpt_dir)
    if not steps or has_optimizer(steps[-1][1]):
        return []
    kinds = ["model", *(["extra"] if any(Path(steps[-1][1]).rglob(_EXTRA_FILE)) else [])]
    return [f"{key}=[{','.join(kinds)}]"]



def disk_preflight(ckpt_dir: str | Path, out_model_dir: str | Path, model: str | Path, keep: int | None,
                   steps: int | None = None, save_freq: int | None = None,
                   free: dict[str, int] | None = None, optimizer: bool = True) -> CheckpointPlan | None:
    """Before a verl launch: size the run (:func:`checkpoint_plan` of :func:`model_params` of ``model``) and check
    that ``ckpt_dir``'s file system holds the peak checkpoints (less what the run's checkpoints already take there)
    and ``out_model_dir``'s the published model (:func:`check_free_space`, which raises
    :class:`rlvr.config.ConfigError` with the path and the shortfall). Returns the plan, or ``None`` (nothing checked)
    when the model cannot be sized (a Hub id not yet downloaded). ``optimizer``: as :func:`checkpoint_plan`."""
    n = model_params(model)
    if n is None:
        return None
    plan = checkpoint_plan(n, keep, steps, save_freq, optimizer)
    check_free_space({ckpt_dir: plan.peak - dir_bytes(ckpt_dir), out_model_dir: plan.published},
                     free={str(ckpt_dir): free[str(ckpt_dir)], str(out_model_dir): free[str(out_model_dir)]}
                     if free is not None else None)
    return plan
