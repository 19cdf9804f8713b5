"""The report: one self-contained HTML page (``reports/index.html``) from the pipeline's metrics files.

Sections Final evaluation, Quality, Repair, Cost, Stability and Data (:mod:`rlvr.report.build`); files read by
:mod:`rlvr.report.collect` (their formats: :mod:`rlvr.report.formats`); charts drawn with matplotlib
(:mod:`rlvr.report.charts`) and inlined as SVG data URIs; HTML by Jinja2 (:mod:`rlvr.report.render`). Never depends
on WandB (``rlvr wandb-sync`` in :mod:`rlvr.report.wandb_sync` only uploads the offline runs). The page holds no
timing, so DVC caches the same bytes on any machine; the timings go to the uncached ``reports/cost.html``
(:mod:`rlvr.report.timings`).

    python stages/report.py        # params.yaml section ``report``
"""

from typing import Any

__all__ = ["ReportParams", "build_report"]


def __getattr__(name: str) -> Any:
    # lazy: `rlvr wandb-sync` and `rlvr --help` must not import the report's (heavy) dependencies
    if name in __all__:
        from rlvr.report import build

        return getattr(build, name)
    raise AttributeError(name)
