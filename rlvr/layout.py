"""The metrics layout: what a reviewer diffs (issue 29; DESIGN.md "Metrics are what a reviewer diffs").

A stage's report is split into scores (the file the stage declares as DVC ``metrics``), cost and provenance files
(:func:`write_metrics` / :func:`read_metrics`, one file per dataset with :func:`write_metrics_folder`); per-step curves
(:func:`write_curves` / :func:`read_curves`) likewise keep their timing columns out of the plotted TSV. Every file is
written atomically (:mod:`rlvr.io`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.io import atomic_write_json, atomic_write_text, read_json_object

__all__ = [
    "COST_KEY",
    "layout_paths",
    "merge_metrics",
    "metric_names",
    "read_curves",
    "read_metrics",
    "read_metrics_folder",
    "split_metrics",
    "write_curves",
    "write_metrics",
    "write_metrics_folder",
]


# ------------------------------------------------------------------------------------------------- metrics layout
# What a reviewer diffs (issue 29; DESIGN.md "Metrics are what a reviewer diffs"): the file a stage declares as DVC
# `metrics` holds scores only, so `dvc metrics diff` between two clean runs is empty; seconds, throughput and tokens
# spent go to a cost file, and so does what the run took from the local cache or a journal instead of computing it
# (`resumed_from_step`, `resumed_tasks`: it follows the machine's cache, not the inputs, like a time follows the
# load); everything else (counts, verdict breakdowns, hashes, versions, protocol, training diagnostics) goes to a
# provenance file, which is then the same for the same inputs. The three are a lossless split:
# merge_metrics(*split_metrics(r)) == r.

#: leaf keys that are scores (accepted@1, pass@k, pass_ratio: :mod:`rlvr.eval.metrics`; recovery: :mod:`rlvr.repair`;
#: accepted_fraction: the judge check's canonical solutions).
SCORE_KEY = re.compile(r"^(accepted@1|pass@\d+|pass_ratio|pass_ratio_mean|recovery_rate|final_accepted|"
                       r"accepted_fraction)$")
#: children of a score key that are scores too: a CI's bounds, a mean +- std over seeds.
SCORE_CHILD = frozenset({"lo", "hi", "mean", "std"})
#: blocks that are provenance whatever their leaves are called (``phases``: the eval summary's copy of the per-phase
#: files; ``eval@k``: the sampled run's full metrics, whose pass@k are already at the dataset level; breakdowns and
#: variants of a score: ``by_template`` (the smoke profile's templates), ``by_source`` (verl's validation per data
#: source, :func:`rlvr.train.verl.validation.validation_scores`), ``evalplus`` (base/plus tests), ``eval@budget``
#: (accepted within the token budget)).
PROVENANCE_BLOCK = frozenset({"protocol", "dataset", "verdicts", "eval@k", "phases", "training", "rollouts",
                              "by_template", "by_source", "evalplus", "eval@budget"})
#: leaf keys that are cost: seconds (``*_s``, ``*_s_mean``/``_p95``/``_per_solved``), throughput, model FLOPs
#: utilisation (``mfu*``), memory, tokens spent, and the work a run resumed instead of doing (``resumed_*``: the
#: training step it resumed from, ``resumed_from_step``; the eval tasks taken from a journal, ``resumed_tasks``),
#: which follows the local cache, not the stage's inputs.
COST_KEY = re.compile(r"(_s|_s_mean|_s_p\d+|_s_per_solved|_per_s|_mb|_gb)$|^throughput|^mfu|^(peak_)?memory|^rss|"
                      r"^(avg_generated_tokens|tokens_per_solved|mean_tokens)$|^resumed_")


def _kind(path: tuple[str, ...], value: Any) -> str:
    """``"scores"``, ``"cost"`` or ``"provenance"`` for the leaf at key ``path`` (module layout rules)."""
    if "protocol" in path[:-1]:
        return "provenance"  # settings such as output_limit_mb are not measured cost
    if COST_KEY.search(path[-1]):
        return "cost"
    if any(k in PROVENANCE_BLOCK for k in path[:-1]):
        return "provenance"
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if numeric and (SCORE_KEY.match(path[-1]) or (
            len(path) > 1 and path[-1] in SCORE_CHILD and SCORE_KEY.match(path[-2]))):
        return "scores"
    return "provenance"


def split_metrics(report: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(scores, cost, provenance)``: the leaves of a stage's nested report dict by kind. Scores are numeric leaves
    keyed ``accepted@1``, ``pass@k``, ``pass_ratio(_mean)``, ``recovery_rate``, ``final_accepted``,
    ``accepted_fraction``, and a score's CI bounds / seed mean and std (``ci.accepted@1.lo``, ``…pass@4.std``); cost are
    seconds, throughput, memory and tokens spent, and the work resumed from the local cache (``resumed_*``:
    :data:`COST_KEY`); the rest (and anything under ``protocol``, ``dataset``, ``verdicts``,
    ``eval@k``, ``phases``, ``training``, ``rollouts``, ``by_template``, ``by_source``, ``evalplus``,
    ``eval@budget``) is provenance.
    Empty dicts stay in provenance so the split is lossless (:func:`merge_metrics`). Raises ``TypeError`` when
    ``report`` is not a dict."""
    if not isinstance(report, dict):
        raise TypeError(f"a metrics report must be a dict, got {type(report).__name__}")
    parts: dict[str, dict[str, Any]] = {"scores": {}, "cost": {}, "provenance": {}}

    def put(kind: str, path: tuple[str, ...], value: Any) -> None:
        node = parts[kind]
        for k in path[:-1]:
            node = node.setdefault(k, {})
        node[path[-1]] = value

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        for k, v in node.items():
            p = (*path, str(k))
            if isinstance(v, dict) and v:
                walk(v, p)
            else:
                put(_kind(p, v), p, v)

    walk(report, ())
    return parts["scores"], parts["cost"], parts["provenance"]


