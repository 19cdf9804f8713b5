"""verl's validation of the GRPO policy as the stage's ``dev`` score (``metrics/grpo/seed-<n>.json``).

verl's ``RayPPOTrainer.fit`` validates on ``data.val_files`` before training
(``trainer.val_before_train``), every ``trainer.test_freq`` steps and after the last step (``test_freq`` > 0), and
logs ``_val_metrics_update``'s keys ``val-core/<data_source>/<var>/<metric>`` and ``val-aux/…`` on that step's line
(``process_validation_metrics``: ``<var>`` is each numeric key of the reward's dict, ``<metric>`` ``mean@<n>``,
``std@<n>``, ``best@<k>/mean``…). :func:`validation_scores` turns the last validation into the GRPO stage's ``dev``.
"""

from __future__ import annotations

import math
import re
import sys
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["VAL_MEAN", "VAL_SCORES", "final_dev", "val_row_counts", "validation_scores"]


def val_row_counts(path: str | Path) -> dict[str, int]:
    """``{data_source: rows}`` of a verl RL parquet (the ``data_source`` column of
    :data:`rlvr.data.export.VERL_SCHEMA`, one row per prompt), sorted by source. Raises ``FileNotFoundError`` when
    the file is absent."""
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no verl validation parquet (needed to weight verl's per-source scores)")
    counts: dict[str, int] = defaultdict(int)
    for source in pq.read_table(p, columns=["data_source"]).column("data_source").to_pylist():
        counts[str(source)] += 1
    return dict(sorted(counts.items()))


#: a validation mean verl 0.9.1 logs (``RayPPOTrainer._val_metrics_update``): section, data source, our reward's
#: ``acc`` or ``pass_ratio`` (:func:`rlvr.reward.verl.compute_score`), samples per prompt ``n``.
VAL_MEAN = re.compile(r"^val-(?:core|aux)/(?P<source>.+)/(?P<var>acc|pass_ratio)/mean@(?P<n>\d+)$")
#: validation keys -> the local engine's ``dev`` keys (:func:`rlvr.train.local.quick_eval.evaluate_accepted`).
VAL_SCORES: dict[str, str] = {"acc": "accepted@1", "pass_ratio": "pass_ratio"}


def validation_scores(steps: Mapping[int, Mapping[str, Any]], val_files: str | Path) -> dict[str, Any] | None:
    """The GRPO ``dev`` scores from verl's last validation: the last step of ``steps`` (:func:`read_file_logs`) whose
    line carries validation means, as ``{"accepted@1", "pass_ratio", "n", "step", "by_source": {source:
    {"accepted@1", "pass_ratio", "n"}}}``; ``None`` when verl never validated (``trainer.test_freq`` -1 and no
    ``val_before_train``).

    Source: verl 0.9.1 ``RayPPOTrainer._validate`` generates ``actor_rollout_ref.rollout.val_kwargs.n`` responses
    per validation prompt (default 1, greedy: ``do_sample`` False, as the local engine's quick eval), scores them with
    our reward (``acc`` = accepted by the judge, ``pass_ratio`` = fraction of tests passed) and
    ``verl.trainer.ppo.metric_utils.process_validation_metrics`` logs, per data source and reward key, ``mean@<n>``:
    the mean over a prompt's n responses, then over the source's prompts. That is the per-sample accept rate, i.e.
    the unbiased pass@1 estimate, which is what our ``accepted@1`` is (one greedy sample per problem when n is 1).
    ``best@<k>``/``maj@<k>`` (bootstrap best-of-k / majority vote, logged only for n > 1; ``val-core`` holds the
    ``acc`` means at the largest n) are other figures and are not read. Both ``val-core`` and ``val-aux`` are searched
    (``acc`` is core, ``pass_ratio`` aux); when a source logged several ``mean@<n>`` of one key (prompts that kept
    different numbers of responses) the largest n is taken, as verl's ``val-core`` does.

    ``accepted@1`` and ``pass_ratio`` over all sources are the per-source means weighted by the source's rows in the
    validation parquet ``val_files`` (:func:`val_row_counts`), i.e. the mean over validation prompts; ``n`` is those
    rows (verl's ``data.filter_overlong_prompts`` may have dropped some, leaving them out of verl's own means too).
    ``step`` is verl's global step of that validation (0 = before training). Raises ``ValueError`` when a validated
    source lacks ``acc`` or ``pass_ratio`` or has a non-numeric one (verl logs NaN as ``null``), or is not in
    ``val_files``; ``FileNotFoundError`` when ``val_files`` is absent."""
    found: dict[str, dict[str, dict[int, Any]]] = {}
    step = None
    for s in sorted(steps, reverse=True):
        for key, value in steps[s].items():
            if m := VAL_MEAN.match(key):
                found.setdefault(m["source"], {}).setdefault(m["var"], {})[int(m["n"])] = value
        if found:
            step = s
            break
    if step is None:
        return None
    counts = val_row_counts(val_files)
    by_source: dict[str, dict[str, Any]] = {}
    for source, by_var in sorted(found.items()):
        if source not in counts:
            raise ValueError(f"verl validated data source {source!r} at step {step}, which {val_files} does not hold "
                             f"(its sources: {sorted(counts)})")
        row: dict[str, Any] = {}
        for var, name in VAL_SCORES.items():
            means = by_var.get(var)
            if not means:
                raise ValueError(f"step {step}: verl logged no {var}/mean@<n> for data source {source!r} (the reward "
                                 f"returns {var}: rlvr.reward.verl)")
            value = means[max(means)]
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise ValueError(f"step {step}: {source}/{var}/mean@{max(means)} = {value!r}, not a number")
            row[name] = float(value)
        by_source[source] = {**row, "n": counts[source]}
    n = sum(r["n"] for r in by_source.values())
    out: dict[str, Any] = {name: sum(r[name] * r["n"] for r in by_source.values()) / n for name in VAL_SCORES.values()}
    return {**out, "n": n, "step": step, "by_source": by_source}


def final_dev(steps: Mapping[int, Mapping[str, Any]], val_files: str | Path, last_step: int | None
               ) -> dict[str, Any] | None:
    """verl's last validation (:func:`validation_scores`) when it scored the trained policy,
    i.e. ran at ``last_step`` (the last training step); else ``None``, with a note on stderr when verl validated only
    earlier (``test_freq`` -1 leaves only the validation before training, a score of the input policy)."""
    dev = validation_scores(steps, val_files)
    if dev is None or last_step is None or dev["step"] != last_step:
        if dev is not None:
            print(f"verl: last validation at step {dev['step']}, not the last training step {last_step}: no dev "
                  "score of the trained policy (set verl.test_freq > 0 for one)", file=sys.stderr)
        return None
    return dev
