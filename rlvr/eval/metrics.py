"""Evaluation metrics over judged samples (one row per (task, sample), see :mod:`rlvr.eval.protocol`).

Definitions (``N`` = samples, ``T`` = tasks, ``n`` = samples per task, ``c`` = accepted samples of a task):

* ``accepted@1``: fraction of tasks whose first sample (``sample_index == 0``) is ``accepted``. It is the standard
  greedy accuracy when decoding is greedy (``metrics["greedy"]``); under sampling it is a one-sample estimate.
* ``pass@k``: mean over tasks of the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
  Trained on Code", eq. 1 and its numerically stable form): ``1 - C(n-c, k) / C(n, k)``
  ``= 1 - prod_{i=n-c+1}^{n} (1 - k / i)``; 1 when ``n - c < k``. Needs ``k <= n``.
* ``pass_ratio_{mean,p50,p90}``: passed tests / total tests per sample, over all samples (percentiles: numpy's
  linear interpolation).
* ``exec_success_rate``: fraction of samples whose program ran to completion on every test it was given: verdict
  ``accepted`` or ``wrong_answer`` (no ``syntax_error``, ``runtime_error``, ``timeout``, ``memory_limit``). Samples
  with no extractable code count as ``syntax_error``. ``sandbox_error`` samples are infrastructure failures that say
  nothing about the program, so they are left out of this rate's denominator (``None`` if nothing is left). They do
  count as not accepted in accepted@1/pass@k (a result the judge could not confirm); ``n_sandbox_error`` reports them.
* ``verdicts``: ``{verdict: {"count", "fraction"}}`` over all samples, every key of ``VERDICTS`` present.
* ``avg_generated_tokens``: mean ``n_tokens`` per sample. ``judge_s_mean`` / ``judge_s_p95``: judge wall seconds
  per sample, over the rows that carry ``judge_s`` (those judged in this run: a row resumed from a journal carries no
  time; samples without code, never sent to the judge, count as 0 s); ``None`` when no row does.
* ``throughput_samples_per_s`` / ``throughput_tokens_per_s``: samples and generated tokens per generation wall second
  (``gen_wall_s``; ``None`` when nothing was generated in this run, e.g. everything resumed).
* ``cost_per_solved``: ``tokens_per_solved`` = all generated tokens / solved tasks, ``judge_s_per_solved`` = all judge
  seconds / solved tasks (only when every row carries ``judge_s``); a task is solved when at least one of its samples
  is accepted. ``None`` when no task is solved (the cost is unbounded, not zero).
* ``evalplus`` (only when rows carry ``base_status``/``plus_status``, i.e. EvalPlus datasets): ``{"base":
  {"accepted@1", "pass@k"}, "plus": {...}, "n_tasks"}``, ``base`` = the original benchmark (HumanEval, MBPP),
  ``plus`` = base and plus inputs both pass (HumanEval+, MBPP+): :func:`rlvr.eval.evalplus_columns.evalplus_metrics`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rlvr.eval.evalplus_columns import evalplus_metrics
from rlvr.judge.verdict import VERDICTS

__all__ = ["EXEC_OK", "compute_metrics", "pass_at_k", "per_task_counts", "percentile"]

EXEC_OK: frozenset[str] = frozenset({"accepted", "wrong_answer"})


def pass_at_k(n: int | Sequence[int] | np.ndarray, c: int | Sequence[int] | np.ndarray, k: int) -> np.ndarray:
    """Unbiased pass@k per task (Chen et al. 2021, stable product form); returns an array of shape ``[T]``.

    Args:
        n: samples per task (int or ``[T]``); c: accepted samples per task (``[T]``); k: 1 <= k.
    Raises ``ValueError`` if ``k < 1``, ``k > n`` for some task, or ``c`` is outside ``[0, n]``.

    Examples:
        >>> [round(float(pass_at_k(5, 2, k)[0]), 6) for k in (1, 2)]
        [0.4, 0.7]
    """
    c_arr = np.atleast_1d(np.asarray(c, dtype=np.int64))
    n_arr = np.broadcast_to(np.atleast_1d(np.asarray(n, dtype=np.int64)), c_arr.shape)
    if k < 1:
        raise ValueError(f"pass@k: k must be >= 1, got {k}")
    if (n_arr < k).any():
        raise ValueError(f"pass@k: k={k} exceeds the samples of some task (min n = {int(n_arr.min())})")
    if ((c_arr < 0) | (c_arr > n_arr)).any():
        raise ValueError("pass@k: accepted count outside [0, n]")
    out = np.empty(c_arr.shape, dtype=np.float64)
    for t, (nt, ct) in enumerate(zip(n_arr.tolist(), c_arr.tolist(), strict=True)):
        if nt - ct < k:
            out[t] = 1.0
        else:
            out[t] = 1.0 - float(np.prod(1.0 - k / np.arange(nt - ct + 1, nt + 1)))
    return out


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float | None:
    """``q``-th percentile (0–100, numpy linear interpolation) of ``values``; ``None`` when empty."""
    arr = np.asarray(values, dtype=np.float64)
    return float(np.percentile(arr, q)) if arr.size else None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def per_task_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{task_id: {"n": samples, "c": accepted, "first": verdict of sample 0}}`` in first-seen task order."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        t = out.setdefault(r["task_id"], {"n": 0, "c": 0, "first": None})
        t["n"] += 1
        t["c"] += r["verdict"] == "accepted"
        if r["sample_index"] == 0:
            t["first"] = r["verdict"]
    return out


def compute_metrics(
    rows: Sequence[Mapping[str, Any]],
    ks: Sequence[int] = (1,),
    greedy: bool = True,
    gen_wall_s: float | None = None,
    gen_samples: int | None = None,
    gen_tokens: int | None = None,
) -> dict[str, Any]:
    """Metrics dict (module doc) from judged sample rows.

    Each row needs ``task_id``, ``sample_index``, ``verdict``, ``pass_ratio``, ``n_tokens``, and ``judge_s``
    (seconds) when it was judged in this run (rows without it are left out of the judge-seconds statistics).
    ``gen_wall_s``: generation wall seconds of this run; ``gen_samples`` / ``gen_tokens``: samples and tokens generated
    in this run (default: all rows; less when rows were resumed), for throughput.
    Raises ``ValueError`` on an unknown verdict or a ``k`` above the samples per task.
    """
    n_samples = len(rows)
    for r in rows:
        if r["verdict"] not in VERDICTS:
            raise ValueError(f"row {r.get('key', '?')}: unknown verdict {r['verdict']!r}")
    tasks = per_task_counts(rows)
    n_arr = np.array([t["n"] for t in tasks.values()], dtype=np.int64)
    c_arr = np.array([t["c"] for t in tasks.values()], dtype=np.int64)
    counts = {v: 0 for v in VERDICTS}
    for r in rows:
        counts[r["verdict"]] += 1
    verdicts = {v: {"count": k, "fraction": (k / n_samples) if n_samples else 0.0} for v, k in counts.items()}
    ratios = [float(r["pass_ratio"]) for r in rows]
    judge_s = [float(r["judge_s"]) for r in rows if r.get("judge_s") is not None]
    tokens = [int(r["n_tokens"]) for r in rows]
    exec_den = n_samples - counts["sandbox_error"]
    solved = int((c_arr > 0).sum()) if len(c_arr) else 0
    m: dict[str, Any] = {
        "greedy": greedy,
        "n_tasks": len(tasks),
        "n_samples": n_samples,
        "samples_per_task": int(n_arr.max()) if len(n_arr) else 0,
        "accepted@1": (sum(t["first"] == "accepted" for t in tasks.values()) / len(tasks)) if tasks else None,
    }
    for k in ks:
        m[f"pass@{k}"] = float(pass_at_k(n_arr, c_arr, k).mean()) if len(tasks) else None
    gen_n = n_samples if gen_samples is None else gen_samples
    gen_tok = sum(tokens) if gen_tokens is None else gen_tokens
    m.update(
        {
            "n_solved": solved,
            "pass_ratio_mean": _mean(ratios),
            "pass_ratio_p50": percentile(ratios, 50),
            "pass_ratio_p90": percentile(ratios, 90),
            "exec_success_rate": (sum(counts[v] for v in EXEC_OK) / exec_den) if exec_den else None,
            "n_sandbox_error": counts["sandbox_error"],
            "verdicts": verdicts,
            "avg_generated_tokens": _mean(tokens),
            "judge_s_mean": _mean(judge_s),
            "judge_s_p95": percentile(judge_s, 95),
            "gen_wall_s": gen_wall_s,
            "throughput_samples_per_s": (gen_n / gen_wall_s) if gen_wall_s and gen_n else None,
            "throughput_tokens_per_s": (gen_tok / gen_wall_s) if gen_wall_s and gen_n else None,
            "tokens_per_solved": (sum(tokens) / solved) if solved else None,
            "judge_s_per_solved": (sum(judge_s) / solved) if solved and len(judge_s) == n_samples else None,
        }
    )
    ep = evalplus_metrics(rows, ks, estimator=pass_at_k)
    if ep is not None:  # EvalPlus datasets: the original benchmark's column and the "+" column from one run
        m["evalplus"] = ep
    return m
