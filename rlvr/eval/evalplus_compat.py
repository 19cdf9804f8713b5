"""What makes ``rlvr judge`` a drop-in for ``evalplus.evaluate``: its dataset names, pass@k and results file.

Source: ``evalplus`` 0.3.1, ``evalplus/evaluate.py`` (``evaluate``) and ``evalplus/data/{humaneval,mbpp}.py``.

* **Dataset names.** EvalPlus's ``--dataset humaneval`` is HumanEval+ and ``--dataset mbpp`` is MBPP+ (the versions
  0.3.1 pins: ``HUMANEVAL_PLUS_VERSION = "v0.1.10"``, ``MBPP_PLUS_VERSION = "v0.2.0"``); in rlvr ``humaneval`` and
  ``mbpp`` are the original benchmarks. :func:`resolve_dataset` maps EvalPlus's names only in EvalPlus mode
  (``rlvr judge --evalplus``), and always reads ``humaneval+`` / ``mbpp+`` and both version spellings
  (``humanevalplus:v0.1.10`` = ``humanevalplus-v0.1.10``, :func:`rlvr.data.bundled.canonical_name`).
* **pass@k** (:func:`pass_at_k_columns`): per task ``n`` = its samples, ``c`` = those passing; ``base`` counts
  ``base_status == "pass"``, ``plus`` counts ``base_status == plus_status == "pass"``; the unbiased estimator
  (Chen et al. 2021, :func:`rlvr.eval.metrics.pass_at_k`) averaged over tasks, reported for a ``k`` only when every
  task has at least ``k`` samples (EvalPlus: ``if total.min() >= k``).
* **Results file** (:func:`eval_results`): EvalPlus writes ``<samples>_eval_results.json`` (for ``samples.jsonl``)
  as ``{"date": "%Y-%m-%d %H:%M", "hash": <dataset hash>, "eval": {task_id: [{"task_id", "solution",
  "base_status", "plus_status", "base_fail_tests", "plus_fail_tests"}, …]}}``, one list entry per sample in the
  samples file's order; rlvr adds ``"pass_at_k": {"base": {"pass@k": …}, "plus": {…}}`` (what 0.3.1 prints; later
  EvalPlus releases write it too; 0.3.1 reads only ``eval`` back). Statuses are ``pass`` / ``fail``, and ``timeout``
  only where EvalPlus's outer timeout kills the check: a program whose execution never reaches its entry point
  (a test that times out is ``fail``: EvalPlus's per-input limit raises inside its check). ``*_fail_tests`` holds the
  first failing input as EvalPlus writes it (:mod:`rlvr.eval.evalplus_inputs`: tuples as lists, MBPP+ 115/124/252
  re-serialised, ``Infinity``/``NaN``, integers in full; EvalPlus's default fast check stops at it), ``[]`` when the
  group passed or the program failed before its tests. ``hash`` here is rlvr's: the sha256 of the judged problems'
  content hashes, so two results files compare only when their problems did.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rlvr.data.bundled import canonical_name
from rlvr.data.schema import Problem
from rlvr.eval.metrics import pass_at_k
from rlvr.judge.verdict import JudgeResult

__all__ = ["DEFAULT_KS", "EVALPLUS_NAMES", "PLUS_ALIASES", "eval_results", "eval_results_path", "fail_tests",
           "pass_at_k_columns", "problems_hash", "resolve_dataset"]

#: EvalPlus's ``--dataset`` names → rlvr's dataset (EvalPlus 0.3.1's pinned versions).
EVALPLUS_NAMES: dict[str, str] = {"humaneval": "humanevalplus-v0.1.10", "mbpp": "mbppplus-v0.2.0"}

#: Other spellings of the "+" benchmarks, read in any mode.
PLUS_ALIASES: dict[str, str] = {"humaneval+": "humanevalplus", "mbpp+": "mbppplus"}

#: EvalPlus's reported k values.
DEFAULT_KS: tuple[int, ...] = (1, 10, 100)


def resolve_dataset(spec: str, evalplus: bool = False) -> str:
    """The canonical rlvr name of dataset ``spec``.

    Args:
        spec: a dataset name with an optional version in either spelling (``:v0.1.10`` or ``-v0.1.10``).
        evalplus: EvalPlus mode: ``humaneval`` → ``humanevalplus-v0.1.10``, ``mbpp`` → ``mbppplus-v0.2.0``.

    >>> resolve_dataset("humaneval"), resolve_dataset("humaneval", evalplus=True), resolve_dataset("mbpp+:v0.1.0")
    ('humaneval', 'humanevalplus-v0.1.10', 'mbppplus-v0.1.0')

    Raises :class:`rlvr.data.errors.DataError` on an empty name."""
    s = spec.strip()
    if evalplus and s in EVALPLUS_NAMES:
        return EVALPLUS_NAMES[s]
    name, sep, version = s.partition(":")
    for alias, real in PLUS_ALIASES.items():
        if name == alias or name.startswith(alias + "-v"):
            name = real + name[len(alias):]
    return canonical_name(name + sep + version)


def eval_results_path(samples: str) -> str:
    """EvalPlus's results path for a samples file: ``x.jsonl`` → ``x_eval_results.json`` (any other name: the name
    plus ``_eval_results.json``)."""
    return samples[: -len(".jsonl")] + "_eval_results.json" if samples.endswith(".jsonl") else \
        samples + "_eval_results.json"


def problems_hash(problems: Sequence[Problem]) -> str:
    """sha256 (hex) over the sorted ``id:content_sha256`` lines of ``problems``: the ``hash`` of the results file."""
    lines = sorted(f"{p.id}:{p.content_sha256()}" for p in problems)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def fail_tests(problem: Problem, result: JudgeResult | None, loaded: str | None = None) -> dict[str, Any]:
    """``{"base_status", "plus_status", "base_fail_tests", "plus_fail_tests"}`` of one sample in EvalPlus's terms
    (module doc): a group passes iff each of its tests is ``accepted``, else ``fail`` (a test that timed out too:
    EvalPlus's per-input time limit raises inside its check, which it counts as ``fail``) with the first failing
    test's input (:func:`rlvr.eval.evalplus_inputs.evalplus_input`).

    ``loaded``: whether the program got as far as the tests: ``None`` (it did, or unknown), ``"fail"`` (executing it
    raised or exited before its entry point existed) or ``"timeout"`` (executing it did not end). EvalPlus then
    writes that status for both groups with no failing input (its ``exec`` of the solution is outside the per-input
    loop; a hang there is killed by the outer timeout, status ``timeout``). A result without per-test records
    (nothing ran) or a program that does not compile fails both groups with no failing input listed."""
    from rlvr.eval.evalplus_inputs import evalplus_input

    out: dict[str, Any] = {}
    ran = result is not None and len(result.tests) == len(problem.tests)
    compiled = ran and not any(r.verdict == "syntax_error" for r in result.tests)  # type: ignore[union-attr]
    for g in ("base", "plus"):
        idx = [i for i, t in enumerate(problem.tests) if getattr(t, "group", None) == g]
        if not compiled or loaded is not None:
            out[f"{g}_status"], out[f"{g}_fail_tests"] = loaded if compiled and loaded else "fail", []
            continue
        bad = [i for i in idx if result.tests[i].verdict != "accepted"]  # type: ignore[union-attr]
        if not bad:
            out[f"{g}_status"], out[f"{g}_fail_tests"] = "pass", []
            continue
        first = evalplus_input(problem, bad[0])
        out[f"{g}_status"], out[f"{g}_fail_tests"] = "fail", ([] if first is None else [first])
    return out


def pass_at_k_columns(rows: Sequence[Mapping[str, Any]], ks: Sequence[int] = DEFAULT_KS) -> dict[str, dict[str, float]]:
    """EvalPlus's ``pass_at_k`` object from per-sample rows (``task_id``, ``base_status``, ``plus_status``):
    ``{"base": {"pass@k": mean over tasks}, "plus": {…}}``; a ``k`` appears only when every task has ``>= k``
    samples; ``plus`` only when some row has a ``plus_status``. Empty ``rows`` → ``{"base": {}}``."""
    tasks: dict[str, list[int]] = {}
    for r in rows:
        t = tasks.setdefault(str(r["task_id"]), [0, 0, 0])
        t[0] += 1
        t[1] += r.get("base_status") == "pass"
        t[2] += r.get("base_status") == "pass" and r.get("plus_status") == "pass"
    if not tasks:
        return {"base": {}}
    ns = [t[0] for t in tasks.values()]
    out: dict[str, dict[str, float]] = {}
    cols = [("base", 1)] + ([("plus", 2)] if any(r.get("plus_status") is not None for r in rows) else [])
    for col, j in cols:
        cs = [t[j] for t in tasks.values()]
        out[col] = {f"pass@{k}": float(pass_at_k(ns, cs, k).mean()) for k in sorted(set(ks)) if min(ns) >= k}
    return out


def eval_results(samples: Sequence[Mapping[str, Any]], problems: Sequence[Problem],
                 results: Sequence[JudgeResult | None], ks: Sequence[int] = DEFAULT_KS,
                 now: datetime | None = None, loaded: Sequence[str | None] | None = None) -> dict[str, Any]:
    """The ``<samples>_eval_results.json`` object (module doc) for judged samples.

    Args:
        samples: ``{"task_id", "solution"}`` per sample (``solution``: the program judged), in file order.
        problems / results: the problem and the verdict of each sample (same length as ``samples``).
        ks: the k values to report. now: the timestamp (default: the current local time).
        loaded: per sample, whether the program reached its tests (:func:`fail_tests`; default: all did).
    Raises ``ValueError`` when the sequences differ in length."""
    loaded = list(loaded) if loaded is not None else [None] * len(samples)
    if not (len(samples) == len(problems) == len(results) == len(loaded)):
        raise ValueError(f"eval_results: {len(samples)} samples, {len(problems)} problems, {len(results)} results, "
                         f"{len(loaded)} load statuses")
    ev: dict[str, list[dict[str, Any]]] = {}
    rows = []
    for s, p, r, ld in zip(samples, problems, results, loaded, strict=True):
        entry = {"task_id": s["task_id"], "solution": s["solution"], **fail_tests(p, r, ld)}
        if not any(getattr(t, "group", None) for t in p.tests):  # not an EvalPlus problem: the verdict is base
            ok = r is not None and r.accepted
            entry.update(base_status="pass" if ok else "fail", plus_status=None, base_fail_tests=[],
                         plus_fail_tests=[])
        ev.setdefault(str(s["task_id"]), []).append(entry)
        rows.append(entry)
    return {"date": (now or datetime.now()).strftime("%Y-%m-%d %H:%M"),
            "hash": problems_hash(list({p.id: p for p in problems}.values())), "eval": ev,
            "pass_at_k": pass_at_k_columns(rows, ks)}
