"""Join EvalPlus's and rlvr's statuses for the same solutions and print per-task agreement (any interpreter).

    python bench/parity/compare.py --label "HumanEval+ v0.1.10" --evalplus ev.jsonl --rlvr rl.jsonl \
        [--explained bench/parity/explained.json] [--json summary.json]

Two columns, as EvalPlus reports them: ``base`` (``base_status == pass``: HumanEval / MBPP) and ``plus``
(``base_status == plus_status == pass``: HumanEval+ / MBPP+). A task agrees when every one of its solutions gets the
same column verdict from both. A disagreement is *explained* when ``--explained`` lists its task (and optionally the
solution id) for this label with a cause; anything else is *unexplained*. EvalPlus's ``timeout`` status counts as
``fail``. Rows of an rlvr run that predates test groups (``legacy``) have only the plus column.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from typing import Any


def _read(path: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["task_id"], r["solution_id"]): r for r in map(json.loads, open(path, encoding="utf-8")) if r}


def _cols(r: dict[str, Any]) -> dict[str, bool]:
    base = r.get("base_status") == "pass"
    return {"base": base, "plus": base and r.get("plus_status") == "pass"}


def _explain(explained: list[dict[str, Any]], label: str, task: str, sol: str, col: str) -> str | None:
    for e in explained:
        if e.get("label", label) != label or e["task_id"] != task:
            continue
        if re.fullmatch(e.get("solution_id", ".*"), sol) and col in e.get("columns", ["base", "plus"]):
            return e["cause"]
    return None


def compare(label: str, ev: dict, rl: dict, explained: list[dict[str, Any]]) -> dict[str, Any]:
    """Agreement summary of one dataset version (see the module docstring)."""
    keys = sorted(set(ev) & set(rl))
    legacy = any(rl[k].get("legacy") for k in keys)
    cols = ["plus"] if legacy else ["base", "plus"]
    per_task: dict[str, dict[str, bool]] = defaultdict(lambda: dict.fromkeys(cols, True))
    dis: list[dict[str, Any]] = []
    for k in keys:
        ce, cr = _cols(ev[k]), _cols(rl[k])
        for c in cols:
            if ce[c] != cr[c]:
                per_task[k[0]][c] = False
                dis.append({"task_id": k[0], "solution_id": k[1], "column": c, "evalplus": ce[c], "rlvr": cr[c],
                            "evalplus_status": [ev[k].get("base_status"), ev[k].get("plus_status")],
                            "rlvr_verdict": rl[k].get("verdict"),
                            "cause": _explain(explained, label, k[0], k[1], c)})
            else:
                per_task[k[0]].setdefault(c, True)
    out: dict[str, Any] = {"label": label, "solutions": len(keys), "tasks": len(per_task), "columns": {}}
    for c in cols:
        bad = sorted(t for t, v in per_task.items() if not v[c])
        d = [x for x in dis if x["column"] == c]
        out["columns"][c] = {
            "tasks_agree": len(per_task) - len(bad), "tasks_disagree": bad,
            "solutions_disagree": len(d), "unexplained": [x for x in d if x["cause"] is None],
            "explained": [x for x in d if x["cause"] is not None],
            "evalplus_pass": sum(_cols(ev[k])[c] for k in keys), "rlvr_pass": sum(_cols(rl[k])[c] for k in keys),
        }
    return out


def main() -> None:
    """CLI entry (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--evalplus", required=True)
    ap.add_argument("--rlvr", required=True)
    ap.add_argument("--explained", default="")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    explained = json.load(open(args.explained)) if args.explained else []
    s = compare(args.label, _read(args.evalplus), _read(args.rlvr), explained)
    print(f"== {s['label']}: {s['solutions']} solutions, {s['tasks']} tasks")
    for c, v in s["columns"].items():
        print(f"  {c:<5} tasks agreeing {v['tasks_agree']}/{s['tasks']}; solutions disagreeing "
              f"{v['solutions_disagree']} (explained {len(v['explained'])}, unexplained {len(v['unexplained'])}); "
              f"pass: EvalPlus {v['evalplus_pass']}, rlvr {v['rlvr_pass']}")
        for x in v["unexplained"] + v["explained"]:
            print(f"    {x['task_id']:<14} {x['solution_id']:<22} EvalPlus {x['evalplus_status']} rlvr "
                  f"{x['rlvr_verdict']}: {x['cause'] or 'UNEXPLAINED'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(s, fh, indent=1)


if __name__ == "__main__":
    main()
