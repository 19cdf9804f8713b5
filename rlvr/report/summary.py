"""The readable end of a run: ``rlvr summary`` answers "did it help?". Per dataset (with its ``n`` problems), one row
per phase: accepted@1 and pass@k with 95 % intervals, the change Δ from the previous phase with a paired test, and a
seed-mean row for seeded phases (GRPO); then where the report is.

Reads the ``eval`` stage's summary (:func:`read_summary`: ``metrics/final/eval.json``, ``headline/`` and ``seeds/``
beside it, each file's scores, cost and provenance parts merged): ``phases`` → dataset → ``role``, ``accepted@1``,
``pass@k``, ``ci`` → metric → ``lo``/``hi``/``n``; ``seeds`` → seeded base → dataset → metric → ``mean``/``std``/``n``;
``not_run``) and, when present, the per-task arrays ``data/eval/final/<phase>/per_task/<dataset>.json`` (``{task:
{"first": verdict of the greedy sample, "pass@k": …}}``) for the paired statistics. Phases are shown in pipeline
order (:data:`PHASE_ORDER`, the ``report.phase_order`` default; unknown names last, by name). The *previous phase* of
a phase is the closest phase before it in that order whose base name differs (``grpo_seed1`` and ``grpo_seed2`` both
compare with ``dpo``); when that previous phase is seeded, the mean over its seeds is the reference (``repair``
compares with the GRPO seed mean).

Statistics (:mod:`rlvr.eval.stats`):

* accepted@1 is a proportion of the ``n`` problems (one greedy sample each): its interval is the Wilson score
  interval (Wilson 1927), which stays honest at 0 and 1 where the percentile bootstrap collapses (0/8 → [0, 0.32],
  not [0, 0]).
* pass@k is a mean of per-problem unbiased estimates (Chen et al. 2021): its interval is the eval stage's percentile
  bootstrap over problems, except where the value is exactly 0 or 1 (every problem agrees, the bootstrap has zero
  width): there the Wilson interval over the ``n`` problems is shown, marked ``W``.
* Δaccepted@1 comes with the two-sided exact McNemar p-value (McNemar 1947) on the problems solved by only one of the
  two phases (the HTML report's paired flips, :func:`rlvr.eval.stats.paired_flips`); Δpass@k with a paired
  percentile-bootstrap interval of the per-problem differences (:func:`rlvr.eval.stats.bootstrap_ci`). Both need the
  per-task arrays of the two phases and a single previous phase (not a seed mean); otherwise they show ``-``.

``dvc metrics show`` shows every score, ``rlvr cost`` the time spent.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from rlvr.layout import merge_metrics, read_metrics, read_metrics_folder

__all__ = ["PER_TASK_DIR", "PHASE_ORDER", "base_phase", "format_summary", "load_summary", "main", "per_task_loader",
           "read_summary", "summary_rows"]


#: Pipeline order of the phases (seeded phases ``<base>_seed<n>`` sort under their base, by seed).
PHASE_ORDER = ("baseline", "sft", "dpo", "grpo", "repair")


def _order_key(name: str) -> tuple[int, str, int]:
    base = base_phase(name)
    rank = PHASE_ORDER.index(base) if base in PHASE_ORDER else len(PHASE_ORDER)
    seed = name.rpartition("_seed")[2]
    return rank, base, int(seed) if base != name else 0


def base_phase(name: str) -> str:
    """``grpo_seed1`` → ``grpo``; any other name unchanged.

    >>> base_phase("grpo_seed12"), base_phase("sft")
    ('grpo', 'sft')
    """
    base, sep, seed = name.rpartition("_seed")
    return base if sep and seed.isdigit() else name


def read_summary(path: str | Path) -> dict[str, Any] | None:
    """The ``eval`` stage's summary as one dict (``phases``, ``not_run``, ``seeds``, ``headline``), from ``path``
    (``metrics/final/eval.json``: its scores, cost and provenance parts, :func:`rlvr.layout.read_metrics`) merged
    with the files written beside it (:func:`rlvr.eval.final.write_summary`): ``headline/<dataset>.json`` and
    ``seeds/<base>/{mean,std}/<dataset>.json`` (and their cost/provenance mirrors). A summary written as one file (the
    earlier layout) reads the same. ``None`` when none of them exists. Raises ``ValueError`` naming a file that is
    not a JSON object."""
    p = Path(path)
    summary = read_metrics(p)
    head = read_metrics_folder(p.parent / "headline")  # {dataset: {"headline": {dataset: {...}}}}
    seeds = read_metrics_folder(p.parent / "seeds")  # {base: {"mean": {dataset: ...}, "std": {dataset: ...}}}
    if summary is None and head is None and seeds is None:
        return None
    data = merge_metrics(summary or {}, *(head or {}).values(),
                         {"seeds": {base: merge_metrics(*t.values()) for base, t in seeds.items()}} if seeds else {})
    return json.loads(json.dumps(data, sort_keys=True))  # keys sorted at every level, as one file reads


def load_summary(path: str | Path) -> dict[str, Any]:
    """The ``eval`` stage's summary (:func:`read_summary`). Raises ``FileNotFoundError`` naming the file and the stage
    that writes it, ``ValueError`` naming the file when it has no ``phases`` object."""
    p = Path(path)
    data = read_summary(p)
    if data is None:
        raise FileNotFoundError(f"{p}: not found; the eval stage writes it (dvc repro eval)")
    if not isinstance(data, dict) or not isinstance(data.get("phases"), dict):
        raise ValueError(f"{p}: field 'phases': missing or not an object (not an eval-stage summary)")
    return data


def _metric_keys(phases: Mapping[str, Mapping[str, Any]], dataset: str) -> list[str]:
    keys: set[str] = set()
    for d in phases.values():
        keys |= {k for k in d.get(dataset, {}) if k.startswith("pass@")}
    return sorted(keys, key=lambda k: int(k.split("@")[1]))


def _reference(summary: Mapping[str, Any], prev: str, dataset: str, metric: str) -> float | None:
    """Value of ``metric`` for the previous phase ``prev`` (a phase name, or a seeded base: mean over seeds)."""
    phases = summary["phases"]
    if prev in phases:
        return phases[prev].get(dataset, {}).get(metric)
    return (((summary.get("seeds") or {}).get(prev) or {}).get(dataset) or {}).get(metric, {}).get("mean")


#: Where the eval stage writes per-task arrays: ``<dir>/<phase>/per_task/<dataset>.json``.
PER_TASK_DIR = "data/eval/final"

PerTask = Callable[[str, str], Mapping[str, Mapping[str, Any]] | None]


def per_task_loader(root: str | Path = PER_TASK_DIR) -> PerTask:
    """``(phase, dataset) -> {task: per-task record} | None``, reading ``<root>/<phase>/per_task/<dataset>.json``
    (``None`` when the file is missing or not a JSON object; each file is read once)."""
    cache: dict[tuple[str, str], Any] = {}

    def load(phase: str, dataset: str) -> Mapping[str, Mapping[str, Any]] | None:
        key = (phase, dataset)
        if key not in cache:
            path = Path(root) / phase / "per_task" / f"{dataset}.json"
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = None
            cache[key] = data if isinstance(data, dict) else None
        return cache[key]

    return load


def _n_problems(m: Mapping[str, Any]) -> int | None:
    """Problems behind a dataset's metrics: the ``n`` of its accepted@1 CI (the eval stage's bootstrap record)."""
    for c in (m.get("ci") or {}).values():
        if isinstance(c, Mapping) and isinstance(c.get("n"), int):
            return int(c["n"])
    return None


def _interval(value: float | None, n: int | None, stored: Mapping[str, Any] | None, proportion: bool
              ) -> tuple[tuple[float, float] | None, str | None]:
    """(interval, method) of one metric: Wilson for a proportion (accepted@1) or at a boundary, else the stored
    bootstrap interval."""
    from rlvr.eval.stats import wilson_ci

    boundary = value is not None and (value <= 0.0 or value >= 1.0)
    if value is not None and n and (proportion or boundary):
        return wilson_ci(min(n, max(0, round(value * n))), n), "wilson"
    c = stored or {}
    if c.get("lo") is not None and c.get("hi") is not None:
        return (float(c["lo"]), float(c["hi"])), "bootstrap"
    return None, None


def _paired(a: Mapping[str, Mapping[str, Any]] | None, b: Mapping[str, Mapping[str, Any]] | None, metric: str | None
            ) -> dict[str, Any]:
    """McNemar on accepted@1 and a paired bootstrap CI of Δ``metric`` between per-task arrays ``a`` → ``b``."""
    from rlvr.eval.stats import bootstrap_ci, paired_flips

    if a is None or b is None:
        return {"p_accepted@1": None, "flips": None, "delta_pass@k_ci": None}
    flips = paired_flips({t: v.get("first") == "accepted" for t, v in a.items()},
                         {t: v.get("first") == "accepted" for t, v in b.items()})
    out: dict[str, Any] = {"p_accepted@1": flips["p_value"] if flips["n_common"] else None,
                           "flips": (flips["won"], flips["lost"]), "delta_pass@k_ci": None}
    if metric is not None:
        common = [t for t in a if t in b and a[t].get(metric) is not None and b[t].get(metric) is not None]
        if common:
            ci = bootstrap_ci([float(b[t][metric]) - float(a[t][metric]) for t in common])
            out["delta_pass@k_ci"] = (ci["lo"], ci["hi"])
    return out


def summary_rows(summary: Mapping[str, Any], per_task: PerTask | None = None) -> dict[str, list[dict[str, Any]]]:
    """``{dataset: [row per phase]}``, rows in pipeline order (:data:`PHASE_ORDER`), each ``{"phase", "role", "n"
    (problems), "accepted@1", "accepted@1_ci": (lo, hi) | None (Wilson), "pass@k" (largest k present), "pass@k_ci",
    "pass@k_ci_method" ("bootstrap" | "wilson" at 0 or 1), "k", "delta_accepted@1", "delta_pass@k", "previous",
    "p_accepted@1" (exact McNemar vs the previous phase), "flips": (won, lost), "delta_pass@k_ci" (paired bootstrap),
    "seed_mean": False}``. After the last seed of a seeded base (``grpo_seed<n>``) comes its mean row: ``"phase":
    "<base> mean"``, ``"seed_mean": True``, ``"seeds"`` (count) and ``"accepted@1_std"``/``"pass@k_std"`` (sample std
    over seeds), no intervals or tests. Deltas are ``None`` for the first phase or a missing value; the paired
    statistics ``None`` without ``per_task`` arrays (:func:`per_task_loader`) of both phases or when the previous
    phase is a seed mean."""
    phases: Mapping[str, Mapping[str, Any]] = summary["phases"]
    seeds: Mapping[str, Any] = summary.get("seeds") or {}
    names = sorted(phases, key=_order_key)
    datasets = sorted({ds for d in phases.values() for ds in d})
    out: dict[str, list[dict[str, Any]]] = {}
    for ds in datasets:
        ks = _metric_keys(phases, ds)
        pk = ks[-1] if ks else None
        rows = []
        for i, name in enumerate(names):
            m = phases[name].get(ds)
            if m is not None:
                rows.append(_phase_row(summary, names, i, ds, pk, per_task))
            base = base_phase(name)
            last_of_base = i + 1 == len(names) or base_phase(names[i + 1]) != base
            if base != name and last_of_base and (seeds.get(base) or {}).get(ds):
                rows.append(_mean_row(summary, names, i, ds, pk))
        out[ds] = rows
    return out


def _previous(names: Sequence[str], i: int) -> str | None:
    prev_name = next((n for n in reversed(names[:i]) if base_phase(n) != base_phase(names[i])), None)
    if prev_name is None:
        return None
    return base_phase(prev_name) if base_phase(prev_name) != prev_name else prev_name


def _phase_row(summary: Mapping[str, Any], names: Sequence[str], i: int, ds: str, pk: str | None,
               per_task: PerTask | None) -> dict[str, Any]:
    name = names[i]
    m = summary["phases"][name][ds]
    prev = _previous(names, i)
    ci = m.get("ci") or {}
    n = _n_problems(m)
    row: dict[str, Any] = {"phase": name, "role": m.get("role"), "previous": prev, "k": pk, "n": n,
                           "seed_mean": False}
    for metric, label in (("accepted@1", "accepted@1"), (pk, "pass@k")):
        if metric is None:
            row[label], row[f"{label}_ci"], row[f"{label}_ci_method"], row[f"delta_{label}"] = None, None, None, None
            continue
        v = m.get(metric)
        row[label] = v
        row[f"{label}_ci"], row[f"{label}_ci_method"] = _interval(v, n, ci.get(metric), metric == "accepted@1")
        ref = _reference(summary, prev, ds, metric) if prev is not None else None
        row[f"delta_{label}"] = None if v is None or ref is None else v - ref
    single_prev = prev is not None and prev in summary["phases"]
    if per_task is not None and single_prev:
        row.update(_paired(per_task(prev, ds), per_task(name, ds), pk))  # type: ignore[arg-type]
    else:
        row.update(_paired(None, None, None))
    return row


def _mean_row(summary: Mapping[str, Any], names: Sequence[str], i: int, ds: str, pk: str | None) -> dict[str, Any]:
    base = base_phase(names[i])
    stats = summary["seeds"][base][ds]
    first = next(j for j, n in enumerate(names) if base_phase(n) == base)
    prev = _previous(names, first)
    roles = [summary["phases"][n][ds].get("role") for n in names
             if base_phase(n) == base and ds in summary["phases"][n]]
    row: dict[str, Any] = {"phase": f"{base} mean", "role": roles[0] if roles else None, "previous": prev, "k": pk,
                           "n": None, "seed_mean": True, "seeds": (stats.get("accepted@1") or {}).get("n"),
                           "p_accepted@1": None, "flips": None, "delta_pass@k_ci": None}
    for metric, label in (("accepted@1", "accepted@1"), (pk, "pass@k")):
        s = (stats.get(metric) or {}) if metric is not None else {}
        v = s.get("mean")
        row[label], row[f"{label}_std"] = v, s.get("std")
        row[f"{label}_ci"], row[f"{label}_ci_method"] = None, None
        ref = _reference(summary, prev, ds, metric) if prev is not None and metric is not None else None
        row[f"delta_{label}"] = None if v is None or ref is None else v - ref
    return row


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ci(c: Sequence[float] | None, mark: str = "") -> str:
    return "" if c is None else f"[{c[0]:.2f},{c[1]:.2f}]{mark}"


def _delta(v: float | None) -> str:
    return "" if v is None else f"{v:+.3f}"


def _p(v: float | None) -> str:
    return "" if v is None else ("<.001" if v < 0.001 else f"{v:.3f}")


def _value_cell(r: Mapping[str, Any], label: str) -> tuple[str, str]:
    """(value, interval) cells: a seed-mean row shows ``mean ±std``, a phase row the value and its interval."""
    if r["seed_mean"]:
        std = r.get(f"{label}_std")
        return _num(r[label]), "" if std is None else f"±{std:.3f} sd"
    mark = "W" if label == "pass@k" and r.get(f"{label}_ci_method") == "wilson" else ""
    return _num(r[label]), _ci(r[f"{label}_ci"], mark)


LEGEND = ("accepted@1 CI: Wilson score interval over the n problems; pass@k CI: bootstrap over problems (W: Wilson, "
          "where every problem agrees); p: exact McNemar test of the accepted@1 flips vs the phase in 'vs'; "
          "Δ pass@k [..]: paired bootstrap over the problems both phases scored; '<base> mean': mean ± sd over "
          "seeds (docs/evaluation.md)")


def format_summary(summary: Mapping[str, Any], report: str | Path | None = None,
                   per_task: PerTask | None = None) -> str:
    """Plain-text tables (one per dataset, Dev before Test, titled with the role and ``n`` problems) of
    :func:`summary_rows`, a legend of the statistics, the phases not run, the headline phase and the report's location
    (``report``, noted as missing when the file does not exist). ``per_task``: per-task arrays for the paired columns
    (:func:`per_task_loader`)."""
    lines: list[str] = []
    by_ds = summary_rows(summary, per_task)
    order = sorted(by_ds, key=lambda d: (0 if (by_ds[d][0]["role"] if by_ds[d] else "") == "dev" else 1, d))
    paired_any = False
    for ds in order:
        rows = by_ds[ds]
        if not rows:
            continue
        pk = rows[0]["k"] or "pass@k"
        ns = sorted({r["n"] for r in rows if r["n"] is not None})
        n_txt = "n ?" if not ns else ("n=" + "/".join(map(str, ns)))
        lines.append(f"{ds} ({rows[0]['role'] or 'role ?'}, {n_txt} problems)")
        lines.append(f"  {'phase':<13} {'accepted@1':>10} {'95% CI':<13} {'Δ':>7} {'p':>6}   {pk:>8} {'95% CI':<14} "
                     f"{'Δ':>7} {'[paired 95% CI]':<16} vs")
        for r in rows:
            a_val, a_ci = _value_cell(r, "accepted@1")
            k_val, k_ci = _value_cell(r, "pass@k")
            dci = r.get("delta_pass@k_ci")
            paired_any = paired_any or r.get("p_accepted@1") is not None
            lines.append(f"  {r['phase']:<13} {a_val:>10} {a_ci:<13} {_delta(r['delta_accepted@1']):>7} "
                         f"{_p(r.get('p_accepted@1')):>6}   {k_val:>8} {k_ci:<14} {_delta(r['delta_pass@k']):>7} "
                         f"{_ci(dci):<16} {r['previous'] or ''}".rstrip())
        lines.append("")
    if by_ds:
        lines.extend(textwrap.wrap(LEGEND, 118))
        if not paired_any:
            lines.append(f"p and paired CIs need the per-task arrays ({PER_TASK_DIR}/<phase>/per_task: dvc pull or "
                         "dvc repro eval)")
    if summary.get("not_run"):
        lines.append("not run: " + ", ".join(summary["not_run"]))
    head = summary.get("headline") or {}
    if head.get("phase"):
        lines.append(f"headline (eval.headline): {head['phase']}" + (f", mean of {head['seeds']} seeds"
                                                                     if head.get("seeds", 1) > 1 else ""))
    if report is not None:
        rp = Path(report)
        lines.append(f"report: {rp.resolve()}" if rp.is_file() else f"report: {rp} (not built yet: dvc repro report)")
    lines.append("scores: dvc metrics show; time spent: rlvr cost; phase diffs: dvc exp diff (docs/evaluation.md)")
    return "\n".join(lines)


@click.command("summary")
@click.option("--eval-summary", "path", default="metrics/final/eval.json", show_default=True,
              type=click.Path(path_type=Path), help="the eval stage's summary file")
@click.option("--report", default="reports/index.html", show_default=True, type=click.Path(path_type=Path))
@click.option("--per-task-dir", default=PER_TASK_DIR, show_default=True, type=click.Path(path_type=Path),
              help="the eval stage's per-task arrays (<dir>/<phase>/per_task/<dataset>.json), for the paired tests")
def main(path: Path, report: Path, per_task_dir: Path) -> None:
    """Did it help? Per dataset (n problems) and phase: accepted@1 and pass@k with 95 % intervals (Wilson at 0 and
    1), the change from the previous phase with McNemar's p and a paired interval, the seed mean of GRPO, and where
    the report is."""
    try:
        summary = load_summary(path)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_summary(summary, report, per_task_loader(per_task_dir)))
