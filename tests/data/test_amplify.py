"""Test-suite amplification (rlvr.data.amplify, rlvr.data.type_mutation, rlvr.data.mutants; issue 42): seeded and
deterministic, type-preserving, capped, only weak training suites, reference failures discarded, near misses caught,
params validated."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from random import Random

import pytest

from rlvr.config import ConfigError, load_section
from rlvr.data.amplify import AmplifyParams, amplify_problems, call_seeds
from rlvr.data.audit import audit_markdown, governance_metrics
from rlvr.data.governance import GovernanceParams, run_governance
from rlvr.data.mutants import mutants, near_miss_report
from rlvr.data.schema import AssertTest, CallTest, Problem
from rlvr.data.type_mutation import canonical_repr, infer_invariants, mutate_args


class InProcessOracle:
    """A judge with only ``call_outputs``: runs the (trusted, test-written) reference in this process; ``None`` where
    it raises, as the sandbox's oracle run reports a failed test."""

    def __init__(self) -> None:
        self.calls = 0

    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]:
        self.calls += 1
        ns: dict = {}
        exec(solution, ns)
        fn = eval(problem.entry_point, ns)
        out: list[str | None] = []
        for t in problem.tests:
            if isinstance(t, CallTest):
                try:
                    out.append(repr(fn(*ast.literal_eval(t.args))))
                except Exception:
                    out.append(None)
        return out


def _problem(pid: str = "mbpp/1", n_tests: int = 3, source: str = "mbpp", role: str = "train",
             solution: str = "def f(xs, k):\n    return sorted(xs)[:k]\n",
             asserts: list[str] | None = None, entry: str = "f") -> Problem:
    asserts = asserts or ["assert f([3, 1, 2], 2) == [1, 2]", "assert f([5, 4], 1) == [4]",
                          "assert f([9, 8, 7, 6], 3) == [6, 7, 8]", "assert f([1], 1) == [1]",
                          "assert f([2, 2], 2) == [2, 2]", "assert f([7, 0], 1) == [0]"]
    return Problem(id=pid, source=source, split="train", statement="s", entry_point=entry,
                   tests=[AssertTest(code=a) for a in asserts[:n_tests]], solutions=[solution], meta={"role": role})


def _added(p: Problem) -> list[CallTest]:
    return p.tests[p.meta["amplify"]["original_tests"]:]  # type: ignore[return-value]


CFG = AmplifyParams(enabled=True)


def test_same_seed_same_tests_other_seed_other_tests():
    p = _problem()
    a, _ = amplify_problems([p], CFG, InProcessOracle())
    b, _ = amplify_problems([p], CFG, InProcessOracle())
    c, _ = amplify_problems([p], CFG.model_copy(update={"seed": 1}), InProcessOracle())
    assert [t.args for t in _added(a[0])] == [t.args for t in _added(b[0])]
    assert [t.args for t in _added(a[0])] != [t.args for t in _added(c[0])]
    assert a[0].meta["amplify"]["seed"] == 0 and c[0].meta["amplify"]["seed"] == 1


_SUBPROCESS = """
import json, sys
from random import Random
from rlvr.data.type_mutation import canonical_repr, mutate_args
seeds = [[{"b", "a", "cc"}, "xyz", {"k": 1}], [{"q", "rr"}, "ab", {"j": 2, "k": 3}]]
rng = Random(7)
print(json.dumps([canonical_repr(mutate_args(seeds, rng)) for _ in range(40)]))
"""


def test_mutants_do_not_depend_on_the_process_hash_seed():
    """Sets of strings iterate in a per-process order (PYTHONHASHSEED): the mutants must not follow it."""
    outs = []
    for hs in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hs, "PYTHONPATH": os.getcwd()}
        r = subprocess.run([sys.executable, "-c", _SUBPROCESS], env=env, capture_output=True, text=True, check=True)
        outs.append(json.loads(r.stdout))
    assert outs[0] == outs[1]


def test_types_are_preserved_at_every_position():
    seeds = [[1, 2.5, "ab", [1, 2], (True, "x"), {"a": 1}, {3, 4}, None, False],
             [0, 0.5, "", [5], (False, "yy"), {"b": 2, "c": 0}, {7}, None, True]]
    rng = Random(0)
    for _ in range(300):
        args = mutate_args(seeds, rng)
        if args is None:
            continue
        assert [type(a) for a in args] == [type(a) for a in seeds[0]]
        assert all(type(x) is int for x in args[3])          # a list of ints stays a list of ints
        assert all(type(x) is int for x in args[5].values())
        assert all(type(x) is int for x in args[6])
        b, s = args[4] if len(args[4]) == 2 else (True, "x")
        assert type(b) is bool and type(s) is str


