"""EvalPlus side of the parity bench: run the ``evalplus`` package's own evaluator on a solutions JSONL.

Run with the interpreter of a separate venv that holds ``evalplus`` (see ``bench/parity/README.md``), never with
rlvr's venv::

    /work/parity-venv/bin/python bench/parity/run_evalplus.py --dataset humaneval \
        --data data/raw/evalplus/HumanEvalPlus-v0.1.10.jsonl.gz --solutions sol.jsonl --out ev.jsonl

The data file is given to EvalPlus through its own override variables (``HUMANEVAL_OVERRIDE_PATH`` /
``MBPP_OVERRIDE_PATH``, read when ``evalplus.data`` is imported), so nothing is downloaded. The ground truth is
computed by ``evalplus.evaluate.get_groundtruth``'s logic (``trusted_exec`` of ``prompt + canonical_solution``, with
per-input times) and each solution is checked as
``evalplus.evaluate.check_correctness`` does (``evalplus.eval.untrusted_check`` on base then plus inputs, fast check;
``evalplus.evaluate`` itself imports the code generators and tree-sitter, so those few lines are repeated here: one
process per solution and group, per-input limit ``max(min_time_limit, gt_time_limit_factor * gt_time)``).

Input lines: ``{"task_id", "solution_id", "solution"}``. Output lines: ``{"task_id", "solution_id", "base_status",
"plus_status"}`` with EvalPlus's statuses (``pass`` / ``fail`` / ``timeout``). ``--only`` re-checks the listed
solutions (the disagreements ``compare.py --pairs-out`` wrote), for ``compare.py --recheck``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types
from concurrent.futures import ProcessPoolExecutor


def _import_evalplus(dataset: str, data: str):
    """Import evalplus offline: the override variable must be set before ``evalplus.data.*`` is imported, and the
    ``datasets`` package (used only by EvalPerf's loader) is stubbed so that it need not be installed."""
    os.environ["HUMANEVAL_OVERRIDE_PATH" if dataset == "humaneval" else "MBPP_OVERRIDE_PATH"] = os.path.abspath(data)
    if "datasets" not in sys.modules:
        stub = types.ModuleType("datasets")
        stub.load_dataset = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("datasets is stubbed (offline)"))
        sys.modules["datasets"] = stub
    import evalplus.config as cfg
    from evalplus.data.humaneval import get_human_eval_plus
    from evalplus.data.mbpp import get_mbpp_plus
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS

    if dataset == "humaneval":
        return get_human_eval_plus(), [], cfg
    return get_mbpp_plus(), MBPP_OUTPUT_NOT_NONE_TASKS, cfg


def _groundtruth(problems: dict, not_none: list) -> dict:
    """``evalplus.evaluate.get_groundtruth`` without its pickle cache (same calls, same timing)."""
    from evalplus.gen.util import trusted_exec

    out = {}
    for task_id, p in problems.items():
        oracle = {}
        for g in ("base", "plus"):
            oracle[g], oracle[f"{g}_time"] = trusted_exec(
                p["prompt"] + p["canonical_solution"], p[f"{g}_input"], p["entry_point"], record_time=True,
                output_not_none=p["entry_point"] in not_none)
        out[task_id] = oracle
    return out


_STATE: dict = {}


def _init(dataset: str, data: str, gt_path: str) -> None:
    import pickle

    problems, _, cfg = _import_evalplus(dataset, data)
    with open(gt_path, "rb") as fh:
        _STATE.update(problems=problems, gt=pickle.load(fh), dataset=dataset, cfg=cfg)


def _check(row: dict) -> dict:
    from evalplus.eval import untrusted_check

    p = _STATE["problems"][row["task_id"]]
    cfg = _STATE["cfg"]
    gt = _STATE["gt"][row["task_id"]]
    out = {"task_id": row["task_id"], "solution_id": row["solution_id"]}
    for g in ("base", "plus"):  # evalplus.evaluate.check_correctness, which this module cannot import offline
        out[f"{g}_status"] = untrusted_check(
            _STATE["dataset"], row["solution"], p[f"{g}_input"], p["entry_point"], expected=gt[g], atol=p["atol"],
            ref_time=gt[f"{g}_time"], fast_check=True, min_time_limit=cfg.DEFAULT_MIN_TIME_LIMIT,
            gt_time_limit_factor=cfg.DEFAULT_GT_TIME_LIMIT_FACTOR)[0]
    return out


def main() -> None:
    """CLI entry (see the module docstring)."""
    import pickle

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", choices=["humaneval", "mbpp"], required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--solutions", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gt-cache", required=True, help="pickle of the ground truth (computed once, then reused)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default="", help="JSONL of {task_id, solution_id}: re-check only these (one at a time)")
    args = ap.parse_args()
    problems, not_none, cfg = _import_evalplus(args.dataset, args.data)
    if not os.path.exists(args.gt_cache):
        t0 = time.time()
        gt = _groundtruth(problems, not_none)
        with open(args.gt_cache + ".tmp", "wb") as fh:
            pickle.dump(gt, fh)
        os.replace(args.gt_cache + ".tmp", args.gt_cache)
        print(f"ground truth of {len(gt)} tasks in {time.time() - t0:.1f} s", file=sys.stderr)
    rows = [json.loads(line) for line in open(args.solutions, encoding="utf-8") if line.strip()]
    rows = [r for r in rows if r["task_id"] in problems]
    if args.only:
        keep = {(r["task_id"], r["solution_id"]) for r in map(json.loads, open(args.only, encoding="utf-8"))}
        rows = [r for r in rows if (r["task_id"], r["solution_id"]) in keep]
    t0 = time.time()
    with ProcessPoolExecutor(args.workers, initializer=_init, initargs=(args.dataset, args.data, args.gt_cache)) as ex:
        results = list(ex.map(_check, rows, chunksize=4))
    with open(args.out + ".tmp", "w", encoding="utf-8") as fh:
        for r in results:
            fh.write(json.dumps(r) + "\n")
    os.replace(args.out + ".tmp", args.out)
    print(f"{len(results)} solutions checked in {time.time() - t0:.1f} s "
          f"(min_time_limit={cfg.DEFAULT_MIN_TIME_LIMIT}, gt_time_limit_factor={cfg.DEFAULT_GT_TIME_LIMIT_FACTOR})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
