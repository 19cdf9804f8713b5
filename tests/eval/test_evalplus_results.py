"""``rlvr judge``'s ``<samples>_eval_results.json`` as ``evalplus`` 0.3.1 writes it, on every bundled release.

The EvalPlus side is ``evalplus.evaluate.evaluate`` itself (``bench/parity/evalplus_results.py``), run on the samples
next to each committed ``*.eval_results.json`` (``tests/eval/data/evalplus_results``); the samples hit each case: sets
(Mbpp/115), tuples (Mbpp/2), complex numbers written as text (Mbpp/124, /252), ``inf`` (Mbpp/404), large integers
(Mbpp/116, HumanEval/53), floats (HumanEval/0), inputs inside a special oracle's assert test (Mbpp/2 set equality,
Mbpp/737 not-None, HumanEval/32 find_zero), a test that times out (``fail``), a program that does not compile, raises
or hangs before its entry point exists (``fail`` / ``timeout``, no failing input), a missing entry point, an empty plus
group (Mbpp/793). With ``RLVR_EVALPLUS_PYTHON`` naming an interpreter that has ``evalplus`` 0.3.1, EvalPlus is also
re-run on the spot and compared."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlvr.cli import main
from rlvr.data.evalplus_oracles import oracle_test
from rlvr.data.schema import CallTest, Problem
from rlvr.eval.evalplus_compat import eval_results, fail_tests
from rlvr.judge.verdict import TestResult, summarise

ROOT = Path(__file__).parents[2]
DATA = Path(__file__).parent / "data" / "evalplus_results"
RELEASES = {"mbppplus-v0.1.0": ("mbpp", "MbppPlus-v0.1.0"), "mbppplus-v0.2.0": ("mbpp", "MbppPlus-v0.2.0"),
            "humanevalplus-v0.1.10": ("humaneval", "HumanEvalPlus-v0.1.10")}


def _result(problem: Problem, verdicts: list[str]):
    return summarise([TestResult(index=i, verdict=v) for i, v in enumerate(verdicts)], 0.1)


def _mbpp(num: int, args: list[str], entry: str = "f") -> Problem:
    tests = [CallTest(args=a, expected="0", group="base" if i == 0 else "plus") for i, a in enumerate(args)]
    return Problem(id=f"mbppplus/Mbpp/{num}", source="mbppplus", split="test", statement="s", entry_point=entry,
                   tests=tests, meta={"task_id": f"Mbpp/{num}"})


def test_fail_tests_are_written_as_evalplus_writes_them():
    """Sets, complex numbers, tuples, inf and large integers: json.dumps of the results object works and gives
    EvalPlus's form (mbpp_serialize_inputs, then json.dump)."""
    cases = {
        115: ("[[{1, 2}, {}, {}]]", [[[1, 2], [], []]]),
        124: ("[0.0, 1j]", ["0.0", "1j"]),
        252: ("[(4+0j)]", ["(4+0j)"]),
        2: ("[(3, 4, 5), (5, 7, 4)]", [[3, 4, 5], [5, 7, 4]]),
        404: ("[-inf, inf]", [-math.inf, math.inf]),
        116: ("[(1, 12345678901234567890123456789)]", [[1, 12345678901234567890123456789]]),
    }
    for num, (args, want) in cases.items():
        p = _mbpp(num, ["[0]", args])
        got = fail_tests(p, _result(p, ["accepted", "wrong_answer"]))
        assert got["base_status"] == "pass" and got["base_fail_tests"] == []
        assert got["plus_status"] == "fail" and got["plus_fail_tests"] == [want], num
        json.dumps(got)  # no set, complex or tuple left
    p = _mbpp(404, ["[-inf, inf]"])
    assert json.dumps(fail_tests(p, _result(p, ["timeout"])), sort_keys=True) == (
        '{"base_fail_tests": [[-Infinity, Infinity]], "base_status": "fail", "plus_fail_tests": [], '
        '"plus_status": "pass"}')


def test_a_special_oracle_test_lists_its_input():
    call = CallTest(args="[(3, 4), ('a', 'b')]", group="base")
    t = oracle_test("set_eq", call, "(4,)", 0.0)
    p = Problem(id="mbppplus/Mbpp/2", source="mbppplus", split="test", statement="s", entry_point="f", tests=[t],
                meta={"task_id": "Mbpp/2"})
    assert fail_tests(p, _result(p, ["wrong_answer"]))["base_fail_tests"] == [[[3, 4], ["a", "b"]]]