def test_invariants_of_the_seeds_hold_in_the_mutants():
    seeds = [[[1, 3, 8], 3, "abc"], [[0, 2], 2, "ba"], [[2, 4, 6, 9], 4, "c"]]
    invs = infer_invariants(seeds)
    assert invs[0].ascending and invs[0].distinct and invs[0].nonempty and invs[1].len_of == 0
    rng = Random(3)
    for _ in range(300):
        args = mutate_args(seeds, rng, invs)
        if args is None:
            continue
        xs, n, s = args
        assert xs == sorted(set(xs)) and n == len(xs) and xs and min(xs) >= 0
        assert set(s) <= set("abc") and s


def test_cap_holds_and_is_reached():
    out, rep = amplify_problems([_problem()], CFG.model_copy(update={"max_tests": 7}), InProcessOracle())
    assert len(out[0].tests) == 7 and out[0].meta["amplify"]["added"] == 4
    assert all(isinstance(t, CallTest) and t.expected is not None and t.time_limit_s is None for t in _added(out[0]))
    # inputs are distinct from the seeds and from each other
    args = [t.args for t in _added(out[0])]
    assert len(set(args)) == len(args) and not set(args) & {canonical_repr(s) for s in call_seeds(_problem())}
    assert rep["before"]["mbpp"]["tests_mean"] == 3 and rep["after"]["mbpp"]["tests_mean"] == 7


def test_only_weak_training_suites_of_listed_sources_are_amplified():
    strong = _problem("mbpp/2", n_tests=6)
    weak = _problem("mbpp/3")
    test_role = _problem("mbpp/4", role="test")
    other = _problem("leetcode/x", source="leetcode")
    oracle = InProcessOracle()
    out, rep = amplify_problems([strong, weak, test_role, other], CFG.model_copy(update={"sources": ["mbpp"]}),
                                oracle)
    assert [p.id for p in out] == ["mbpp/2", "mbpp/3", "mbpp/4", "leetcode/x"]
    assert out[0] == strong and out[2] == test_role and out[3] == other
    assert len(out[1].tests) == 10 and rep["problems_eligible"] == 1 and oracle.calls == 1
    off, rep_off = amplify_problems([weak], AmplifyParams(), oracle)
    assert off == [weak] and rep_off["problems_amplified"] == 0


def test_an_input_the_reference_raises_on_is_discarded():
    sol = "def g(x):\n    if x == 5:\n        raise ValueError('no')\n    return x * 2\n"
    p = _problem(solution=sol, entry="g", asserts=["assert g(4) == 8", "assert g(6) == 12", "assert g(7) == 14"])
    out, rep = amplify_problems([p], CFG, InProcessOracle())
    args = [t.args for t in _added(out[0])]
    assert "[5]" not in args and args
    assert rep["discarded_by_reason"]["oracle"] >= 1
    assert out[0].meta["amplify"]["discarded"] == out[0].meta["amplify"]["candidates"] - len(args)


def test_an_output_of_a_type_the_seeds_never_give_is_discarded():
    sol = "def h(xs, t):\n    return [i for i, x in enumerate(xs) if x == t] or None\n"
    p = _problem(solution=sol, entry="h", asserts=["assert h([1, 2], 2) == [1]", "assert h([3, 3], 3) == [0, 1]"])
    out, rep = amplify_problems([p], CFG, InProcessOracle())
    assert all(t.expected != "None" for t in _added(out[0]))
    assert rep["discarded_by_reason"]["output_type"] >= 1


def test_leetcode_keyword_calls_follow_the_reference_signature():
    sol = "class Solution:\n    def go(self, nums: list, target: int) -> int:\n        return nums.count(target)\n"
    p = _problem("leetcode/go", source="leetcode", solution=sol, entry="Solution().go",
                 asserts=["assert candidate(target = 1, nums = [1, 1]) == 2", "assert candidate([2], target = 3) == 0",
                          "assert is_same(candidate(nums = [1], target = 1), 1)"])
    assert call_seeds(p) == [[[1, 1], 1], [[2], 3]]


def test_problem_without_call_style_tests_is_kept_as_is():
    p = _problem(asserts=["assert f(Pair(1, 2), 1) == 1", "assert set(f([1], 1)) == {1}"], n_tests=2)
    out, rep = amplify_problems([p], CFG, InProcessOracle())
    assert out == [p] and rep["problems_no_call_tests"] == 1


class AcceptingJudge(InProcessOracle):
    """Fills oracles in process; reference verification accepts every program."""

    def judge_many(self, items):
        from rlvr.judge.verdict import JudgeResult

        return [JudgeResult(verdict="accepted", passed=1, total=1, pass_ratio=1.0, judge_s=0.0) for _ in items]


