"""The ``model`` section of ``params.yaml`` (read by the ``model`` stage and checked by ``rlvr check``), and the check
that ``model.name`` resolves: ``tiny``, a local model folder, or a Hub id (looked up when the Hub is reachable)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field

from rlvr.config import Section

__all__ = ["ModelParams", "check_model_name", "hub_lookup"]


class ModelParams(Section):
    """``model`` section: ``name`` (``tiny`` or a Hub id/path); the other fields size the locally built random-init
    model only (:func:`rlvr.model.build_tiny_model`; a 7B-shaped one in ``profiles/lent/qwen7b_random_2xh100.yaml``:
    ``vocab_rows`` embedding rows past the tokenizer, ``tie_word_embeddings``, ``rope_theta``, stored ``dtype``,
    ``init_device`` where the weights are drawn)."""

    name: str = "tiny"
    seed: int = 0
    vocab_size: int = Field(default=4096, ge=300)
    hidden_size: int = Field(default=64, ge=8)
    layers: int = Field(default=2, ge=1)
    heads: int = Field(default=4, ge=1)
    kv_heads: int = Field(default=2, ge=1)
    intermediate_size: int = Field(default=256, ge=8)
    max_position_embeddings: int = Field(default=4096, ge=256)
    corpus_solutions: int = Field(default=1, ge=0)
    vocab_rows: int | None = Field(default=None, ge=300)
    tie_word_embeddings: bool = True
    rope_theta: float | None = Field(default=None, gt=0)
    dtype: Literal["float32", "bfloat16"] = "float32"
    init_device: Literal["cpu", "cuda", "auto"] = "cpu"


def hub_lookup(name: str, timeout_s: float = 10.0) -> bool | None:
    """Whether the HuggingFace Hub has model ``name``: ``True`` (found, gated included), ``False`` (not found, or
    private without a token), ``None`` when it cannot say (``HF_HUB_OFFLINE`` set, Hub unreachable, any other error).
    One ``huggingface_hub.model_info`` call, ``timeout_s`` seconds at most."""
    import os

    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    try:
        from huggingface_hub import model_info
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    except ImportError:
        return None
    try:
        model_info(name, timeout=timeout_s)
    except GatedRepoError:
        return True
    except RepositoryNotFoundError:
        return False
    except Exception:  # network down, rate limit, offline mode: the Hub cannot say
        return None
    return True


def check_model_name(name: str, lookup: Callable[[str], bool | None] | None = None) -> tuple[str | None, str | None]:
    """``(error, note)`` about a ``model.name``: ``tiny``; a local folder (must hold ``config.json`` or the
    ``model.json`` reference the ``model`` stage writes); else a Hub id (``org/name``), looked up with ``lookup``
    (default :func:`hub_lookup`). ``error`` is one clause for ``params.yaml: model.name: <error>``; ``note`` says what
    could not be checked (the Hub unreachable)."""
    from rlvr.model.tiny import MODEL_REF_FILE

    if name == "tiny":
        return None, None
    path = Path(name).expanduser()
    if path.exists():
        if path.is_dir() and ((path / "config.json").is_file() or (path / MODEL_REF_FILE).is_file()):
            return None, None
        return f"{name!r} exists but is not a model folder (no config.json)", None
    if name.startswith(("/", "./", "../", "~")):
        return f"local folder {name!r} not found", None
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?", name):
        return f"{name!r} is neither a local folder nor a Hub id (org/name)", None
    found = (lookup or hub_lookup)(name)
    if found is False:
        return f"{name!r} not found on the HuggingFace Hub nor as a local folder (private: set HF_TOKEN)", None
    if found is None:
        return None, f"model.name {name!r}: the HuggingFace Hub is not reachable, the id was not checked"
    return None, None
