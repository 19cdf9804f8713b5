"""Tool calls that fail for the infrastructure's reasons are counted per episode (issue 42, item 5): repair's
``run_tests`` answered ``sandbox_error`` by the judge, or raising, through verl's own agent loop; a healthy call is
not counted."""

from __future__ import annotations

import pytest
from test_repair_env import FakeJudge, _problem
from test_repair_verl_tool import _run_agent_loop

pytest.importorskip("verl")
pytest.importorskip("hydra")

from rlvr.judge.verdict import JudgeResult  # noqa: E402
from rlvr.repair import EnvConfig, verl_tool  # noqa: E402
from rlvr.reward.verl import TOOL_SANDBOX_ERRORS_KEY  # noqa: E402


class BrokenSandbox(FakeJudge):
    """The tool's judge cannot run anything (a node whose bubblewrap broke)."""

    def judge(self, problem, solution):
        return JudgeResult(verdict="sandbox_error", passed=0, total=len(problem.tests), pass_ratio=0.0, judge_s=0.0,
                           message="bwrap: setting up uid map: Permission denied")


class Raises(FakeJudge):
    def judge(self, problem, solution):
        raise ConnectionError("judge server unreachable")


@pytest.mark.parametrize(("judge", "want"), [(FakeJudge(), 0), (BrokenSandbox(), 2), (Raises(), 2)])
def test_tool_failures_are_counted_per_episode(tmp_path, monkeypatch, judge, want):
    from rlvr.model import build_tokenizer

    monkeypatch.setattr(verl_tool, "_JUDGE", judge)
    call = verl_tool.tool_call_text("run_tests", {"code": "print('x')"}, "qwen3_coder")
    replies = [call, call, "```python\nprint('FIXED')\n```"]
    cfg = EnvConfig(turns=3, tool_format="qwen3_coder")
    tok = build_tokenizer([*replies, "Echo. wrong Fix it. Your output sandbox_error"] * 20, vocab_size=400)
    out, _ = _run_agent_loop(tmp_path, tok, replies, cfg, _problem())
    assert out.extra_fields[TOOL_SANDBOX_ERRORS_KEY] == want