def test_amplification_without_reference_verification_is_refused():
    """The added tests' expected outputs are the reference's: unverified, a wrong reference would write wrong tests."""
    for refs in ({"verify": False}, {"roles": ["dev"]}):
        with pytest.raises(ValueError, match=r"amplify\.enabled needs governance\.references\.verify: true"):
            GovernanceParams(datasets=[{"name": "mbpp", "role": "train"}], references=refs,
                             amplify={"enabled": True})


def test_governance_amplifies_after_the_audits_and_reports_per_source():
    p = _problem()
    cfg = GovernanceParams(datasets=[{"name": "mbpp", "role": "train"}], compute_expected=False,
                           amplify={"enabled": True, "near_miss": {"max_problems": 0}})
    with pytest.raises(ValueError, match=r"amplify\.enabled needs a judge"):
        run_governance([p], cfg, audits={})
    kept, report = run_governance([p], cfg, judge=AcceptingJudge(), audits={})
    m = governance_metrics(report, {"mbpp": kept})["amplify"]
    assert m["tests_added"] == 7 and m["mbpp"]["problems_amplified"] == 1
    assert m["mbpp"]["tests_before"] == {"mean": 3, "median": 3.0, "min": 3}
    assert m["mbpp"]["tests_after"] == {"mean": 10, "median": 10.0, "min": 10}
    md = audit_markdown(report, [], cfg)
    assert "## Test amplification" in md and "| mbpp | 1 | 1 | 3 / 3.0 / 3 | 10 / 10.0 / 10 |" in md


class RejectingJudge(InProcessOracle):
    """Fills oracles in process; reference verification rejects every program."""

    def judge_many(self, items):
        from rlvr.judge.verdict import JudgeResult

        return [JudgeResult(verdict="wrong_answer", passed=0, total=1, pass_ratio=0.0, judge_s=0.0) for _ in items]


def test_a_problem_whose_reference_verification_fails_keeps_its_original_suite():
    p = _problem()
    cfg = GovernanceParams(datasets=[{"name": "mbpp", "role": "train"}], compute_expected=False,
                           amplify={"enabled": True, "near_miss": {"max_problems": 0}})
    kept, report = run_governance([p], cfg, judge=RejectingJudge(), audits={})
    assert kept[0].tests == p.tests and kept[0].meta["amplify"]["reverted"] == "reference_rejected"
    assert report["amplify"]["problems_reverted"] == 1 and report["amplify"]["problems_amplified"] == 0
    assert report["amplify"]["after"]["mbpp"]["tests_mean"] == 3


def test_near_miss_the_original_tests_accept_is_rejected_by_the_amplified_suite(judge):
    """A constructed example through the real judge: ``x >= 10`` passes 9 → False, 11 → True, 0 → False; the
    mutated input 10 (9 + 1) tells it from the reference ``x > 10``."""
    ref = "def is_big(x):\n    return x > 10\n"
    p = _problem(solution=ref, entry="is_big",
                 asserts=["assert is_big(9) == False", "assert is_big(11) == True", "assert is_big(0) == False"])
    assert "def is_big(x):\n    return x >= 10" in list(mutants(ref))
    out, _ = amplify_problems([p], CFG, judge)
    assert "[10]" in [t.args for t in _added(out[0])]
    assert judge.judge(out[0], ref).accepted
    nm = near_miss_report(out, judge, max_problems=5, per_problem=5)
    assert nm["mbpp"]["accepted_original"] >= 1 and nm["mbpp"]["rejected_amplified"] >= 1


@pytest.mark.parametrize(("amplify", "key"), [
    ({"max_tests": 3, "min_tests": 5}, "governance.amplify: Value error, max_tests=3 is below min_tests=5"),
    ({"min_tests": 0}, "governance.amplify.min_tests:"),
    ({"oracle_time_limit_s": 0}, "governance.amplify.oracle_time_limit_s:"),
    ({"seeed": 1}, "governance.amplify.seeed: Extra inputs are not permitted (did you mean 'seed'?)"),
    ({"near_miss": {"max_problems": -1}}, "governance.amplify.near_miss.max_problems:"),
])
def test_bad_amplify_params_fail_with_one_line_naming_the_key(tmp_path, amplify, key):
    f = tmp_path / "params.yaml"
    f.write_text(json.dumps({"governance": {"datasets": [{"name": "mbpp"}], "amplify": amplify}}), encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_section("governance", GovernanceParams, f)
    assert key in str(exc.value) and "\n" not in str(exc.value)
