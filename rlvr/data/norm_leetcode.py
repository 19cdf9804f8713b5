"""Normalisers of the LeetCode benchmarks: LeetCodeDataset (``leetcode``) and the DeepSeek-Coder contest set
(``leetcode_contest``). Each is ``(record, where, split, options) -> Problem``; the per-dataset decisions are listed in
:mod:`rlvr.data.loaders`.
"""
from __future__ import annotations

import ast
import re
from typing import Any

from rlvr.data.errors import DataError
from rlvr.data.records import get_field, make_problem, time_limit
from rlvr.data.schema import AssertTest, Problem

__all__ = ["DEEPSEEK_IMPORT_HELPER", "LEETCODE_HELPERS", "norm_leetcode", "norm_leetcode_contest"]


LEETCODE_HELPERS = '''
class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right
'''
DEEPSEEK_IMPORT_HELPER = "\n".join([
    "import math", "import re", "import sys", "import copy", "import datetime", "import itertools",
    "import collections", "import heapq", "import functools", "import hashlib", "import string",
    "from typing import *", "from collections import *", "from functools import *",
]) + "\n"


def _split_check(test: str) -> list[str] | None:
    """Split ``def check(candidate):`` made only of one-line asserts into the dedented assert lines, else ``None``."""
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(tree.body) != 1 or len(funcs) != 1:
        return None
    lines = test.splitlines()
    out: list[str] = []
    for stmt in funcs[0].body:
        if not isinstance(stmt, ast.Assert) or stmt.lineno != stmt.end_lineno:
            return None
        out.append(lines[stmt.lineno - 1].strip())
    return out or None


def norm_leetcode(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """LeetCodeDataset record (v0.3.1: ``problem_description, starter_code``…; v0.2.0: ``meta.question_title``,
    ``meta.lang_code``…; both ``task_id, prompt, completion, entry_point, test``) → Problem (see module doc)."""
    slug = get_field(rec, "task_id", where)
    preamble = get_field(rec, "prompt", where)
    entry = get_field(rec, "entry_point", where)
    test = get_field(rec, "test", where)
    completion = get_field(rec, "completion", where)
    meta_in = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    if "problem_description" in rec:
        statement = get_field(rec, "problem_description", where)
        starter = get_field(rec, "starter_code", where)
        meta = {"question_id": rec.get("question_id"), "difficulty": rec.get("difficulty"),
                "tags": rec.get("tags", []), "estimated_date": rec.get("estimated_date")}
    else:
        if "question_title" not in meta_in:
            raise DataError(f"{where}: field 'meta.question_title': missing")
        statement = meta_in["question_title"]
        starter = meta_in.get("lang_code", "")
        meta = {"question_id": meta_in.get("question_id"), "difficulty": meta_in.get("difficulty")}
    asserts = _split_check(test)
    tests = ([AssertTest(code=a) for a in asserts] if asserts
             else [AssertTest(code=f"{test}\ncheck(candidate)\n")])
    meta.update(slug=slug, check_split=asserts is not None)
    return make_problem(
        where,
        id=f"leetcode/{slug}", source="leetcode", split=split or "test",
        statement=statement, starter_code=starter, solution_prefix=preamble, entry_point=entry, tests=tests,
        time_limit_s=time_limit("leetcode", opts.get("time_limit_s")), solutions=[completion], meta=meta,
    )


def _split_contest_test(test: str) -> list[str]:
    """Split a DeepSeek contest ``test`` script into self-contained scripts: header + one ``test_input`` block."""
    parts = re.split(r"\n(?=test_input = )", test.strip("\n"))
    if len(parts) < 2:
        return [test]
    header = parts[0].rstrip() + "\n\n"
    return [header + p.strip() + "\n" for p in parts[1:]]


def norm_leetcode_contest(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """DeepSeek-Coder LeetCode contest record (``task_id, prompt, prompt_sft, test, meta, start_time``) → Problem
    without solutions (see module doc)."""
    tid = get_field(rec, "task_id", where)
    prompt = get_field(rec, "prompt", where)
    test = get_field(rec, "test", where)
    statement = get_field(rec, "prompt_sft", where)
    meta_in = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    starter = prompt.rsplit('"""\n', 1)[-1] if '"""\n' in prompt else ""
    methods = sorted(set(re.findall(r"my_solution\.(\w+)\(", test)))
    if not methods:
        raise DataError(f"{where}: field 'test': no 'my_solution.<method>(' call found")
    return make_problem(
        where,
        id=f"leetcode_contest/{tid}", source="leetcode_contest", split=split or "test",
        statement=statement, starter_code=starter,
        solution_prefix=DEEPSEEK_IMPORT_HELPER + LEETCODE_HELPERS, entry_point=f"Solution().{methods[0]}",
        tests=[AssertTest(code=c) for c in _split_contest_test(test)],
        time_limit_s=time_limit("leetcode_contest", opts.get("time_limit_s")),
        meta={"task_id": tid, "url": rec.get("url"), "difficulty": meta_in.get("difficulty"),
              "question_id": meta_in.get("questionFrontendId"), "start_time": rec.get("start_time")},
    )
