"""Join EvalPlus's and rlvr's statuses for the same solutions and print per-task agreement (any interpreter).

    python bench/parity/compare.py --label "HumanEval+ v0.1.10" --evalplus ev.jsonl --rlvr rl.jsonl \
        [--explained bench/parity/explained.json] [--json summary.json]

Two columns, as EvalPlus reports them: ``base`` (``base_status == pass``: HumanEval / MBPP) and ``plus``
(``base_status == plus_status == pass``: HumanEval+ / MBPP+). A task agrees when every one of its solutions gets the
same column verdict from both. A disagreement is *explained* when ``--explained`` lists its task (and optionally the
solution id) for this label with a cause; anything else is *unexplained*. EvalPlus's ``timeout`` status counts as
``fail``. Rows of an rlvr run that predates test groups (``legacy``) have only the plus column.

EvalPlus's per-input limits come from ground-truth times taken once, so on a loaded machine a correct solution can
exceed ``max(1 s, 4 x t_gt)`` and fail. ``--pairs-out`` writes the disagreeing pairs; ``run_evalplus.py --only``
re-checks them alone (one process, ``--workers 1``); ``--recheck`` reads that output: a disagreement whose EvalPlus
verdict
changes on the lone re-check and then agrees with rlvr is counted as *EvalPlus load flake* (explained: the verdict
EvalPlus gives depends on machine load), and the re-checked verdict is the one kept (``--merged-out``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import defaultdict
from typing import Any


def _read(paths: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """``(task_id, solution_id)`` → row over JSONL ``paths``; a later file's row replaces an earlier one's."""
    return {(r["task_id"], r["solution_id"]): r for p in paths for r in map(json.loads, open(p, encoding="utf-8"))
            if r}


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


def compare(label: str, ev: dict, rl: dict, explained: list[dict[str, Any]],
            recheck: dict | None = None) -> dict[str, Any]:
    """Agreement summary of one dataset version (see the module docstring)."""
    recheck = recheck or {}
    keys = sorted(set(ev) & set(rl))
    legacy = any(rl[k].get("legacy") for k in keys)
    cols = ["plus"] if legacy else ["base", "plus"]
    per_task: dict[str, dict[str, bool]] = defaultdict(lambda: dict.fromkeys(cols, True))
    dis: list[dict[str, Any]] = []
    for k in keys:
        ce, cr = _cols(ev[k]), _cols(rl[k])
        per_task[k[0]]
        flaked = k in recheck and _cols(recheck[k]) != ce
        if flaked:
            ce = _cols(recheck[k])
        for c in cols:
            if flaked and ce[c] == cr[c] and _cols(ev[k])[c] != cr[c]:
                dis.append({"task_id": k[0], "solution_id": k[1], "column": c, "flake": True,
                            "evalplus_status": [ev[k].get("base_status"), ev[k].get("plus_status")],
                            "recheck_status": [recheck[k].get("base_status"), recheck[k].get("plus_status")],
                            "rlvr_verdict": rl[k].get("verdict"),
                            "cause": "EvalPlus load flake: its first verdict did not reproduce when re-checked alone"})
                continue
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
            "solutions_disagree": len([x for x in d if not x.get("flake")]),
            "flakes": [x for x in d if x.get("flake")],
            "unexplained": [x for x in d if x["cause"] is None],
            "explained": [x for x in d if x["cause"] is not None and not x.get("flake")],
            "evalplus_pass": sum(_cols(recheck.get(k, ev[k]))[c] for k in keys),
            "rlvr_pass": sum(_cols(rl[k])[c] for k in keys),
        }
    out["kinds"] = kinds(keys, {k: _cols(recheck.get(k, ev[k])) for k in keys}, dis)
    return out


def kind_of(solution_id: str) -> str:
    """Mutant kind of a bench solution id: ``canonical``, ``wrap:<m>`` or ``src`` (every operator change)."""
    return "src" if solution_id.startswith("src:") else solution_id


def kinds(keys: list[tuple[str, str]], ev_cols: dict[tuple[str, str], dict[str, bool]],
          dis: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per solution kind: ``solutions``, ``tasks`` it was generated for, EvalPlus ``plus_pass`` (after re-checks) and
    ``disagree`` (solutions with a non-flake disagreement in any column): the bench's coverage table."""
    bad = {(x["task_id"], x["solution_id"]) for x in dis if not x.get("flake")}
    out: dict[str, dict[str, Any]] = {}
    for k in keys:
        d = out.setdefault(kind_of(k[1]), {"solutions": 0, "tasks": set(), "plus_pass": 0, "disagree": 0})
        d["solutions"] += 1
        d["tasks"].add(k[0])
        d["plus_pass"] += ev_cols[k]["plus"]
        d["disagree"] += k in bad
    return {n: {**d, "tasks": len(d["tasks"])} for n, d in sorted(out.items())}


def main() -> None:
    """CLI entry (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--evalplus", required=True, nargs="+", help="JSONL file(s); a later file's row wins")
    ap.add_argument("--rlvr", required=True, nargs="+", help="JSONL file(s); a later file's row wins")
    ap.add_argument("--explained", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--recheck", nargs="*", default=[], help="run_evalplus.py --only output(s) for disagreeing pairs")
    ap.add_argument("--pairs-out", default="", help="write the disagreeing pairs here (JSONL)")
    ap.add_argument("--merged-out", default="",
                    help="write EvalPlus verdicts with re-checks applied (JSONL; gzipped when the name ends in .gz)")
    args = ap.parse_args()
    explained = json.load(open(args.explained)) if args.explained else []
    ev, rl = _read(args.evalplus), _read(args.rlvr)
    recheck = _read(args.recheck) if args.recheck else {}
    s = compare(args.label, ev, rl, explained, recheck)
    if args.pairs_out:
        pairs = sorted({(x["task_id"], x["solution_id"]) for v in s["columns"].values()
                        for x in v["unexplained"] + v["explained"]})
        with open(args.pairs_out, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps({"task_id": t, "solution_id": i}) + "\n" for t, i in pairs)
    if args.merged_out:
        with (gzip.open if args.merged_out.endswith(".gz") else open)(args.merged_out, "wt", encoding="utf-8") as fh:
            for k in sorted(ev):
                r = dict(recheck.get(k, ev[k]))
                if k in recheck and recheck[k] != ev[k]:
                    r["first_run"] = [ev[k].get("base_status"), ev[k].get("plus_status")]
                fh.write(json.dumps(r) + "\n")
    print(f"== {s['label']}: {s['solutions']} solutions, {s['tasks']} tasks")
    for c, v in s["columns"].items():
        print(f"  {c:<5} tasks agreeing {v['tasks_agree']}/{s['tasks']}; solutions disagreeing "
              f"{v['solutions_disagree']} (explained {len(v['explained'])}, unexplained {len(v['unexplained'])}); "
              f"EvalPlus load flakes {len(v['flakes'])}; pass: EvalPlus {v['evalplus_pass']}, rlvr {v['rlvr_pass']}")
        for x in v["unexplained"] + v["explained"] + v["flakes"]:
            print(f"    {x['task_id']:<14} {x['solution_id']:<22} EvalPlus {x['evalplus_status']} rlvr "
                  f"{x['rlvr_verdict']}: {x['cause'] or 'UNEXPLAINED'}")
    print("  kind: solutions / tasks / EvalPlus plus-pass / disagreeing: " + "; ".join(
        f"{n} {d['solutions']}/{d['tasks']}/{d['plus_pass']}/{d['disagree']}" for n, d in s["kinds"].items()))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(s, fh, indent=1)


if __name__ == "__main__":
    main()
