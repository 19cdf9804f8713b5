"""Checkers reach the reward: a multi-answer problem's special checker travels in ``ground_truth`` (issue 28, item 5),
so an alternative correct answer is rewarded 1 by verl's ``compute_score`` and by TRL's reward function, as
evaluation (``judge.judge`` on the Problem) already scores it."""

from __future__ import annotations

import json

import pytest

from rlvr.data.schema import Checker, Problem, StdioTest, from_ground_truth, ground_truth
from rlvr.reward import verl as rverl
from rlvr.reward.scorer import set_default_judge
from rlvr.reward.trl import make_reward_funcs

PERMUTATION = Checker(
    kind="python",
    source="def check(input, expected, actual):\n"
    "    n = int(input)\n"
    "    return sorted(map(int, actual.split())) == list(range(1, n + 1))\n",
)
# "Print any permutation of 1..n": the jury's answer is the identity, every permutation is correct.
ANY_PERMUTATION = Problem(
    id="synthetic/any-permutation", source="synthetic", split="test", statement="Print any permutation of 1..n.",
    tests=[StdioTest(stdin="3\n", stdout="1 2 3\n"), StdioTest(stdin="4\n", stdout="1 2 3 4\n")],
    checker=PERMUTATION,
)
REVERSED = "```python\nn = int(input())\nprint(*range(n, 0, -1))\n```"  # correct, but not the jury's answer
WRONG = "```python\nn = int(input())\nprint(*([1] * n))\n```"


def test_ground_truth_carries_the_checker_and_only_when_there_is_one() -> None:
    gt = ground_truth(ANY_PERMUTATION)
    assert json.loads(gt)["checker"]["source"] == PERMUTATION.source
    assert from_ground_truth(gt, "synthetic").checker == PERMUTATION
    plain = ANY_PERMUTATION.model_copy(update={"checker": None})
    assert "checker" not in json.loads(ground_truth(plain))  # checker-less payloads are unchanged


@pytest.mark.slow
def test_alternative_answer_rewarded_through_verl_and_trl(judge) -> None:
    assert judge.judge(ANY_PERMUTATION, REVERSED.split("\n", 1)[1].rsplit("```", 1)[0]).verdict == "accepted"
    gt = ground_truth(ANY_PERMUTATION)
    prev = set_default_judge(judge)
    try:
        ok = rverl.compute_score("synthetic", REVERSED, gt, reward_mode="sparse")
        bad = rverl.compute_score("synthetic", WRONG, gt, reward_mode="sparse")
    finally:
        set_default_judge(prev)
    assert (ok["score"], ok["acc"], ok["status"]) == (1.0, True, "accepted")
    assert (bad["score"], bad["status"]) == (0.0, "wrong_answer")
    [reward] = make_reward_funcs("sparse", judge=judge)
    assert reward(prompts=["p", "p"], completions=[REVERSED, WRONG], ground_truth=[gt, gt],
                  data_source=["synthetic", "synthetic"]) == [1.0, 0.0]
    # without the checker (the payload before this change) the same answer is compared token by token: reward 0
    old = json.dumps({k: v for k, v in json.loads(gt).items() if k != "checker"})
    assert reward(prompts=["p"], completions=[REVERSED], ground_truth=[old], data_source=["synthetic"]) == [0.0]
