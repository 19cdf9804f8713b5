"""Read whatever metrics files the pipeline has produced so far (the report never runs a model or the judge).

Files and what they become (everything optional; absent ones are reported as "not run"):

* ``metrics/baseline.json`` and ``metrics/eval_<phase>.json``, or their folder form ``metrics/baseline/<dataset>.json``
  (:func:`rlvr.layout.read_metrics` reads either) → evaluation **phases**: ``{dataset: metrics dict of
  rlvr.eval.metrics.compute_metrics, "protocol": {...}}``. A dataset entry is any top-level object holding
  ``accepted@1`` or ``verdicts``. ``metrics/repair.json`` is a phase too when it has that shape.
* Per-task arrays for CIs and flips: ``<data_dir>/<stem>/per_task/<dataset>.json`` (``stem`` = metrics file stem,
  e.g. ``data/baseline/per_task/mbpp.json``, ``data/eval_sft/per_task/mbpp.json``) or
  ``<data_dir>/eval/<phase>/per_task/<dataset>.json``; format ``{task_id: {"n", "c", "first", "pass@k"...}}``.
* ``metrics/<stage>.json`` (any other file) → **training stage** summaries; ``metrics/<stage>/**/*.tsv`` → training
  **curves** (DVC plots TSV, first column ``step``).
* ``metrics/governance.json``, ``metrics/judge_check.json``, ``<data_dir>/governance/audit.md`` → the Data section.
* ``metrics/final/eval.json`` with ``headline/`` and ``seeds/`` beside it (the summary: ``phases``, ``not_run``,
  ``seeds``, ``headline``; :func:`rlvr.report.summary.read_summary`) and
  ``metrics/final/eval_<phase>/<dataset>.json`` (:func:`rlvr.layout.read_metrics_folder`; the earlier layout, one file
  ``metrics/final/eval_<phase>.json``, reads the same) → the **final evaluation** (stage ``eval``,
  :mod:`rlvr.eval.final`: Dev and Test sets under one protocol, CIs inside each dataset entry under ``"ci"``);
  per-task arrays from
  ``<data_dir>/eval/final/<phase>/per_task/<dataset>.json`` when present (paired flips).
* ``metrics/repair.json`` (or ``metrics/repair/eval/{after,before}/``, :func:`repair_report`) is also kept whole
  (``Collected.repair``: after-training metrics per dataset, optional ``before``/``training``/``protocol`` blocks) for
  the repair section.

Layout (:func:`rlvr.layout.layout_paths`): each ``metrics/<rel>.json`` is the scores part of a stage's report; its
cost and provenance parts are ``metrics/cost/<rel>.json`` and ``metrics/provenance/<rel>.json``. Every file is read
whole (:func:`rlvr.layout.read_metrics` merges the three parts), so the sections below see one dict per report, and a
report with no scores (governance) is found by its other parts.

Parsing one file (JSON, the TSVs, flattened keys) is :mod:`rlvr.report.formats`; its readers stay importable
from here.

Seeds: a name or path part matching ``seed[-_]?<n>`` (``eval_grpo_seed1.json``, ``metrics/grpo/seed-2/train.tsv``,
``grpo@1``-style ``_<n>`` suffixes are *not* guessed) gives the seed; the phase/stage is the name without it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.layout import layout_paths, metric_names, read_metrics, read_metrics_folder
from rlvr.report.formats import align_columns, flatten, read_json, read_tsv
from rlvr.report.summary import read_summary

__all__ = [
    "FINAL_DIR",
    "SPECIAL_FILES",
    "Collected",
    "Curve",
    "Phase",
    "TrainingRun",
    "collect",
    "flatten",
    "read_json",
    "read_tsv",
    "repair_report",
    "split_seed",
]

#: metrics files with their own section (not training stages).
SPECIAL_FILES = ("governance", "judge_check", "repair", "baseline", "eval")
#: sub-folder of the metrics dir written by the final ``eval`` stage.
FINAL_DIR = "final"
_SEED_RE = re.compile(r"(?:^|[-_./@])seed[-_]?(\d+)", re.IGNORECASE)


def split_seed(name: str) -> tuple[str, int | None]:
    """``"grpo_seed2"`` → ``("grpo", 2)``; ``"sft"`` → ``("sft", None)``; ``"seed-1"`` → ``("", 1)``."""
    m = _SEED_RE.search(name)
    if not m:
        return name, None
    base = (name[: m.start()] + name[m.end():]).strip("-_./@")
    return base, int(m.group(1))


@dataclass
class Phase:
    """One evaluated model: ``name`` (``baseline``, ``sft``, ``grpo_seed1``), ``base`` (``grpo``), ``seed``;
    ``datasets``: dataset → metrics dict; ``per_task``: dataset → per-task arrays (when found); ``protocol``."""

    name: str
    base: str
    seed: int | None
    path: Path
    datasets: dict[str, dict[str, Any]]
    protocol: dict[str, Any] = field(default_factory=dict)
    per_task: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


@dataclass
class Curve:
    """One training-curve TSV: ``stage`` (``grpo``), ``seed``, ``name`` (file path under the stage folder without
    the seed part and ``.tsv``, e.g. ``train``), ``columns`` (:func:`rlvr.report.formats.read_tsv`); ``cost``: the
    timing columns of its cost mirror (``metrics/cost/<same path>``, :func:`rlvr.layout.write_curves`; e.g.
    ``judge_step_s`` seconds), aligned with ``columns["step"]`` (NaN where a step is missing), empty without a
    mirror."""

    stage: str
    seed: int | None
    name: str
    path: Path
    columns: dict[str, list[float]]
    cost: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class TrainingRun:
    """A training stage: ``summaries`` seed → metrics dict (``None`` key = unseeded); ``curves`` (all seeds)."""

    stage: str
    summaries: dict[int | None, dict[str, Any]] = field(default_factory=dict)
    summary_paths: list[Path] = field(default_factory=list)
    curves: list[Curve] = field(default_factory=list)


@dataclass
class Collected:
    """Everything the report shows. ``sources``: files read → sha256 (provenance); ``problems``: unreadable
    files → error message (shown in the report instead of failing it)."""

    phases: list[Phase] = field(default_factory=list)
    training: dict[str, TrainingRun] = field(default_factory=dict)
    governance: dict[str, Any] | None = None
    judge_check: dict[str, Any] | None = None
    repair: dict[str, Any] | None = None
    final_phases: list[Phase] = field(default_factory=list)
    final_summary: dict[str, Any] | None = None
    audit_md: str | None = None
    sources: dict[str, str] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


def _is_dataset_entry(v: Any) -> bool:
    return isinstance(v, dict) and ("accepted@1" in v or "verdicts" in v)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _phase_order_key(order: list[str]):
    def key(p: Phase) -> tuple[int, str, int]:
        idx = order.index(p.base) if p.base in order else len(order)
        return idx, p.base, -1 if p.seed is None else p.seed

    return key


def _load_phase(path: Path, name: str, data: Any, data_dir: Path, per_task_dirs: list[Path] | None = None
                ) -> Phase | None:
    if not isinstance(data, dict):
        return None
    datasets = {k: v for k, v in data.items() if _is_dataset_entry(v)}
    if not datasets:
        return None
    base, seed = split_seed(name)
    phase = Phase(name=name, base=base or name, seed=seed, path=path, datasets=datasets,
                  protocol=data.get("protocol") if isinstance(data.get("protocol"), dict) else {})
    stem = path.stem
    dirs = per_task_dirs or [data_dir / stem / "per_task", data_dir / "eval" / name / "per_task"]
    for ds in datasets:
        for cand in (d / f"{ds}.json" for d in dirs):
            if cand.is_file():
                arrays = read_json(cand)
                if isinstance(arrays, dict):
                    phase.per_task[ds] = arrays
                break
    return phase


def collect(metrics_dir: str | Path = "metrics", data_dir: str | Path = "data",
            phase_order: list[str] | None = None) -> Collected:
    """Read every known metrics file under ``metrics_dir`` (module doc). Unreadable files are recorded in
    ``Collected.problems`` (file → message) rather than raised, so one bad file never hides the rest."""
    metrics_dir, data_dir = Path(metrics_dir), Path(data_dir)
    order = list(phase_order or ["baseline", "sft", "dpo", "grpo", "repair"])
    out = Collected()
    if not metrics_dir.is_dir():
        return out

    def load(path: Path) -> Any:
        try:
            data = read_metrics(path)
        except (OSError, ValueError) as exc:
            out.problems[str(path)] = str(exc)
            return None
        for part in layout_paths(path):
            if part.is_file():
                out.sources[str(part)] = _sha(part)
        for folder in {p.parent for p in layout_paths(path.with_suffix("") / "x.json")}:  # its folder form
            for f in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
                out.sources[str(f)] = _sha(f)
        return data

    for path in (metrics_dir / name for name in _report_names(metrics_dir)):
        stem = path.stem
        data = load(path)
        if stem == "repair":
            data = repair_report(data)
        if data is None:
            continue
        if stem == "eval":  # a final-eval summary written beside the Dev evals (--metrics-dir metrics)
            out.final_summary = out.final_summary or _load_summary(out, path)
        elif stem == "governance":
            out.governance = data if isinstance(data, dict) else None
        elif stem == "judge_check":
            out.judge_check = data if isinstance(data, dict) else None
        elif stem == "baseline" or stem.startswith("eval_") or stem == "repair":
            if stem == "repair":
                out.repair = data if isinstance(data, dict) else {"value": data}
            name = stem[5:] if stem.startswith("eval_") else stem
            try:
                phase = _load_phase(path, name, data, data_dir)
            except (OSError, ValueError) as exc:
                out.problems[str(path)] = str(exc)
                continue
            if phase is not None:
                out.phases.append(phase)
            elif stem != "repair":
                out.problems[str(path)] = "no dataset entries (objects with 'accepted@1' or 'verdicts')"
        else:
            base, seed = split_seed(stem)
            run = out.training.setdefault(base, TrainingRun(stage=base))
            run.summaries[seed] = data if isinstance(data, dict) else {"value": data}
            run.summary_paths.append(path)
    out.phases.sort(key=_phase_order_key(order))

    _collect_final(out, metrics_dir / FINAL_DIR, data_dir, order, load)

    mirrors = {p.parent for p in layout_paths(metrics_dir / "x.json")[1:]}
    for sub in sorted(p for p in metrics_dir.iterdir() if p.is_dir() and p not in mirrors):
        stage_base, stage_seed = split_seed(sub.name)
        for tsv in sorted(sub.rglob("*.tsv")):
            rel = tsv.relative_to(sub).with_suffix("").as_posix()
            rel_base, rel_seed = split_seed(rel)
            seed = stage_seed if stage_seed is not None else rel_seed
            cost_tsv = layout_paths(tsv)[1]
            try:
                cols = read_tsv(tsv)
                cost = align_columns(read_tsv(cost_tsv), cols["step"]) if cost_tsv.is_file() else {}
            except (OSError, ValueError) as exc:
                out.problems[str(tsv)] = str(exc)
                continue
            for src in (tsv, cost_tsv) if cost else (tsv,):
                out.sources[str(src)] = _sha(src)
            run = out.training.setdefault(stage_base, TrainingRun(stage=stage_base))
            run.curves.append(Curve(stage=stage_base, seed=seed, name=rel_base or "curves", path=tsv, columns=cols,
                                    cost=cost))

    audit = data_dir / "governance" / "audit.md"
    if audit.is_file():
        out.audit_md = audit.read_text(encoding="utf-8")
        out.sources[str(audit)] = _sha(audit)
    return out


def _report_names(metrics_dir: Path) -> list[str]:
    """``<name>.json`` of every report directly in ``metrics_dir``: its files (:func:`rlvr.layout.metric_names`) and the
    reports written in folder form (:func:`rlvr.layout.write_metrics_folder`), a sub-folder of ``metrics_dir`` or of its
    cost/provenance mirrors named like a special file (``baseline``, ``judge_check``, ``repair``…) or ``eval_<phase>``.
    :func:`rlvr.layout.read_metrics` of ``metrics_dir / name`` reads either form."""
    names = set(metric_names(metrics_dir))
    for base in {p.parent for p in layout_paths(metrics_dir / "x.json")}:
        if base.is_dir():
            names.update(f"{d.name}.json" for d in base.iterdir()
                         if d.is_dir() and (d.name in SPECIAL_FILES or d.name.startswith("eval_")))
    return sorted(names)


def repair_report(data: Any) -> Any:
    """The repair stage's report as one dict, ``{dataset: after-training metrics, "before": {dataset: ...},
    "training": {...}, "protocol": {...}}``, from :func:`rlvr.layout.read_metrics` of ``metrics/repair.json`` in either
    layout: the folder form ``metrics/repair/eval/{after,before}/`` (read as ``{"eval": {"after": ..., "before":
    ...}}``; a leftover file of the earlier layout beside it is ignored) or the earlier one file, returned as it is
    (so is anything else, ``None`` included)."""
    ev = data.get("eval") if isinstance(data, dict) else None
    if not isinstance(ev, dict) or not isinstance(ev.get("after"), dict):
        return data
    return {**ev["after"], **({"before": ev["before"]} if isinstance(ev.get("before"), dict) else {})}


def _phase_folders(final_dir: Path) -> list[Path]:
    """``<final_dir>/eval_<phase>`` for every such folder in ``final_dir`` or its cost/provenance mirrors."""
    names = {d.name for base in {p.parent for p in layout_paths(final_dir / "x.json")} if base.is_dir()
             for d in base.iterdir() if d.is_dir() and d.name.startswith("eval_")}
    return [final_dir / n for n in sorted(names)]


def _load_folder(out: Collected, folder: Path) -> dict[str, Any] | None:
    """:func:`rlvr.layout.read_metrics_folder` of a final-eval phase folder, its files' sha256 in ``out.sources``; an
    unreadable file is recorded in ``out.problems`` (``None``)."""
    try:
        data = read_metrics_folder(folder)
    except (OSError, ValueError) as exc:
        out.problems[str(folder)] = str(exc)
        return None
    for base in layout_paths(folder / "x.json"):
        for f in sorted(base.parent.glob("*.json")):
            out.sources[str(f)] = _sha(f)
    return data


def _load_summary(out: Collected, path: Path) -> dict[str, Any] | None:
    """:func:`rlvr.report.summary.read_summary` of ``path`` (the summary and the ``headline/``, ``seeds/`` files
    beside it), those files' sha256 in ``out.sources``; an unreadable file is recorded in ``out.problems``."""
    try:
        data = read_summary(path)
    except (OSError, ValueError) as exc:
        out.problems[str(path)] = str(exc)
        return None
    for sub in ("headline", "seeds"):
        for base in {p.parent for p in layout_paths(path.parent / sub / "x.json")}:
            for f in sorted(base.rglob("*.json")) if base.is_dir() else []:
                out.sources[str(f)] = _sha(f)
    return data