def merge_metrics(*parts: Any) -> dict[str, Any]:
    """Deep merge of dicts (the inverse of :func:`split_metrics`; a later part's leaf wins on a clash)."""
    out: dict[str, Any] = {}
    for part in parts:
        for k, v in (part or {}).items():
            out[k] = merge_metrics(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def layout_paths(path: str | Path) -> tuple[Path, Path, Path]:
    """``(scores, cost, provenance)`` files of the metrics file ``path``: under the nearest ancestor folder named
    ``metrics``, the cost and provenance files mirror the path in its ``cost/`` and ``provenance/`` sub-folders
    (``metrics/final/eval_sft/syn.json`` → ``metrics/cost/final/eval_sft/syn.json``, ``metrics/provenance/final/…``);
    without such an ancestor they go to ``cost/`` and ``provenance/`` beside the file."""
    p = Path(path)
    parts = p.parts
    idx = max((i for i, part in enumerate(parts[:-1]) if part == "metrics"), default=None)
    if idx is None:
        return p, p.parent / "cost" / p.name, p.parent / "provenance" / p.name
    root, rel = Path(*parts[: idx + 1]), Path(*parts[idx + 1:])
    return p, root / "cost" / rel, root / "provenance" / rel


def write_metrics(path: str | Path, report: dict[str, Any], empty: bool = True) -> tuple[Path, Path, Path]:
    """Split ``report`` (:func:`split_metrics`) and write the three parts atomically to :func:`layout_paths`, an
    empty part as ``{}`` (so every file a stage declares in dvc.yaml exists whatever the run measured) or, with
    ``empty=False``, not at all (a stale one is removed: a report without scores leaves no empty row in ``dvc metrics
    show``). Returns the three paths. Raises ``TypeError`` when ``report`` is not a dict."""
    paths = layout_paths(path)
    for target, part in zip(paths, split_metrics(report), strict=True):
        if part or empty:
            atomic_write_json(target, part)
        else:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
    return paths


def write_metrics_folder(folder: str | Path, report: dict[str, Any], empty: bool = True) -> list[Path]:
    """Write ``report`` in its folder form: each top-level entry that is a dict becomes its own metrics file
    ``<folder>/<key>.json``, split into scores, cost and provenance parts (:func:`layout_paths`) exactly as it would be
    inside the whole report (:func:`split_metrics` of ``{key: entry}``, so ``training``'s seconds stay cost). An entry
    (a dataset) gets all three parts, an empty one as ``{}`` (so the folders a stage declares in dvc.yaml exist), an
    entry named like a provenance block (:data:`PROVENANCE_BLOCK`: ``protocol``, ``training``) only the parts it
    fills, so it adds no empty row to ``dvc metrics show``; with ``empty=False`` every entry gets only the parts it
    fills (an entry with nothing at all: its provenance part ``{}``), for folders no declaration needs. Values that are
    not dicts (``judge_version``) go to the report's own file beside the folder (``<folder>.json``, e.g.
    ``metrics/provenance/judge_check.json``); a part of that file with nothing to hold is removed, so a file of the
    one-file layout does not merge back into the report. ``dvc metrics show <folder>`` then prints one row per entry
    (a dataset) with a few short columns (``accepted@1``, ``pass@k``, ``ci.accepted@1.lo``…) instead of one row with
    every entry's columns side by side. :func:`read_metrics` of ``<folder>.json`` (or :func:`read_metrics_folder` of
    the folder) gives the report back. Returns the paths written. Raises ``TypeError`` when ``report`` is not a dict,
    ``ValueError`` when a key is not a plain file name."""
    if not isinstance(report, dict):
        raise TypeError(f"a metrics report must be a dict, got {type(report).__name__}")
    folder = Path(folder)
    files: list[tuple[Path, tuple[dict[str, Any], ...], tuple[bool, ...]]] = []  # (path, parts, write part if empty)
    for key, entry in report.items():
        if not isinstance(entry, dict):
            continue
        if not key or "/" in key or "\\" in key or key.startswith("."):
            raise ValueError(f"{folder}: entry {key!r} is not a plain file name")
        parts = tuple(part.get(key, {}) for part in split_metrics({key: entry}))
        keep = empty and key not in PROVENANCE_BLOCK
        files.append((folder / f"{key}.json", parts, (keep, keep, keep or not any(parts))))  # {} reads back as {}
    loose = {k: v for k, v in report.items() if not isinstance(v, dict)}
    files.append((folder.with_name(f"{folder.name}.json"), split_metrics(loose), (False, False, False)))
    written: list[Path] = []
    for path, parts, keep_empty in files:
        for target, part, keep in zip(layout_paths(path), parts, keep_empty, strict=True):
            if part or keep:
                atomic_write_json(target, part)
                written.append(target)
            else:  # left by an earlier run or the one-file layout: it would merge back into the report
                with contextlib.suppress(FileNotFoundError):
                    target.unlink()
    return written


def read_metrics_folder(folder: str | Path) -> dict[str, Any] | None:
    """The report :func:`write_metrics_folder` wrote to ``folder``: ``{key: read_metrics(<folder>/<key>.json)}`` over
    the ``*.json`` names and the sub-folders (a nested report in folder form) found in the folder or its cost/provenance
    mirrors (:func:`layout_paths`), keys sorted; ``None`` when there are none. The report's own file beside the folder
    is not included (:func:`read_metrics` of ``<folder>.json`` merges it). Raises ``ValueError`` naming a file that is
    not a JSON object."""
    folder = Path(folder)
    names = {n[: -len(".json")] for n in metric_names(folder)}
    for d in {p.parent for p in layout_paths(folder / "x.json")}:
        if d.is_dir():
            names.update(c.name for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))
    out = {name: read_metrics(folder / f"{name}.json") for name in sorted(names)}
    out = {k: v for k, v in out.items() if v is not None}
    return out or None




