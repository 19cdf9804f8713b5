"""Stage ``report``: one self-contained HTML page from every metrics file the pipeline has written so far.

Reads ``params.yaml`` section ``report`` (:class:`rlvr.report.ReportParams`: bootstrap resamples, seed, alpha, phase
order), ``metrics/*.json``, ``metrics/<stage>/**/*.tsv``, the final eval's ``metrics/final/*.json``, the per-task
arrays ``data/<phase>/per_task/*.json`` and ``data/eval/final/<phase>/per_task/*.json``, and
``data/governance/audit.md``. Writes ``reports/index.html`` (no network needed to view it: charts are inline SVG)
and ``reports/params.resolved.json``. Stages that have not run show as "not run".

    python stages/report.py [--params params.yaml] [--out reports/index.html]
"""

from __future__ import annotations

from pathlib import Path

import click

from rlvr.config import dump_resolved, load_section
from rlvr.report import ReportParams, build_report


@click.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, type=click.Path(exists=True))
@click.option("--metrics-dir", default="metrics", show_default=True, type=click.Path(path_type=Path))
@click.option("--data-dir", default="data", show_default=True, type=click.Path(path_type=Path))
@click.option("--out", "out_path", default="reports/index.html", show_default=True, type=click.Path(path_type=Path))
def main(params_path: str, metrics_dir: Path, data_dir: Path, out_path: Path) -> None:
    """Render the quality / cost / stability / data report."""
    cfg = load_section("report", ReportParams, params_path)
    summary = build_report(cfg, metrics_dir, data_dir, out_path)
    dump_resolved(cfg, out_path.parent)
    click.echo(f"report: {out_path} ({summary['bytes'] / 1e3:.0f} kB, {summary['charts']} charts); "
               f"phases {summary['phases'] or 'none'}; training {summary['training'] or 'none'}")
    if summary["not_run"]:
        click.echo("not run yet: " + "; ".join(summary["not_run"]))


if __name__ == "__main__":
    main()
