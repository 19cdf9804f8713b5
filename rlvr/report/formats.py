"""The file formats the report reads: JSON files, DVC-plots TSVs (a curve and its cost mirror aligned by step) and
DVC's flattened metric keys. Pure functions of one file or value; which files exist and what they mean is
:mod:`rlvr.report.collect`'s business."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

__all__ = ["align_columns", "flatten", "read_json", "read_tsv"]


def read_json(path: Path) -> Any:
    """Parse a JSON file. Raises ``ValueError`` naming the file (and line/column) when it is not valid JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from exc


def read_tsv(path: Path) -> dict[str, list[float]]:
    """A DVC-plots TSV as ``{column: values}`` (floats; empty or non-numeric cells → NaN), rows sorted by ``step``.

    Raises ``ValueError`` naming the file and line when the header is missing, has no ``step`` column, or a row has
    more cells than the header."""
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))
    if not rows or not rows[0]:
        raise ValueError(f"{path}: empty TSV (no header line)")
    header = rows[0]
    if "step" not in header:
        raise ValueError(f"{path}: line 1: no 'step' column in header {header}")
    cols: dict[str, list[float]] = {h: [] for h in header}
    for lineno, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) > len(header):
            raise ValueError(f"{path}: line {lineno}: {len(row)} cells but {len(header)} columns")
        for i, h in enumerate(header):
            cell = row[i].strip() if i < len(row) else ""
            try:
                cols[h].append(float(cell) if cell else math.nan)
            except ValueError:
                cols[h].append(math.nan)
    order = sorted(range(len(cols["step"])), key=lambda i: cols["step"][i])
    return {h: [v[i] for i in order] for h, v in cols.items()}


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts → ``{"a.b.c": scalar}`` (lists are kept as values; DVC's metric key style)."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = obj
    return out


def align_columns(cols: dict[str, list[float]], steps: list[float]) -> dict[str, list[float]]:
    """The columns of ``cols`` (a :func:`read_tsv` table) but ``step``, re-ordered to ``steps`` by their ``step``
    value: one list per column, as long as ``steps``, NaN where ``cols`` has no row for that step."""
    index = {s: i for i, s in enumerate(cols["step"])}
    return {h: [v[index[s]] if s in index else math.nan for s in steps] for h, v in cols.items() if h != "step"}
