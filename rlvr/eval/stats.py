"""Uncertainty statistics for evaluation metrics: bootstrap CIs over problems, mean ± std over seeds, paired phase
comparisons.

* **Bootstrap CI** (percentile method; Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 13): resample
  the ``T`` per-problem values with replacement ``B`` times, take the metric (the mean) of each resample, and report
  the ``alpha/2`` and ``1 - alpha/2`` quantiles of those ``B`` means. Problems are the unit of resampling, so the
  interval reflects which problems happened to be in the benchmark; the samples within a problem stay together
  (a problem's pass@k estimate is resampled as one value). Seeded (:class:`numpy.random.Generator`, PCG64), so the
  same inputs and seed give the same interval.
* **Seeds**: mean and sample standard deviation (``ddof = 1``, Bessel's correction) of one metric over training seeds.
* **Paired comparison** of two phases on the same problems: per problem, solved by A and/or B; *won* = solved by B
  only, *lost* = solved by A only. McNemar's exact test (McNemar 1947, "Note on the sampling error of the difference
  between correlated proportions or percentages", *Psychometrika* 12(2)) asks whether won and lost differ more than
  chance: under H0 the discordant problems split 50/50, so the two-sided p-value is the exact binomial test of
  ``won`` successes in ``won + lost`` trials at ``p = 0.5`` (:func:`scipy.stats.binomtest`); ``1.0`` when there is no
  discordant problem.
* **Wilson score interval** of a proportion (Wilson 1927, "Probable inference, the law of succession, and statistical
  inference", *JASA* 22(158)): unlike the percentile bootstrap, which has zero width when every problem agrees
  (0/8 gives [0, 0]), it stays honest at 0 and 1 (0/8 gives about [0, 0.32]).
* **Which interval a metric gets** (:func:`per_task_metric_cis`: the eval stage's metrics files, the HTML report and
  ``rlvr summary`` all show it): accepted@1, a proportion of the problems, the Wilson interval; pass@k, a mean of
  per-problem estimates, the percentile bootstrap, except at exactly 0 or 1 (every problem agrees: the bootstrap has
  zero width) where the Wilson interval over the ``n`` problems is used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "bootstrap_ci",
    "bootstrap_counts_ci",
    "mcnemar_exact",
    "paired_flips",
    "per_task_metric_cis",
    "proportion_ci",
    "seed_summary",
    "wilson_ci",
]


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, float | int | None]:
    """Percentile-bootstrap CI of the mean of per-problem ``values`` (module doc; Efron & Tibshirani 1993).

    Args:
        values: one number per problem, shape ``[T]`` (e.g. 0/1 accepted@1, or per-task pass@k estimates).
        n_boot: bootstrap resamples ``B`` (>= 1). seed: RNG seed. alpha: 1 - coverage (0.05 → 95 % interval).
    Returns ``{"value": mean, "lo", "hi", "n": T, "B": n_boot, "alpha": alpha}``; ``value``/``lo``/``hi`` are
    ``None`` when ``values`` is empty. A constant input gives a zero-width interval ``lo == value == hi``.
    Raises ``ValueError`` on ``n_boot < 1``, ``alpha`` outside ``(0, 1)``, a non-1-D input or a non-finite value.

    >>> ci = bootstrap_ci([1, 1, 1, 1], n_boot=50)
    >>> (ci["value"], ci["lo"], ci["hi"])
    (1.0, 1.0, 1.0)
    """
    if n_boot < 1:
        raise ValueError(f"bootstrap_ci: n_boot must be >= 1, got {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"bootstrap_ci: alpha must be in (0, 1), got {alpha}")
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"bootstrap_ci: values must be 1-D (one per problem), got shape {arr.shape}")
    out: dict[str, float | int | None] = {"value": None, "lo": None, "hi": None, "n": int(arr.size),
                                          "B": int(n_boot), "alpha": float(alpha)}
    if arr.size == 0:
        return out
    if not np.isfinite(arr).all():
        raise ValueError("bootstrap_ci: values contain NaN or infinity")
    rng = np.random.default_rng(seed)
    # [B, T] indices drawn with replacement; done in chunks so B * T stays small in memory.
    means = np.empty(n_boot, dtype=np.float64)
    chunk = max(1, 2_000_000 // arr.size)
    for s in range(0, n_boot, chunk):
        b = min(chunk, n_boot - s)
        idx = rng.integers(0, arr.size, size=(b, arr.size))
        means[s : s + b] = arr[idx].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    value = float(arr.mean())
    # Summation order can put a quantile a few ulp beside the point estimate (constant inputs); snap that back.
    lo = value if value - 1e-12 < lo <= value + 1e-12 else float(lo)
    hi = value if value - 1e-12 <= hi < value + 1e-12 else float(hi)
    out.update(value=value, lo=float(lo), hi=float(hi))
    return out


def bootstrap_counts_ci(
    successes: int, n: int, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> dict[str, float | int | None]:
    """Bootstrap CI of a proportion from its counts alone: ``successes`` ones and ``n - successes`` zeros.

    For a 0/1 per-problem metric (accepted@1) the bootstrap depends only on the counts, so this equals
    :func:`bootstrap_ci` on the reconstructed vector. Raises ``ValueError`` unless ``0 <= successes <= n``."""
    if not 0 <= successes <= n:
        raise ValueError(f"bootstrap_counts_ci: need 0 <= successes <= n, got {successes}/{n}")
    return bootstrap_ci(np.r_[np.ones(successes), np.zeros(n - successes)], n_boot=n_boot, seed=seed, alpha=alpha)


def per_task_metric_cis(
    per_task: Mapping[str, Mapping[str, Any]],
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> dict[str, dict[str, float | int | None]]:
    """CIs of accepted@1 (Wilson) and every pass@k (percentile bootstrap; Wilson at 0 or 1) in per-task arrays
    (module doc, "Which interval a metric gets").

    ``per_task``: ``{task_id: {"n", "c", "first": verdict of sample 0, "pass@k": float, …}}`` (the ``per_task``
    file written by :func:`rlvr.eval.protocol.evaluate`). accepted@1 per task is ``first == "accepted"``; pass@k per
    task is the stored unbiased estimate (Chen et al. 2021). Every bootstrapped metric is resampled with the same seed
    (so the same problem resamples are used for each). Returns ``{"accepted@1": ci, "pass@1": ci, …}`` (records of
    :func:`bootstrap_ci`'s shape).
    Raises ``ValueError`` naming the task when a ``pass@k`` value is missing for some tasks but not others."""
    tasks = list(per_task.items())
    out: dict[str, dict[str, float | int | None]] = {}
    acc = sum(t.get("first") == "accepted" for _, t in tasks)
    out["accepted@1"] = proportion_ci(acc, len(tasks), n_boot=n_boot, alpha=alpha)
    keys = sorted({k for _, t in tasks for k in t if k.startswith("pass@")}, key=lambda k: int(k[5:]))
    for key in keys:
        vals = []
        for tid, t in tasks:
            if key not in t or t[key] is None:
                raise ValueError(f"per-task arrays: task {tid!r} has no {key!r} while other tasks do")
            vals.append(float(t[key]))
        ci = bootstrap_ci(vals, n_boot=n_boot, seed=seed, alpha=alpha)
        if ci["value"] is not None and ci["value"] in (0.0, 1.0):  # every problem agrees: zero-width bootstrap
            ci = proportion_ci(round(float(ci["value"]) * len(vals)), len(vals), n_boot=n_boot, alpha=alpha)
        out[key] = ci
    return out


def proportion_ci(successes: int, n: int, n_boot: int = 1000, alpha: float = 0.05) -> dict[str, float | int | None]:
    """The Wilson interval (:func:`wilson_ci`) of ``successes / n`` as a CI record of :func:`bootstrap_ci`'s shape:
    ``{"value", "lo", "hi", "n", "B", "alpha"}`` (``B`` is ``n_boot``, kept so every record has the same keys;
    ``value``/``lo``/``hi`` ``None`` when ``n == 0``). Raises ``ValueError`` unless ``0 <= successes <= n``.

    >>> ci = proportion_ci(0, 16); (ci["value"], ci["lo"], round(ci["hi"], 3))
    (0.0, 0.0, 0.194)
    """
    w = wilson_ci(successes, n, alpha)
    return {"value": successes / n if n else None, "lo": w[0] if w else None, "hi": w[1] if w else None, "n": int(n),
            "B": int(n_boot), "alpha": float(alpha)}


def seed_summary(values: Sequence[float | None]) -> dict[str, float | int | None]:
    """Mean ± sample standard deviation (``ddof=1``) of one metric over seeds; ``None`` entries are skipped.

    Returns ``{"mean", "std", "n"}``: ``mean`` is ``None`` with no value, ``std`` is ``None`` with fewer than two.

    >>> s = seed_summary([0.2, 0.4]); (round(s["mean"], 6), round(s["std"], 6), s["n"])
    (0.3, 0.141421, 2)
    """
    vals = np.asarray([v for v in values if v is not None], dtype=np.float64)
    return {
        "mean": float(vals.mean()) if vals.size else None,
        "std": float(vals.std(ddof=1)) if vals.size >= 2 else None,
        "n": int(vals.size),
    }


def mcnemar_exact(won: int, lost: int) -> float:
    """Two-sided exact McNemar p-value (McNemar 1947) for ``won`` vs ``lost`` discordant pairs.

    = :func:`scipy.stats.binomtest` ``(won, won + lost, 0.5).pvalue``; ``1.0`` when ``won + lost == 0``.
    Raises ``ValueError`` on negative counts.

    >>> mcnemar_exact(0, 0), round(mcnemar_exact(6, 0), 6), round(mcnemar_exact(3, 1), 6)
    (1.0, 0.03125, 0.625)
    """
    if won < 0 or lost < 0:
        raise ValueError(f"mcnemar_exact: counts must be >= 0, got won={won}, lost={lost}")
    if won + lost == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(won, won + lost, 0.5, alternative="two-sided").pvalue)


def paired_flips(a: Mapping[str, bool], b: Mapping[str, bool]) -> dict[str, Any]:
    """Paired comparison of phase A → phase B on the problems both were scored on (module doc).

    Args:
        a, b: ``{task_id: solved}`` per phase (e.g. accepted@1 per task). Only task ids present in both count.
    Returns ``{"n_common", "both", "neither", "won" (B only), "lost" (A only), "net" (won - lost),
    "a_rate", "b_rate" (solved fractions on the common tasks, ``None`` if none), "p_value" (exact McNemar),
    "n_only_a", "n_only_b" (tasks scored in one phase only, left out)}``.

    >>> r = paired_flips({"t1": True, "t2": False, "t3": False}, {"t1": True, "t2": True, "t3": False})
    >>> (r["won"], r["lost"], r["both"], r["neither"], r["p_value"])
    (1, 0, 1, 1, 1.0)
    """
    common = [t for t in a if t in b]
    won = sum(1 for t in common if b[t] and not a[t])
    lost = sum(1 for t in common if a[t] and not b[t])
    both = sum(1 for t in common if a[t] and b[t])
    n = len(common)
    return {
        "n_common": n,
        "both": both,
        "neither": n - won - lost - both,
        "won": won,
        "lost": lost,
        "net": won - lost,
        "a_rate": (both + lost) / n if n else None,
        "b_rate": (both + won) / n if n else None,
        "p_value": mcnemar_exact(won, lost),
        "n_only_a": sum(1 for t in a if t not in b),
        "n_only_b": sum(1 for t in b if t not in a),
    }


def wilson_ci(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float] | None:
    """Wilson score interval ``(lo, hi)`` of the proportion ``successes / n`` (Wilson 1927; module doc).

    ``z`` is the standard normal ``1 - alpha/2`` quantile (1.96 for a 95 % interval); ``lo = (p + z²/2n - h) / (1 +
    z²/n)``, ``hi`` likewise with ``+ h``, ``h = z·sqrt(p(1-p)/n + z²/4n²)``. ``None`` when ``n == 0``. Raises
    ``ValueError`` unless ``0 <= successes <= n`` and ``0 < alpha < 1``.

    >>> tuple(round(x, 3) for x in wilson_ci(0, 8)), tuple(round(x, 3) for x in wilson_ci(8, 8))
    ((0.0, 0.324), (0.676, 1.0))
    >>> tuple(round(x, 3) for x in wilson_ci(5, 10))
    (0.237, 0.763)
    """
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_ci: need 0 <= successes <= n, got {successes}/{n}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"wilson_ci: alpha must be in (0, 1), got {alpha}")
    if n == 0:
        return None
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - alpha / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * float(np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi
