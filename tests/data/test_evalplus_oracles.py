"""EvalPlus special oracles, tolerance carry-over and time limits (rlvr.data.evalplus_oracles / evalplus_limits)."""

from __future__ import annotations

import re

import pytest

from rlvr.data.evalplus_limits import evalplus_limit, set_time_limits
from rlvr.data.evalplus_oracles import evalplus_atols, oracle_kind, oracle_test
from rlvr.data.schema import AssertTest, CallTest, Problem
from rlvr.judge.verdict import JudgeResult, TestResult


def _passes(test: AssertTest, candidate) -> bool:
    """Run an assert test as the judge does: the code with ``candidate`` bound; passes iff nothing is raised."""
    ns = {"candidate": candidate}
    try:
        exec(test.code, ns)
    except Exception:
        return False
    return True


REF = "import re\ndef text_match_three(text):\n    return re.search('ab{3}?', text)\n"


@pytest.mark.parametrize(("args", "out", "want"), [
    ("['abbb']", lambda s: re.search("b", s), True),   # reference returns a Match: any non-None passes
    ("['abbb']", lambda s: True, True),                # bool must equal "not None" of the reference
    ("['abbb']", lambda s: False, False),              # False where the reference matches: fails (EvalPlus)
    ("['xyz']", lambda s: None, True),
    ("['xyz']", lambda s: False, True),                # False where the reference returns None: passes
    ("['xyz']", lambda s: "", False),                  # not a bool, not None where None is expected
])
def test_not_none_oracle_follows_evalplus(args, out, want):
    t = oracle_test("not_none", CallTest(args=args, group="plus"), None, 0.0, reference=REF,
                    entry_point="text_match_three")
    assert t.group == "plus"
    assert _passes(t, out) is want


def test_value_oracles():
    t = oracle_test("set_eq", CallTest(args="[[1, 2], [2, 3]]"), "[2]", 0.0)
    assert _passes(t, lambda a, b: (2,)) and not _passes(t, lambda a, b: [3])
    t = oracle_test("or_zero", CallTest(args="[8]"), "7", 0.0)
    assert _passes(t, lambda n: 0) and _passes(t, lambda n: 7) and not _passes(t, lambda n: 1)
    t = oracle_test("always", CallTest(args="['a', 'b']"), None, 0.0)
    assert _passes(t, lambda a, b: "anything") and not _passes(t, lambda a, b: 1 / 0)
    t = oracle_test("poly_root", CallTest(args="[[-10, -2]]"), "-5.0", 1e-4)  # -10 - 2x = 0 at x = -5
    assert _passes(t, lambda xs: -5.00001) and not _passes(t, lambda xs: -4.9)
    t = oracle_test("poly_root_0.3.1", CallTest(args="[[-10, -2]]"), None, 1e-4)
    assert not _passes(t, lambda xs: -5.0)  # the 0.3.1 release fails every find_zero solution
    t = oracle_test("digit_distance", CallTest(args="[123, 5]"), "6", 0.0)
    assert _passes(t, lambda a, b: 6) and _passes(t, lambda a, b: 1 + 2 + 2)  # zero-padded reading: 1+2+2
    t = oracle_test("surface_area", CallTest(args="[3, 4]"), "33", 0.0)
    assert _passes(t, lambda b, h: 33) and not _passes(t, lambda b, h: 34)
    with pytest.raises(ValueError, match="unknown"):
        oracle_test("nope", CallTest(args="[]"), "1", 0.0)
    with pytest.raises(ValueError, match="needs the reference"):
        oracle_test("set_eq", CallTest(args="[]"), None, 0.0)


def test_oracle_kind_and_release_compat():
    assert oracle_kind("mbppplus", "Diff") == "set_eq"
    assert oracle_kind("mbppplus", "check_str") == "not_none"
    assert oracle_kind("humanevalplus", "find_zero") == "poly_root"
    assert oracle_kind("humanevalplus", "find_zero", "0.3.1") == "poly_root_0.3.1"
    assert oracle_kind("humanevalplus", "Diff") is None
    with pytest.raises(ValueError, match="known releases"):
        oracle_kind("humanevalplus", "find_zero", "9.9")


def test_atol_carries_over_within_a_group_as_in_evalplus():
    tests = [CallTest(args="[0]", expected="1", group="base"),
             CallTest(args="[1]", expected="2.5", group="base"),
             CallTest(args="[2]", expected="[1, 2.5]", group="base"),  # mixed list: keeps the carried 1e-6
             CallTest(args="[3]", expected="[1, 2.5]", group="plus")]  # a new group starts from the record
    got = [t.atol for t in evalplus_atols(tests, 0.0)]
    assert got == [0.0, 1e-6, 1e-6, 0.0]
    assert [t.atol for t in evalplus_atols(tests, 1e-3)] == [1e-3] * 4


