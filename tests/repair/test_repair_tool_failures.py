"""Tool calls that fail for the infrastructure's reasons are counted per episode (issue 42, item 5): repair's
``run_tests`` answered ``sandbox_error`` by the judge, or raising, through verl's own agent loop; a healthy call is
not counted."""

from __future__ import annotations

import pytest
from test_repair_env import FakeJudge, _problem
from test_repair_verl_tool import _run_agent_loop

pytest.importorskip("verl")
pytest.importorskip("hydra")

from rlvr.judge.verdict import JudgeResult
from rlvr.repair import EnvConfig, verl_tool
from rlvr.reward.verl import TOOL_SANDBOX_ERRORS_KEY


class BrokenSandbox(FakeJudge):
    """The tool's judge cannot run anything (a node whose bubblewrap broke)."""

    def judge(self, problem, solution):
        return JudgeResult(verdict="sandbox_error", passed=0, total=len(problem.tests), pass_ratio=0.0, judge_s=0.0,
                           message="bwrap: setting up uid map: Permission denied")


@pytest.mark.parametrize(("judge", "want"), [(FakeJudge(), 0), (BrokenSandbox(), 3)])
def test_feedback_judged_as_sandbox_error_is_counted_per_episode(tmp_path, monkeypatch, judge, want):
    """Under the repair protocol every answer is judged on the visible tests; three answers whose judging failed
    for the infrastructure's reasons count 3, healthy ones 0."""
    from rlvr.model import build_tokenizer

    monkeypatch.setattr(verl_tool, "_JUDGE", judge)
    replies = ["```python\nprint('x')\n```", "```python\nprint('y')\n```", "```python\nprint('FIXED')\n```"]
    cfg = EnvConfig(turns=3)
    tok = build_tokenizer([*replies, "Echo. wrong Fix it. Your output sandbox_error"] * 20, vocab_size=400)
    out, _ = _run_agent_loop(tmp_path, tok, replies, cfg, _problem())
    assert out.extra_fields[TOOL_SANDBOX_ERRORS_KEY] == want


def test_local_engine_counts_feedback_judged_as_sandbox_error():
    """The local engine's repair rollouts: every answer's visible-test feedback whose judging came back sandbox_error
    is counted in the rollout statistics (metrics: repair training's ``rollouts.tool_sandbox_errors``)."""
    from test_repair_env import BAD, Scripted

    from rlvr.train.local.repair import collect_repair_contexts

    _, ok = collect_repair_contexts([_problem()], Scripted([BAD]), FakeJudge(), EnvConfig(turns=3), 2, 1.0)
    _, broken = collect_repair_contexts([_problem()], Scripted([BAD]), BrokenSandbox(), EnvConfig(turns=3), 2, 1.0)
    assert ok["tool_sandbox_errors"] == 0
    assert broken["tool_sandbox_errors"] > 0
