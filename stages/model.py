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
from pathlib import Path
from typing import Literal

import click
from pydantic import Field

from rlvr.config import Section
from rlvr.data.prompts import build_prompt
from rlvr.data.schema import read_problems
from rlvr.io import atomic_dir
from rlvr.model import build_tiny_model
from rlvr.model.tiny import MODEL_REF_FILE
from rlvr.stage import Params, Result, option, stage


class ModelParams(Section):
    """``model`` section: ``name`` (``tiny`` or a Hub id/path); the other fields size the locally built random-init
    model only (:func:`rlvr.model.build_tiny_model`; a 7B-shaped one in ``profiles/qwen7b_*.yaml``)."""

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
