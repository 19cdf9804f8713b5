"""Loaders on the real bundled files: counts, splits, ids, per-dataset decisions, and clear errors on bad input."""

from __future__ import annotations

import json
from collections import Counter
from functools import cache

import pytest

from rlvr.data.bundled import resolve
from rlvr.data.errors import DataError
from rlvr.data.evalplus import mbppplus_restore_inputs
from rlvr.data.loaders import load, load_bundled, mbpp_split
from rlvr.data.schema import AssertTest, CallTest, StdioTest
from rlvr.data.tolerance import statement_float_tolerance
from rlvr.judge.literal import parse_literal


@cache
def _load(spec):
    return tuple(load_bundled(spec))


COUNTS = {
    "humaneval": {"test": 164},
    "mbpp": {"prompt": 10, "test": 500, "validation": 90, "train": 374},
    "mbpp_reg": {"dev": 100},
    "mbpp_sanitized": {"test": 257, "train": 120, "validation": 43, "prompt": 7},
    "humanevalplus:v0.1.9": {"test": 164},
    "humanevalplus:v0.1.10": {"test": 164},
    "mbppplus:v0.1.0": {"test": 399},
    "mbppplus:v0.2.0": {"test": 378},
    "leetcode": {"train": 1890, "test": 228},
    "leetcode_contest": {"test": 180},
    "codecontests": {"train": 300},
    "apps": {"train": 150},
}


@pytest.mark.parametrize("spec", sorted(COUNTS))
def test_counts_splits_and_ids(spec):
    ps = _load(spec)
    assert dict(Counter(p.split for p in ps)) == COUNTS[spec]
    name = spec.split(":")[0]
    assert all(p.source == name and p.id.startswith(f"{name}/") and p.tests for p in ps)
    assert len({p.id for p in ps}) == len(ps)


def test_mbpp_split_ranges():
    assert [mbpp_split(i) for i in (1, 10, 11, 510, 511, 600, 601, 974)] == [
        "prompt", "prompt", "test", "test", "validation", "validation", "train", "train"]
    with pytest.raises(ValueError):
        mbpp_split(975)


def test_mbpp_statement_tests_and_setup():
    ps = {p.id: p for p in _load("mbpp")}
    p = ps["mbpp/1"]
    assert p.statement.startswith("Write a function to find the minimum cost path")
    assert "Your code should pass these tests:\nassert min_cost(" in p.statement
    assert p.entry_point == "min_cost" and len(p.tests) == 3 and p.tests[0].public and not p.tests[1].public
    assert "\r" not in p.solutions[0]
    assert sum(bool(q.test_setup) for q in ps.values()) == 2
    assert len(ps["mbpp/11"].meta["challenge_tests"]) > 0 and len(ps["mbpp/11"].tests) == 3
    with_challenge = load_bundled("mbpp", options={"include_challenge_tests": True})
    assert len({p.id: p for p in with_challenge}["mbpp/11"].tests) > 3


def test_mbpp_sanitized_imports_go_to_test_setup():
    ps = {p.id: p for p in _load("mbpp_sanitized")}
    assert ps["mbpp_sanitized/82"].test_setup == "import math"


