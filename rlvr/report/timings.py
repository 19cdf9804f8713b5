"""The report's two pages, split by what DVC may cache (issue 45): ``reports/index.html`` (a cached DVC output) holds
no timing, so the same metrics give the same bytes on any machine and a shared DVC cache restores it; the timings go
to ``reports/cost.html`` (a ``cache: false`` output, like the ``metrics/cost/**`` files it is drawn from), which the
cached page links to.

What a timing is follows the metrics layout (:func:`rlvr.layout.split_metrics`, :data:`rlvr.layout.COST_KEY`): the
leaves of the cost part — seconds, throughput, memory, tokens spent and the work resumed from the local cache — the
curves' cost mirrors (``metrics/cost/<path of the curves TSV>``, e.g. ``judge_step_s`` seconds per step) and the
sha256 of every file under ``metrics/cost/``. :func:`without_timings` drops them all from what the cached page is
rendered from; :func:`cost_sections` draws them on the uncached page.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from rlvr.layout import split_metrics
from rlvr.report import charts
from rlvr.report.collect import Collected, Phase, TrainingRun
from rlvr.report.render import chart

__all__ = ["COST_PAGE", "cost_link", "cost_sections", "curve_timings_section", "drop_cost", "is_cost_file",
           "without_timings"]

#: File name of the uncached cost page, beside ``reports/index.html`` (dvc.yaml: ``reports/cost.html``,
#: ``cache: false``).
COST_PAGE = "cost.html"


def drop_cost(report: Any) -> Any:
    """``report`` without its cost leaves (:func:`rlvr.layout.split_metrics`), key order kept; a dict left empty by
    the drop is dropped too. Anything but a dict is returned as it is."""
    if not isinstance(report, dict):
        return report
    return _minus(report, split_metrics(report)[1])


def _minus(node: dict[str, Any], cost: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in node.items():
        c = cost.get(str(k))
        if c is None:
            out[k] = v
        elif isinstance(c, dict) and isinstance(v, dict):
            rest = _minus(v, c)
            if rest:
                out[k] = rest
    return out


def is_cost_file(path: str | Path) -> bool:
    """Whether ``path`` lies in a ``cost/`` folder right under a folder named ``metrics``
    (:func:`rlvr.layout.layout_paths`' cost mirror, ``metrics/cost/…``)."""
    parts = Path(path).parts
    idx = max((i for i, part in enumerate(parts[:-1]) if part == "metrics"), default=None)
    return idx is not None and idx + 1 < len(parts) - 1 and parts[idx + 1] == "cost"


def _phase(p: Phase) -> Phase:
    return replace(p, datasets={ds: drop_cost(m) for ds, m in p.datasets.items()}, protocol=drop_cost(p.protocol))


def _run(r: TrainingRun) -> TrainingRun:
    return replace(r, summaries={s: drop_cost(d) for s, d in r.summaries.items()},
                   curves=[replace(c, cost={}) for c in r.curves])


def without_timings(col: Collected) -> Collected:
    """A copy of ``col`` with no timing (module doc): every metrics dict through :func:`drop_cost`, the curves without
    their cost mirrors, ``sources`` without the ``metrics/cost/`` files. Rendered, it gives the same bytes whatever
    the machine measured."""
    return replace(
        col,
        phases=[_phase(p) for p in col.phases],
        final_phases=[_phase(p) for p in col.final_phases],
        training={k: _run(r) for k, r in col.training.items()},
        governance=drop_cost(col.governance),
        judge_check=drop_cost(col.judge_check),
        repair=drop_cost(col.repair),
        final_summary=drop_cost(col.final_summary),
        sources={p: h for p, h in col.sources.items() if not is_cost_file(p)},
    )


def curve_timings_section(col: Collected) -> dict[str, Any]:
    """Per-step timings: the timing columns of every curve's cost mirror (e.g. ``judge_step_s``, seconds) vs step,
    seeds overlaid, one chart per stage and curve file."""
    blocks: list[dict[str, Any]] = []
    for stage, run in sorted(col.training.items()):
        by_name: dict[str, list[Any]] = {}
        for c in run.curves:
            if c.cost:
                by_name.setdefault(c.name, []).append(c)
        for name, curves in sorted(by_name.items()):
            curves.sort(key=lambda c: -1 if c.seed is None else c.seed)
            cols = list(dict.fromkeys(k for c in curves for k in c.cost))
            series = [(stage if c.seed is None else f"seed {c.seed}", {"step": c.columns["step"], **c.cost})
                      for c in curves]
            blocks.append(chart(charts.curves_figure(series, cols), f"{stage}: {name} timings (vs step)",
                                f"timing columns of {stage} ({name}): {', '.join(cols)}"))
    return {"id": "curve-timings", "title": "Per-step timings", "blocks": blocks,
            "missing": "no curve has a timing column (metrics/cost/<stage>/*.tsv)"}


def cost_sections(col: Collected, cost_section: dict[str, Any]) -> list[dict[str, Any]]:
    """The sections of the uncached cost page: ``cost_section`` (:func:`rlvr.report.build.cost_section` of the whole
    ``col``) and :func:`curve_timings_section`."""
    return [cost_section, curve_timings_section(col)]


def cost_link(note: str = "") -> dict[str, Any]:
    """The block of the cached page's Cost section: a link to the uncached cost page (:data:`COST_PAGE`)."""
    return {"kind": "link", "href": COST_PAGE, "text": f"Cost: tokens, seconds, throughput ({COST_PAGE})",
            "note": note or ("Timings depend on the machine and its load, so they are kept out of this page (a "
                             "cached DVC output, the same on every machine) and shown on the uncached cost page, "
                             "drawn from metrics/cost/ (rlvr cost prints them too).")}