def read_metrics(path: str | Path) -> dict[str, Any] | None:
    """The whole report behind the metrics file ``path``: its scores, cost and provenance files merged
    (:func:`layout_paths`), and its folder form when there is one (``<path without .json>/``,
    :func:`write_metrics_folder`: one file per entry; :func:`read_metrics_folder`); keys then sorted at every level,
    the order a stage writes, since a merge would put the scores first. ``None`` when none of them exists. A file
    written before the split (everything in the scores file) or before the folder form reads the same. Raises
    ``ValueError`` naming the file (line, column) when one is not valid JSON or not an object."""
    p = Path(path)
    parts: list[dict[str, Any]] = [read_json_object(f) for f in layout_paths(p) if f.is_file()]
    if p.suffix == ".json" and (folder := read_metrics_folder(p.with_suffix(""))) is not None:
        parts.append(folder)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else _sorted(merge_metrics(*parts))


def _sorted(obj: Any) -> Any:
    """Dicts with keys in sorted order at every level (the order :func:`atomic_write_json` writes), so a merged report
    iterates like the whole file did."""
    return {k: _sorted(obj[k]) for k in sorted(obj)} if isinstance(obj, dict) else obj


def metric_names(folder: str | Path) -> list[str]:
    """Sorted ``*.json`` names directly in ``folder`` or in its cost/provenance mirrors (:func:`layout_paths`), so a
    report whose scores part is empty (governance) is still found: ``read_metrics(folder / name)`` reads each."""
    folder = Path(folder)
    names: set[str] = set()
    for d in {p.parent for p in layout_paths(folder / "x.json")}:
        if d.is_dir():
            names.update(p.name for p in d.glob("*.json"))
    return sorted(names)


