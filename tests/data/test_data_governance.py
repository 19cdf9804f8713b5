"""Governance logic (fake judge) and the two stage CLIs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from click.testing import CliRunner

from rlvr.data.governance import GovernanceParams, fill_expected, load_configured, run_governance
from rlvr.data.schema import AssertTest, CallTest, Problem, read_problems
from rlvr.layout import read_metrics

ROOT = Path(__file__).resolve().parents[2]


class FakeJudge:
    """call_outputs returns canned values per problem id; raises for ids in `errors`."""

    def __init__(self, outputs, errors=()):
        self.outputs, self.errors, self.calls = outputs, set(errors), []

    def call_outputs(self, problem, solution):
        self.calls.append((problem.id, solution))
        if problem.id in self.errors:
            raise ValueError("does not compile")
        return self.outputs[problem.id]


def _call_problem(pid, n, solutions=("def f(x): return x",)):
    return Problem(id=f"t/{pid}", source="t", split="test", statement=f"P{pid}", entry_point="f",
                   tests=[CallTest(args=f"[{i}]") for i in range(n)] + [AssertTest(code="assert True")],
                   solutions=list(solutions))


def test_fill_expected_rules():
    ps = [_call_problem(1, 3), _call_problem(2, 1), _call_problem(3, 1, solutions=()), _call_problem(4, 1),
          Problem(id="t/5", source="t", split="test", statement="s", tests=[CallTest(args="[1]", expected="1")])]
    judge = FakeJudge({"t/1": ["0", None, "2.5"], "t/2": [None]}, errors={"t/4"})
    kept, rep = fill_expected(ps, judge)
    assert [p.id for p in kept] == ["t/1", "t/2", "t/5"]  # t/2 keeps its assert test
    t1 = [t for t in kept[0].tests if isinstance(t, CallTest)]
    assert [(t.args, t.expected, t.atol) for t in t1] == [("[0]", "0", 0.0), ("[2]", "2.5", 1e-6)]
    assert rep["tests_failed"] == 2 and rep["failed_tests"] == {"t/1": 1, "t/2": 1}
    reasons = {d["id"]: d["reason"] for d in rep["dropped"]}
    assert reasons["t/3"] == "no_solution" and reasons["t/4"].startswith("judge_error: ValueError")
    assert ("t/5", "def f(x): return x") not in judge.calls  # already-filled problems are not re-run


def test_fill_expected_set_oracle_becomes_assert():
    p = _call_problem(7, 1)
    p.meta["evalplus_oracle"] = "set_eq"
    kept, _ = fill_expected([p], FakeJudge({"t/7": ["(2, 1)"]}))
    assert kept[0].tests[0] == AssertTest(code="assert set(candidate(*[0])) == set([1, 2])")


def test_fill_expected_set_oracle_is_independent_of_iteration_order():
    # the canonical solution's set comes back in hash-seed order; the written test must have the same bytes either way
    codes = set()
    for order in ("('b', 'a', 'c')", "('c', 'b', 'a')", "['a', 'c', 'b']"):
        p = _call_problem(8, 1)
        p.meta["evalplus_oracle"] = "set_eq"
        kept, _ = fill_expected([p], FakeJudge({"t/8": [order]}))
        codes.add(kept[0].tests[0].code)
    assert codes == {"assert set(candidate(*[0])) == set(['a', 'b', 'c'])"}


def test_fill_expected_drops_problem_without_tests():
    p = Problem(id="t/9", source="t", split="test", statement="s", entry_point="f",
                tests=[CallTest(args="[1]")], solutions=["x"])
    kept, rep = fill_expected([p], FakeJudge({"t/9": [None]}))
    assert kept == [] and rep["dropped"] == [{"id": "t/9", "reason": "no_tests_left"}]


def test_run_governance_with_bundled_data():
    cfg = GovernanceParams.model_validate({"datasets": [
        {"name": "humanevalplus", "role": "test", "max_problems": 2},
        {"name": "humaneval", "role": "test"},
        {"name": "mbpp", "role": "train", "splits": ["train"], "max_problems": 5},
    ], "references": {"verify": False}})
    by_slug = load_configured(cfg)
    assert set(by_slug) == {"humanevalplus-v0.1.10", "humaneval", "mbpp"}
    problems = [p for ps in by_slug.values() for p in ps]
    outs = {p.id: ["1"] * sum(isinstance(t, CallTest) for t in p.tests) for p in by_slug["humanevalplus-v0.1.10"]}
    _kept, rep = run_governance(problems, cfg, judge=FakeJudge(outs))
    assert rep["counts_before"]["humaneval/test"] == 164 and rep["counts_after"]["humaneval/test"] == 164
    dedup = rep["audits"]["exact_dedup"]
    assert dedup["counts"]["groups_cross_source"] == 2 and dedup["dropped"] == []  # HE+ vs HE: reported only
    assert rep["expected"]["problems_computed"] == 2
    with pytest.raises(ValueError, match="needs a judge"):
        run_governance(problems, cfg)
    extra = {"noop": lambda ps, c: (ps[:1], {"counts": {"n": 1}})}
    kept2, rep2 = run_governance(problems, cfg.model_copy(update={"compute_expected": False}), audits=extra)
    assert len(kept2) == 1 and rep2["audits"] == {"noop": {"counts": {"n": 1}}}


def test_evalplus_release_is_a_governance_hyperparameter():
    # params.yaml carries the key (so `dvc exp run -S governance.evalplus_release=0.3.1` overrides an existing key),
    # the governance stage depends on the whole section, and the value DVC writes ("0.3.1", a YAML string) reaches
    # the HumanEval+ loader: HumanEval/32 gets the 0.3.1 find_zero oracle, the default keeps the corrected one
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    assert "evalplus_release" in params["governance"] and params["governance"]["evalplus_release"] is None
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["governance"]
    assert "governance" in stage["params"]
    overridden = {**params["governance"], "evalplus_release": yaml.safe_load("0.3.1"),
                  "datasets": [{"name": "humanevalplus:v0.1.10", "role": "test", "max_problems": 33}]}
    oracle = {}
    for release, section in (("0.3.1", overridden), (None, {**overridden, "evalplus_release": None})):
        cfg = GovernanceParams.model_validate(section)
        by_id = {p.meta["task_id"]: p for p in load_configured(cfg)["humanevalplus-v0.1.10"]}
        oracle[release] = by_id["HumanEval/32"].meta["evalplus_oracle"]
    assert oracle == {"0.3.1": "poly_root_0.3.1", None: "poly_root"}
    with pytest.raises(ValueError, match=r"evalplus_release='0.2.0': known releases \['0.3.1', 'pre-set-eq'\]"):
        GovernanceParams.model_validate({**overridden, "evalplus_release": "0.2.0"})


@pytest.mark.parametrize("stage", ["governance", "manifests"])
def test_stage_help(stage):
    r = subprocess.run([sys.executable, str(ROOT / "stages" / f"{stage}.py"), "--help"], capture_output=True,
                       text=True, cwd=ROOT, check=False)
    assert r.returncode == 0 and "Usage" in r.stdout


def test_stages_end_to_end_without_judge(tmp_path):
    sys.path.insert(0, str(ROOT / "stages"))
    try:
        import governance as gov_stage
        import manifests as man_stage
    finally:
        sys.path.pop(0)
    params = tmp_path / "params.yaml"
    params.write_text(
        "governance:\n  compute_expected: false\n  references: {verify: false}\n  datasets:\n"
        "    - {name: apps, role: test}\n    - {name: mbpp, role: train, splits: [train], max_problems: 20}\n"
        "manifests:\n  verl_train: [mbpp/train]\n  verl_val: [apps/train]\n")
    r = CliRunner().invoke(gov_stage.main, ["--params", str(params), "--out-dir", str(tmp_path / "gov"),
                                            "--metrics", str(tmp_path / "m.json")])
    assert r.exit_code == 0, r.output
    apps = read_problems(tmp_path / "gov" / "problems" / "apps.jsonl")
    assert len(apps) == 128  # 22 repeated records dropped by exact dedup
    metrics = read_metrics(tmp_path / "m.json")
    assert metrics["problems_per_dataset"] == {"apps": 128, "mbpp": 20}
    assert metrics["bad_data"] == 22 and metrics["exact_dups"] == 0  # APPS repeats: listed as duplicate_id
    removed = [json.loads(line) for line in (tmp_path / "gov" / "removed.jsonl").read_text().splitlines()]
    assert len(removed) == 22 and {r["reason"] for r in removed} == {"duplicate_id"}
    assert {r["file"] for r in removed} == {"apps_mapcoder150/selected150.jsonl.gz"}
    for name in ("near_dup_clusters.jsonl", "contamination.jsonl", "references.jsonl"):
        for line in (tmp_path / "gov" / name).read_text().splitlines():
            json.loads(line)
    audit = (tmp_path / "gov" / "audit.md").read_text()
    assert "selected150.jsonl.gz" in audit and "115483c5fe38ab07" in audit
    r = CliRunner().invoke(man_stage.main, ["--params", str(params), "--in-dir", str(tmp_path / "gov" / "problems"),
                                            "--out-dir", str(tmp_path / "man")])
    assert r.exit_code == 0, r.output
    index = json.loads((tmp_path / "man" / "index.json").read_text())
    assert index["apps.train.manifest.jsonl"]["count"] == 128
    train = datasets.load_dataset("parquet", data_files=str(tmp_path / "man" / "verl" / "train.parquet"), split="train")
    assert len(train) == 20 and train[0]["data_source"] == "mbpp"


# HumanEval+/32's reference (EvalPlus's canonical find_zero: Newton's method from 0, 1000 steps, |f| < 1e-5)
FIND_ZERO = '''import math


def poly(xs: list, x: float):
    return sum([coeff * math.pow(x, i) for i, coeff in enumerate(xs)])


def find_zero(xs: list):
    dxs = [xs[i] * i for i in range(1, len(xs))]
    def func(x):
        return poly(xs, x)
    def derivative(x):
        return poly(dxs, x)
    x, tol = 0, 1e-5
    for _ in range(1000):
        fx = func(x)
        dfx = derivative(x)
        if abs(fx) < tol: break
        x = x - fx / dfx
    return x
'''


class HostJudge:
    """call_outputs by running the (trusted, pure) solution here: the repr of each call test's result."""

    def call_outputs(self, problem, solution):
        import ast

        ns: dict = {}
        exec(solution, ns)
        fn = ns[problem.entry_point]
        return [repr(fn(*ast.literal_eval(t.args))) for t in problem.tests if isinstance(t, CallTest)]


