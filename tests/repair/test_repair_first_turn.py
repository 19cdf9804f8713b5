"""The repair protocol's first turn is the prompt the single-turn phases train and evaluate on (issue 42, item 1).

The repair stage's "before" evaluation of the GRPO model scored accepted@1 0.0 on synthetic dev where the same model
scores 0.778 single-turn (``make repro`` at 348d460): the protocol appended its rules to the first user message, and
the tiny CPU policy, GRPO-trained on the plain prompt, answered that unseen text with garbage. A policy that is
sensitive to the exact prompt text (:class:`PromptSensitive`) shows it without a model: its first repair turn must
score what the single-turn evaluation scores. The rules now come with the feedback (``{protocol}``)."""

from __future__ import annotations

import pytest
from test_repair_env import BAD, GOOD, _problem
from test_repair_protocol import HiddenOnlyJudge

from rlvr.data.export import verl_rows
from rlvr.data.prompts import build_messages, build_prompt
from rlvr.data.schema import CallTest, Problem
from rlvr.eval.protocol import evaluate
from rlvr.generate import Completion, GenerationStats, SamplingParams
from rlvr.repair import EnvConfig, repair_metrics, run_episodes
from rlvr.repair import protocol as proto
from rlvr.repair.verl_config import repair_verl_rows
from rlvr.train.local.common import grpo_rows
from rlvr.train.local.repair import first_turn_contexts

SAMPLING = SamplingParams(max_new_tokens=8)


class PromptSensitive:
    """A brittle policy, like the tiny CPU model: the right program only for a conversation that is exactly one user
    message equal to a single-turn prompt (:func:`build_prompt`) it knows, a wrong one for anything else. Records
    every conversation it is asked to continue."""

    model_id = "prompt-sensitive"

    def __init__(self, problems: list[Problem]) -> None:
        self.known = {build_prompt(p) for p in problems}
        self.seen: list[list[dict[str, str]]] = []
        self.stats = GenerationStats()

    def generate(self, prompts, n, sampling, ids=None):
        out = []
        for msgs in prompts:
            self.seen.append(list(msgs))
            ok = len(msgs) == 1 and msgs[0]["content"] in self.known
            out.append([Completion(GOOD if ok else BAD, 7, "stop")] * n)
        return out


def _problems() -> list[Problem]:
    """A stdin/stdout problem and a function problem with starter code (the two prompt shapes)."""
    func = Problem(id="t/f", source="t", split="test", statement="Return FIXED.", starter_code="def f():\n",
                   entry_point="f", tests=[CallTest(args="[]", expected="'FIXED'") for _ in range(3)])
    return [_problem("t/1"), func]


@pytest.mark.parametrize("turns", [1, 3])
def test_the_first_repair_turn_scores_what_the_single_turn_evaluation_scores(turns, tmp_path):
    """A policy that knows only the single-turn prompt passes every problem single-turn, so the repair episodes'
    turn-1 accepted@1 is 1.0 too (on the old code: 0.0, the prompt carried the protocol's rules), and the
    conversations the policy saw first are the single-turn evaluation's prompts."""
    problems = _problems()
    single = PromptSensitive(problems)
    m1 = evaluate(problems, single, HiddenOnlyJudge(), SAMPLING, n=1, ks=[1], out_dir=tmp_path / "eval")
    assert m1["accepted@1"] == 1.0
    policy = PromptSensitive(problems)
    envs = run_episodes(problems, policy, HiddenOnlyJudge(), EnvConfig(turns=turns), SAMPLING)
    m = repair_metrics([e.record() for e in envs], turns)
    assert m["accepted@1"] == m1["accepted@1"] and m["first_turn_failures"] == 0
    assert policy.seen == single.seen == [build_messages(p) for p in problems]


@pytest.mark.parametrize("turns", [1, 3])
def test_every_path_opens_with_the_single_turn_prompt(turns):
    """The repair episode's first message is GRPO's training prompt on both engines (TRL rows, verl parquet rows),
    and the repair training rows open with it too: local engine (first-turn contexts), verl (repair rows)."""
    cfg = EnvConfig(turns=turns)
    for p in _problems():
        want = build_messages(p)
        assert proto.initial_messages(p, cfg) == want
        assert grpo_rows([p])[0]["prompt"] == want and verl_rows([p])[0]["prompt"] == want
        assert list(repair_verl_rows([p], cfg)[0]["prompt"]) == want
        assert first_turn_contexts([p], cfg)[0].chat() == want


def test_the_feedback_states_the_rules_and_restates_the_single_turn_prompt():
    """The default feedback says what the first message no longer does: answers left of ``turns``, when the episode
    ends, which program is graded; a ``{prompt}`` template restates the single-turn prompt, nothing added."""
    problem = _problem()
    envs = run_episodes([problem], PromptSensitive([]), HiddenOnlyJudge(), EnvConfig(turns=3), SAMPLING)
    feedback = [m["content"] for m in envs[0].messages if m["role"] == "user"][1:]
    assert len(feedback) == 2
    assert "(2 of 3 answers left)" in feedback[0] and "(1 of 3 answers left)" in feedback[1]
    for text in feedback:
        assert "the last program you wrote is the one graded, on hidden tests" in text
        assert "passes them or after your last answer" in text
    cfg = EnvConfig(turns=2, feedback_template="{expected}\n\n{prompt}")
    envs = run_episodes([problem], PromptSensitive([]), HiddenOnlyJudge(), cfg, SAMPLING)
    assert envs[0].messages[2]["content"].endswith("\n\n" + build_prompt(problem))


def test_interpreter_mode_adds_only_the_tool_to_the_single_turn_prompt():
    """In interpreter mode the model must know the python-run tool before its first reply: the first message is the
    single-turn prompt followed by the tool's instructions, nothing else."""
    problem = _problem()
    cfg = EnvConfig(turns=3, mode="interpreter", max_tool_calls=2)
    (msg,) = proto.initial_messages(problem, cfg)
    assert msg["content"] == build_prompt(problem) + "\n\n" + proto.TOOL_INSTRUCTIONS.format(n=2)
    assert proto.initial_messages(problem, cfg.model_copy(update={"max_tool_calls": 0})) == build_messages(problem)


def test_the_tool_variants_feedback_is_unchanged():
    """The ``run_tests`` tool variants count no answers: their feedback ends with the plain fix request, as before."""
    from rlvr.repair import split_tests

    problem = _problem()
    visible, _ = split_tests(problem, 1)
    res = HiddenOnlyJudge().judge(visible, "print('bad')\n")
    text = proto.format_feedback(visible, res, EnvConfig(turns=3))
    assert text.endswith("\n" + proto.FIX_REQUEST) and "answers left" not in text
