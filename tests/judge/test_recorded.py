"""Recorded settle margins (issue 45, item 5): a trusted program whose CPU need straddles its settle limit gets the
same verdict at every load once its margin is recorded; without the record it flips (the two flips of 2026-11-28).

The fake machine models the embedded judge: a plain limit is a wall limit; a CPU-judged copy's limit is a CPU limit
with a wall backstop of ``MAX_SLOWDOWN`` × it. Contention also inflates CPU time itself (``cpu_inflation``: 2.3 s idle
became 3.2 s under load for the LeetCode reference), which is what the default rule cannot absorb."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlvr.data.oracles import FILL_RETRY_FACTOR, fill_expected
from rlvr.data.references import ReferenceParams, verify_references
from rlvr.data.schema import CallTest, Problem, StdioTest
from rlvr.judge.check import check_references
from rlvr.judge.recorded import DEFAULT_FILE, RecordedMargin, RecordedMargins, program_sha256, propose
from rlvr.judge.settle import cpu_judged_slack, judge_settled
from rlvr.judge.verdict import JudgeResult, TestResult

ROOT = Path(__file__).resolve().parents[2]
REF = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"


class Machine:
    """``needs[i]``: idle CPU seconds of test ``i``; under load the CPU time is ``cpu_inflation`` × that and wall
    time ``slowdown`` × the CPU time."""

    def __init__(self, needs: list[float], slowdown: float, cpu_inflation: float) -> None:
        self.needs, self.slowdown, self.inflation = needs, slowdown, cpu_inflation
        self.limits: list[list[float]] = []

    def _timeout(self, p: Problem, t, i: int) -> bool:
        cpu = self.needs[i] * self.inflation
        tl = t.time_limit_s or p.time_limit_s
        slack = cpu_judged_slack(p)
        return (cpu > tl or cpu * self.slowdown > tl * slack) if slack else cpu * self.slowdown > tl

    def judge_many(self, items):
        out = []
        for p, _ in items:
            self.limits.append([t.time_limit_s or p.time_limit_s for t in p.tests])
            tests = [TestResult(index=i, verdict="timeout" if self._timeout(p, t, i) else "accepted",
                                cpu_s=self.needs[i] * self.inflation) for i, t in enumerate(p.tests)]
            passed = sum(t.verdict == "accepted" for t in tests)
            out.append(JudgeResult(verdict="accepted" if passed == len(tests) else "timeout", passed=passed,
                                   total=len(tests), pass_ratio=passed / len(tests), judge_s=0.0, tests=tests))
        return out

    def call_outputs(self, p: Problem, solution: str):
        self.limits.append([t.time_limit_s or p.time_limit_s for t in p.tests])
        return [None if self._timeout(p, t, i) else repr(i) for i, t in enumerate(p.tests)]


IDLE, BUSY = (1.0, 1.0), (2.5, 1.4)  # (wall slowdown, CPU inflation)


def _codecontests() -> Problem:
    return Problem(id="codecontests/1503_e_2coloring_8359", source="codecontests", split="train", statement="s",
                   time_limit_s=10.0, solutions=[REF], meta={"role": "train"},
                   tests=[StdioTest(stdin="1 2", stdout="3"), StdioTest(stdin="2 2", stdout="4")])


def _table(tmp_path: Path, *entries: RecordedMargin) -> RecordedMargins:
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps({"rule": "r", "entries": [e.model_dump(mode="json") for e in entries]}))
    return RecordedMargins.read(path)


def test_a_reference_straddling_its_cap_flips_without_a_record_and_holds_with_one(tmp_path):
    p = _codecontests()
    needs = [0.1, 25.0]  # 25 s idle, 35 s busy: the default 3 x 10 s = 30 s cap lies between
    plain = [judge_settled(Machine(needs, *load), [(p, REF)])[0].verdict for load in (IDLE, BUSY)]
    assert plain == ["accepted", "timeout"]  # the flip, as judge_check saw it
    table = _table(tmp_path, propose(p.id, REF, 10.0, [25.0, 35.0], "accept"))
    assert table.entries[0].margin == 6.0  # 60 s >= 1.5 x 35 s
    held = [judge_settled(Machine(needs, *load), [(p, REF)], recorded=table)[0].verdict for load in (IDLE, BUSY)]
    assert held == ["accepted", "accepted"]
    m = Machine(needs, *BUSY)
    check_references([p], m, recorded=table)
    assert m.limits == [[10.0, 10.0], [60.0, 60.0]]  # the second run at the recorded margin, both stages alike
    rows, _ = verify_references([p], Machine(needs, *BUSY), ReferenceParams(), recorded=table)
    assert [r["accepted"] for r in rows] == [True]


def test_a_record_is_keyed_by_the_program_text(tmp_path):
    p = _codecontests()
    table = _table(tmp_path, propose(p.id, REF, 10.0, [25.0, 35.0], "accept"))
    other = REF + "# edited\n"
    assert table.margin(p.id, other, 3.0) == 3.0 and not table.listed(p.id, other)
    assert judge_settled(Machine([0.1, 25.0], *BUSY), [(p, other)], recorded=table)[0].verdict == "timeout"


def test_a_reject_record_holds_too(tmp_path):
    p = _codecontests()
    needs = [0.1, 25.0]
    table = _table(tmp_path, propose(p.id, REF, 10.0, [25.0, 35.0], "reject"))
    assert table.entries[0].margin == 1.5  # 15 s x 1.5 <= 25 s
    assert [judge_settled(Machine(needs, *load), [(p, REF)], recorded=table)[0].verdict
            for load in (IDLE, BUSY)] == ["timeout", "timeout"]


def test_an_oracle_input_record_applies_to_that_input_only(tmp_path):
    """largest-palindrome-product: n = 8 needs 2.3 s idle, 3.2 s busy against the oracle's 10 x 0.25 s cap."""
    sol = "class Solution: ..."
    p = Problem(id="leetcode/largest-palindrome-product", source="leetcode", split="train", statement="s",
                entry_point="f", time_limit_s=15.0, solutions=[sol],
                tests=[CallTest(args=f"[{n}]", time_limit_s=0.25) for n in (3, 8, 9)])
    needs = [0.01, 2.3, 40.0]  # n = 9 cannot finish under any cap
    kept = [[t.args for t in fill_expected([p], Machine(needs, *load), measure_limits=False)[0][0].tests]
            for load in (IDLE, BUSY)]
    assert kept == [["[3]", "[8]"], ["[3]"]]  # the flip
    table = _table(tmp_path, propose(p.id, sol, 0.25, [2.3, 3.2], "accept", args="[8]"))
    m = Machine(needs, *BUSY)
    (out,), _ = fill_expected([p], m, measure_limits=False, recorded=table)
    assert [t.args for t in out.tests] == ["[3]", "[8]"]
    assert m.limits[1] == [0.25 * FILL_RETRY_FACTOR, 0.25 * 20.0, 0.25 * FILL_RETRY_FACTOR]
    (idle,), _ = fill_expected([p], Machine(needs, *IDLE), measure_limits=False, recorded=table)
    assert idle == out