def test_a_program_that_never_reaches_its_tests():
    p = _mbpp(2, ["[1]", "[2]"])
    r = _result(p, ["timeout", "timeout"])
    assert fail_tests(p, r)["base_status"] == "fail"  # a test that timed out is EvalPlus's fail
    assert fail_tests(p, r, "timeout") == {"base_status": "timeout", "plus_status": "timeout", "base_fail_tests": [],
                                           "plus_fail_tests": []}
    doc = eval_results([{"task_id": "Mbpp/2", "solution": "x"}], [p], [r], loaded=["fail"])
    assert doc["eval"]["Mbpp/2"][0]["plus_status"] == "fail" and doc["eval"]["Mbpp/2"][0]["plus_fail_tests"] == []


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_an_empty_samples_file_is_an_error(tmp_path, content):
    samples = tmp_path / "s.jsonl"
    samples.write_text(content)
    r = CliRunner().invoke(main, ["judge", "--dataset", "mbppplus:v0.1.0", "--samples", str(samples)])
    assert r.exit_code != 0 and "no samples" in r.output
    assert not (tmp_path / "s_verdicts.jsonl").exists()


def test_an_unmatched_samples_file_is_an_error(tmp_path):
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/0", "solution": "x"}) + "\n")
    r = CliRunner().invoke(main, ["judge", "--dataset", "mbppplus:v0.1.0", "--samples", str(samples),
                                  "--problems-dir", str(tmp_path / "none")])
    assert r.exit_code != 0 and "unknown task id 'HumanEval/0'" in r.output


def _entries(doc: dict) -> list[str]:
    """Each sample's entry as canonical JSON text (NaN-safe comparison), in file order. Mbpp/115's inputs are sets
    that EvalPlus lists in its process's hash order: compared as sorted lists."""
    out = []
    for task, entries in doc["eval"].items():
        for e in entries:
            if task == "Mbpp/115":
                e = {**e, **{k: [[[sorted(s, key=repr) for s in inp[0]]] for inp in e[k]]
                             for k in ("base_fail_tests", "plus_fail_tests")}}
            out.append(json.dumps(e, sort_keys=True))
    return out


def _evalplus_now(dataset: str, data: str, samples: Path, out: Path) -> dict:
    python = os.environ["RLVR_EVALPLUS_PYTHON"]
    subprocess.run([python, str(ROOT / "bench/parity/evalplus_results.py"), "--dataset", dataset, "--data",
                    str(ROOT / "data/raw/evalplus" / f"{data}.jsonl.gz"), "--samples", str(samples), "--out",
                    str(out)], check=True, capture_output=True, timeout=900)
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
@pytest.mark.parametrize("release", sorted(RELEASES))
def test_results_file_matches_evalplus(tmp_path, monkeypatch, judge, release):
    monkeypatch.setattr("rlvr.judge.client.get_judge", lambda: judge)
    samples = tmp_path / "samples.jsonl"
    shutil.copyfile(DATA / f"{release}.samples.jsonl", samples)
    r = CliRunner().invoke(main, ["judge", "--dataset", release, "--samples", str(samples), "--problems-dir",
                                  str(tmp_path / "none"), "--k", "1"])
    assert r.exit_code == 0, r.output
    ours = json.loads((tmp_path / "samples_eval_results.json").read_text())
    theirs = json.loads((DATA / f"{release}.eval_results.json").read_text())
    assert list(ours["eval"]) == list(theirs["eval"])
    assert _entries(ours) == _entries(theirs)
    if os.environ.get("RLVR_EVALPLUS_PYTHON"):
        dataset, data = RELEASES[release]
        fresh = _evalplus_now(dataset, data, DATA / f"{release}.samples.jsonl", tmp_path / "fresh.json")
        assert _entries(ours) == _entries(fresh)


def test_committed_evalplus_results_cover_every_case():
    """The committed EvalPlus outputs hold what the samples were written for (so the slow test compares them)."""
    statuses = set()
    text = ""
    for release in RELEASES:
        doc = json.loads((DATA / f"{release}.eval_results.json").read_text())
        statuses |= {e[k] for v in doc["eval"].values() for e in v for k in ("base_status", "plus_status")}
        text += (DATA / f"{release}.eval_results.json").read_text()
    assert statuses == {"pass", "fail", "timeout"}
    assert "Infinity" in text and '"(1+0j)"' in text and '"0.0", "1j"' in text
    assert "999999999999999999999" in text
