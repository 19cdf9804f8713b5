"""``rlvr judge`` as a drop-in for ``evalplus.evaluate``: EvalPlus's dataset names, one spelling per dataset, pass@k
for n samples per task (base, base + plus), ``<samples>_eval_results.json`` in EvalPlus 0.3.1's layout, and the
``pre-set-eq`` release flag (the published MBPP+ v0.1.0 tables)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlvr.cli import main
from rlvr.data.bundled import canonical_name, parse_spec
from rlvr.data.evalplus_oracles import oracle_kind
from rlvr.data.governance import DatasetSpec, GovernanceParams
from rlvr.data.schema import CallTest, Problem, write_problems
from rlvr.eval.baseline import DatasetSelection
from rlvr.eval.evalplus_compat import eval_results_path, pass_at_k_columns, resolve_dataset
from rlvr.eval.final_params import EvalDataset
from rlvr.judge.verdict import TestResult, summarise


def test_one_spelling_per_dataset():
    assert parse_spec("humanevalplus-v0.1.10") == parse_spec("humanevalplus:v0.1.10") == ("humanevalplus", "v0.1.10")
    assert parse_spec("mbpp-all") == ("mbpp-all", None)  # only versioned datasets take the dash form
    assert canonical_name("mbppplus") == canonical_name("mbppplus:v0.2.0") == "mbppplus-v0.2.0"
    # params: both spellings read, stored as one
    for model in (EvalDataset, DatasetSelection, DatasetSpec):
        assert model(name="humanevalplus:v0.1.10").name == model(name="humanevalplus-v0.1.10").name \
            == "humanevalplus-v0.1.10"


def test_judge_check_must_pass_reads_both_spellings():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_judge_check_stage",
                                                  Path(__file__).parents[2] / "stages" / "judge_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cfg = mod.JudgeCheckParams(must_pass=["humanevalplus:v0.1.10", "mbpp-all", "humaneval"])
    assert cfg.must_pass == ["humanevalplus-v0.1.10", "mbpp-all", "humaneval"]


def test_evalplus_names_only_in_evalplus_mode():
    assert resolve_dataset("humaneval") == "humaneval"  # rlvr: the original HumanEval
    assert resolve_dataset("humaneval", evalplus=True) == "humanevalplus-v0.1.10"
    assert resolve_dataset("mbpp", evalplus=True) == "mbppplus-v0.2.0"
    assert resolve_dataset("humaneval+") == resolve_dataset("humanevalplus") == "humanevalplus-v0.1.10"
    assert resolve_dataset("mbpp+:v0.1.0") == resolve_dataset("mbppplus-v0.1.0") == "mbppplus-v0.1.0"
    assert eval_results_path("out/samples.jsonl") == "out/samples_eval_results.json"


def test_pass_at_k_columns_follow_evalplus():
    rows = [{"task_id": "A", "base_status": b, "plus_status": p}
            for b, p in (("pass", "pass"), ("pass", "fail"), ("fail", "fail"))]
    rows += [{"task_id": "B", "base_status": "pass", "plus_status": "pass"}] * 3
    cols = pass_at_k_columns(rows, (1, 2, 10))
    assert cols["base"] == pytest.approx({"pass@1": (2 / 3 + 1) / 2, "pass@2": 1.0})  # no pass@10: n = 3 < 10
    assert cols["plus"] == pytest.approx({"pass@1": (1 / 3 + 1) / 2, "pass@2": (2 / 3 + 1) / 2})


class GroupJudge:
    """Accepts every test of a solution containing ``return a + b``; ``+ 0`` solutions fail the plus tests only."""

    workers = 1

    def judge_many(self, items, language: str = "python"):
        out = []
        for p, s in items:
            res = []
            for i, t in enumerate(p.tests):
                ok = "return a + b" in s and not ("+ 0" in s and t.group == "plus")
                res.append(TestResult(index=i, verdict="accepted" if ok else "wrong_answer"))
            out.append(summarise(res, 0.1))
        return out


@pytest.fixture(autouse=True)
def _no_preflight(monkeypatch):
    """The stand-in judges here grade by group, not programs: skip rlvr judge's start-up check (tested on its own in
    tests/judge/test_preflight.py)."""
    monkeypatch.setattr("rlvr.judge.preflight.preflight", lambda judge, *a, **k: None)


def _he_plus(tmp_path: Path) -> Path:
    d = tmp_path / "problems"
    tests = [CallTest(args="[1, 2]", expected="3", group="base"), CallTest(args="[5, -5]", expected="0", group="plus"),
             CallTest(args="[2, 2]", expected="4", group="plus")]
    probs = [Problem(id=f"humanevalplus/HumanEval/{i}", source="humanevalplus", split="test", statement="add",
                     entry_point="add", starter_code="def add(a, b):\n", tests=tests) for i in (0, 1)]
    write_problems(d / "humanevalplus-v0.1.10.jsonl", probs)
    return d


def test_judge_evalplus_mode_writes_eval_results(tmp_path, monkeypatch):
    monkeypatch.setattr("rlvr.judge.client.get_judge", lambda: GroupJudge())
    sols = {"ok": "    return a + b\n", "plus_bug": "    return a + b + 0\n", "bad": "    return a - b\n"}
    lines = [{"task_id": "HumanEval/0", "completion": sols[k]} for k in ("ok", "plus_bug", "bad")]
    lines += [{"task_id": "HumanEval/1", "completion": sols["ok"]}] * 3
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = CliRunner().invoke(main, ["judge", "--evalplus", "--dataset", "humaneval", "--samples", str(samples),
                                  "--k", "1,2,10", "--problems-dir", str(_he_plus(tmp_path))])
    assert r.exit_code == 0, r.output
    assert "= humanevalplus-v0.1.10 (EvalPlus names)" in r.output
    assert (tmp_path / "samples_verdicts.jsonl").is_file()  # --out defaults next to the samples
    doc = json.loads((tmp_path / "samples_eval_results.json").read_text())
    assert set(doc) == {"date", "hash", "eval", "pass_at_k"} and len(doc["hash"]) == 64
    first = doc["eval"]["HumanEval/0"]
    assert [e["base_status"] for e in first] == ["pass", "pass", "fail"]
    assert [e["plus_status"] for e in first] == ["pass", "fail", "fail"]
    assert set(first[0]) == {"task_id", "solution", "base_status", "plus_status", "base_fail_tests",
                             "plus_fail_tests"}
    assert first[1]["plus_fail_tests"] == [[5, -5]] and first[2]["base_fail_tests"] == [[1, 2]]
    assert first[0]["solution"] == "def add(a, b):\n    return a + b\n"
    assert doc["pass_at_k"]["base"] == pytest.approx({"pass@1": (2 / 3 + 1) / 2, "pass@2": 1.0})
    assert doc["pass_at_k"]["plus"] == pytest.approx({"pass@1": (1 / 3 + 1) / 2, "pass@2": (2 / 3 + 1) / 2})
    assert "base + extra tests" in r.output and "pass@2: 1.000" in r.output


def test_judge_reads_both_spellings(tmp_path, monkeypatch):
    monkeypatch.setattr("rlvr.judge.client.get_judge", lambda: GroupJudge())
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    return a + b\n"}) + "\n")
    pdir = _he_plus(tmp_path)
    outs = []
    for spec in ("humanevalplus:v0.1.10", "humanevalplus-v0.1.10", "humaneval+"):
        out = tmp_path / f"{len(outs)}.jsonl"
        r = CliRunner().invoke(main, ["judge", "--dataset", spec, "--samples", str(samples), "--out", str(out),
                                      "--problems-dir", str(pdir), "--no-eval-results"])
        assert r.exit_code == 0, (spec, r.output)
        outs.append(json.loads(out.read_text())["problem_id"])
    assert outs == ["humanevalplus/HumanEval/0"] * 3
    assert not (tmp_path / "s_eval_results.json").exists()
    r = CliRunner().invoke(main, ["judge", "--dataset", "humanevalplus", "--samples", str(samples),
                                  "--evalplus-release", "9.9", "--problems-dir", str(pdir)])
    assert r.exit_code != 0 and "pre-set-eq" in r.output


def test_pre_set_eq_release_is_known_everywhere():
    assert oracle_kind("mbppplus", "similar_elements") == "set_eq"
    # the general rule (out == exp) against the reference run in another process
    assert oracle_kind("mbppplus", "similar_elements", "pre-set-eq") == "eq_other_process"
    assert oracle_kind("humanevalplus", "find_zero", "pre-set-eq") == "poly_root"
    GovernanceParams(datasets=[], evalplus_release="pre-set-eq")  # a governance hyperparameter too


def _mbppplus_v010_rows(tmp_path: Path, task_id: str, solution: str) -> dict[str | None, dict]:
    """``rlvr judge --dataset mbppplus:v0.1.0`` on one sample, with the current rules (key ``None``) and with
    ``--evalplus-release pre-set-eq``: the task's row of each run's ``_eval_results.json``."""
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": task_id, "solution": solution}) + "\n")
    rows = {}
    for release in (None, "pre-set-eq"):
        args = ["judge", "--dataset", "mbppplus:v0.1.0", "--samples", str(samples), "--problems-dir",
                str(tmp_path / "none"), "--out", str(tmp_path / "v.jsonl")]
        r = CliRunner().invoke(main, args + (["--evalplus-release", release] if release else []))
        assert r.exit_code == 0, r.output
        rows[release] = json.loads((tmp_path / "s_eval_results.json").read_text())["eval"][task_id][0]
    return rows


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_pre_set_eq_reproduces_order_sensitive_verdicts(tmp_path, monkeypatch, judge):
    """Mbpp/2 answered with the shared elements in another order: accepted under EvalPlus's set-equality oracle,
    rejected under ``pre-set-eq`` (as the published MBPP+ v0.1.0 tables graded it)."""
    monkeypatch.setattr("rlvr.judge.client.get_judge", lambda: judge)
    sol = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b), reverse=True))\n"
    rows = _mbppplus_v010_rows(tmp_path, "Mbpp/2", sol)
    assert (rows[None]["base_status"], rows[None]["plus_status"]) == ("pass", "pass")
    assert (rows["pre-set-eq"]["base_status"], rows["pre-set-eq"]["plus_status"]) == ("fail", "fail")


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_pre_set_eq_grades_against_a_reference_from_another_process(tmp_path, monkeypatch, judge):
    """Qwen2.5-Coder-7B's published MBPP+ v0.1.0 verdicts fail its ``intersection_array`` (the reference's own code)
    on the plus inputs whose intersection is a set of strings: that evaluator compared ``out == exp`` with ``exp``
    cached from another process, whose string hash seed ordered the set differently. ``pre-set-eq`` reproduces it
    (the reference's value is taken with ``PYTHONHASHSEED=1``, the solution runs with ``0``); the current oracle and
    the integer-only base inputs pass. On today's code before this rule both columns passed."""
    monkeypatch.setattr("rlvr.judge.client.get_judge", lambda: judge)
    sol = "def intersection_array(arr1, arr2):\n    return list(set(arr1) & set(arr2))\n"
    rows = _mbppplus_v010_rows(tmp_path, "Mbpp/249", sol)
    assert (rows[None]["base_status"], rows[None]["plus_status"], rows[None]["plus_fail_tests"]) == ("pass", "pass", [])
    row = rows["pre-set-eq"]
    assert (row["base_status"], row["plus_status"]) == ("pass", "fail")
    # the first failing input holds strings (an int's hash, and so its place in a set, does not depend on the seed)
    failed = row["plus_fail_tests"]
    assert any(isinstance(x, str) for arg in failed[0] for x in arg), failed


def test_other_process_reference_orders_a_string_set_by_its_own_seed():
    """The wrapper runs the reference in a child with the given seed: the same code gives that seed's order."""
    import subprocess
    import sys

    from rlvr.data.evalplus_oracles import other_process_reference

    ref = "def f(a):\n    return list(set(a))\n"
    words = [f"w{i}" for i in range(12)]
    orders = {}
    for seed in (0, 1):
        code = other_process_reference(ref, "f", seed) + f"\nprint(f({words!r}))\n"
        # the parent's own seed (here 0) does not matter: the child's does
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"})
        direct = subprocess.run([sys.executable, "-c", ref + f"\nprint(f({words!r}))\n"], capture_output=True,
                                text=True, check=True, env={"PYTHONHASHSEED": str(seed)})
        orders[seed] = run.stdout
        assert run.stdout == direct.stdout
    assert orders[0] != orders[1]  # 12 strings: the two seeds' orders differ (checked once, fixed seeds)