def _collect_final(out: Collected, final_dir: Path, data_dir: Path, order: list[str],
                   load: Any) -> None:
    """The final eval stage's files (module doc) into ``out.final_summary`` / ``out.final_phases``: a phase is a
    folder ``eval_<phase>/`` (one file per dataset) or, as written before, one file ``eval_<phase>.json``."""
    folders = {f.name: f for f in _phase_folders(final_dir)}
    entries: list[tuple[Path, Any]] = [(f, _load_folder(out, f)) for f in folders.values()]
    for path in (final_dir / name for name in metric_names(final_dir)):
        if path.stem in folders:
            continue  # a leftover of the earlier layout beside its folder: the folder is the newer one
        entries.append((path, load(path)))
    for path, data in entries:
        if data is None:
            continue
        if path.stem == "eval":
            out.final_summary = _load_summary(out, path)
            continue
        if not path.stem.startswith("eval_"):
            continue
        name = path.stem[5:]
        try:
            phase = _load_phase(path, name, data, data_dir, [data_dir / "eval" / FINAL_DIR / name / "per_task"])
        except (OSError, ValueError) as exc:
            out.problems[str(path)] = str(exc)
            continue
        if phase is None:
            out.problems[str(path)] = "no dataset entries (objects with 'accepted@1' or 'verdicts')"
        else:
            out.final_phases.append(phase)
    out.final_phases.sort(key=_phase_order_key(order))