def test_fill_expected_drops_find_zero_inputs_that_depend_on_the_float_summation():
    """HumanEval+/32 plus inputs 219 and 277: the reference passes them under CPython 3.11's left-to-right ``sum``
    and fails them under 3.12's compensated one (219: its root's terms are ~1e13, the polynomial is 0.0 or -0.0023
    there; 277: Newton finds no root in 1000 steps), so they are removed whatever interpreter runs governance."""
    args = ["[[-10, -2]]", "[[9450000, 9, -7, 3, 2, 6, 1, -4, -10, 6, 17, -1]]",
            "[[9, -6, 20999, 2, 8, -4, -10, 26, 6, 5, -1, 8]]"]
    p = Problem(id="humanevalplus/HumanEval/32", source="humanevalplus", split="test", statement="s",
                entry_point="find_zero", tests=[CallTest(args=a, group="plus") for a in args], solutions=[FIND_ZERO],
                meta={"evalplus_oracle": "poly_root", "evalplus_atol": 1e-4})
    kept, rep = fill_expected([p], HostJudge())
    assert [t.code.split("candidate(*")[1].split(")")[0] for t in kept[0].tests] == [args[0]]
    assert rep["tests_sum_dependent"] == 2 and rep["sum_dependent_tests"] == {p.id: 2}
    assert rep["tests_computed"] == 1 and rep["tests_failed"] == 0
