"""Stage ``model``: provide the base model at ``models/base/``.

``model.name: tiny`` builds the tiny random-init Qwen2 chat model locally (:func:`rlvr.model.build_tiny_model`): a
byte-level BPE tokenizer trained on ``data/governance/problems/*.jsonl`` (each problem's prompt text plus its first
``corpus_solutions`` reference solutions), ChatML template, weights drawn from ``seed``. Any other name (a Hub id such
as ``Qwen/Qwen2.5-Coder-7B-Instruct`` or a local path) writes only ``models/base/model.json`` = ``{"name": ...}``;
consumers resolve it with :func:`rlvr.model.resolve_model_ref` and load it through ``from_pretrained`` / vLLM.

    python stages/model.py [--params params.yaml]
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import click

from rlvr.config import ConfigError
from rlvr.data.prompts import build_prompt
from rlvr.data.schema import read_problems
from rlvr.io import atomic_dir
from rlvr.model import build_tiny_model
from rlvr.model.params import ModelParams, check_model_name
from rlvr.model.tiny import MODEL_REF_FILE
from rlvr.stage import Params, Result, option, stage


def corpus(problems_dir: Path, solutions: int) -> list[str]:
    """Tokenizer corpus: per problem its prompt text and first ``solutions`` references (files in sorted order)."""
    texts: list[str] = []
    for path in sorted(problems_dir.glob("*.jsonl")):
        for p in read_problems(path):
            texts.append(build_prompt(p))
            texts.extend(p.solutions[:solutions])
    if not texts:
        raise click.ClickException(f"{problems_dir}: no problems found for the tokenizer corpus")
    return texts


@stage(option("--problems-dir", default="data/governance/problems", path=True),
       option("--out", default="models/base", path=True))
def main(params: Params, problems_dir: Path, out: Path) -> Result:
    """Build the tiny model or record the external model id."""
    cfg = params.section("model", ModelParams)
    error, note = check_model_name(cfg.name)  # a typo'd Hub id fails here, not in baseline
    if error:
        raise ConfigError(f"{params.path}: model.name: {error}")
    if note:
        logging.getLogger(__name__).warning(note)
    if cfg.name == "tiny":
        build_tiny_model(out, corpus(problems_dir, cfg.corpus_solutions), seed=cfg.seed, vocab_size=cfg.vocab_size,
                         hidden_size=cfg.hidden_size, layers=cfg.layers, heads=cfg.heads, kv_heads=cfg.kv_heads,
                         intermediate_size=cfg.intermediate_size, max_position_embeddings=cfg.max_position_embeddings,
                         vocab_rows=cfg.vocab_rows, tie_word_embeddings=cfg.tie_word_embeddings,
                         rope_theta=cfg.rope_theta, dtype=cfg.dtype, init_device=cfg.init_device)
    else:
        with atomic_dir(out) as tmp:
            (tmp / MODEL_REF_FILE).write_text(json.dumps({"name": cfg.name}) + "\n", encoding="utf-8")
    return Result(resolved={out: cfg}, echo=f"model: {cfg.name} -> {out}")


if __name__ == "__main__":
    main()
