"""Stage ``report``: one self-contained HTML page from every metrics file the pipeline has written so far.

Reads ``params.yaml`` section ``report`` (:class:`rlvr.report.ReportParams`: bootstrap resamples, seed, alpha, phase
order), ``metrics/*.json``, ``metrics/<stage>/**/*.tsv``, the final eval's ``metrics/final/*.json``, the per-task
arrays ``data/<phase>/per_task/*.json`` and ``data/eval/final/<phase>/per_task/*.json``, and
``data/governance/audit.md`` (each metrics file read whole: scores, cost and provenance parts,
:func:`rlvr.layout.read_metrics`). Writes ``reports/index.html`` (no network needed to view it: charts are inline SVG;
no timing, so the same bytes on every machine), ``reports/cost.html`` (the timings: uncached in dvc.yaml),
``reports/plots/<stage>.tsv`` (the seeded curves, seeds overlaid, for ``dvc plots``) and
``reports/params.resolved.json``. Stages that have not run show as "not run".

    python stages/report.py [--params params.yaml] [--out reports/index.html]
"""

from __future__ import annotations

from pathlib import Path

from rlvr.report import ReportParams, build_report
from rlvr.stage import Params, Result, option, stage


@stage(option("--metrics-dir", default="metrics", path=True), option("--data-dir", default="data", path=True),
       option("--out", "out_path", default="reports/index.html", path=True))
def main(params: Params, metrics_dir: Path, data_dir: Path, out_path: Path) -> Result:
    """Render the quality / cost / stability / data report."""
    cfg = params.section("report", ReportParams)
    summary = build_report(cfg, metrics_dir, data_dir, out_path)
    echo = (f"report: {out_path} ({summary['bytes'] / 1e3:.0f} kB, {summary['charts']} charts; timings: "
            f"{summary['cost_page']}); "
            f"phases {summary['phases'] or 'none'}; training {summary['training'] or 'none'}")
    if summary["not_run"]:
        echo += "\nnot run yet: " + "; ".join(summary["not_run"])
    return Result(resolved={out_path.parent: cfg}, echo=echo)


if __name__ == "__main__":
    main()
