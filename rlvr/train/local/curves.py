"""Training curves of the local (TRL) engine: :class:`TsvCurves`, a ``TrainerCallback`` writing logged keys per step
to a TSV (the ``dvc plots`` format); timing columns (``judge_step_s``) go to the TSV's cost mirror
(:func:`rlvr.layout.write_curves`), so the plot is the same on any machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvr.io import atomic_write_text
from rlvr.layout import read_curves, write_curves

__all__ = ["TsvCurves"]


class TsvCurves:
    """A ``transformers.TrainerCallback`` that writes one TSV row per logging step (DVC plots format), and makes the
    trainer log its last step as well (transformers logs every ``logging_steps`` only).

    ``columns`` maps TSV column name → logged key (``{"reward_mean": "reward", "kl": "kl"}``); the first column is
    always ``step`` (``state.global_step``). Missing keys are written as empty cells; rows with none of the keys
    (e.g. the final ``train_runtime`` summary) are skipped. The file is rewritten atomically at every row, so it is
    complete after an interruption; on resume, rows already present (``step`` ≤ the resumed step) are kept. Columns
    that measure time (:data:`rlvr.layout.COST_KEY`, e.g. ``judge_step_s`` seconds) are written to the cost mirror of
    ``path`` (``metrics/cost/<same path>``, :func:`rlvr.layout.write_curves`), not to the plot.
    ``mirror``: a second, whole copy (every column) kept beside the checkpoints (outside DVC's outputs, which DVC
    deletes before re-running a stage), from which the rows of an earlier run are restored on resume.
    """

    def __init__(self, path: str | Path, columns: Mapping[str, str], mirror: str | Path | None = None) -> None:
        from transformers import TrainerCallback

        self.path = Path(path)
        self.mirror = Path(mirror) if mirror is not None else None
        self.columns = dict(columns)
        self.rows: list[dict[str, Any]] = []
        self._cb = type("_TsvCallback", (TrainerCallback,), {"on_log": self._on_log,
                                                              "on_step_end": self._on_step_end})()

    @property
    def callback(self) -> Any:
        """The ``TrainerCallback`` instance to pass to a trainer's ``callbacks``."""
        return self._cb

    def load_existing(self, upto_step: int) -> None:
        """Keep rows of an earlier (interrupted) run with ``step <= upto_step`` (resume)."""
        source = self.path if self.path.is_file() else self.mirror
        if source is None or not source.is_file():
            return
        _, rows = read_curves(source) if source == self.path else _whole(source)
        self.rows.extend(r for r in rows if r.get("step", "").isdigit() and int(r["step"]) <= upto_step)

    def _on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # transformers logs every `logging_steps` only: the last step is logged too, so no step's loss is missing
        # from the curves or from rlvr.train.local.common.logged_training_loss (a run shorter than logging_steps
        # would otherwise log none)
        if state.max_steps and state.global_step >= state.max_steps:
            control.should_log = True

    def _on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # Bound method stored on the callback class: the handler calls it as on_log(args, state, control, logs=…).
        if not logs or not any(k in logs for k in self.columns.values()):
            return
        row: dict[str, Any] = {"step": state.global_step}
        for col, key in self.columns.items():
            v = logs.get(key)
            row[col] = "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)
        self.rows.append(row)
        self.write()

    def write(self) -> None:
        """Rewrite the plot TSV and its cost mirror (:func:`rlvr.layout.write_curves`), and the whole-copy ``mirror``,
        atomically."""
        write_curves(self.path, list(self.columns), self.rows)
        if self.mirror is not None:
            header = ["step", *self.columns]
            lines = ["\t".join(header)] + ["\t".join(str(r.get(h, "")) for h in header) for r in self.rows]
            atomic_write_text(self.mirror, "\n".join(lines) + "\n")


def _whole(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """``(header, rows)`` of a TSV holding every column (the checkpoint-side mirror), cells as text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        return [], []
    header = lines[0].split("\t")
    return header, [dict(zip(header, line.split("\t"), strict=False)) for line in lines[1:]]
