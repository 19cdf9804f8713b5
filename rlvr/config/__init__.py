"""Typed access to ``params.yaml`` (hyperparameters) and ``RLVR_*`` environment variables (where/how).

Each stage reads exactly its own section of ``params.yaml`` into a pydantic model with ``extra="forbid"`` so a typo in
``dvc exp run -S section.key=…`` fails loudly instead of being ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ConfigError", "RuntimeSettings", "Section", "dump_resolved", "load_params", "load_section"]

S = TypeVar("S", bound=BaseModel)


class ConfigError(ValueError):
    """A ``params.yaml`` section is missing or invalid; the message names the file, section and field."""


class Section(BaseModel):
    """Base class of every params section model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class RuntimeSettings(BaseSettings):
    """Where/how settings from the environment (never hyperparameters).

    ``RLVR_SANDBOX_URL``: base URL of a remote SandboxFusion/rlvr judge server; empty = embedded in-process judge.
    ``RLVR_SANDBOX_WORKERS``: concurrent sandboxes of the embedded judge (default: CPU count).
    ``RLVR_CACHE_DIR``: cache folder (tokenizers, intermediate checkpoints); default ``.cache`` in the repo.
    ``RLVR_BWRAP``: path of the bubblewrap binary (default: found on PATH).
    ``RLVR_SANDBOX_MAX_QUEUE``: judge server: requests allowed to wait for a free worker before it answers 503 with
    ``Retry-After`` (unset = ``RLVR_SANDBOX_QUEUE_FACTOR`` × workers; 0 = never queue).
    ``RLVR_SANDBOX_QUEUE_FACTOR``: judge server: queue bound as a multiple of its worker count (default 2).
    ``RLVR_SANDBOX_RETRY_AFTER_MAX_S``: judge server: cap of the ``Retry-After`` it suggests, seconds (default 30).
    ``RLVR_SANDBOX_MAX_BODY_MB``: judge server: largest request body, MiB (default 32; larger: HTTP 413).
    ``RLVR_FORKLOOP``: run the sandbox's stdin/stdout tests through its compiled per-test loop and end each
    submission with its compiled wipe, built on first use with the system C compiler (default 1; 0: the Python loop
    and wipe, same verdicts, more CPU per test).
    ``WANDB_MODE`` is read by wandb itself (rlvr sets ``offline`` when unset).
    """

    model_config = SettingsConfigDict(env_prefix="RLVR_", extra="ignore")

    sandbox_url: str = ""
    sandbox_workers: int = 0
    cache_dir: str = ".cache"
    bwrap: str = ""
    sandbox_max_queue: int | None = None
    sandbox_queue_factor: float = 2.0
    sandbox_retry_after_max_s: int = 30
    sandbox_max_body_mb: float = 32.0
    forkloop: bool = True


def load_params(path: str | Path = "params.yaml", *, raw: bool = False) -> dict[str, Any]:
    """Read the whole ``params.yaml`` as a dict, with the selected scale profile merged in
    (:func:`rlvr.config.profiles.apply_profile`; ``raw=True``: the file as written).

    Raises :class:`ConfigError` if the file is missing or not a mapping, or the profile is invalid/incomplete."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: params file not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: top level must be a mapping")
    if raw:
        return data
    from rlvr.config.profiles import ProfileError, apply_profile

    try:
        return apply_profile(data, p)
    except ProfileError as exc:
        raise ConfigError(f"{p}: profile: {exc}") from exc


def load_section(name: str, model: type[S], path: str | Path = "params.yaml") -> S:
    """Validate section ``name`` of ``params.yaml`` into ``model``.

    Raises :class:`ConfigError` naming the file, section and offending field (pydantic's location) on error.
    """
    params = load_params(path)
    if name not in params:
        raise ConfigError(f"{path}: section '{name}' missing")
    try:
        return model.model_validate(params[name])
    except ValidationError as exc:
        errs = "; ".join(f"{name}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{path}: {errs}") from exc


def dump_resolved(section: BaseModel, out_dir: str | Path) -> Path:
    """Write the resolved section as ``<out_dir>/params.resolved.json`` (atomic) and return the path."""
    from rlvr.io import atomic_write_text

    out = Path(out_dir) / "params.resolved.json"
    atomic_write_text(out, json.dumps(section.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    return out
