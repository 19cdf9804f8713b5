"""``bench/gpu/teach_tools.py`` transcripts: the rows that teach a policy the tool-call format and to repair from a
failing test's feedback (the H100 repair_tool run had reward 0 until the failure rows existed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from test_repair_env import FakeJudge

pytest.importorskip("verl")

from rlvr.data.synthetic import generate
from rlvr.repair import EnvConfig, verl_tool, verl_tool_variant
from rlvr.repair.env import format_feedback, split_tests

ROOT = Path(__file__).resolve().parents[2]


def _teach():
    spec = importlib.util.spec_from_file_location("teach_tools", ROOT / "bench" / "gpu" / "teach_tools.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_transcripts_teach_the_call_the_answer_and_the_repair_from_real_feedback():
    teach = _teach()
    problems = generate(templates=["add"], n_tests=3)[:3]
    env = EnvConfig(visible_tests=1)
    judge = FakeJudge()  # rejects every program without FIXED: each wrong program gets wrong_answer feedback
    rows, failures = teach.transcripts(problems, "qwen3_coder", env, judge, failures_per_problem=2)
    assert failures == 6 and len(rows) == 3 * 2 + 6
    p = problems[0]
    visible, hidden = split_tests(p, 1)
    first, answered, *repairs = rows[:4]
    assert first["completion"][0]["content"] == verl_tool_variant.tool_call_text("run_tests", {"code": p.solutions[0]},
                                                                         "qwen3_coder")
    assert answered["prompt"][-1] == {"role": "tool", "content": verl_tool.accepted_feedback(1)}
    for r in repairs:  # a wrong call, the tool's answer to it from the judge, then the reference answer
        assert r["prompt"][-2]["content"].startswith("<tool_call>") and "print(" in r["prompt"][-2]["content"]
        assert r["prompt"][-1]["role"] == "tool" and r["completion"] == answered["completion"]
        assert all(t.stdin.strip() not in r["prompt"][-1]["content"] for t in hidden.tests)
    assert [len(j.tests) for j in judge.judged] == [1] * 6 and all(j.tests == visible.tests for j in judge.judged[:2])
    res = FakeJudge().judge(visible, "print(0)")
    assert repairs[0]["prompt"][-1]["content"] == format_feedback(visible, res, env)
    no_judge, n = teach.transcripts(problems, "qwen3_coder", env)
    assert n == 0 and len(no_judge) == 6
