"""``rlvr cost``: what the run spent, per stage: the cost files that the stages write beside their metrics
(:func:`rlvr.layout.write_metrics`: seconds, throughput, memory and tokens spent, and the work resumed from the local
cache, ``resumed_from_step`` / ``resumed_tasks``, in ``metrics/cost/<path of the metrics file>``), and the timing
columns of the per-step curves (``metrics/cost/<path of the curves TSV>``, e.g. ``grpo/seed-1.tsv``: ``judge_step_s``
seconds per step, :func:`rlvr.layout.write_curves`), summarised per column. They are plain DVC outs, not ``metrics`` or
``plots``, so ``dvc metrics diff`` and ``dvc plots diff`` stay about behaviour; this command (or ``dvc metrics show
metrics/cost/<file>``, which reads any JSON file named as a target) shows them.

    rlvr cost                      # every cost file, one block per file: flattened key, value
    rlvr cost final/eval_sft sft   # only files whose path (under metrics/cost/) contains one of these strings
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from rlvr.io import read_json_object

__all__ = ["cost_files", "curve_cost", "format_cost", "main"]


def cost_files(metrics_dir: str | Path = "metrics", match: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """``{name: cost dict}`` for every ``metrics/cost/**/*.json`` (name: the path under ``metrics/cost/`` without
    ``.json``) and every ``metrics/cost/**/*.tsv`` (name: the path with ``.tsv``; :func:`curve_cost`), sorted by
    name, only those whose name contains one of ``match`` when given. Raises ``ValueError`` naming a file that is not
    a JSON object."""
    root = Path(metrics_dir) / "cost"
    out: dict[str, dict[str, Any]] = {}
    files = sorted([*root.rglob("*.json"), *root.rglob("*.tsv")]) if root.is_dir() else []
    for path in files:
        rel = path.relative_to(root).as_posix()
        rel = rel[: -len(".json")] if path.suffix == ".json" else rel
        if match and not any(m in rel for m in match):
            continue
        out[rel] = _read(path) if path.suffix == ".json" else curve_cost(path)
    return dict(sorted(out.items()))


def curve_cost(path: str | Path) -> dict[str, dict[str, float | int | None]]:
    """Per-column summary of a curves cost TSV (header ``step`` + timing columns, e.g. ``judge_step_s`` seconds per
    step): ``{column: {"steps": steps with a value, "total", "mean", "max"}}`` in the column's unit (``None`` when no
    step has a value); empty or non-numeric cells are skipped."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t") if lines else []
    values: dict[str, list[float]] = {h: [] for h in header if h != "step"}
    for line in lines[1:]:
        for h, cell in zip(header, line.split("\t"), strict=False):
            if h in values and cell.strip():
                try:
                    values[h].append(float(cell))
                except ValueError:
                    continue
    return {h: {"steps": len(v), "total": sum(v) if v else None, "mean": sum(v) / len(v) if v else None,
                "max": max(v) if v else None} for h, v in values.items()}


def _read(path: Path) -> dict[str, Any]:
    """One cost file alone (not merged with the scores beside it). Raises ``ValueError`` naming the file."""
    return read_json_object(path)


def _flat(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(v, Mapping) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)


def format_cost(files: Mapping[str, Mapping[str, Any]]) -> str:
    """One block per file: its name, then ``key  value`` lines (flattened keys, floats to 4 significant digits,
    ``None`` as ``-``)."""
    blocks = []
    for name, data in files.items():
        flat = _flat(data)
        width = max((len(k) for k in flat), default=0)
        blocks.append("\n".join([name, *(f"  {k:<{width}}  {_fmt(v)}" for k, v in flat.items())]))
    return "\n\n".join(blocks) if blocks else "no cost files (run the pipeline: dvc repro)"


@click.command("cost")
@click.argument("match", nargs=-1)
@click.option("--metrics-dir", default="metrics", show_default=True, type=click.Path(path_type=Path))
def main(match: tuple[str, ...], metrics_dir: Path) -> None:
    """Seconds, throughput, memory and tokens spent per stage, and what it resumed from the local cache
    (metrics/cost/), optionally only files whose path contains one of MATCH."""
    try:
        files = cost_files(metrics_dir, match)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_cost(files))
