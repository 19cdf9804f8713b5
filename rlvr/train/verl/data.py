"""The verl SFT parquet: one ``messages`` conversation per judge-verified (problem, answer) pair.

verl 0.9.1's SFT trainer reads it with ``verl.utils.dataset.multiturn_sft_dataset.MultiTurnSFTDataset``
(``data.messages_key=messages``): a list of ``{"role", "content"}`` messages whose assistant turns are trained on.
The user turn is :func:`rlvr.data.prompts.build_messages`, the one prompt every engine shows, so SFT and RL see the
same prompt. The RL parquet is :func:`rlvr.data.export.write_verl_parquet` (manifests stage).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from rlvr.data.prompts import build_messages
from rlvr.data.schema import Problem
from rlvr.io import atomic_open

__all__ = ["LENGTH_MARGIN_TOKENS", "SFT_SCHEMA", "filter_by_length", "sft_rows", "write_sft_parquet"]

# verl's MultiTurnSFTDataset tokenizes message by message; a few tokens of slack keep a row that fits here from
# tripping its ``truncation=error`` check
LENGTH_MARGIN_TOKENS = 8

SFT_SCHEMA = pa.schema([
    ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("data_source", pa.string()),
    ("id", pa.string()),
])


def sft_rows(pairs: Sequence[tuple[Problem, str]]) -> list[dict[str, Any]]:
    """One row per ``(problem, assistant answer text)``: ``messages`` = prompt messages + the assistant answer."""
    return [
        {
            "messages": [*build_messages(p), {"role": "assistant", "content": text}],
            "data_source": p.source,
            "id": p.id,
        }
        for p, text in pairs
    ]


def filter_by_length(pairs: Sequence[tuple[Problem, str]], tokenizer: Any, max_length: int,
                     margin: int = LENGTH_MARGIN_TOKENS) -> tuple[list[tuple[Problem, str]], dict[str, int]]:
    """Drop the pairs whose whole conversation (prompt messages + answer, through the tokenizer's chat template) is
    longer than ``max_length - margin`` tokens: verl's SFT trainer runs with ``data.truncation=error`` (a truncated
    program would be trained on as if complete), so one long statement would otherwise end the run.

    Returns ``(kept pairs, {"rows_in", "rows_kept", "dropped_over_length", "max_tokens_kept"})`` (tokens).
    Raises ``ValueError`` when ``max_length <= margin``."""
    if max_length <= margin:
        raise ValueError(f"sft max_length={max_length} tokens must exceed the margin {margin}")
    kept: list[tuple[Problem, str]] = []
    longest = 0
    for p, text in pairs:
        msgs = [*build_messages(p), {"role": "assistant", "content": text}]
        ids = tokenizer.apply_chat_template(msgs, tokenize=True)
        n = len(ids["input_ids"] if hasattr(ids, "keys") else ids)  # transformers 5: a BatchEncoding
        if n <= max_length - margin:
            kept.append((p, text))
            longest = max(longest, n)
    stats = {"rows_in": len(pairs), "rows_kept": len(kept), "dropped_over_length": len(pairs) - len(kept),
             "max_tokens_kept": longest, "max_length": max_length}
    return kept, stats


def write_sft_parquet(pairs: Sequence[tuple[Problem, str]], path: str | Path) -> int:
    """Write the SFT parquet at ``path`` atomically (schema :data:`SFT_SCHEMA`); returns the row count.

    Raises ``ValueError`` when ``pairs`` is empty (verl would fail later with a less clear error)."""
    if not pairs:
        raise ValueError(f"{path}: no SFT pairs to write")
    table = pa.Table.from_pylist(sft_rows(pairs), schema=SFT_SCHEMA)
    with atomic_open(path, "wb") as fh:
        pq.write_table(table, fh)
    return table.num_rows
