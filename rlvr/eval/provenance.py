"""Model identity for evaluation keys and metrics files: a content hash of a model folder.

Every evaluation row is keyed by the model's *content* (:func:`model_tag`), never by its path alone: a stage that
re-publishes new weights at the same path (``models/base`` after ``dvc exp run -S model.hidden_size=…``, a re-trained
``models/sft``) must not reuse the completions of the old weights. Shared by the baseline protocol
(:mod:`rlvr.eval.protocol` through :mod:`rlvr.eval.baseline`) and the final ``eval`` stage (:mod:`rlvr.eval.final`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rlvr.data.bundled import sha256_file

__all__ = ["MODEL_FILES", "model_hash", "model_tag", "tag_of"]

#: Files of a model folder that determine its completions: weights, config, tokenizer, chat template, and the
#: ``model.json`` Hub reference written by the ``model`` stage for non-tiny models.
MODEL_FILES = ("*.safetensors", "config.json", "generation_config.json", "tokenizer*.json", "chat_template*", "*.model",
               "vocab.json", "merges.txt", "model.json")


def model_hash(model_dir: str | Path) -> dict[str, str]:
    """``{"id", "sha256"}`` of a model folder: sha256 over ``name\\0sha256(file)\\n`` of its :data:`MODEL_FILES`
    (sorted by name; sub-folders such as checkpoints are not included).

    ``id`` is the folder path, or the Hub id for a folder holding only ``model.json`` (a Hub reference; its hash is
    the hash of that reference, so the Hub revision is not pinned). Raises ``FileNotFoundError`` when the folder has
    none of those files."""
    d = Path(model_dir)
    files = sorted({f for pat in MODEL_FILES for f in d.glob(pat) if f.is_file()})
    if not files:
        raise FileNotFoundError(f"{d}: no model files (config.json / *.safetensors / model.json)")
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.name}\0{sha256_file(f)}\n".encode())
    mid = str(d)
    if (d / "model.json").is_file() and not (d / "config.json").is_file():
        try:
            mid = json.loads((d / "model.json").read_text(encoding="utf-8"))["name"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{d / 'model.json'}: expected a JSON object with a 'name' (Hub id)") from exc
    return {"id": mid, "sha256": h.hexdigest()}


def model_tag(model_ref: str | Path) -> str:
    """The model identity recorded in every sample key: ``"<id>@<first 16 hex of the content sha256>"`` for a local
    model folder (:func:`model_hash`), else ``model_ref`` unchanged (a Hub id or a served model name, which has no
    local content to hash). Raises like :func:`model_hash` for a folder without model files."""
    d = Path(model_ref)
    if not d.is_dir():
        return str(model_ref)
    return tag_of(model_hash(d))


def tag_of(mh: dict[str, str]) -> str:
    """``"<id>@<first 16 hex of sha256>"`` of a :func:`model_hash` result (the form used in sample keys)."""
    return f"{mh['id']}@{mh['sha256'][:16]}"
