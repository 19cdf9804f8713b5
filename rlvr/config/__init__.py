"""Typed access to ``params.yaml`` (hyperparameters) and ``RLVR_*`` environment variables (where/how).

Each stage reads exactly its own section of ``params.yaml`` into a pydantic model with ``extra="forbid"`` so a typo in
``dvc exp run -S section.key=…`` fails loudly instead of being ignored.
"""

from __future__ import annotations

import difflib
import json
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from rlvr.config.errors import ConfigError

__all__ = [
    "SECTION_NAMES",
    "ConfigError",
    "RuntimeSettings",
    "Section",
    "did_you_mean",
    "dump_resolved",
    "load_params",
    "load_section",
    "unknown_sections",
    "validation_messages",
]

S = TypeVar("S", bound=BaseModel)


class Section(BaseModel):
    """Base class of every params section model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class RuntimeSettings(BaseSettings):
    """Where/how settings from the environment (never hyperparameters).

    ``RLVR_SANDBOX_URL``: base URL of a remote SandboxFusion/rlvr judge server; empty = embedded in-process judge.
    ``RLVR_SANDBOX_WORKERS``: concurrent sandboxes of the embedded judge (default: CPU count).
    ``RLVR_CACHE_DIR``: cache folder (tokenizers, intermediate checkpoints); default ``.cache`` in the repo.
    ``RLVR_BWRAP``: path of the bubblewrap binary (default: found on PATH).
    ``RLVR_SANDBOX_SITE``: extra folders of Python packages for the sandbox's interpreter (``os.pathsep``-separated,
    absolute; bound read-only and put on its ``PYTHONPATH``: :func:`rlvr.judge.sandbox.bwrap.sandbox_site`).
    ``RLVR_SANDBOX_MAX_QUEUE``: judge server: requests allowed to wait for a free worker before it answers 503 with
    ``Retry-After`` (unset = ``RLVR_SANDBOX_QUEUE_FACTOR`` × workers; 0 = never queue).
    ``RLVR_SANDBOX_QUEUE_FACTOR``: judge server: queue bound as a multiple of its worker count (default 2).
    ``RLVR_SANDBOX_RETRY_AFTER_MAX_S``: judge server: cap of the ``Retry-After`` it suggests, seconds (default 30).
    ``RLVR_SANDBOX_MAX_BODY_MB``: judge server: largest request body, MiB (default 32; larger: HTTP 413).
    ``RLVR_SANDBOX_MAX_BODIES``: judge server: request bodies it reads or holds at once (unset = workers + queue
    bound; beyond: HTTP 503 before the body is read).
    ``RLVR_SANDBOX_MAX_CONNECTIONS``: judge server: open HTTP connections (unset = the open-file limit / 4, at most
    1024; beyond: 503 and closed at once).
    ``RLVR_SANDBOX_MAX_HEADER_KB``: judge server: largest request line + headers, KiB (default 16; larger: HTTP 431).
    ``RLVR_SANDBOX_HEADER_TIMEOUT_S`` / ``RLVR_SANDBOX_BODY_TIMEOUT_S``: judge server: read deadlines of a request's
    headers (from the connection or the previous answer, default 10 s) and of its body (from admission, default
    60 s); past them: HTTP 408 and the connection closed. ``RLVR_SANDBOX_KEEP_ALIVE_S``: idle keep-alive, seconds
    (default 5).
    ``RLVR_SANDBOX_METRICS_VERDICTS``: judge server: ``/metrics`` includes the verdict counters for every caller
    (default 0: only for a caller presenting ``RLVR_SANDBOX_METRICS_TOKEN`` as ``Authorization: Bearer …``).
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
    sandbox_site: str = ""
    sandbox_max_queue: int | None = None
    sandbox_queue_factor: float = 2.0
    sandbox_retry_after_max_s: int = 30
    sandbox_max_body_mb: float = 32.0
    sandbox_max_bodies: int | None = None
    sandbox_max_connections: int | None = None
    sandbox_max_header_kb: float = 16.0
    sandbox_header_timeout_s: float = 10.0
    sandbox_body_timeout_s: float = 60.0
    sandbox_keep_alive_s: float = 5.0
    sandbox_metrics_verdicts: bool = False
    sandbox_metrics_token: str = ""
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
    except yaml.YAMLError as exc:  # one line: file:line:column: what the parser expected
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(p)
        what = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ConfigError(f"{where}: invalid YAML: {what}") from exc
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

    Raises :class:`ConfigError` naming the file, section and offending field (pydantic's location) on error, one
    line, with the nearest valid key for an unknown one (``params.yaml: baseline.batch_sise: Extra inputs are not
    permitted (did you mean 'batch_size'?)``).
    """
    params = load_params(path)
    if name not in params:
        raise ConfigError(f"{path}: section '{name}' missing")
    try:
        return model.model_validate(params[name])
    except ValidationError as exc:
        raise ConfigError(f"{path}: " + "; ".join(validation_messages(name, model, exc))) from exc


def validation_messages(name: str, model: type[BaseModel], exc: ValidationError) -> list[str]:
    """One ``section.key: problem`` clause per error of ``exc`` (raised validating section ``name`` with ``model``),
    with the nearest valid key for an unknown one."""
    return [f"{name}{''.join(f'.{x}' if isinstance(x, str) else f'[{x}]' for x in e['loc'])}: {e['msg']}"
            f"{_did_you_mean(model, e)}" for e in exc.errors()]


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the candidate nearest ``word`` (:func:`difflib.get_close_matches`, cutoff 0.6),
    else ``""``."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


#: Every top-level key of ``params.yaml`` a stage reads (sections and the scalars ``engine``, ``reward``, ``seeds``).
#: ``rlvr check`` validates each with its schema (:data:`rlvr.check.SECTIONS`); a key not listed is a typo.
SECTION_NAMES: tuple[str, ...] = (
    "governance", "manifests", "judge_check", "judge", "reward", "reward_shaping", "model", "baseline", "report",
    "engine", "seeds", "profile", "synthetic", "train", "sft", "dpo", "grpo", "verl", "repair", "eval",
)


def unknown_sections(path: str | Path = "params.yaml") -> list[str]:
    """``file: key: unknown params section (did you mean …?)`` for every top-level key of ``path`` that no stage reads
    (e.g. ``dvc exp run -S basline.n=2`` adds a section nobody reads). Raises :class:`ConfigError` when the file is
    missing or not a mapping."""
    return [f"{path}: {key}: unknown params section{did_you_mean(str(key), SECTION_NAMES)}"
            for key in load_params(path) if key not in SECTION_NAMES]


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that holds the last key of ``loc`` (``None`` when the path leaves nested models)."""
    for key in loc:
        field = model.model_fields.get(str(key)) if isinstance(key, str) else None
        if field is None:
            return None
        candidates = [field.annotation, *typing.get_args(field.annotation)]
        nested = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if nested is None:
            return None
        model = nested
    return model


def _did_you_mean(model: type[BaseModel], err: Any) -> str:
    """`` (did you mean 'batch_size'?)`` for an unknown key close to a valid one (:func:`difflib.get_close_matches`,
    cutoff 0.6), else ``""``."""
    if err.get("type") != "extra_forbidden" or not err.get("loc"):
        return ""
    holder = _model_at(model, tuple(err["loc"][:-1]))
    if holder is None:
        return ""
    names = [f.alias or n for n, f in holder.model_fields.items()]
    return did_you_mean(str(err["loc"][-1]), names)


def dump_resolved(section: BaseModel, out_dir: str | Path) -> Path:
    """Write the resolved section as ``<out_dir>/params.resolved.json`` (atomic) and return the path."""
    from rlvr.io import atomic_write_text

    out = Path(out_dir) / "params.resolved.json"
    atomic_write_text(out, json.dumps(section.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
    return out