def test_an_unlisted_program_near_its_settle_limit_is_logged(caplog):
    p = _codecontests()
    with caplog.at_level(logging.WARNING, logger="rlvr.judge.settle"):
        judge_settled(Machine([0.1, 22.0], *IDLE), [(p, REF)])  # 22 s of a 30 s CPU limit: over 1/1.5 of it
    assert "near its settle limit" in caplog.text and DEFAULT_FILE in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rlvr.judge.settle"):
        judge_settled(Machine([0.1, 12.0], *IDLE), [(p, REF)])  # 12 s of 30 s: clear of it
    assert caplog.text == ""


@pytest.mark.parametrize(("entry", "message"), [
    ({"margin": 4.0}, r"entries\[0\]: field 'entry'.*within 1.5x of the measured 35 s"),
    ({"decision": "maybe"}, r"entries\[0\]: field 'decision'"),
    ({"program_sha256": "abc"}, r"entries\[0\]: field 'program_sha256'"),
    ({"base_limit_s": 0}, r"entries\[0\]: field 'base_limit_s'"),
])
def test_a_bad_entry_is_one_line_naming_file_entry_and_field(tmp_path, entry, message):
    good = {"problem": "x/1", "program_sha256": program_sha256(REF), "base_limit_s": 10.0, "margin": 6.0,
            "decision": "accept", "measured_cpu_s": [30.0, 35.0]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"entries": [{**good, **entry}]}))
    with pytest.raises(ValueError, match=rf"^{path}: {message}") as exc:
        RecordedMargins.read(path)
    assert "\n" not in str(exc.value)


def test_a_missing_file_is_an_empty_table_and_a_duplicate_is_an_error(tmp_path):
    assert len(RecordedMargins.read(tmp_path / "none.json")) == 0
    e = propose("x/1", REF, 10.0, [25.0], "accept").model_dump(mode="json")
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"entries": [e, e]}))
    with pytest.raises(ValueError, match=r"entries\[1\]: x/1 is listed twice"):
        RecordedMargins.read(path)


def test_the_committed_table_reads_and_names_the_two_observed_flips():
    table = RecordedMargins.read(ROOT / DEFAULT_FILE)
    assert {(e.problem, e.args, e.decision) for e in table.entries} >= {
        ("codecontests/1503_e_2coloring_8359", None, "accept"),
        ("leetcode/largest-palindrome-product", "[8]", "accept")}


def test_the_command_measures_and_widens_an_entry(tmp_path, monkeypatch):
    """``rlvr recorded-margin``: measured CPU seconds (here a stub) become an entry; a second measurement widens it."""
    from rlvr.cli import main
    from rlvr.data.schema import write_problems

    p = _codecontests()
    write_problems(tmp_path / "problems" / "codecontests.jsonl", [p])
    seen = iter([[20.0, 21.0], [30.0]])
    monkeypatch.setattr("rlvr.judge.settle.measure_cpu", lambda *a, **k: next(seen))
    monkeypatch.setattr("rlvr.judge.core.Judge", _NoJudge)
    args = ["recorded-margin", "--id", p.id, "--problems-dir", str(tmp_path / "problems"), "--decision", "accept",
            "--file", str(tmp_path / "m.json")]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert RecordedMargins.read(tmp_path / "m.json").entries[0].margin == 4.0  # 40 s >= 1.5 x 21 s
    r = CliRunner().invoke(main, args)
    (e,) = RecordedMargins.read(tmp_path / "m.json").entries
    assert r.exit_code == 0 and e.measured_cpu_s == [20.0, 21.0, 30.0] and e.margin == 6.0


class _NoJudge:
    def __init__(self, **kw) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None: ...
