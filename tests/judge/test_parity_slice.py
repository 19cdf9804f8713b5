"""A fast slice of the EvalPlus parity bench (``bench/parity/``), through the real judge, without ``evalplus``.

The committed reference ``bench/parity/evalplus_verdicts/<dataset>.jsonl.gz`` (all four versions: HumanEval+ v0.1.9,
v0.1.10, MBPP+ v0.1.0, v0.2.0) holds the ``base_status`` / ``plus_status`` that the ``evalplus`` 0.3.1 evaluator
gave each bench solution (after ``compare.py``'s lone re-checks; ``bench/parity/README.md`` says how it was made).
Here a slice of tasks is loaded from ``data/raw``, filled as the governance stage fills it, its bench
solutions are regenerated (``bench/parity/solutions.py``, deterministic) and judged, and rlvr's statuses must equal
EvalPlus's on every pair. Timing mutants (``slow_*``) are left out (no timed unit tests); HumanEval+ is loaded with
``evalplus_release="0.3.1"`` so that HumanEval/32 reproduces that release's ``find_zero`` bug exactly.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERDICTS = ROOT / "bench" / "parity" / "evalplus_verdicts"
SLICE = {  # dataset → (spec, loader options, tasks): ~50 tasks with small inputs, every special oracle family
    "mbppplus-v0.2.0": ("mbppplus:v0.2.0", {}, [
        "Mbpp/2", "Mbpp/7", "Mbpp/20", "Mbpp/80", "Mbpp/65", "Mbpp/70", "Mbpp/75", "Mbpp/85", "Mbpp/100",
        "Mbpp/111", "Mbpp/125", "Mbpp/140", "Mbpp/160", "Mbpp/165", "Mbpp/170", "Mbpp/230", "Mbpp/232", "Mbpp/235",
        "Mbpp/250", "Mbpp/260", "Mbpp/270", "Mbpp/280", "Mbpp/285", "Mbpp/300", "Mbpp/305", "Mbpp/395", "Mbpp/405",
        "Mbpp/410", "Mbpp/425", "Mbpp/435", "Mbpp/440", "Mbpp/455", "Mbpp/460", "Mbpp/558", "Mbpp/579", "Mbpp/581",
        "Mbpp/737", "Mbpp/769", "Mbpp/787", "Mbpp/794"]),
    "humanevalplus-v0.1.10": ("humanevalplus:v0.1.10", {"evalplus_release": "0.3.1"}, [
        "HumanEval/0", "HumanEval/2", "HumanEval/4", "HumanEval/5", "HumanEval/21", "HumanEval/30",
        "HumanEval/32", "HumanEval/45", "HumanEval/60", "HumanEval/70"]),
    "mbppplus-v0.1.0": ("mbppplus:v0.1.0", {}, [  # the v0.1.0-only oracles: are_equivalent, sum_div, set_eq /249
        "Mbpp/164", "Mbpp/295", "Mbpp/249", "Mbpp/3", "Mbpp/17", "Mbpp/58", "Mbpp/62", "Mbpp/88", "Mbpp/127",
        "Mbpp/222", "Mbpp/240", "Mbpp/557", "Mbpp/737"]),
    "humanevalplus-v0.1.9": ("humanevalplus:v0.1.9", {"evalplus_release": "0.3.1"}, [
        "HumanEval/3", "HumanEval/13", "HumanEval/32", "HumanEval/52", "HumanEval/101", "HumanEval/152"]),
}
SOLUTIONS_PER_TASK = 5
# first the mutants that separated rlvr from EvalPlus before the parity work (docs/judge/parity.md), then the rest
PRIORITY = ["canonical", "wrap:bool_to_int", "wrap:int_to_float", "wrap:match_to_false", "wrap:none_to_false",
            "wrap:match_to_bool", "wrap:perturb", "wrap:round7", "wrap:to_set", "wrap:reversed", "wrap:raises"]


def _reference(name: str) -> dict[tuple[str, str], dict]:
    path = VERDICTS / f"{name}.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return {(r["task_id"], r["solution_id"]): r for r in map(json.loads, fh)}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLICE))
def test_parity_slice_matches_committed_evalplus_verdicts(judge, name):
    sys.path.insert(0, str(ROOT / "bench" / "parity"))
    import solutions as bench_solutions

    from rlvr.data.bundled import resolve
    from rlvr.data.governance import fill_expected
    from rlvr.data.loaders import load
    from rlvr.eval.evalplus_columns import group_statuses

    spec, options, tasks = SLICE[name]
    ref = _reference(name)
    problems = [p for p in load(spec, options=options) if p.meta["task_id"] in set(tasks)]
    problems, rep = fill_expected(problems, judge)
    assert not rep["dropped"] and len(problems) == len(tasks)
    by_task = {p.meta["task_id"]: p for p in problems}
    data = ROOT / "data" / "raw" / resolve(spec).files[0].path
    with gzip.open(data, "rt", encoding="utf-8") as fh:
        records = [r for r in map(json.loads, fh) if r["task_id"] in by_task]
    sols = [s for s in bench_solutions.make(records, by_task)
            if not s["solution_id"].startswith("wrap:slow") and (s["task_id"], s["solution_id"]) in ref]
    picked: list[dict] = []
    rank = {sid: i for i, sid in enumerate(PRIORITY)}
    for t in tasks:  # canonical + the most telling mutants of the task
        mine = sorted((s for s in sols if s["task_id"] == t), key=lambda s: rank.get(s["solution_id"], len(rank)))
        picked += mine[:SOLUTIONS_PER_TASK]
    assert len(picked) >= 3 * len(tasks)
    results = judge.judge_many([(by_task[s["task_id"]], s["solution"]) for s in picked])
    bad = []
    for s, res in zip(picked, results, strict=True):
        got = group_statuses(by_task[s["task_id"]], res)
        want = ref[(s["task_id"], s["solution_id"])]
        want = {k: "pass" if want[k] == "pass" else "fail" for k in ("base_status", "plus_status")}
        if got != want:
            bad.append((s["task_id"], s["solution_id"], want, got, res.message[:80]))
    assert not bad, bad
