"""EvalPlus time limits as a committed table (rlvr.data.evalplus_limits): the quantisation rule, the file round trip,
applying it (and refusing a stale one), governance applying it instead of measuring, and the committed file itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr.data.errors import DataError
from rlvr.data.evalplus_limits import (
    DEFAULT_FILE,
    MEASURE_COMMAND,
    apply_time_limits,
    dataset_key,
    quantised_limit,
    read_table,
    set_time_limits,
    write_table,
)
from rlvr.data.governance import GovernanceParams, run_governance
from rlvr.data.schema import CallTest, Problem
from rlvr.judge.verdict import JudgeResult, TestResult

ROOT = Path(__file__).resolve().parents[2]


def _ep(pid: str = "mbppplus/Mbpp/2", n: int = 3, version: str = "v0.2.0") -> Problem:
    return Problem(id=pid, source="mbppplus", split="test", statement="s", entry_point="f",
                   solutions=["def f(x): return x"], meta={"version": version},
                   tests=[CallTest(args=f"[{i}]", expected=str(i), group="base") for i in range(n)])


def _table(**problems) -> dict:
    return {"min_time_limit_s": 1.0, "datasets": {"mbppplus-v0.2.0": {
        "problems": problems or {"mbppplus/Mbpp/2": {"tests": 3, "above_floor": {"1": 4.0}}}, "not_timed": {}}}}


@pytest.mark.parametrize(("t", "want"), [(0.0, 1.0), (0.05, 1.0), (0.25, 1.0), (0.2501, 2.0), (0.5, 2.0),
                                         (0.51, 4.0), (3.0, 16.0)])
def test_quantised_limit_is_a_power_of_two_above_the_floor(t, want):
    assert quantised_limit(t) == want


def test_quantisation_absorbs_timing_noise():
    # the same reference timed at 0.3 s and, under load, at 0.45 s: EvalPlus's exact limit moves, the stored one not
    assert quantised_limit(0.3) == quantised_limit(0.45) == 2.0


class _TimingJudge:
    """judge() returns accepted results with per-test times from a list of runs (cycled)."""

    def __init__(self, runs):
        self.runs, self.calls = runs, 0

    def judge(self, problem, solution):
        times = self.runs[self.calls % len(self.runs)]
        self.calls += 1
        tests = [TestResult(index=i, verdict="accepted", time_s=t) for i, t in enumerate(times)]
        return JudgeResult(verdict="accepted", passed=len(tests), total=len(tests), pass_ratio=1.0, judge_s=0.1,
                           tests=tests)


def test_measurement_keeps_the_fastest_of_the_repeats_and_quantises():
    p = _ep(n=2)
    p = p.model_copy(update={"tests": [t.model_copy(update={"time_limit_s": None}) for t in p.tests]})
    judge = _TimingJudge([[0.9, 0.1], [0.3, 0.2], [0.6, 0.05]])  # a loaded first run
    (out,), _ = set_time_limits([p], judge, repeats=3, quantise=True)
    assert judge.calls == 3 and [t.time_limit_s for t in out.tests] == [2.0, 1.0] and out.time_limit_s == 2.0


def test_apply_sets_per_test_limits_and_the_problem_limit():
    other = Problem(id="x/1", source="x", split="test", statement="s", tests=[CallTest(args="[1]", expected="1")])
    (p, o), rep = apply_time_limits([_ep(), other], _table())
    assert [t.time_limit_s for t in p.tests] == [1.0, 4.0, 1.0] and p.time_limit_s == 4.0
    assert o is other
    assert rep["problems_limited"] == 1 and rep["tests_above_floor"] == 1 and rep["max_limit_s"] == 4.0


def test_apply_keeps_a_problem_that_could_not_be_timed():
    table = _table()
    table["datasets"]["mbppplus-v0.2.0"]["not_timed"] = {"mbppplus/Mbpp/3": "judge_error: x"}
    p = _ep("mbppplus/Mbpp/3")
    (out,), rep = apply_time_limits([p], table)
    assert out is p and rep["not_timed"] == ["mbppplus/Mbpp/3"]


@pytest.mark.parametrize(("problem", "table", "match"), [
    (_ep(version="v0.1.0"), _table(), "no time limits for dataset 'mbppplus-v0.1.0'"),
    (_ep("mbppplus/Mbpp/9"), _table(), "no limits for problem 'mbppplus/Mbpp/9'"),
    (_ep(n=4), _table(), "3 tests measured, 4 now"),
])
def test_a_stale_table_is_an_error_naming_the_command(problem, table, match):
    table["source_path"] = "limits.json"
    with pytest.raises(DataError, match=match) as err:
        apply_time_limits([problem], table)
    assert str(err.value).startswith("limits.json: ") and MEASURE_COMMAND in str(err.value)


def test_a_changed_data_file_is_an_error():
    table = _table()
    table["datasets"]["mbppplus-v0.2.0"].update({"spec": "mbppplus:v0.2.0", "sha256": "0" * 64})
    with pytest.raises(DataError, match="bundled file differs"):
        apply_time_limits([_ep()], table)


def test_file_round_trip_is_sorted_and_stable(tmp_path):
    table = {"rule": "r", "min_time_limit_s": 1.0, "factor": 4.0, "repeats": 3, "datasets": {
        "mbppplus-v0.2.0": {"spec": "mbppplus:v0.2.0", "sha256": "ab", "not_timed": {},
                            "problems": {"mbppplus/Mbpp/3": {"tests": 2}, "mbppplus/Mbpp/2": {"tests": 3}}},
        "humanevalplus-v0.1.10": {"spec": "humanevalplus:v0.1.10", "sha256": "cd", "not_timed": {"h/1": "x"},
                                  "problems": {"h/0": {"tests": 1, "above_floor": {"0": 2.0}}}}}}
    f = tmp_path / "limits.json"
    write_table(f, table)
    back = read_table(f)
    assert back.pop("source_path") == str(f) and back == table
    text = f.read_text()
    write_table(f, read_table(f))
    assert f.read_text() == text and text.index("humanevalplus") < text.index("mbppplus")
    assert text.index('"mbppplus/Mbpp/2"') < text.index('"mbppplus/Mbpp/3"')


def test_missing_or_malformed_file(tmp_path):
    with pytest.raises(DataError, match=r"not found.*rlvr time-limits"):
        read_table(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("[]")
    with pytest.raises(DataError, match=r"bad\.json: field 'datasets'"):
        read_table(tmp_path / "bad.json")


class _FillJudge(_TimingJudge):
    """call_outputs fills; judge() measures limits (counted: it must not be called when a table is given)."""

    def __init__(self):
        super().__init__([[0.9, 0.9, 0.9]])

    def call_outputs(self, problem, solution):
        return [str(i) for i in range(len(problem.tests))]


def test_governance_applies_the_table_and_never_measures():
    p = _ep()
    p = p.model_copy(update={"tests": [CallTest(args=t.args, group="base") for t in p.tests]})
    p.meta["role"] = "test"
    cfg = GovernanceParams(datasets=[{"name": "mbppplus", "role": "test"}], references={"verify": False})
    judge = _FillJudge()
    (out,), rep = run_governance([p], cfg, judge=judge, audits={}, time_limits=_table())
    assert [t.expected for t in out.tests] == ["0", "1", "2"] and judge.calls == 0
    assert [t.time_limit_s for t in out.tests] == [1.0, 4.0, 1.0] and rep["time_limits"]["problems_limited"] == 1
    (measured,), _ = run_governance([p], cfg, judge=judge, audits={})  # without a table it measures (benches)
    assert judge.calls == 1 and [t.time_limit_s for t in measured.tests] == [3.6] * 3


def test_the_committed_file_covers_the_configured_evalplus_datasets():
    import yaml

    table = read_table(ROOT / DEFAULT_FILE)
    cfg = GovernanceParams.model_validate(yaml.safe_load((ROOT / "params.yaml").read_text())["governance"])
    from rlvr.data.governance import dataset_slug
    from rlvr.data.loaders import load

    for d in cfg.datasets:
        if d.name.split(":")[0] not in ("humanevalplus", "mbppplus"):
            continue
        entry = table["datasets"][dataset_slug(d.name)]
        problems = load(d.name, "bundled")
        assert {dataset_key(p) for p in problems} == {dataset_slug(d.name)}
        assert {p.id for p in problems} == set(entry["problems"]) | set(entry["not_timed"])
        limits = [v for e in entry["problems"].values() for v in e.get("above_floor", {}).values()]
        assert all(v > 1.0 and float(v).is_integer() and (int(v) & (int(v) - 1)) == 0 for v in limits)
    assert json.loads((ROOT / DEFAULT_FILE).read_text())["rule"].startswith("limit_s = max(")


class _SlowFillJudge:
    """call_outputs: a test whose reference needs 8 s fails (None) under the 6 s limit and succeeds with more."""

    def __init__(self):
        self.limits = []

    def call_outputs(self, problem, solution):
        self.limits.append(problem.time_limit_s)
        return [None if i == 1 and problem.time_limit_s < 8.0 else str(i) for i in range(len(problem.tests))]


def test_oracle_filling_retries_a_reference_slowed_past_its_limit():
    from rlvr.data.oracles import FILL_RETRY_FACTOR, fill_expected

    p = _ep(n=3).model_copy(update={"time_limit_s": 6.0})
    p = p.model_copy(update={"tests": [CallTest(args=t.args, group="base") for t in p.tests]})
    judge = _SlowFillJudge()
    (out,), rep = fill_expected([p], judge, measure_limits=False)
    assert [t.expected for t in out.tests] == ["0", "1", "2"] and rep["tests_failed"] == 0
    assert judge.limits == [6.0, 6.0 * FILL_RETRY_FACTOR]


def test_references_are_timed_without_a_real_limit_and_a_timeout_is_never_a_fast_test():
    """Timed under its own limits, a slow test times out and the judge skips the tests after it (time 0 s): they
    would be stored at the floor. The measurement runs every test under MEASURE_CEILING_S and a test that still
    times out leaves the problem untimed (listed), never at the floor."""
    from rlvr.data.evalplus_limits import MEASURE_CEILING_S

    seen = []

    class Ceiling(_TimingJudge):
        def judge(self, problem, solution):
            seen.append([t.time_limit_s for t in problem.tests] + [problem.time_limit_s])
            return super().judge(problem, solution)

    p = _ep(n=2)
    p = p.model_copy(update={"tests": [t.model_copy(update={"time_limit_s": None}) for t in p.tests]})
    (out,), _ = set_time_limits([p], Ceiling([[10.0, 0.1]]), quantise=True)
    assert seen == [[MEASURE_CEILING_S] * 3] and [t.time_limit_s for t in out.tests] == [64.0, 1.0]

    class TimesOut(_TimingJudge):
        def judge(self, problem, solution):
            tests = [TestResult(index=0, verdict="timeout", time_s=MEASURE_CEILING_S),
                     TestResult(index=1, verdict="timeout", time_s=0.0, message="not run after repeated timeouts")]
            return JudgeResult(verdict="timeout", passed=0, total=2, pass_ratio=0.0, judge_s=0.1, tests=tests)

    (out,), report = set_time_limits([p], TimesOut([[0]]), quantise=True)
    assert report["not_timed"] == [{"id": p.id, "reason": f"timeout: test 0 over {MEASURE_CEILING_S:g} s"}]
    assert all(t.time_limit_s is None for t in out.tests)
