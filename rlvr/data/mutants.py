"""Near misses of a reference program (AST mutants) and the audit of what an amplified suite catches (issue 42).

:func:`mutants` is the single-edit mutator the GPU rehearsal scripts its "mutant" rollouts with
(``bench/gpu/rehearse.py``); :func:`near_miss_report` counts, per source, the mutants of each amplified problem's
reference that its **original** tests accept and its **added** tests reject: wrong programs a reward on the original
suite would have paid in full (the measure EvalPlus reports as pass@k drop, Liu et al. 2023, here on mutants instead of
LLM samples). Run by the governance stage (``governance.amplify.near_miss``) and by
``python -m rlvr.data.mutants data/governance/problems/mbpp.jsonl …`` on governed files.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from rlvr.data.schema import Problem
from rlvr.judge.settle import judge_settled

__all__ = ["main", "mutants", "near_miss_report"]


def mutants(code: str) -> Iterator[str]:
    """Near misses of ``code``: one AST edit each (a comparison flipped, ``+``/``-`` swapped, an int constant
    + 1), in source order; the caller keeps the first the tests reject. Yields nothing for code that does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return
    flips = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
             ast.NotEq: ast.Eq}
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Compare, ast.BinOp, ast.Constant))]
    for i in range(len(nodes)):
        t = ast.parse(code)
        node = [n for n in ast.walk(t) if isinstance(n, (ast.Compare, ast.BinOp, ast.Constant))][i]
        if isinstance(node, ast.Compare) and type(node.ops[0]) in flips:
            node.ops[0] = flips[type(node.ops[0])]()
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            node.value += 1
        else:
            continue
        yield ast.unparse(t)


def near_miss_report(problems: Sequence[Problem], judge: Any, max_problems: int = 40, per_problem: int = 3,
                     time_limit_s: float = 1.0) -> dict[str, dict[str, int]]:
    """Per source: of the first ``max_problems`` amplified problems by id (``meta['amplify']['added'] > 0``), the
    first ``per_problem`` mutants (:func:`mutants`) of the reference, judged on the original tests
    (``tests[:original_tests]``) and, where accepted there, on the added ones, each test limited to ``time_limit_s``
    wall seconds (a mutant that loops — a flipped loop bound — costs that much, not the problem's limit), with the
    rule of reference verification (:func:`rlvr.judge.settle.judge_settled`: a result with a timeout is judged once
    more at 3x the limits, and that verdict is final), so the counts, which ``audit.md`` prints, do not follow the
    machine's load. A mutant that times out on the original tests is not a near miss.

    Returns ``{source: {"problems", "mutants", "accepted_original", "rejected_amplified"}}``:
    ``rejected_amplified`` counts the near misses the original tests accept and the amplified suite rejects. ``{}``
    for ``max_problems == 0``."""
    if max_problems <= 0:
        return {}
    by_source: dict[str, list[Problem]] = {}
    for p in sorted(problems, key=lambda p: p.id):
        amp = p.meta.get("amplify") or {}
        if amp.get("added") and p.solutions and len(by_source.setdefault(p.source, [])) < max_problems:
            by_source[p.source].append(p)
    out: dict[str, dict[str, int]] = {}
    for src, ps in sorted(by_source.items()):
        items: list[tuple[Problem, Problem, str]] = []
        for p in ps:
            n0 = int(p.meta["amplify"]["original_tests"])
            tl = min(p.time_limit_s, time_limit_s)
            orig = p.model_copy(update={"tests": p.tests[:n0], "time_limit_s": tl})
            added = p.model_copy(update={"tests": p.tests[n0:], "time_limit_s": tl})
            items += [(orig, added, m) for m in list(mutants(p.solutions[0]))[:per_problem]]
        first = judge_settled(judge, [(o, m) for o, _, m in items])
        passed = [it for it, r in zip(items, first, strict=True) if r.accepted]
        second = judge_settled(judge, [(a, m) for _, a, m in passed])
        out[src] = {"problems": len(ps), "mutants": len(items), "accepted_original": len(passed),
                    "rejected_amplified": sum(not r.accepted for r in second)}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlvr.data.mutants FILE.jsonl… [--max-problems N] [--per-problem K]``: print the near-miss report
    (:func:`near_miss_report`) of governed problem files as JSON, judged by the configured judge
    (``RLVR_SANDBOX_URL`` or the embedded one)."""
    import argparse

    from rlvr.data.schema import read_problems
    from rlvr.judge.client import get_judge

    ap = argparse.ArgumentParser(prog="python -m rlvr.data.mutants", description=main.__doc__)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--max-problems", type=int, default=40)
    ap.add_argument("--per-problem", type=int, default=3)
    a = ap.parse_args(argv)
    problems = [p for f in a.files for p in read_problems(f)]
    judge = get_judge()
    try:
        rep = near_miss_report(problems, judge, a.max_problems, a.per_problem)
    finally:
        close = getattr(judge, "close", None)
        if close is not None:
            close()
    json.dump(rep, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
