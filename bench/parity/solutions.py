"""Solutions for the parity bench: every canonical solution, systematic mutants of it, model-like wrong answers.

Run with rlvr's venv (it reads the problems file ``run_rlvr.py`` cached, to know each task's result types and pick
only mutants that change something)::

    PYTHONPATH=$PWD /work/main/.venv/bin/python bench/parity/solutions.py --data data/raw/evalplus/X.jsonl.gz \
        --problems /tmp/x-problems.jsonl --out sol.jsonl

Output lines: ``{"task_id", "solution_id", "solution"}``. Kinds (``solution_id``):

* ``canonical``: ``prompt + canonical_solution``, as EvalPlus builds it.
* ``wrap:<m>``: the canonical function renamed and called by a wrapper that changes its result: ``off_by_one`` (an
  ``int`` result + 1, or the first ``int`` item of a list), ``str`` (``str(result)``), ``list_to_tuple`` /
  ``tuple_to_list`` / ``to_set`` / ``reversed`` (container type and order: set-compared tasks accept some),
  ``bool_to_int`` (``1``/``0`` for ``True``/``False``), ``bool_to_match`` (a ``re.Match`` for ``True``, ``None`` for
  ``False``), ``match_to_bool`` / ``match_to_false`` / ``none_to_false`` (the regex family: ``re.Match``/``None``
  results turned into ``bool``), ``int_to_float``, ``float_to_int``, ``round4`` / ``round7`` (floats rounded to 4 / 7
  decimals), ``perturb`` (every float inside the result, at any depth, + 5e-7), ``none`` (returns ``None``),
  ``raises`` (``ValueError`` on the last plus input), ``slow_over`` / ``slow_under`` (sleeps 1.3 s / 0.3 s on the
  first base input: over / under EvalPlus's 1 s floor).
* ``src:<op>``: the canonical source with its first occurrence of an operator replaced, the way a model's near-miss
  looks (``<``→``<=``, ``<=``→``<``, ``>``→``>=``, ``range(1,``→``range(0,``, ``+ 1``→``""``, ``- 1``→``""``,
  ``sorted(``→``list(``, ``and``→``or``).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import re
from typing import Any

WRAP = {
    "off_by_one": "if type(r) is int: r = r + 1\n"
                  "elif type(r) is list and r and type(r[0]) is int: r = [r[0] + 1] + r[1:]",
    "str": "r = str(r)",
    "list_to_tuple": "if type(r) is list: r = tuple(r)",
    "tuple_to_list": "if type(r) is tuple: r = list(r)",
    "to_set": "if type(r) in (list, tuple):\n    try: r = set(r)\n    except TypeError: pass",
    "reversed": "if type(r) is list: r = r[::-1]",
    "bool_to_int": "if type(r) is bool: r = int(r)",
    "bool_to_match": "if type(r) is bool:\n    import re as _re\n    r = _re.match('', '') if r else None",
    "match_to_bool": "if r is None or type(r).__name__ == 'Match': r = r is not None",
    "match_to_false": "if type(r).__name__ == 'Match': r = False",
    "none_to_false": "if r is None: r = False",
    "int_to_float": "if type(r) is int: r = float(r)",
    "float_to_int": "if type(r) is float and r == r and abs(r) < 1e300: r = int(round(r))",
    "round4": "r = _ep_map(r, lambda x: round(x, 4))",
    "round7": "r = _ep_map(r, lambda x: round(x, 7))",
    "perturb": "r = _ep_map(r, lambda x: x + 5e-7)",
    "none": "r = None",
}
ARG_WRAP = {  # mutants keyed on one input (repr of the argument list, computed before the call)
    "raises": ("last_plus", "raise ValueError('mutant')"),
    "slow_over": ("first_base", "import time as _t; _t.sleep(1.3)"),
    "slow_under": ("first_base", "import time as _t; _t.sleep(0.3)"),
}
SRC_OPS = [("<=", "<"), (" < ", " <= "), (" > ", " >= "), ("range(1,", "range(0,"), (" + 1", ""), (" - 1", ""),
           ("sorted(", "list("), (" and ", " or ")]

_MAP = '''
def _ep_map(x, f):
    if type(x) is float:
        return f(x)
    if type(x) in (list, tuple, set):
        return type(x)(_ep_map(i, f) for i in x)
    if type(x) is dict:
        return {k: _ep_map(v, f) for k, v in x.items()}
    return x
'''


def _applies(name: str, values: list[Any], oracle: str | None) -> bool:
    """Whether wrapper ``name`` can change any of the sample results ``values`` (skip no-op mutants)."""
    ty = {type(v) for v in values}

    def deep_float(x: Any) -> bool:
        if type(x) is float:
            return True
        if isinstance(x, list | tuple | set):
            return any(deep_float(i) for i in x)
        if isinstance(x, dict):
            return any(deep_float(i) for i in x.values())
        return False

    if oracle == "not_none":
        return name in ("match_to_bool", "match_to_false", "none_to_false", "none", "str", "bool_to_int")
    return {
        "off_by_one": bool(ty & {int, list}), "list_to_tuple": list in ty, "tuple_to_list": tuple in ty,
        "to_set": bool(ty & {list, tuple}), "reversed": list in ty, "bool_to_int": bool in ty,
        "bool_to_match": bool in ty, "match_to_bool": False, "match_to_false": False, "none_to_false": type(None) in ty,
        "int_to_float": int in ty, "float_to_int": float in ty,
        "round4": any(deep_float(v) for v in values), "round7": any(deep_float(v) for v in values),
        "perturb": any(deep_float(v) for v in values), "str": True, "none": True,
    }[name]


def _wrapper(code: str, entry: str, body: str, cond: str | None = None) -> str:
    ind = "\n".join("    " + ln for ln in body.splitlines())
    if cond is None:
        return (f"{code}\n{_MAP}\n_ep_ref = {entry}\n\ndef {entry}(*args, **kwargs):\n"
                f"    r = _ep_ref(*args, **kwargs)\n{ind}\n    return r\n")
    return (f"{code}\n_ep_ref = {entry}\n_ep_key = {cond!r}\n\ndef {entry}(*args, **kwargs):\n"
            f"    if repr(list(args)) == _ep_key:\n        {body}\n    return _ep_ref(*args, **kwargs)\n")


def _literal(s: str | None) -> Any:
    try:
        return ast.literal_eval(s) if s is not None and len(s) < 100_000 else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def rotate(rows: list[dict[str, Any]], per_task: int, canonical: bool = True) -> list[dict[str, Any]]:
    """Keep, per task, ``per_task`` of its non-canonical solutions (plus the canonical one when ``canonical``): the
    kinds used least so far over the preceding tasks (ties: generation order), so that every kind appears on many
    tasks and every task gets some wrong answers at a fraction of the full cost. ``src:*`` counts as one kind
    (``src``) for balancing (then its operators rotate too), so model-like near misses appear about as often as each
    wrapper. Deterministic."""
    used: dict[str, int] = {}
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_task.setdefault(r["task_id"], []).append(r)

    def kind(r: dict[str, Any]) -> str:
        return "src" if r["solution_id"].startswith("src:") else r["solution_id"]

    out: list[dict[str, Any]] = []
    for sols in by_task.values():
        out += [r for r in sols if r["solution_id"] == "canonical" and canonical]
        muts = [r for r in sols if r["solution_id"] != "canonical"]
        seen: set[str] = set()
        pick: list[dict[str, Any]] = []
        for r in sorted(muts, key=lambda r: (used.get(kind(r), 0), used.get(r["solution_id"], 0))):  # stable
            if len(pick) < per_task and kind(r) not in seen:
                pick.append(r)
                seen.add(kind(r))
        for r in pick:
            used[kind(r)] = used.get(kind(r), 0) + 1
            if kind(r) == "src":
                used[r["solution_id"]] = used.get(r["solution_id"], 0) + 1
        out += pick
    return out


def make(records: list[dict[str, Any]], problems: dict[str, Any]) -> list[dict[str, Any]]:
    """All solutions (see the module docstring) for EvalPlus ``records``; ``problems``: native task id → rlvr
    Problem with filled tests (for result types and argument reprs)."""
    out: list[dict[str, Any]] = []
    for rec in records:
        tid, entry = rec["task_id"], rec["entry_point"]
        code = rec["prompt"] + rec["canonical_solution"]
        out.append({"task_id": tid, "solution_id": "canonical", "solution": code})
        p = problems.get(tid)
        if p is None:
            continue
        oracle = p.meta.get("evalplus_oracle")
        values = [_literal(t.expected) for t in p.tests[:50] if getattr(t, "expected", None) is not None]
        for name, body in WRAP.items():
            if _applies(name, values, oracle):
                out.append({"task_id": tid, "solution_id": f"wrap:{name}", "solution": _wrapper(code, entry, body)})
        calls = [t for t in p.tests if getattr(t, "args", None) is not None]
        base = [t for t in calls if t.group == "base" and len(t.args) < 2000]
        plus = [t for t in calls if t.group == "plus" and len(t.args) < 2000]
        for name, (where, body) in ARG_WRAP.items():
            pick = base[:1] if where == "first_base" else plus[-1:]
            if pick:
                out.append({"task_id": tid, "solution_id": f"wrap:{name}",
                            "solution": _wrapper(code, entry, body, cond=pick[0].args)})
        sol = rec["canonical_solution"]
        for old, new in SRC_OPS:
            if old in sol:
                out.append({"task_id": tid, "solution_id": f"src:{old.strip()}->{new.strip() or 'del'}",
                            "solution": rec["prompt"] + sol.replace(old, new, 1)})
    return out


def main() -> None:
    """CLI entry (see the module docstring)."""
    from rlvr.data.schema import read_problems

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--problems", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", default="", help="regex on task ids to keep (default: all)")
    ap.add_argument("--skip-tasks", default="", help="regex (full match) on task ids to drop")
    ap.add_argument("--per-task", type=int, default=0, help="keep this many mutants per task, rotating kinds (0: all)")
    ap.add_argument("--no-canonical", action="store_true", help="leave the canonical solutions out")
    ap.add_argument("--exclude", nargs="*", default=[], help="JSONL files of (task, solution) to leave out")
    args = ap.parse_args()
    records = [json.loads(line) for line in gzip.open(args.data, "rt", encoding="utf-8")]
    if args.tasks:
        records = [r for r in records if re.search(args.tasks, r["task_id"])]
    if args.skip_tasks:
        records = [r for r in records if not re.fullmatch(args.skip_tasks, r["task_id"])]
    problems = {p.meta["task_id"]: p for p in read_problems(args.problems)}
    rows = make(records, problems)
    if args.per_task or args.no_canonical:
        rows = rotate(rows, args.per_task or 10**6, canonical=not args.no_canonical)
    done = {(r["task_id"], r["solution_id"]) for f in args.exclude for r in map(json.loads, open(f, encoding="utf-8"))}
    rows = [r for r in rows if (r["task_id"], r["solution_id"]) not in done]
    with open(args.out, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    print(f"{len(rows)} solutions for {len(records)} tasks -> {args.out}")


if __name__ == "__main__":
    main()
