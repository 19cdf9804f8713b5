"""The environment of a verl run's processes: the launch's own (:func:`ray_env`), what every Ray worker gets through
the job's ``runtime_env`` (:func:`worker_env`, :func:`propagated_env`), and the CUDA device rule of several GPUs.

Ray (GRPO): ``verl.trainer.main_ppo`` calls ``ray.init()`` itself, which joins the cluster named by ``RAY_ADDRESS``
(Ray's own variable) or starts a local one. A cluster started elsewhere has its own environment, so the driver's
where/how settings reach the workers through ``runtime_env`` on a local cluster and an existing one alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvr.train.verl.params import VerlProfile

__all__ = ["NOSET_CUDA_VISIBLE_DEVICES", "PROPAGATED_PREFIXES", "propagated_env", "ray_env", "worker_env"]


# Ray leaves CUDA_VISIBLE_DEVICES alone and verl's workers pick their GPU from Ray's accelerator ids: on a 2-GPU
# H100 host verl GRPO otherwise failed at FSDP init (NCCL "Duplicate GPU detected"). Under torchrun (verl SFT) the
# same variable makes verl's worker ask Ray for accelerator ids it has none of (IndexError at engine build, seen on
# the lent 2 x H100), so the SFT launch removes it.
NOSET_CUDA_VISIBLE_DEVICES = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"


def ray_env(ray_address: str | None = None, n_gpus: int = 1) -> dict[str, str]:
    """Environment for a GRPO launch: ``RAY_ADDRESS`` = ``ray_address`` when given (an existing cluster),
    ``WANDB_MODE=offline`` unless set, ``TOKENIZERS_PARALLELISM=true`` (verl's own default), and
    :data:`NOSET_CUDA_VISIBLE_DEVICES` ``=1`` when the run uses more than one GPU."""
    env = {"WANDB_MODE": os.environ.get("WANDB_MODE", "offline"), "TOKENIZERS_PARALLELISM": "true"}
    if n_gpus > 1:
        env[NOSET_CUDA_VISIBLE_DEVICES] = "1"
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    return env


def worker_env(log_path: str | Path, profile: VerlProfile, judge: Any = None) -> dict[str, str]:
    """What every Ray worker of a GRPO/repair run gets through ``runtime_env``: :func:`propagated_env`, verl's file
    logger path (``VERL_FILE_LOGGER_PATH``, absolute: the logger lives in a Ray actor), the step guard's
    partial-failure bound (:data:`rlvr.reward.share_window.SHARE_ENV`: ``judge.max_sandbox_error_share`` and
    ``judge.sandbox_error_window_steps`` of ``judge``, a :class:`rlvr.judge.preflight.JudgeParams`; ``None`` = the
    ``judge`` section of ``params.yaml`` in the working directory, the stages' default params file) and, on several
    GPUs, :data:`NOSET_CUDA_VISIBLE_DEVICES`. On a local cluster the workers would inherit these from the driver; on
    an existing one (``RAY_ADDRESS``) only ``runtime_env`` reaches them. Raises :class:`rlvr.config.ConfigError` for
    an invalid ``judge`` section."""
    from rlvr.judge.preflight import JudgeParams, load_judge_params
    from rlvr.reward.share_window import share_env

    if judge is None:
        judge = load_judge_params("params.yaml") if Path("params.yaml").is_file() else JudgeParams()
    env = {**propagated_env(), "VERL_FILE_LOGGER_PATH": str(Path(log_path).resolve()),
           **share_env(judge.max_sandbox_error_share, judge.sandbox_error_window_steps)}
    if profile.n_gpus_per_node * profile.nnodes > 1:
        env[NOSET_CUDA_VISIBLE_DEVICES] = "1"
    return env


PROPAGATED_PREFIXES: tuple[str, ...] = ("RLVR_", "WANDB_", "HF_")
"""Environment variables (by prefix) that :func:`propagated_env` hands to every Ray worker: rlvr's where/how settings
(``RLVR_SANDBOX_URL``, ``RLVR_CACHE_DIR``…), W&B's (``WANDB_MODE``, ``WANDB_PROJECT``…) and the Hub's
(``HF_HOME``, ``HF_HUB_OFFLINE``…)."""
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")


def propagated_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The driver's settings every Ray worker must see: the variables of ``environ`` (default ``os.environ``) with a
    :data:`PROPAGATED_PREFIXES` prefix, plus ``WANDB_MODE`` as :func:`ray_env` sets it.

    Secrets (a name containing ``KEY``, ``TOKEN``, ``SECRET``, ``PASSWORD`` or ``CREDENTIAL``, e.g.
    ``WANDB_API_KEY``, ``HF_TOKEN``) are left out: the overrides are written to a file in the run folder
    (``<run>/verl_overrides.txt``, ``verl_command.sh``); give them to the cluster's nodes yourself (``wandb login``,
    the environment of ``ray start``). A relative ``RLVR_CACHE_DIR`` is made absolute (Ray workers do not run in the
    driver's working directory). A value holding ``${`` is left out (verl's config would interpolate it)."""
    src = os.environ if environ is None else environ
    env = {k: v for k, v in src.items()
           if k.startswith(PROPAGATED_PREFIXES) and not any(m in k.upper() for m in _SECRET_MARKERS)
           and "${" not in v}  # OmegaConf would take it for an interpolation (ray_env_override refuses it)
    env.setdefault("WANDB_MODE", "offline")
    if env.get("RLVR_CACHE_DIR"):
        env["RLVR_CACHE_DIR"] = str(Path(env["RLVR_CACHE_DIR"]).absolute())
    return env
