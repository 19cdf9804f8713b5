"""verl's code ground truth (``{"inputs", "outputs"[, "fn_name"]}``, read by verl's ``prime_code`` and
``sandbox_fusion`` scorers) scored by ``compute_score`` as rlvr scores its own; rows shaped as verl's
``examples/data_preprocess`` scripts write them (``data_source``, chat ``prompt``, ``ability``, ``reward_model``
``{"style": "rule", "ground_truth": <JSON string>}``, ``extra_info`` ``{"split", "index"}``)."""

from __future__ import annotations

import json
import shutil

import pytest
from reward_fixtures import fenced

from rlvr.data.schema import AssertTest, StdioTest, from_ground_truth
from rlvr.reward import verl as rverl
from rlvr.reward.scorer import set_default_judge

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def verl_row(data_source: str, question: str, gt: dict, index: int = 0) -> dict:
    """A verl RL row as verl's preprocess scripts (and PRIME's Eurus-2-RL-Data) write it."""
    return {
        "data_source": data_source,
        "prompt": [{"role": "user", "content": question}],
        "ability": "code",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(gt)},
        "extra_info": {"split": "train", "index": index},
    }


# PRIME/CodeContests stdio; TACO/APPS call-based with wrapped return values; LiveCodeBench-style JSON lines
STDIO = verl_row("codecontests", "Print a+b.", {"inputs": ["1 2\n", "3 4\n", "10 -3\n"],
                                                 "outputs": ["3\n", "7\n", "7\n"]})
CALL = verl_row("taco", "Write add(a, b).", {"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [[3], [7]]})
CALL_JSON = verl_row("apps", "Write pair(a, b).",
                     {"fn_name": "pair", "inputs": ["1\n2", "3\n[4]"], "outputs": ["[1, 2]", "[3, [4]]"]})


def score(row: dict, completion: str, **kw) -> dict:
    """Call compute_score the way verl's naive reward manager does for one sample of ``row``."""
    return rverl.compute_score(
        data_source=row["data_source"], solution_str=completion,
        ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"], **kw,
    )


def test_layout_becomes_rlvr_tests():
    p = from_ground_truth(STDIO["reward_model"]["ground_truth"], "codecontests")
    assert [type(t) for t in p.tests] == [StdioTest] * 3 and p.entry_point is None
    assert p.tests[0].stdin == "1 2\n" and p.tests[2].stdout == "7\n"
    c = from_ground_truth(json.loads(CALL["reward_model"]["ground_truth"]), "taco")  # a dict is read too
    assert [type(t) for t in c.tests] == [AssertTest] * 2
    assert c.entry_point == "add if 'add' in globals() else Solution().add"
    # lists of lines are joined, as prime_code's run_test does
    lines = from_ground_truth({"inputs": [["1", "2"]], "outputs": [["3", "4"]]})
    assert (lines.tests[0].stdin, lines.tests[0].stdout) == ("1\n2", "3\n4")
    # the id is stable (content hash), so a GRPO group's samples share one cached problem
    assert p.id == from_ground_truth(STDIO["reward_model"]["ground_truth"], "codecontests").id


@pytest.mark.parametrize("gt, match", [
    ({"inputs": ["1"], "outputs": []}, "'inputs' has 1 items, 'outputs' 0"),
    ({"inputs": [], "outputs": []}, "empty"),
    ({"inputs": "1", "outputs": "1"}, "expected lists"),
    ({"fn_name": "f", "inputs": ["{bad"], "outputs": ["1"]}, r"inputs\[0\]"),
    ({"fn_name": "f x", "inputs": [[1]], "outputs": [1]}, "fn_name"),
])
def test_bad_layout_fails_loudly(gt, match):
    with pytest.raises(ValueError, match=match):
        rverl.compute_score("taco", "x", json.dumps(gt))


@needs_bwrap
def test_stdio_rows_real_judge(judge):
    prev = set_default_judge(judge)
    try:
        ok = score(STDIO, fenced("a, b = map(int, input().split())\nprint(a + b)"), reward_mode="sparse")
        assert (ok["score"], ok["status"], ok["n_tests"]) == (1.0, "accepted", 3)
        half = score(STDIO, fenced("print(3)"), reward_mode="dense")  # right on test 0 only
        assert half["status"] == "wrong_answer" and half["score"] == pytest.approx(1 / 3)
    finally:
        set_default_judge(prev)


@needs_bwrap
def test_call_rows_real_judge(judge):
    prev = set_default_judge(judge)
    try:
        # module-level function, and LeetCode's class Solution (sandbox_fusion's lookup order)
        assert score(CALL, fenced("def add(a, b):\n    return a + b"), reward_mode="sparse")["score"] == 1.0
        sol = "class Solution:\n    def add(self, a, b):\n        return a + b"
        assert score(CALL, fenced(sol), reward_mode="sparse")["status"] == "accepted"
        wrong = score(CALL, fenced("def add(a, b):\n    return a - b"), reward_mode="dense")
        assert wrong["status"] == "wrong_answer" and wrong["score"] == 0.0
        # JSON-lines inputs; a tuple return counts as the expected list (prime_code's rule)
        assert score(CALL_JSON, fenced("def pair(a, b):\n    return (a, b)"), reward_mode="sparse")["acc"]
        assert not score(CALL_JSON, fenced("def pair(a, b):\n    return [b, a]"), reward_mode="sparse")["acc"]
        # unwrapped expected values (TACO sometimes stores the bare value): equal to outputs[i] passes too
        bare = verl_row("taco", "Write f.", {"fn_name": "f", "inputs": [[2]], "outputs": [[2, 2]]})
        assert score(bare, fenced("def f(n):\n    return [n] * n"), reward_mode="sparse")["acc"]
        assert not score(bare, fenced("def f(n):\n    return [n]"), reward_mode="sparse")["acc"]
        crash = score(CALL, fenced("def add(a, b):\n    raise ValueError"), reward_mode="sparse")
        assert crash["status"] == "runtime_error" and crash["score"] == 0.0
    finally:
        set_default_judge(prev)


def test_numpy_columns_as_pandas_reads_them():
    np = pytest.importorskip("numpy")
    gt = {"fn_name": "add", "inputs": np.array([np.array([1, 2]), np.array([3, 4])], dtype=object),
          "outputs": np.array([[3], [7]])}
    p = from_ground_truth(gt, "taco")
    assert p.id == from_ground_truth(json.loads(CALL["reward_model"]["ground_truth"]), "taco").id
    assert len(p.tests) == 2 and "_json.loads('[1, 2]')" in p.tests[0].code
