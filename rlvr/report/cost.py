"""``rlvr cost``: what the run spent, per stage: the cost files that the stages write beside their metrics
(:func:`rlvr.layout.write_metrics`: seconds, throughput, memory and tokens spent, and the work resumed from the local
cache, ``resumed_from_step`` / ``resumed_tasks``, in ``metrics/cost/<path of the metrics file>``), and the timing
columns of the per-step curves (``metrics/cost/<path of the curves TSV>``, e.g. ``grpo/seed-1.tsv``: ``judge_step_s``
seconds per step, :func:`rlvr.layout.write_curves`), summarised per column. They are plain DVC outs, not ``metrics`` or
``plots``, so ``dvc metrics diff`` and ``dvc plots diff`` stay about behaviour; this command (or ``dvc metrics show
metrics/cost/<file>``, which reads any JSON file named as a target) shows them.

    rlvr cost                      # totals per stage: one screen (stage_totals)
    rlvr cost --all                # the totals, then every cost file, one block per file: flattened key, value
    rlvr cost final/eval_sft sft   # the blocks of the files whose path (under metrics/cost/) contains one of these

Totals (:func:`stage_totals`): the files are grouped by the first folder under ``metrics/cost/`` (``final/<phase>``
for the eval stage's phases), and per group the seconds are summed by kind: ``gen_s`` (``gen_wall_s``: generation,
``eval@k`` included), ``judge_s`` (``judge_wall_s``, ``judge_s``: judging outside training), ``train_s``
(``train_runtime_s``, ``mining_s``, ``rollout_s``) and ``wall_s`` (``stage_wall_s``, where a stage records its whole
wall time; it includes the others); ``resumed`` sums ``resumed_tasks`` and ``resumed_from_step`` (0: nothing was
resumed from the local cache). Means, percentiles, throughputs and the judging inside training steps
(``judge_step_s``, part of ``train_s``) are not summed: they are in the per-file blocks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from rlvr.io import read_json_object

__all__ = ["KINDS", "cost_files", "curve_cost", "format_cost", "format_totals", "main", "stage_totals"]

#: Totals columns → the leaf keys (last part of a flattened key) summed into them (module doc).
KINDS: dict[str, tuple[str, ...]] = {
    "gen_s": ("gen_wall_s",),
    "judge_s": ("judge_wall_s", "judge_s"),
    "train_s": ("train_runtime_s", "mining_s", "rollout_s"),
    "wall_s": ("stage_wall_s",),
    "resumed": ("resumed_tasks", "resumed_from_step"),
}


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


def _group(name: str) -> str:
    parts = name.split("/")
    return "/".join(parts[:2]) if parts[0] == "final" and len(parts) > 2 else parts[0].removesuffix(".tsv")


def stage_totals(files: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float | int]]:
    """``{group: {"files": n, "gen_s", "judge_s", "train_s", "wall_s" (seconds), "resumed"}}`` of :func:`cost_files`'
    output, groups in file order (module doc: grouping and :data:`KINDS`); non-numeric values are skipped."""
    out: dict[str, dict[str, float | int]] = {}
    leaf_kind = {leaf: kind for kind, leaves in KINDS.items() for leaf in leaves}
    for name, data in files.items():
        row = out.setdefault(_group(name), {"files": 0, **dict.fromkeys(KINDS, 0)})
        row["files"] += 1
        for key, value in _flat(data).items():
            kind = leaf_kind.get(key.rsplit(".", 1)[-1])
            if kind and isinstance(value, int | float) and not isinstance(value, bool):
                row[kind] += value
    return out


def format_totals(totals: Mapping[str, Mapping[str, float | int]]) -> str:
    """The totals as one table: a row per group, then ``total`` (column sums); seconds to one decimal."""
    cols = ["files", *KINDS]
    rows = [[g, *(r[c] for c in cols)] for g, r in totals.items()]
    rows.append(["total", *(sum(r[c] for r in totals.values()) for c in cols)])
    cells = [[str(r[0]), *(f"{v:.1f}" if c.endswith("_s") else str(int(v)) for c, v in zip(cols, r[1:], strict=True))]
             for r in rows]
    head = ["stage", *cols]
    width = [max(len(x[i]) for x in [head, *cells]) for i in range(len(head))]
    line = lambda r: "  ".join(r[0].ljust(width[0]) if i == 0 else r[i].rjust(width[i])  # noqa: E731
                               for i in range(len(r)))
    return "\n".join([line(head), *(line(r) for r in cells)])


@click.command("cost")
@click.argument("match", nargs=-1)
@click.option("--all", "show_all", is_flag=True, help="after the totals, every cost file's keys (hundreds of lines)")
@click.option("--metrics-dir", default="metrics", show_default=True, type=click.Path(path_type=Path))
def main(match: tuple[str, ...], show_all: bool, metrics_dir: Path) -> None:
    """Seconds spent per stage (totals: generation, judging, training, wall; what was resumed from the local cache),
    one screen; --all adds every cost file's keys (throughput, memory, tokens), MATCH shows only the files whose path
    under metrics/cost/ contains one of MATCH."""
    try:
        files = cost_files(metrics_dir, match)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    if not files:
        click.echo(format_cost(files))
        return
    if match and not show_all:
        click.echo(format_cost(files))
        return
    click.echo("seconds per stage (metrics/cost/; --all or MATCH for every key of every file)")
    click.echo(format_totals(stage_totals(files)))
    if show_all:
        click.echo("\n" + format_cost(files))
