"""The readable end of a run: ``rlvr summary`` prints, per dataset, one row per phase with accepted@1 and pass@k (with
their 95 % bootstrap CIs) and the change from the previous phase, then where the report is.

Reads only ``metrics/final/eval.json`` and its provenance part (:func:`rlvr.io.read_metrics`): the ``eval`` stage's
summary, ``phases`` → dataset → ``role``, ``accepted@1``, ``pass@k``, ``ci`` → metric → ``lo``/``hi``; ``seeds`` →
seeded base → dataset → metric → ``mean``/``std``/``n``; ``not_run``. Phases are shown in pipeline order
(:data:`PHASE_ORDER`, the ``report.phase_order`` default; unknown names last, by name). The *previous phase* of a phase
is the closest phase before it in that order whose base name differs (``grpo_seed1`` and ``grpo_seed2`` both compare
with ``dpo``); when that previous phase is seeded, the mean over its seeds is the reference (``repair`` compares with
the GRPO seed mean). ``dvc metrics show`` shows every score, ``rlvr cost`` the time spent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from rlvr.io import read_metrics

__all__ = ["PHASE_ORDER", "base_phase", "format_summary", "load_summary", "main", "summary_rows"]


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


def load_summary(path: str | Path) -> dict[str, Any]:
    """The ``eval`` stage's summary JSON. Raises ``FileNotFoundError`` naming the file and the stage that writes it,
    ``ValueError`` naming the file when it has no ``phases`` object."""
    p = Path(path)
    data = read_metrics(p)
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


def summary_rows(summary: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """``{dataset: [row per phase]}``, rows in pipeline order (:data:`PHASE_ORDER`): ``{"phase", "role", "accepted@1",
    "accepted@1_ci": (lo, hi) | None, "pass@k" (largest k present) , "pass@k_ci", "k", "delta_accepted@1",
    "delta_pass@k", "previous"}``; deltas are ``None`` for the first phase or a missing value."""
    phases: Mapping[str, Mapping[str, Any]] = summary["phases"]
    names = sorted(phases, key=_order_key)
    datasets = sorted({ds for d in phases.values() for ds in d})
    out: dict[str, list[dict[str, Any]]] = {}
    for ds in datasets:
        ks = _metric_keys(phases, ds)
        pk = ks[-1] if ks else None
        rows = []
        for i, name in enumerate(names):
            m = phases[name].get(ds)
            if m is None:
                continue
            prev_name = next((n for n in reversed(names[:i]) if base_phase(n) != base_phase(name)), None)
            prev = None if prev_name is None else (base_phase(prev_name) if base_phase(prev_name) != prev_name
                                                     else prev_name)
            ci = m.get("ci") or {}
            row: dict[str, Any] = {"phase": name, "role": m.get("role"), "previous": prev, "k": pk}
            for metric, label in (("accepted@1", "accepted@1"), (pk, "pass@k")):
                if metric is None:
                    row[label], row[f"{label}_ci"], row[f"delta_{label}"] = None, None, None
                    continue
                v = m.get(metric)
                c = ci.get(metric) or {}
                row[label] = v
                row[f"{label}_ci"] = (c["lo"], c["hi"]) if "lo" in c and "hi" in c else None
                ref = _reference(summary, prev, ds, metric) if prev is not None else None
                row[f"delta_{label}"] = None if v is None or ref is None else v - ref
            rows.append(row)
        out[ds] = rows
    return out


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _ci(c: Sequence[float] | None) -> str:
    return "" if c is None else f"[{c[0]:.2f},{c[1]:.2f}]"


def _delta(v: float | None) -> str:
    return "" if v is None else f"{v:+.3f}"


def format_summary(summary: Mapping[str, Any], report: str | Path | None = None) -> str:
    """Plain-text tables (one per dataset, Dev before Test) of :func:`summary_rows`, the phases not run, the headline
    phase and the report's location (``report``, noted as missing when the file does not exist)."""
    lines: list[str] = []
    by_ds = summary_rows(summary)
    order = sorted(by_ds, key=lambda d: (0 if (by_ds[d][0]["role"] if by_ds[d] else "") == "dev" else 1, d))
    for ds in order:
        rows = by_ds[ds]
        if not rows:
            continue
        pk = rows[0]["k"] or "pass@k"
        lines.append(f"{ds} ({rows[0]['role'] or 'role ?'})")
        head = f"  {'phase':<12} {'accepted@1':>10} {'95% CI':<13} {'Δ':>7}   {pk:>8} {'95% CI':<13} {'Δ':>7}  vs"
        lines.append(head)
        for r in rows:
            lines.append(f"  {r['phase']:<12} {_num(r['accepted@1']):>10} {_ci(r['accepted@1_ci']):<13} "
                         f"{_delta(r['delta_accepted@1']):>7}   {_num(r['pass@k']):>8} {_ci(r['pass@k_ci']):<13} "
                         f"{_delta(r['delta_pass@k']):>7}  {r['previous'] or ''}")
        lines.append("")
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
def main(path: Path, report: Path) -> None:
    """Per phase and dataset: accepted@1 and pass@k with 95 % CIs, the change from the previous phase, and where the
    report is."""
    try:
        summary = load_summary(path)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_summary(summary, report))
