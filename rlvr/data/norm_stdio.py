"""Normalisers of the stdin/stdout benchmarks: CodeContests and MapCoder's APPS-150. Each is ``(record, where, split,
options) -> Problem``; the per-dataset decisions are listed in :mod:`rlvr.data.loaders`.
"""
from __future__ import annotations

import re
from typing import Any

from rlvr.data.errors import DataError
from rlvr.data.records import get_field, make_problem, time_limit
from rlvr.data.schema import Problem, StdioTest
from rlvr.data.tolerance import statement_float_tolerance

__all__ = ["APPS_CALL_NOTE", "norm_apps", "norm_codecontests"]


def _stdin(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


def norm_codecontests(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """CodeContests-subset record (``id, name, description, tests[{input, output}], solution_python3, difficulty,
    cf_tags, cluster``) → stdio Problem."""
    pid = get_field(rec, "id", where)
    desc = get_field(rec, "description", where)
    raw_tests = get_field(rec, "tests", where, list)
    tests = []
    for i, t in enumerate(raw_tests):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise DataError(f"{where}: field 'tests[{i}]': expected {{input: str, output: str}}")
        tests.append(StdioTest(stdin=_stdin(t["input"]), stdout=t["output"]))
    sol = rec.get("solution_python3")
    ref = (opts.get("reference_check") or {}).get(pid)
    meta = {"name": rec.get("name"), "difficulty": rec.get("difficulty"), "cf_tags": rec.get("cf_tags", []),
            "cluster": rec.get("cluster"), "reference_float_tolerance": 1e-6}
    if ref is not None:
        meta["reference_check"] = ref
        meta["reference_passes"] = all(r == "ok" for r in ref)
    return make_problem(
        where,
        id=f"codecontests/{pid}", source="codecontests", split=split or "train", statement=desc, tests=tests,
        time_limit_s=time_limit("codecontests", opts.get("time_limit_s")),
        float_tolerance=opts.get("float_tolerance", statement_float_tolerance(desc)), solutions=[sol] if sol else [],
        meta=meta,
    )


APPS_CALL_NOTE = (
    "\n\nImportant: read the input from standard input and print the answer to standard output. If you write a "
    "function, then after its definition read its arguments with `input()` (one per line), call it and print its "
    "return value."
)


def _apps_out(v: Any) -> str:
    return v if isinstance(v, str) else str(v)


def norm_apps(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """MapCoder APPS record (``id, description, difficulty, starter_code, sample_io, test_list``) → stdio Problem
    (MapCoder's protocol, see module doc). ``output`` must be a one-element list."""
    pid = get_field(rec, "id", where, (int, str))
    desc = get_field(rec, "description", where)
    starter = rec.get("starter_code") or ""
    raw = get_field(rec, "test_list", where, list)
    samples = rec.get("sample_io") or []
    tests = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str):
            raise DataError(f"{where}: field 'test_list[{i}].input': expected a string")
        out = t.get("output")
        if not isinstance(out, list) or len(out) != 1:
            raise DataError(f"{where}: field 'test_list[{i}].output': expected a one-element list")
        tests.append(StdioTest(stdin=_stdin(t["input"]), stdout=_apps_out(out[0]), public=t in samples))
    call_based = bool(starter.strip())
    fn = re.search(r"def\s+(\w+)\s*\(", starter)
    return make_problem(
        where,
        id=f"apps/{pid}", source="apps", split=split or "train",
        statement=desc.strip() + (APPS_CALL_NOTE if call_based else ""), starter_code=starter.lstrip("\n"),
        tests=tests, time_limit_s=time_limit("apps", opts.get("time_limit_s")),
        float_tolerance=opts.get("float_tolerance", statement_float_tolerance(desc)),
        meta={"apps_id": pid, "difficulty": rec.get("difficulty"), "call_based": call_based,
              "fn_name": fn.group(1) if fn else None},
    )
