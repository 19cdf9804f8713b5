"""Repair environment and evaluation: scripted policies, the hidden-test firewall, interpreter mode, real judge."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from rlvr.data.schema import Problem, StdioTest
from rlvr.generate import Completion, GenerationStats, SamplingParams
from rlvr.judge.verdict import TestResult, summarise
from rlvr.repair import EnvConfig, RepairEnv, repair_metrics, run_episodes, run_repair, split_tests
from rlvr.repair.env import find_tool_call

BAD = "```python\nprint('bad')\n```"
GOOD = "```python\nprint('FIXED')\n```"


class FakeJudge:
    """Accepts a solution iff it contains FIXED; a failing test prints ``wrong``. Records every judged problem."""

    def __init__(self, secs: float = 0.01) -> None:
        self.judged: list[Problem] = []
        self.runs: list[str] = []
        self.secs = secs  # wall seconds every judge call and tool run reports (a busy machine: more)

    def judge(self, problem: Problem, solution: str):
        self.judged.append(problem)
        ok = "FIXED" in solution
        res = [TestResult(index=i, verdict="accepted" if ok else "wrong_answer", stdout="" if ok else "wrong\n",
                          stderr="" if ok else "Traceback: boom", message="" if ok else "line 1 differs")
               for i in range(len(problem.tests))]
        return summarise(res, self.secs)

    def run_code(self, code, stdin="", timeout_s=10.0, memory_limit_mb=1024):
        self.runs.append(code)
        return SimpleNamespace(verdict="accepted", exit_code=0, stdout="42\n", stderr="", time_s=self.secs)


class Scripted:
    """A policy: ``replies[i]`` is the reply after i assistant messages (the last one repeats)."""

    model_id = "scripted"

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.stats = GenerationStats()

    def generate(self, prompts, n, sampling, ids=None):
        out = []
        for p in prompts:
            k = sum(m["role"] == "assistant" for m in p)
            out.append([Completion(self.replies[min(k, len(self.replies) - 1)], 7, "stop")])
        return out


def _problem(pid: str = "t/1", public: bool = False, n: int = 4) -> Problem:
    tests = [StdioTest(stdin=f"{'VIS' if (public and i == 0) or (not public and i == 0) else 'HID'}_IN_{i}_{pid}\n",
                       stdout=f"OUT_{i}_{pid}\n", public=public and i == 0) for i in range(n)]
    return Problem(id=pid, source="t", split="test", statement="Echo.", tests=tests)


def test_split_tests_public_and_first_n():
    vis, hid = split_tests(_problem(public=True), 3)
    assert [t.public for t in vis.tests] == [True] and len(hid.tests) == 3 and not any(t.public for t in hid.tests)
    vis, hid = split_tests(_problem(), 2)
    assert len(vis.tests) == 2 and len(hid.tests) == 2
    assert {t.stdin for t in vis.tests}.isdisjoint({t.stdin for t in hid.tests})
    vis, hid = split_tests(_problem(n=1), 3)
    assert vis.tests == [] and len(hid.tests) == 1
    with pytest.raises(ValueError, match="t/1"):
        split_tests(Problem(id="t/1", source="t", split="x", statement="", tests=[]), 1)


@pytest.mark.parametrize(("replies", "rate", "curve"), [
    ([BAD, GOOD], 1.0, [0.0, 1.0, 1.0]),
    ([BAD], 0.0, [0.0, 0.0, 0.0]),
])
def test_scripted_policy_recovery_rate(replies, rate, curve, tmp_path):
    cfg = EnvConfig(turns=3)
    m = run_repair([_problem("t/1"), _problem("t/2", public=True)], Scripted(replies), FakeJudge(), cfg,
                   SamplingParams(), tmp_path / "tr.jsonl")
    assert m["recovery_rate"] == rate
    assert m["accepted_at_turn"] == curve
    assert m["first_turn_failures"] == 2
    assert m["mean_turns"] == (2.0 if rate else 3.0)
    rows = [json.loads(x) for x in (tmp_path / "tr.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["turns"]) == m["mean_turns"] for r in rows)
    assert m["tokens_per_solved"] == (14.0 if rate else None)


def test_first_turn_success_is_not_a_failure():
    m = repair_metrics([{"turns": [{"hidden_verdict": "accepted"}], "accepted": True, "tokens": 5, "tool_calls": [],
                         "judge_s": 0.1, "final_verdict": "accepted"}], 2)
    assert m["recovery_rate"] is None and m["accepted_at_turn"] == [1.0, 1.0] and m["first_turn_failures"] == 0


@pytest.mark.parametrize("public", [False, True])
def test_hidden_tests_never_in_conversation(public):
    j = FakeJudge()
    env = run_episodes([_problem(public=public)], Scripted([BAD]), j, EnvConfig(turns=3, visible_tests=1),
                       SamplingParams())[0]
    text = json.dumps(env.messages)
    assert "VIS_IN_0" in text and "OUT_0" in text  # the visible test is shown
    for t in env.hidden.tests:
        assert t.stdin.strip() not in text and t.stdout.strip() not in text
    assert len(env.messages) == 1 + 2 * 3 - 1 and "Traceback: boom" in text
    # the judge ran the visible problem (only visible tests) and the hidden one, never a mix
    vis_ids = {t.stdin for t in env.visible.tests}
    for p in j.judged:
        s = {t.stdin for t in p.tests}
        assert s == vis_ids or s.isdisjoint(vis_ids)


def test_feedback_caps_and_no_code():
    cfg = EnvConfig(turns=2, field_chars=30, feedback_chars=200)
    p = Problem(id="t/big", source="t", split="x", statement="s",
                tests=[StdioTest(stdin="x" * 5000 + "\n", stdout="y\n"), StdioTest(stdin="1\n", stdout="2\n")])
    env = RepairEnv(p, FakeJudge(), cfg)
    r = env.step("no code at all ```cpp\nint main(){}\n```")
    assert "No ```python code block" in r.message and env.turns[0]["hidden_verdict"] == "syntax_error"
    r = env.step(BAD)
    assert r.done and env.final is not None and not env.accepted
    env2 = RepairEnv(p, FakeJudge(), cfg)
    msg = env2.step(BAD).message
    assert len(msg) < 260 and "chars cut" in msg
    with pytest.raises(RuntimeError):
        env.step(GOOD)


def test_interpreter_mode_tool_call():
    j = FakeJudge()
    run = "Let me check.\n```python-run\nprint(6*7)\n```"
    cfg = EnvConfig(turns=2, mode="interpreter", max_tool_calls=1)
    env = run_episodes([_problem()], Scripted([run, run, GOOD]), j, cfg, SamplingParams())[0]
    assert j.runs == ["print(6*7)\n"]
    assert "python-run" in env.messages[0]["content"]
    assert any("42" in m["content"] for m in env.messages if m["role"] == "user")
    # 2nd python-run reply exceeds max_tool_calls: judged as an answer (no python block -> syntax_error), then fixed
    assert len(env.tool_calls) == 1 and [t["visible_verdict"] for t in env.turns] == ["syntax_error", "accepted"]
    assert env.accepted
    assert find_tool_call("```python\nx\n```") is None


def test_traces_are_the_same_bytes_whatever_the_judge_took(tmp_path):
    """data/repair/**/traces is a DVC-hashed output: episodes judged in 0.01 s and in 5 s a call (tool runs too)
    write the same traces; the seconds are only in the metrics (``judge_s``, cost)."""
    run = "Let me check.\n```python-run\nprint(6*7)\n```"
    cfg = EnvConfig(turns=3, mode="interpreter", max_tool_calls=1)
    ms = {secs: run_repair([_problem("t/1"), _problem("t/2")], Scripted([run, BAD, GOOD]), FakeJudge(secs), cfg,
                           SamplingParams(), tmp_path / f"{secs}.jsonl") for secs in (0.01, 5.0)}
    fast, slow = (tmp_path / "0.01.jsonl").read_bytes(), (tmp_path / "5.0.jsonl").read_bytes()
    assert fast == slow and b"python-run" in fast and b"time_s" not in fast and b"judge_s" not in fast
    assert ms[5.0]["judge_s"] == pytest.approx(500 * ms[0.01]["judge_s"]) and ms[0.01]["judge_s"] > 0
    assert ms[5.0]["recovery_rate"] == ms[0.01]["recovery_rate"] == 1.0


def test_samples_backend_is_a_scripted_policy(tmp_path):
    from rlvr.generate.samples import SamplesGenerator

    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps({"task_id": "t/1", "solution": s}) for s in ["print(1)", "print('FIXED')"]))
    m = run_repair([_problem()], SamplesGenerator(path), FakeJudge(), EnvConfig(turns=3), SamplingParams())
    assert m["recovery_rate"] == 1.0 and m["accepted_at_turn"] == [0.0, 1.0, 1.0]


def test_real_judge_end_to_end(judge):
    from rlvr.data.synthetic import completion_for, generate

    p = generate(templates=["add"], min_constant=3, max_constant=3, n_tests=4)[0]
    bad = completion_for(p.incorrect_solutions[0])
    env = run_episodes([p], Scripted([bad, completion_for(p.solutions[0])]), judge, EnvConfig(turns=3),
                       SamplingParams())[0]
    assert [t["hidden_verdict"] for t in env.turns] == ["wrong_answer", "accepted"]
    fb = env.messages[2]["content"]
    vis, hid = env.visible.tests[0], env.hidden.tests
    assert "wrong_answer" in fb and vis.stdout.strip() in fb and vis.stdin.strip() in fb
    body = json.dumps(env.messages)
    assert all(f"```\\n{t.stdin.strip()}\\n```" not in body for t in hid)
    assert env.judge_s > 0



class FeedbackReader:
    """A policy for the synthetic ``judge_number`` template: turn 1 guesses 5; later turns copy the number from the
    *expected output* of the judge's feedback (``use_feedback=False``: keeps guessing)."""

    model_id = "feedback-reader"

    def __init__(self, use_feedback: bool) -> None:
        self.use_feedback = use_feedback
        self.stats = GenerationStats()

    def generate(self, prompts, n, sampling, ids=None):
        import re

        from rlvr.data.synthetic import completion_for

        out = []
        for p in prompts:
            number = "5"
            if self.use_feedback and len(p) > 1:
                number = re.search(r"Expected output:\n```\n(\d+)\n```", p[-1]["content"]).group(1)
            out.append([Completion(completion_for(f"print({number})"), 9, "stop")])
        return out


@pytest.mark.parametrize(("use_feedback", "rate"), [(True, 1.0), (False, 0.0)])
def test_feedback_template_is_recoverable_only_from_feedback(judge, use_feedback, rate):
    # the synthetic judge_number template: one statement for every constant, so a first answer fits one instance;
    # the constant is the visible test's expected output, which the feedback shows
    from rlvr.data.synthetic import generate

    ps = generate(templates=["judge_number"], min_constant=4, max_constant=6)
    assert len({p.statement for p in ps}) == 1
    m = run_repair(ps, FeedbackReader(use_feedback), judge, EnvConfig(turns=2), SamplingParams())
    assert m["accepted@1"] == pytest.approx(1 / 3) and m["first_turn_failures"] == 2
    assert m["recovery_rate"] == rate
