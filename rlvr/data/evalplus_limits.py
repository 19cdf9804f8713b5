"""Per-test time limits of EvalPlus datasets: EvalPlus's rule, measured once per dataset version, stored in git.

**The rule.** EvalPlus (``evalplus`` 0.3.1, ``evalplus/eval/__init__.py::untrusted_check``, defaults in
``evalplus/config.py``) gives every input its own wall limit ``max(min_time_limit, gt_time_limit_factor * t_gt)``,
``t_gt`` the ground truth's time on that input, with ``DEFAULT_MIN_TIME_LIMIT = 1.0`` s and
``DEFAULT_GT_TIME_LIMIT_FACTOR = 4.0`` (:func:`evalplus_limit`, exact to the millisecond, used when a caller measures
limits on the fly, as the parity bench does). rlvr's pipeline stores *quantised* limits (:func:`quantised_limit`):
``max(1 s, 2 ** ceil(log2(4 * t_gt)))`` — 1, 2, 4, 8 … seconds, never below EvalPlus's own limit — with ``t_gt`` the
*minimum* over ``repeats`` timed runs of the reference (the run least disturbed by other load). A re-measurement on
another machine, or under load, moves a limit only when ``4 * t_gt`` crosses a power of two; with the 1 s floor almost
every input keeps 1 s.

**Measured once, committed.** :func:`measure_table` (command ``rlvr time-limits``, ``rlvr.cli``) fills
the oracles of each EvalPlus dataset in the judge, times the reference, and writes the limits to a JSON file committed
to git (``data/evalplus_time_limits.json``), one entry per dataset version (``humanevalplus-v0.1.10``) holding the
sha256 of the bundled data file it was measured on. The ``governance`` stage never measures: it reads the file and
applies it (:func:`apply_time_limits`, after the oracles are filled), so the governed problems are a function of the
data, the params and this file — not of the machine's load. A dataset missing from the file, a data file whose sha256
changed, or a problem whose test count differs is a :class:`~rlvr.data.errors.DataError` naming the file and the
command that re-measures. ``Problem.time_limit_s`` becomes the largest per-test limit, for judges that only read the
problem's limit.

File layout (sorted keys; only limits above the floor are listed)::

    {"rule": "...", "min_time_limit_s": 1.0, "factor": 4.0, "repeats": 3,
     "datasets": {"humanevalplus-v0.1.10": {
         "spec": "humanevalplus:v0.1.10", "sha256": "<bundled data file>",
         "problems": {"humanevalplus/HumanEval/0": {"tests": 1085, "above_floor": {"17": 2.0}}, ...},
         "not_timed": {"<id>": "<reason>"}}}}

Test indices are positions in the problem's test list after the oracles are filled (the list the judge runs).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rlvr.data.errors import DataError
from rlvr.data.schema import Problem

__all__ = ["DEFAULT_FILE", "DEFAULT_GT_TIME_LIMIT_FACTOR", "DEFAULT_MIN_TIME_LIMIT", "DEFAULT_REPEATS",
           "MEASURE_COMMAND", "apply_time_limits", "dataset_key", "evalplus_limit", "is_evalplus",
           "measure_table", "quantised_limit", "read_table", "set_time_limits", "write_table"]

DEFAULT_MIN_TIME_LIMIT = 1.0  # seconds; evalplus/config.py
DEFAULT_GT_TIME_LIMIT_FACTOR = 4.0  # evalplus/config.py
DEFAULT_REPEATS = 3  # timed runs of the reference per dataset measurement; the minimum per test is kept
DEFAULT_FILE = "data/evalplus_time_limits.json"
MEASURE_COMMAND = "rlvr time-limits"
RULE = ("limit_s = max(min_time_limit_s, 2 ** ceil(log2(factor * t_ref_s))), t_ref_s = the minimum wall time of the "
        "reference solution on that test over `repeats` runs in the judge (EvalPlus: max(1.0, 4.0 * t_gt), "
        "quantised up to a power of two)")


def is_evalplus(problem: Problem) -> bool:
    """True when ``problem`` has EvalPlus tests (a test with a ``group``)."""
    return any(getattr(t, "group", None) for t in problem.tests)


def dataset_key(problem: Problem) -> str:
    """The dataset version an EvalPlus problem belongs to, as a file slug: ``"humanevalplus-v0.1.10"`` (``source``
    and ``meta['version']``; just ``source`` when the loader recorded no version)."""
    version = problem.meta.get("version")
    return f"{problem.source}-{version}" if version else problem.source


def evalplus_limit(gt_time_s: float, min_time_limit: float = DEFAULT_MIN_TIME_LIMIT,
                   factor: float = DEFAULT_GT_TIME_LIMIT_FACTOR) -> float:
    """EvalPlus's limit ``max(min_time_limit, factor * gt_time_s)`` in seconds, rounded up to the millisecond.

    >>> evalplus_limit(0.1), evalplus_limit(0.30001)
    (1.0, 1.201)
    """
    return max(min_time_limit, math.ceil(factor * max(gt_time_s, 0.0) * 1000.0) / 1000.0)


def quantised_limit(gt_time_s: float, min_time_limit: float = DEFAULT_MIN_TIME_LIMIT,
                    factor: float = DEFAULT_GT_TIME_LIMIT_FACTOR) -> float:
    """The stored limit, seconds: ``max(min_time_limit, 2 ** ceil(log2(factor * gt_time_s)))`` — EvalPlus's limit
    (:func:`evalplus_limit`) rounded up to a power of two, so that timing noise rarely moves it.

    >>> quantised_limit(0.1), quantised_limit(0.26), quantised_limit(0.5), quantised_limit(0.51)
    (1.0, 2.0, 2.0, 4.0)
    """
    x = factor * max(gt_time_s, 0.0)
    return max(min_time_limit, 2.0 ** math.ceil(math.log2(x))) if x > 0 else min_time_limit


MEASURE_CEILING_S = 60.0
"""Per-test limit (seconds) while a reference is timed: EvalPlus times its ground truth with no limit; under a real
limit a slow test would time out, and after the judge's repeated-timeout rule the tests after it would not run at all
and time as 0 s (seen: HumanEval/83's million-digit tests, 10 s each, stored at the 1 s floor)."""


def _time_reference(p: Problem, judge: Any, repeats: int) -> tuple[list[float] | None, str]:
    """Per-test wall seconds of ``p``'s first reference (minimum over ``repeats`` runs, every test under
    :data:`MEASURE_CEILING_S`), or ``(None, reason)`` when the judge fails or a test times out even then."""
    best: list[float] | None = None
    roomy = p.model_copy(update={
        "time_limit_s": MEASURE_CEILING_S,
        "tests": [t.model_copy(update={"time_limit_s": MEASURE_CEILING_S}) for t in p.tests]})
    for _ in range(max(1, repeats)):
        try:
            res = judge.judge(roomy, p.solutions[0])
        except Exception as exc:  # infrastructure: reported, never silent
            return None, f"judge_error: {type(exc).__name__}: {exc}"[:300]
        if len(res.tests) != len(p.tests) or any(t.verdict == "sandbox_error" for t in res.tests):
            return None, f"judge_error: {res.message}"[:300]
        slow = [i for i, t in enumerate(res.tests) if t.verdict == "timeout"]
        if slow:
            return None, f"timeout: test {slow[0]} over {MEASURE_CEILING_S:g} s"
        times = [float(t.time_s) for t in res.tests]
        best = times if best is None else [min(a, b) for a, b in zip(best, times, strict=True)]
    return best, ""


def set_time_limits(problems: Sequence[Problem], judge: Any, workers: int = 2,
                    min_time_limit: float = DEFAULT_MIN_TIME_LIMIT, factor: float = DEFAULT_GT_TIME_LIMIT_FACTOR,
                    repeats: int = 1, quantise: bool = False) -> tuple[list[Problem], dict[str, Any]]:
    """Measure and set EvalPlus per-test limits on every EvalPlus problem of ``problems`` (others pass through).

    Args:
        judge: anything with ``judge(problem, solution) -> JudgeResult`` (per-test ``time_s``, wall seconds).
        workers: problems judged concurrently. min_time_limit (s) / factor: EvalPlus's defaults.
        repeats: timed runs of each reference; the minimum per test is used.
        quantise: :func:`quantised_limit` (the committed file's rule) instead of EvalPlus's exact
            :func:`evalplus_limit`.
    Returns ``(problems, report)``, report ``{"problems_timed", "not_timed": [{id, reason}], "max_limit_s"}``.
    A problem whose reference cannot be judged (no solution, sandbox failure) keeps its limits and is listed; one
    whose tests all have limits already is left as it is. The result depends on the machine's speed and load: the
    pipeline reads committed limits instead (:func:`apply_time_limits`)."""
    todo = [p for p in problems if is_evalplus(p) and p.solutions and any(t.time_limit_s is None for t in p.tests)]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        times = dict(zip((p.id for p in todo), ex.map(lambda p: _time_reference(p, judge, repeats), todo),
                         strict=True))
    rule = quantised_limit if quantise else evalplus_limit
    out: list[Problem] = []
    report: dict[str, Any] = {"problems_timed": 0, "not_timed": [], "max_limit_s": 0.0}
    for p in problems:
        if p.id not in times:
            if is_evalplus(p) and not p.solutions:
                report["not_timed"].append({"id": p.id, "reason": "no_solution"})
            out.append(p)
            continue
        ts, err = times[p.id]
        if ts is None:
            report["not_timed"].append({"id": p.id, "reason": err})
            out.append(p)
            continue
        limits = [rule(t, min_time_limit, factor) for t in ts]
        report["problems_timed"] += 1
        report["max_limit_s"] = max(report["max_limit_s"], max(limits, default=0.0))
        out.append(_with_limits(p, limits))
    return out, report


def _with_limits(p: Problem, limits: Sequence[float]) -> Problem:
    tests = [t.model_copy(update={"time_limit_s": lim}) for t, lim in zip(p.tests, limits, strict=True)]
    return p.model_copy(update={"tests": tests, "time_limit_s": max(limits, default=p.time_limit_s)})


# ------------------------------------------------------------------------------------------ the committed table
def read_table(path: str | Path = DEFAULT_FILE) -> dict[str, Any]:
    """Read the limits file. Raises :class:`DataError` naming the file when it is missing or malformed."""
    p = Path(path)
    try:
        table = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise DataError(f"{p}: EvalPlus time-limit file not found: measure it with `{MEASURE_COMMAND}`") from exc
    except (OSError, ValueError) as exc:
        raise DataError(f"{p}: unreadable EvalPlus time-limit file: {exc}") from exc
    if not isinstance(table, dict) or not isinstance(table.get("datasets"), dict):
        raise DataError(f"{p}: field 'datasets': missing or not an object")
    table.setdefault("source_path", str(p))
    return table


def write_table(path: str | Path, table: Mapping[str, Any]) -> None:
    """Write the limits file atomically, keys sorted, one problem per line (a readable git diff)."""
    from rlvr.io import atomic_write_text

    body = {k: v for k, v in table.items() if k != "source_path"}
    datasets = body.pop("datasets", {})
    lines = ["{"] + [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in sorted(body.items())]
    lines.append('  "datasets": {')
    for di, (slug, entry) in enumerate(sorted(datasets.items())):
        head = {k: v for k, v in entry.items() if k not in ("problems", "not_timed")}
        lines.append(f"    {json.dumps(slug)}: {{")
        lines += [f"      {json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in sorted(head.items())]
        lines.append(f'      "not_timed": {json.dumps(entry.get("not_timed", {}), sort_keys=True)},')
        lines.append('      "problems": {')
        probs = sorted(entry.get("problems", {}).items())
        lines += [f"        {json.dumps(pid)}: {json.dumps(e, sort_keys=True)}{',' if i < len(probs) - 1 else ''}"
                  for i, (pid, e) in enumerate(probs)]
        lines.append("      }")
        lines.append("    }" + ("," if di < len(datasets) - 1 else ""))
    lines += ["  }", "}"]
    atomic_write_text(path, "\n".join(lines) + "\n")


def _entry(p: Problem, floor: float) -> dict[str, Any]:
    above = {str(i): t.time_limit_s for i, t in enumerate(p.tests) if t.time_limit_s and t.time_limit_s > floor}
    return {"tests": len(p.tests), "above_floor": above} if above else {"tests": len(p.tests)}


def _data_sha256(spec: str) -> str:
    from rlvr.data.bundled import resolve

    return ",".join(f.sha256 for f in resolve(spec).files)


def apply_time_limits(problems: Sequence[Problem], table: Mapping[str, Any]) -> tuple[list[Problem], dict[str, Any]]:
    """Set the committed per-test limits of ``table`` (:func:`read_table`) on every EvalPlus problem (others pass
    through unchanged); a problem the measurement could not time (listed under ``not_timed``) keeps its limits.

    Returns ``(problems, report)`` with report ``{"file", "problems_limited", "tests_above_floor", "max_limit_s",
    "not_timed": [ids]}``. Raises :class:`DataError` (naming the file and :data:`MEASURE_COMMAND`) when a dataset is
    missing from the table, its data file's sha256 differs from the one measured, a problem is missing, or a
    problem's test count differs from the measured one."""
    where = table.get("source_path", DEFAULT_FILE)
    floor = float(table.get("min_time_limit_s", DEFAULT_MIN_TIME_LIMIT))
    datasets: Mapping[str, Any] = table.get("datasets", {})
    checked: set[str] = set()
    report: dict[str, Any] = {"file": str(where), "problems_limited": 0, "tests_above_floor": 0, "max_limit_s": 0.0,
                              "not_timed": []}
    out: list[Problem] = []
    for p in problems:
        if not is_evalplus(p):
            out.append(p)
            continue
        slug = dataset_key(p)
        entry = datasets.get(slug)
        if entry is None:
            raise DataError(f"{where}: no time limits for dataset {slug!r} (problem {p.id}): measure them with "
                            f"`{MEASURE_COMMAND} --dataset <name:version>`")
        if slug not in checked:
            if entry.get("spec") and entry.get("sha256") and _data_sha256(entry["spec"]) != entry["sha256"]:
                raise DataError(f"{where}: dataset {slug!r}: limits were measured on data file sha256 "
                                f"{entry['sha256']}, the bundled file differs: re-measure with `{MEASURE_COMMAND}`")
            checked.add(slug)
        if p.id in entry.get("not_timed", {}):
            report["not_timed"].append(p.id)
            out.append(p)
            continue
        e = entry.get("problems", {}).get(p.id)
        if e is None:
            raise DataError(f"{where}: dataset {slug!r}: no limits for problem {p.id!r}: re-measure with "
                            f"`{MEASURE_COMMAND}`")
        if int(e.get("tests", -1)) != len(p.tests):
            raise DataError(f"{where}: problem {p.id!r}: {e.get('tests')} tests measured, {len(p.tests)} now: "
                            f"re-measure with `{MEASURE_COMMAND}`")
        above = {int(i): float(v) for i, v in e.get("above_floor", {}).items()}
        limits = [above.get(i, floor) for i in range(len(p.tests))]
        report["problems_limited"] += 1
        report["tests_above_floor"] += len(above)
        report["max_limit_s"] = max(report["max_limit_s"], max(limits, default=0.0))
        out.append(_with_limits(p, limits))
    return out, report


def measure_table(filled: Mapping[str, Sequence[Problem]], judge: Any, *, workers: int = 2,
                  repeats: int = DEFAULT_REPEATS, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Measure the quantised limits of EvalPlus datasets: ``filled`` maps a spec (``"humanevalplus:v0.1.10"``) to
    its bundled problems with the oracles already filled (:func:`rlvr.data.oracles.fill_expected` with
    ``measure_limits=False``, as governance fills them); each reference is timed ``repeats`` times in ``judge`` and
    the minimum per test is kept. Returns the table (``base``'s other datasets kept). Minutes of CPU per dataset; run
    on an otherwise idle machine (command ``rlvr time-limits``)."""
    from rlvr.data.bundled import parse_spec

    table: dict[str, Any] = {"rule": RULE, "min_time_limit_s": DEFAULT_MIN_TIME_LIMIT,
                             "factor": DEFAULT_GT_TIME_LIMIT_FACTOR, "repeats": repeats,
                             "datasets": dict((base or {}).get("datasets", {}))}
    for spec, problems in filled.items():
        name, version = parse_spec(spec)
        timed, rep = set_time_limits(problems, judge, workers=workers, repeats=repeats, quantise=True)
        not_timed = {r["id"]: r["reason"] for r in rep["not_timed"]}
        table["datasets"][name if version is None else f"{name}-{version}"] = {
            "spec": spec, "sha256": _data_sha256(spec),
            "problems": {p.id: _entry(p, DEFAULT_MIN_TIME_LIMIT) for p in timed
                         if is_evalplus(p) and p.id not in not_timed},
            "not_timed": not_timed,
        }
    return table