def test_humanevalplus_call_tests():
    ps = {p.id: p for p in _load("humanevalplus:v0.1.10")}
    p = ps["humanevalplus/HumanEval/0"]
    assert all(isinstance(t, CallTest) and t.expected is None for t in p.tests)
    assert p.meta["n_base"] + p.meta["n_plus"] == len(p.tests) and p.meta["n_base"] == 7
    assert parse_literal(p.tests[0].args) == [[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3]
    assert p.starter_code and p.solutions[0].startswith(p.starter_code)
    assert sum(len(q.tests) for q in ps.values()) == 122_683 + 1_570
    assert {t.atol for q in ps.values() for t in q.tests} >= {0.0, 1e-6}


def test_mbppplus_type_restoration_and_empty_plus():
    ps = {p.id: p for p in _load("mbppplus:v0.2.0")}
    assert len(ps["mbppplus/Mbpp/793"].tests) == 3  # plus_input stored as {}
    a124 = parse_literal(ps["mbppplus/Mbpp/124"].tests[0].args)
    assert a124 == [0.0, 1j] and isinstance(a124[1], complex)
    assert isinstance(parse_literal(ps["mbppplus/Mbpp/106"].tests[0].args)[1], tuple)
    assert isinstance(parse_literal(ps["mbppplus/Mbpp/580"].tests[0].args)[0][2], tuple)
    assert isinstance(parse_literal(ps["mbppplus/Mbpp/2"].tests[0].args)[0], tuple)
    assert ps["mbppplus/Mbpp/2"].meta["evalplus_oracle"] == "set_eq"
    assert "inf" in " ".join(t.args for t in ps["mbppplus/Mbpp/404"].tests)  # parseable by the judge's literal
    not_none = [p for p in ps.values() if p.meta["evalplus_oracle"] == "not_none"]
    assert len(not_none) == 3 and all(isinstance(t, AssertTest) and "is not None" in t.code
                                      for p in not_none for t in p.tests)
    for p in ps.values():
        for t in p.tests:
            if isinstance(t, CallTest):
                parse_literal(t.args)


def test_mbppplus_restore_quirk_115():
    assert mbppplus_restore_inputs("Mbpp/115", [[[[1, 2], []]]]) == [[[{1, 2}, {}]]]
    assert mbppplus_restore_inputs("Mbpp/9999", [[1, [2]]]) == [[1, [2]]]


def test_leetcode_asserts_and_prefix():
    ps = {p.id: p for p in _load("leetcode")}
    p = ps["leetcode/two-sum"]
    assert p.split == "train" and p.entry_point == "Solution().twoSum" and "from typing import *" in p.solution_prefix
    assert next(t.code for t in p.tests) == "assert candidate(nums = [2,7,11,15], target = 9) == [0,1]"
    assert p.starter_code.startswith("class Solution:") and "indices of the two numbers" in p.statement
    assert sum(q.meta["check_split"] for q in ps.values()) > 2000
    whole = [q for q in ps.values() if not q.meta["check_split"]]
    assert all(len(q.tests) == 1 and q.tests[0].code.endswith("check(candidate)\n") for q in whole)


def test_leetcode_contest_split_blocks():
    ps = _load("leetcode_contest")
    assert all(not p.solutions for p in ps)
    p = ps[0]
    assert p.entry_point == "Solution().minimumPushes" and len(p.tests) == 100
    assert all(t.code.startswith("my_solution = Solution()") and t.code.count("assert ") == 1 for t in p.tests)
    assert p.starter_code.startswith("class Solution:") and "class ListNode" in p.solution_prefix


def test_codecontests_stdio_and_reference_check():
    ps = _load("codecontests")
    assert all(isinstance(t, StdioTest) and t.stdin.endswith("\n") for p in ps for t in p.tests)
    assert sum(len(p.tests) for p in ps) == 2999
    assert sum(p.meta["reference_passes"] for p in ps) == 258
    # tolerance as the statement declares it (rlvr.data.tolerance); the reference check's 1e-6 kept in meta
    assert all(p.float_tolerance == statement_float_tolerance(p.statement) for p in ps)
    assert all(p.meta["reference_float_tolerance"] == 1e-6 for p in ps)


def test_apps_mapcoder_protocol():
    ps = {p.id: p for p in _load("apps")}
    assert sum(p.meta["call_based"] for p in ps.values()) == 98
    p = ps["apps/3554"]
    assert p.entry_point is None and p.starter_code.startswith("def get_score")
    assert isinstance(p.tests[0], StdioTest) and p.tests[0].stdin == "[1]\n" and p.tests[0].stdout == "100"
    assert "standard input" in p.statement
    repeats = [q for q in ps.values() if "repeat_of" in q.meta]  # MapCoder's file repeats 21 problems
    assert len(repeats) == 22 and len({q.meta["repeat_of"] for q in repeats}) == 21


def test_humaneval_assert_and_statement():
    p = _load("humaneval")[0]
    assert isinstance(p.tests[0], AssertTest) and p.tests[0].code.rstrip().endswith("check(candidate)")
    assert p.statement.startswith("Check if in given list") and p.meta["statement_in_starter"]


# ------------------------------------------------------------------------------------------------ bad input


def _fake_raw(tmp_path, spec, lines):
    f = resolve(spec).files[0]
    target = tmp_path / f.path
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.suffix == ".gz":
        import gzip

        with gzip.open(target, "wt") as fh:
            fh.write("\n".join(lines) + "\n")
    else:
        target.write_text("\n".join(lines) + "\n")
    return target


def test_malformed_line_names_file_and_line(tmp_path):
    good = json.dumps({"task_id": "HumanEval/0", "prompt": "def f():\n", "entry_point": "f",
                       "canonical_solution": "  return 1\n", "test": "def check(c): pass"})
    target = _fake_raw(tmp_path, "humaneval", [good, "{not json"])
    with pytest.raises(DataError, match=rf"{target}:2: malformed JSON"):
        load_bundled("humaneval", tmp_path, verify=False)


def test_missing_field_names_file_line_and_field(tmp_path):
    rec = {"task_id": "5", "text": "t", "code": "def f(): pass", "test_setup_code": "", "challenge_test_list": []}
    target = _fake_raw(tmp_path, "mbpp", [json.dumps(rec)])
    with pytest.raises(DataError, match=rf"{target}:1: field 'test_list': missing"):
        load_bundled("mbpp", tmp_path, verify=False)


def test_wrong_type_names_field(tmp_path):
    rec = {"id": "x", "description": "d", "tests": [{"input": 1, "output": "2"}]}
    _fake_raw(tmp_path, "codecontests", [json.dumps(rec)])
    with pytest.raises(DataError, match=r":1: field 'tests\[0\]'"):
        load_bundled("codecontests", tmp_path, verify=False, options={"reference_check": {}})


def test_unknown_dataset_and_source():
    with pytest.raises(DataError, match="unknown bundled dataset"):
        load("humaneva1")
    with pytest.raises(DataError, match="unknown source"):
        load("humaneval", "ftp")


def test_time_limit_override():
    assert {p.time_limit_s for p in load_bundled("apps", options={"time_limit_s": 2.5})} == {2.5}
    assert {p.time_limit_s for p in _load("leetcode")} == {15.0}
