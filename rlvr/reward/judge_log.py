"""Per-sample judge log of verl's reward workers, and its split into GRPO steps.

Why: verl 0.9.1's v1 PPO trainer computes the reward inside the agent loop (one ``compute_score`` call per sample, in
Ray reward workers) and logs neither ``timing_s/reward`` nor the ``reward_extra_info`` of training batches; its
rollout dump (``trainer.rollout_data_dir``) holds only ``uid`` and ``score``. So the judge's own seconds per step
cannot be read from verl's logs. :mod:`rlvr.reward.verl` therefore appends one line per judged sample to a folder
given by the reward kwarg ``judge_log`` (a where, set by the launcher), and the log → TSV converter sums them per step.

Record (one JSON line, written with a single ``write`` of < 4 KiB in append mode, so lines of concurrent threads and
processes do not interleave; one file per process: ``<host>-<pid>.jsonl``)::

    {"t": <unix seconds when the judge returned>, "judge_s": <judge wall seconds of the sample>,
     "split": <extra_info["split"] or null>, "id": <problem id or null>, "status": <verdict>,
     "pass_ratio": <passed / tests>, "has_code": <whether a program was found in the response>,
     "tool_parse_failures": <the episode's tool calls that failed to parse>,
     "tool_sandbox_errors": <the episode's tool calls that failed for the infrastructure's reasons>}

Step assignment (:func:`judge_seconds_per_step`): verl writes ``<rollout_data_dir>/<step>.jsonl`` once the step's
rollouts (and so their rewards) are complete, and the next step's rollout starts only after the actor update, so a
training sample judged at time ``t`` belongs to the first step whose dump file was written at or after ``t``.
Validation samples are left out by their ``split``: the caller names the splits that occur only in the validation
files (GRPO: ``dev``); when training and validation share a split (a repair run validating on its training
problems), validation samples are counted with the step they precede. A resumed run's interrupted step is counted
with the step that re-ran it (its samples were judged twice).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from bisect import bisect_left
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.io import read_appended_jsonl

__all__ = ["append_record", "dump_times", "judge_seconds_per_step", "read_judge_log", "require_judged", "union_seconds"]

_lock = threading.Lock()


def append_record(log_dir: str | Path, extra_info: Any, result: Mapping[str, Any], now: float | None = None) -> None:
    """Append one sample's judge record to ``<log_dir>/<host>-<pid>.jsonl`` (see the module docstring).

    ``result`` is :func:`rlvr.reward.verl.compute_score`'s dict (``judge_s`` seconds, ``status``); ``now`` defaults
    to ``time.time()``. Never raises for a sample: an ``OSError`` (full disk, folder removed) is swallowed, since a
    lost timing line must not fail the reward of a training step."""
    info = extra_info if isinstance(extra_info, Mapping) else {}
    rec = {
        "t": time.time() if now is None else float(now),
        "judge_s": float(result.get("judge_s") or 0.0),
        "split": info.get("split") if isinstance(info.get("split"), str) else None,
        "id": str(info["id"])[:200] if info.get("id") is not None else None,
        "status": str(result.get("status", ""))[:40],
        "pass_ratio": float(result.get("pass_ratio") or 0.0),
        "has_code": bool(result.get("has_code")),
        "tool_parse_failures": int(result.get("tool_parse_failures") or 0),
        "tool_sandbox_errors": int(result.get("tool_sandbox_errors") or 0),
    }
    line = (json.dumps(rec) + "\n").encode()
    path = Path(log_dir) / f"{socket.gethostname()}-{os.getpid()}.jsonl"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _lock:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
    except OSError:
        pass


def read_judge_log(log_dir: str | Path | None) -> list[dict[str, Any]]:
    """All records of a judge log folder, ordered by time ``t``; ``[]`` when the folder is absent.

    A torn last line (a killed worker) is skipped; any other malformed line raises ``ValueError`` naming the file and
    line."""
    if log_dir is None or not Path(log_dir).is_dir():
        return []
    recs: list[dict[str, Any]] = []
    for f in sorted(Path(log_dir).glob("*.jsonl")):
        for lineno, rec in read_appended_jsonl(f):
            if not isinstance(rec, dict) or not isinstance(rec.get("t"), int | float) or not isinstance(
                rec.get("judge_s"), int | float
            ):
                raise ValueError(f"{f}:{lineno}: expected a judge record with numeric 't' and 'judge_s'")
            recs.append(rec)
    return sorted(recs, key=lambda r: r["t"])


def require_judged(records: Sequence[Mapping[str, Any]], where: str | Path) -> None:
    """Raise ``RuntimeError`` naming ``where`` when some of ``records`` (:func:`read_judge_log`) reached the judge and
    every one of those has status ``sandbox_error``: the judge never ran a program (no bubblewrap, an unreachable
    ``RLVR_SANDBOX_URL``), so the run trained on no reward at all and its model must not be published as if it had.
    Seen on the lent H100 when bubblewrap was missing (docs/training/gpu.md). Samples without code (``has_code``
    false; a record without the key counts as judged) never reach the judge, so they neither trigger nor prevent it.
    The run-wide backstop of the per-step guard (:mod:`rlvr.reward.step_guard`), which stops a run at its second
    such step in a row."""
    judged = [r for r in records if r.get("has_code", True) is not False]
    if judged and all(r.get("status") == "sandbox_error" for r in judged):
        raise RuntimeError(
            f"{where}: all {len(judged)} judged samples were sandbox_error: the judge could not run any program "
            "(bubblewrap missing or unusable, or the remote sandbox unreachable); the run had no reward signal")


def judge_seconds_per_step(
    records: Sequence[Mapping[str, Any]], dump_times: Mapping[int, float], exclude_splits: Collection[str] = ()
) -> dict[int, dict[str, float]]:
    """Sum the training samples' judge seconds per GRPO step.

    Args:
        records: :func:`read_judge_log` output (any order).
        dump_times: ``{step: unix seconds}`` when the step's rollout dump was written (its file's mtime).
        exclude_splits: ``split`` values of validation-only samples, left out.

    Returns:
        ``{step: {"judge_s": summed judge seconds, "judge_wall_s": wall seconds during which at least one of the
        step's samples was being judged (the union of the intervals ``[t - judge_s, t]``, so concurrent calls count
        once: divided by the step's wall seconds it is the judge's wall-time share), "judged": samples,
        "tool_parse_failures": summed, "sent": samples that reached the judge (``has_code``; a record without the
        key counts), "sandbox_errors": the ``sandbox_error`` ones among those, "tool_sandbox_errors": summed}}`` for
        steps with at least one record; records after the last dump (a step that never finished) are dropped.
    """
    steps = sorted(dump_times)
    ends = [dump_times[s] for s in steps]
    out: dict[int, dict[str, float]] = {}
    spans: dict[int, list[tuple[float, float]]] = {}
    for r in records:
        if r.get("split") in exclude_splits:
            continue
        t = float(r["t"])
        i = bisect_left(ends, t)
        if i == len(steps):
            continue
        agg = out.setdefault(steps[i], {"judge_s": 0.0, "judge_wall_s": 0.0, "judged": 0, "tool_parse_failures": 0,
                                        "sent": 0, "sandbox_errors": 0, "tool_sandbox_errors": 0})
        agg["judge_s"] += float(r["judge_s"])
        agg["judged"] += 1
        agg["tool_parse_failures"] += int(r.get("tool_parse_failures") or 0)
        agg["tool_sandbox_errors"] += int(r.get("tool_sandbox_errors") or 0)
        if r.get("has_code", True) is not False:
            agg["sent"] += 1
            agg["sandbox_errors"] += r.get("status") == "sandbox_error"
        spans.setdefault(steps[i], []).append((t - max(float(r["judge_s"]), 0.0), t))
    for step, iv in spans.items():
        out[step]["judge_wall_s"] = union_seconds(iv)
    return out


def union_seconds(intervals: Sequence[tuple[float, float]]) -> float:
    """Total length (seconds) of the union of ``[start, end]`` intervals: overlapping time counts once."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def dump_times(rollout_dir: str | Path | None) -> dict[int, float]:
    """``{step: mtime}`` of verl's rollout dump files ``<rollout_dir>/<step>.jsonl`` (``{}`` when absent)."""
    if rollout_dir is None or not Path(rollout_dir).is_dir():
        return {}
    return {int(f.stem): f.stat().st_mtime for f in Path(rollout_dir).glob("*.jsonl") if f.stem.isdigit()}

