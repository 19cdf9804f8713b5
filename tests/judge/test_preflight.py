"""Fail loudly (rlvr.judge.preflight): the judge's check at start, the sandbox_error ceiling, and what a user sees from
`rlvr judge` and a stage when RLVR_SANDBOX_URL points at nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from door_server import free_port

from rlvr.data.schema import AssertTest, Problem, write_problems
from rlvr.judge.preflight import (
    GuardedJudge,
    JudgeUnavailable,
    SandboxErrorShareExceeded,
    open_judge,
    preflight,
    probe_problem,
)
from rlvr.judge.verdict import JudgeResult

ROOT = Path(__file__).resolve().parents[2]


class ScriptedJudge:
    """Answers every item with ``verdict`` (or raises ``raises``); counts calls; closes."""

    def __init__(self, verdict: str = "accepted", raises: Exception | None = None, message: str = "") -> None:
        self.verdict, self.raises, self.message = verdict, raises, message
        self.calls = 0
        self.closed = False
        self.workers = 3

    def judge_many(self, items, language: str = "python"):
        self.calls += 1
        if self.raises is not None:
            raise self.raises
        return [JudgeResult(verdict=self.verdict, passed=0, total=1, pass_ratio=0.0, judge_s=0.0,
                            message=self.message) for _ in items]

    def judge(self, problem, solution, language: str = "python"):
        return self.judge_many([(problem, solution)])[0]

    def close(self) -> None:
        self.closed = True


def test_preflight_accepts_a_working_judge_and_the_embedded_one(judge) -> None:
    preflight(ScriptedJudge("accepted"), "embedded")
    preflight(judge, "embedded")  # the real sandbox runs the probe program and accepts it
    assert probe_problem().solutions == ["print(int(input()) + 1)\n"]


@pytest.mark.parametrize(
    ("fake", "needle"),
    [
        (ScriptedJudge("sandbox_error", message="sandbox failure: bwrap: No permissions\nmore"),
         "a trivial program was judged sandbox_error (sandbox failure: bwrap: No permissions)"),
        (ScriptedJudge("wrong_answer"), "a trivial program was judged wrong_answer (no message)"),
        (ScriptedJudge(raises=OSError("connection refused\ntrace")), "OSError: connection refused"),
    ],
)
def test_preflight_failure_is_one_sentence_naming_where(fake: ScriptedJudge, needle: str) -> None:
    with pytest.raises(JudgeUnavailable) as exc:
        preflight(fake, "http://127.0.0.1:9")
    msg = str(exc.value)
    assert msg.startswith("the judge (http://127.0.0.1:9) does not work: ") and needle in msg
    assert "\n" not in msg


def test_guarded_judge_counts_and_enforces_the_ceiling() -> None:
    inner = ScriptedJudge("accepted")
    g = GuardedJudge(inner, max_share=0.05, where="embedded")
    p = probe_problem()
    g.judge_many([(p, "x")] * 19)
    assert g.workers == 3 and g.inner is inner  # other attributes are the wrapped judge's
    inner.verdict = "sandbox_error"
    g.judge(p, "x")
    assert g.counts == {"accepted": 19, "sandbox_error": 1} and g.sandbox_error_share() == 0.05
    g.check_sandbox_errors()  # exactly at the ceiling: fine
    g.judge(p, "x")
    with pytest.raises(SandboxErrorShareExceeded, match=r"2 of 21 judge requests \(9\.5%\) failed"):
        g.check_sandbox_errors()
    g.check_verdicts(["accepted"] * 20 + ["sandbox_error"], "eval x/y")
    with pytest.raises(SandboxErrorShareExceeded, match=r"^eval x/y: 1 of 2 verdicts"):
        g.check_verdicts(["accepted", "sandbox_error"], "eval x/y")


def test_open_judge_preflights_checks_at_the_end_and_closes(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("judge: {max_sandbox_error_share: 0.0}\n")
    inner = ScriptedJudge("accepted")
    with open_judge(params, lambda: inner) as j:
        j.judge_many([(probe_problem(), "x")])
    assert inner.calls == 2 and inner.closed  # the probe, then the body's call
    inner = ScriptedJudge("accepted")
    with pytest.raises(SandboxErrorShareExceeded), open_judge(params, lambda: inner) as j:
        inner.verdict = "sandbox_error"
        j.judge_many([(probe_problem(), "x")])
    assert inner.closed
    params.write_text("judge: {preflight: false, max_sandbox_error_share: 1.0}\n")
    inner = ScriptedJudge("sandbox_error")
    with open_judge(params, lambda: inner) as j:  # no probe: nothing judged, nothing raised
        pass
    assert inner.calls == 0
    params.write_text("judge: {max_sandbox_error_sahre: 0.1}\n")
    with pytest.raises(ValueError, match="did you mean 'max_sandbox_error_share'"), open_judge(params, ScriptedJudge):
        pass


# ------------------------------------------------------------------------------------- a URL with nothing behind it
def _run(args: list[str], cwd: Path, url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", "RLVR_SANDBOX_URL": url}
    env.pop("RLVR_DEBUG", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _problems(tmp: Path) -> Path:
    pdir = tmp / "problems"
    write_problems(pdir / "humaneval.jsonl", [
        Problem(id="humaneval/HumanEval/0", source="humaneval", split="test", statement="Add.",
                starter_code="def add(a, b):\n", entry_point="add",
                tests=[AssertTest(code="assert candidate(1, 2) == 3")],
                solutions=["def add(a, b):\n    return a + b\n"])])
    return pdir


def _assert_one_line(r: subprocess.CompletedProcess, url: str) -> None:
    assert r.returncode != 0
    progress = ("judging ", "computing ", "dataset ")  # rlvr judge progress and dataset notes; stage INFO lines
    lines = [ln for ln in r.stderr.splitlines()
             if ln.strip() and not ln.startswith(progress) and " INFO " not in ln and " rlvr." not in ln[:40]]
    assert len(lines) == 1, r.stderr
    assert f"the judge ({url}) does not work: a trivial program was judged sandbox_error" in lines[0]
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_unreachable_judge_stops_rlvr_judge_and_a_stage_with_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    pdir = _problems(tmp_path)
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "HumanEval/0", "completion": "    return a + b\n"}) + "\n")
    out = tmp_path / "verdicts.jsonl"
    r = _run(["-m", "rlvr.cli", "judge", "--dataset", "humaneval", "--samples", str(samples), "--out", str(out),
              "--problems-dir", str(pdir)], tmp_path, url)
    _assert_one_line(r, url)
    assert not out.exists()

    (tmp_path / "params.yaml").write_text(
        "baseline:\n  backend: samples\n  datasets: [{name: humaneval}]\n"
        f"  samples: {{humaneval: {samples}}}\n")
    r = _run([str(ROOT / "stages" / "baseline.py"), "--problems-dir", str(pdir)], tmp_path, url)
    _assert_one_line(r, url)
    assert not (tmp_path / "metrics").exists()


class FlakyJudge(ScriptedJudge):
    """Passes the preflight, then answers sandbox_error for every program (a judge that broke mid-run)."""

    def judge_many(self, items, language: str = "python"):
        self.calls += 1
        return [JudgeResult(verdict="accepted" if p.id == "rlvr/preflight" else "sandbox_error", passed=0, total=1,
                            pass_ratio=0.0, judge_s=0.0, message="sandbox failure: worker died") for p, _ in items]


def test_a_stage_whose_verdicts_are_sandbox_errors_fails_without_metrics(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from click.testing import CliRunner

    spec = importlib.util.spec_from_file_location("stage_judge_check_preflight", ROOT / "stages" / "judge_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RLVR_SANDBOX_URL", raising=False)
    pdir = _problems(tmp_path)
    (tmp_path / "params.yaml").write_text("judge_check: {}\njudge: {max_sandbox_error_share: 0.05}\n")
    judge = FlakyJudge()
    monkeypatch.setattr(mod, "get_judge", lambda: judge)
    res = CliRunner().invoke(mod.main, ["--problems-dir", str(pdir), "--out", "metrics/judge_check"])
    assert res.exit_code == 1
    assert res.output.strip() == (
        "1 of 1 judge requests (100.0%) failed for the infrastructure (sandbox_error, after per-request retries), "
        "above judge.max_sandbox_error_share=0.05: the judge (embedded) failed, not the programs; no metrics "
        "written; first error: sandbox failure: worker died")
    assert not (tmp_path / "metrics").exists() and judge.closed
    (tmp_path / "params.yaml").write_text("judge_check: {}\njudge: {max_sandbox_error_share: 1.0}\n")
    res = CliRunner().invoke(mod.main, ["--problems-dir", str(pdir), "--out", "metrics/judge_check"])
    assert res.exit_code == 0, res.output  # a ceiling of 1.0 lets it through: the verdicts are then the metrics
    from rlvr.layout import read_metrics

    assert read_metrics(tmp_path / "metrics" / "judge_check.json")["humaneval"]["verdicts"] == {
        "sandbox_error": 1}
