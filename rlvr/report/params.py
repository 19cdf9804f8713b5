"""Parameters of the ``report`` stage (``params.yaml`` section ``report``), shared by the page's section builders."""

from __future__ import annotations

from pydantic import Field

from rlvr.config import Section

__all__ = ["ReportParams"]


class ReportParams(Section):
    """``params.yaml`` section ``report``.

    ``bootstrap``: resamples B of the bootstrap CIs; ``seed``: their RNG seed; ``alpha``: 1 - CI coverage (0.05 →
    95 %); ``phase_order``: pipeline order of phases/stages (flips compare each phase with the previous one; unknown
    names go last); ``title``: page title."""

    bootstrap: int = Field(1000, ge=1)
    seed: int = 0
    alpha: float = Field(0.05, gt=0, lt=1)
    phase_order: list[str] = Field(default_factory=lambda: ["baseline", "sft", "dpo", "grpo", "repair"])
    title: str = "rlvr report: quality, cost, stability, data"
