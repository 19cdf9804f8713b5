"""rlvr side of the parity bench: judge a solutions JSONL with rlvr's real judge, write EvalPlus-style statuses.

Run with rlvr's venv::

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/parity/run_rlvr.py --spec humanevalplus:v0.1.10 \
        --solutions sol.jsonl --out rl.jsonl --problems-cache /tmp/heplus-v0.1.10.jsonl

The dataset is loaded from ``data/raw`` (``rlvr.data.loaders.load``), its expected outputs and per-test time limits
are filled as the governance stage fills them (``rlvr.data.governance.fill_expected``: reference outputs, EvalPlus
oracles and tolerances, then :mod:`rlvr.data.evalplus_limits`), cached in ``--problems-cache``; each solution is
judged by :class:`rlvr.judge.core.Judge` and its ``base_status`` / ``plus_status`` are read off the per-test
verdicts (:func:`rlvr.eval.evalplus_columns.group_statuses`). Output lines: ``{"task_id", "solution_id",
"base_status", "plus_status", "verdict"}``. With an rlvr that predates test groups (``PYTHONPATH`` of an older
checkout, the "before" column) both statuses are the one overall verdict and ``legacy`` is set.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path


def main() -> None:
    """CLI entry (see the module docstring)."""
    from rlvr.data.governance import fill_expected
    from rlvr.data.loaders import load
    from rlvr.data.schema import read_problems, write_problems
    from rlvr.io import atomic_write_jsonl
    from rlvr.judge.core import Judge

    try:
        from rlvr.eval.evalplus_columns import group_statuses
    except ImportError:  # an rlvr before base/plus groups (the "before" column): one verdict for both groups

        def group_statuses(problem, result):  # type: ignore[no-redef]
            s = "pass" if result.verdict == "accepted" else "fail"
            return {"base_status": s, "plus_status": s, "legacy": True}

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", required=True)
    ap.add_argument("--solutions", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--problems-cache", required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--tasks", default="", help="regex on native task ids to keep before filling (default: all)")
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.solutions, encoding="utf-8") if line.strip()]
    with Judge(workers=args.workers) as judge:
        cache = Path(args.problems_cache)
        if cache.exists():
            problems = read_problems(cache)
        else:
            t0 = time.time()
            loaded = [p for p in load(args.spec) if re.search(args.tasks, p.meta["task_id"])]
            problems, rep = fill_expected(loaded, judge, workers=args.workers)
            write_problems(cache, problems)
            print(f"filled {len(problems)} problems in {time.time() - t0:.1f} s; dropped {rep['dropped']}; "
                  f"time limits {rep.get('time_limits', {}).get('max_limit_s')} s max", file=sys.stderr)
        by_native = {p.meta["task_id"]: p for p in problems}
        rows = [r for r in rows if r["task_id"] in by_native]
        t0 = time.time()
        results = judge.judge_many([(by_native[r["task_id"]], r["solution"]) for r in rows])
    out = [{"task_id": r["task_id"], "solution_id": r["solution_id"], **group_statuses(by_native[r["task_id"]], res),
            "verdict": res.verdict} for r, res in zip(rows, results, strict=True)]
    atomic_write_jsonl(args.out, out)
    print(f"{len(out)} solutions judged in {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