def test_evalplus_limit_floor_and_factor():
    assert evalplus_limit(0.0) == 1.0
    assert evalplus_limit(0.2) == 1.0
    assert evalplus_limit(0.5) == 2.0
    assert evalplus_limit(0.30001) == pytest.approx(1.201)  # rounded up to the ms


class _FakeJudge:
    def __init__(self, times):
        self.times = times

    def judge(self, problem, solution):
        tests = [TestResult(index=i, verdict="accepted", time_s=t) for i, t in enumerate(self.times)]
        return JudgeResult(verdict="accepted", passed=len(tests), total=len(tests), pass_ratio=1.0, judge_s=0.1,
                           tests=tests)


def test_set_time_limits_per_test_and_problem():
    p = Problem(id="mbppplus/Mbpp/2", source="mbppplus", split="test", statement="s", entry_point="f",
                solutions=["def f(x): return x"],
                tests=[CallTest(args="[1]", expected="1", group="base"),
                       CallTest(args="[2]", expected="2", group="plus")])
    other = Problem(id="x/1", source="x", split="test", statement="s", tests=[CallTest(args="[1]", expected="1")])
    out, rep = set_time_limits([p, other], _FakeJudge([0.01, 0.75]))
    assert [t.time_limit_s for t in out[0].tests] == [1.0, 3.0]
    assert out[0].time_limit_s == 3.0
    assert out[1] is other  # not an EvalPlus problem
    assert rep["problems_timed"] == 1 and rep["max_limit_s"] == 3.0


@pytest.mark.parametrize("value", [1.5, -0.0, float("inf"), float("nan"), 1e300, [1.0, 2.5], (3.0,), 2, "1.5", "abc",
                                   [1, 2], [1.0, 2], ["x"], None, True, {"a": 1.0}, "e", 10**30])
def test_float_precheck_never_hides_a_float(value):
    from rlvr.data.evalplus_oracles import repr_may_be_floats
    from rlvr.judge.compare import is_floats

    if is_floats(value):
        assert repr_may_be_floats(repr(value))
    assert repr_may_be_floats(repr("a.b")) is False and repr_may_be_floats("[1, 2, 3]") is False


def _rule(name):
    from rlvr.data.evalplus_oracles import SUM_RULES

    ns: dict = {}
    exec(SUM_RULES[name], ns)
    return ns["sum"]


def test_sum_rules_are_cpythons():
    """The two emulated float-summation rules: left to right (CPython <= 3.11) and Neumaier's (>= 3.12); the running
    interpreter's builtin ``sum`` is one of them."""
    import sys

    naive, neumaier = _rule("naive"), _rule("neumaier")
    xs = [1e16, 1.0, -1e16]
    assert naive(xs) == 0.0 and neumaier(xs) == 1.0
    assert sum(xs) == (neumaier if sys.version_info >= (3, 12) else naive)(xs)
    assert naive([1, 2], 3) == neumaier([1, 2], 3) == 6 and neumaier([[1]], []) == [1]  # non-floats: plain +
    assert neumaier([float("inf"), 1.0]) == float("inf")


def test_poly_root_robust_needs_a_root_under_both_rules():
    from rlvr.data.evalplus_oracles import poly_root_robust

    assert poly_root_robust("[[-10, -2]]", ["-5.0", "-5.0000001"], 1e-4)
    assert not poly_root_robust("[[-10, -2]]", ["-5.0", "-4.9"], 1e-4)
    # HumanEval+/32 plus input 219: its reference's root under CPython 3.11; the terms are ~1e13, so the polynomial
    # is 0.0 there summed left to right but -0.0023 summed with compensation (> atol 1e-4)
    xs = "[[9450000, 9, -7, 3, 2, 6, 1, -4, -10, 6, 17, -1]]"
    assert not poly_root_robust(xs, ["17.3124550475086"], 1e-4)
    assert not poly_root_robust("[[-10, -2]]", [None], 1e-4) and not poly_root_robust("[[-10, -2]]", ["'x'"], 1e-4)
    assert not poly_root_robust("[[-10, -2]]", ["1e400"], 1e-4) and not poly_root_robust("[[-10, -2]]", ["nan"], 1e-4)
