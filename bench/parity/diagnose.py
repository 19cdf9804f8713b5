"""Explain EvalPlus-side disagreements: re-check given solutions alone, input by input (EvalPlus venv).

    /work/parity-venv/bin/python bench/parity/diagnose.py --dataset mbpp --data data/raw/evalplus/X.jsonl.gz \
        --solutions sol.jsonl --gt-cache gt.pkl --pairs Mbpp/255:canonical HumanEval/15:canonical

For each pair and group it runs ``evalplus.eval.untrusted_check`` with ``fast_check=False`` (every input, one
process, nothing else started by this script) three ways: EvalPlus's defaults; with its address-space cap lifted
(``EVALPLUS_MAX_MEMORY_BYTES=-1``); and with a 100x time factor. It prints the status, the failing inputs (first 3,
truncated), their ground-truth times and limits. A status that flips with the memory cap is the 4 GiB
``RLIMIT_AS`` (EvalPlus's default), one that flips with the time factor is the time limit.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(__file__))
from run_evalplus import _import_evalplus


def main() -> None:
    """CLI entry (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", choices=["humaneval", "mbpp"], required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--solutions", required=True)
    ap.add_argument("--gt-cache", required=True)
    ap.add_argument("--pairs", nargs="+", required=True, help="TASK_ID:SOLUTION_ID")
    ap.add_argument("--modes", default="default,no-memory-cap,time-x100", help="comma-separated subset of the modes")
    args = ap.parse_args()
    problems, _, cfg = _import_evalplus(args.dataset, args.data)
    import evalplus.eval as ev

    gt = pickle.load(open(args.gt_cache, "rb"))
    sols = {(r["task_id"], r["solution_id"]): r["solution"] for r in map(json.loads, open(args.solutions))}
    for pair in args.pairs:
        tid, sid = pair.split(":", 1)
        p, g = problems[tid], gt[tid]
        for grp in ("base", "plus"):
            for label, env, factor in (("default", None, cfg.DEFAULT_GT_TIME_LIMIT_FACTOR),
                                       ("no-memory-cap", "-1", cfg.DEFAULT_GT_TIME_LIMIT_FACTOR),
                                       ("time-x100", None, 100.0)):
                if label not in args.modes.split(","):
                    continue
                if env is not None:
                    os.environ["EVALPLUS_MAX_MEMORY_BYTES"] = env
                else:
                    os.environ.pop("EVALPLUS_MAX_MEMORY_BYTES", None)
                st, det = ev.untrusted_check(args.dataset, sols[(tid, sid)], p[f"{grp}_input"], p["entry_point"],
                                             g[grp], p["atol"], g[f"{grp}_time"], fast_check=False,
                                             min_time_limit=cfg.DEFAULT_MIN_TIME_LIMIT, gt_time_limit_factor=factor)
                bad = [i for i, d in enumerate(det) if not d]
                times = g[f"{grp}_time"]
                info = [(i, str(p[f"{grp}_input"][i])[:40], round(times[i], 3),
                         round(max(cfg.DEFAULT_MIN_TIME_LIMIT, factor * times[i]), 3)) for i in bad[:3]]
                print(f"{tid} {sid} {grp:<4} {label:<13} {st:<7} recorded {len(det)}/{len(p[grp + '_input'])} "
                      f"failing {len(bad)} {info}", flush=True)


if __name__ == "__main__":
    main()