# ------------------------------------------------------------------------------------------------- curves (TSV)
# The per-step curves TSVs are DVC plots: a clean re-run must leave them byte-identical, so a column that measures time
# (COST_KEY: seconds, throughput, memory) goes to the cost mirror of the TSV (layout_paths: metrics/grpo/seed-1.tsv ->
# metrics/cost/grpo/seed-1.tsv), with ``step`` as its first column; read_curves joins the two back by step.


def write_curves(path: str | Path, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]
                 ) -> tuple[Path, Path | None]:
    """Write per-step curve ``rows`` (``{"step": step, column: cell}``, cells written with ``str``; ``""`` =
    missing) atomically as two TSVs: the plot at ``path`` (header ``step`` + the columns that are not cost) and the
    cost mirror (:func:`layout_paths`; header ``step`` + the cost columns: names matching :data:`COST_KEY`, e.g.
    ``judge_step_s`` seconds), so nothing load-dependent is in the plot. Without a cost column no mirror is written (a
    stale one is removed). Returns ``(plot path, cost path or None)``. Raises ``ValueError`` when ``columns`` includes
    ``step``."""
    if "step" in columns:
        raise ValueError("write_curves: 'step' is always the first column; do not list it in columns")
    rows = list(rows)
    cost_cols = [c for c in columns if COST_KEY.search(c)]
    plot_cols = [c for c in columns if c not in cost_cols]
    plot, cost, _ = layout_paths(path)

    def tsv(header: list[str]) -> str:
        lines = ["\t".join(header)] + ["\t".join(str(r.get(h, "")) for h in header) for r in rows]
        return "\n".join(lines) + "\n"

    atomic_write_text(plot, tsv(["step", *plot_cols]))
    if not cost_cols:
        with contextlib.suppress(FileNotFoundError):
            cost.unlink()
        return plot, None
    atomic_write_text(cost, tsv(["step", *cost_cols]))
    return plot, cost


def _read_tsv_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        return [], []
    header = lines[0].split("\t")
    return header, [dict(zip(header, line.split("\t"), strict=False)) for line in lines[1:] if line]


def read_curves(path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    """``(header, rows)`` of the curves TSV ``path`` joined by ``step`` with its cost mirror (:func:`write_curves`),
    cells as text; the header is the plot's columns, then the mirror's (less ``step``). A TSV written before the split
    (cost columns in the plot) or without a mirror reads as it is. Raises ``FileNotFoundError`` when ``path`` does not
    exist."""
    plot, cost, _ = layout_paths(path)
    header, rows = _read_tsv_rows(plot)
    if not cost.is_file():
        return header, rows
    cost_header, cost_rows = _read_tsv_rows(cost)
    by_step = {r.get("step"): r for r in cost_rows}
    extra = [h for h in cost_header if h != "step" and h not in header]
    for r in rows:
        r.update({h: by_step.get(r.get("step"), {}).get(h, "") for h in extra})
    return header + extra, rows
