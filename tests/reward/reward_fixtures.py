"""Problems and fake judges shared by the reward tests (imported as a plain module; unique basename).

Problems are copied from the bundled benchmark files (``/work/shared/data``; HumanEval/0, MBPP/2) and from
``bench/stdio200`` (``stdio/sum``), in the rlvr schema: HumanEval/0 both as assert tests (``check(candidate)``, the
benchmark's form) and as call tests (EvalPlus form), MBPP/2 as its three assert lines, the stdio one as 3 tests.
"""

from __future__ import annotations

import threading

from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest
from rlvr.judge.verdict import JudgeResult, TestResult

HE0_PROMPT = '''from typing import List


def has_close_elements(numbers: List[float], threshold: float) -> bool:
    """ Check if in given list of numbers, are any two numbers closer to each other than
    given threshold.
    >>> has_close_elements([1.0, 2.0, 3.0], 0.5)
    False
    >>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)
    True
    """
'''
HE0_BODY = """    for idx, elem in enumerate(numbers):
        for idx2, elem2 in enumerate(numbers):
            if idx != idx2:
                distance = abs(elem - elem2)
                if distance < threshold:
                    return True

    return False
"""
HE0_CHECK = """

METADATA = {
    'author': 'jt',
    'dataset': 'test'
}


def check(candidate):
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True
    assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05) == False
    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.95) == True
    assert candidate([1.0, 2.0, 5.9, 4.0, 5.0], 0.8) == False
    assert candidate([1.0, 2.0, 3.0, 4.0, 5.0, 2.0], 0.1) == True
    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 1.0) == True
    assert candidate([1.1, 2.2, 3.1, 4.1, 5.1], 0.5) == False

"""
HE0_CALLS = [
    ("[[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3]", "True"),
    ("[[1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.05]", "False"),
    ("[[1.0, 2.0, 5.9, 4.0, 5.0], 0.95]", "True"),
    ("[[1.0, 2.0, 5.9, 4.0, 5.0], 0.8]", "False"),
    ("[[1.0, 2.0, 3.0, 4.0, 5.0, 2.0], 0.1]", "True"),
    ("[[1.1, 2.2, 3.1, 4.1, 5.1], 1.0]", "True"),
    ("[[1.1, 2.2, 3.1, 4.1, 5.1], 0.5]", "False"),
]

HUMANEVAL_0 = Problem(
    id="humaneval/HumanEval/0",
    source="humaneval",
    split="test",
    statement="Check if in given list of numbers, are any two numbers closer to each other than given threshold.",
    starter_code=HE0_PROMPT,
    entry_point="has_close_elements",
    tests=[AssertTest(code=HE0_CHECK + "\ncheck(candidate)\n")],
    solutions=[HE0_PROMPT + HE0_BODY],
)

HUMANEVAL_0_CALL = Problem(
    id="humanevalplus/HumanEval/0",
    source="humanevalplus",
    split="test",
    statement=HUMANEVAL_0.statement,
    starter_code=HE0_PROMPT,
    entry_point="has_close_elements",
    tests=[CallTest(args=a, expected=e) for a, e in HE0_CALLS],
    solutions=[HE0_PROMPT + HE0_BODY],
)

MBPP_2 = Problem(
    id="mbpp/2",
    source="mbpp",
    split="prompt",
    statement="Write a function to find the similar elements from the given two tuple lists.",
    entry_point="similar_elements",
    tests=[
        AssertTest(code="assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)"),
        AssertTest(code="assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)"),
        AssertTest(code="assert similar_elements((11, 12, 14, 13),(17, 15, 14, 13)) == (13, 14)"),
    ],
    solutions=[
        "def similar_elements(test_tup1, test_tup2):\r\n"
        "  res = tuple(set(test_tup1) & set(test_tup2))\r\n  return (res) "
    ],
)

STDIO_SUM = Problem(
    id="stdio/sum/0",
    source="stdio200",
    split="bench",
    statement="Read n and n integers; print their sum.",
    tests=[
        StdioTest(stdin="3\n1 2 3\n", stdout="6\n"),
        StdioTest(stdin="4\n-5 10 7 -1\n", stdout="11\n"),
        StdioTest(stdin="1\n987654321\n", stdout="987654321\n"),
    ],
    solutions=[
        "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nxs = list(map(int, data[1:1 + n]))\n"
        "print(sum(xs))\n"
    ],
)

GUARD_PROBLEMS = {"humaneval": HUMANEVAL_0, "humaneval_call": HUMANEVAL_0_CALL, "mbpp": MBPP_2, "stdio": STDIO_SUM}


def fenced(code: str) -> str:
    """A chat-style completion holding ``code`` in a python fence."""
    return f"Here is my solution.\n```python\n{code}\n```\n"


class FakeJudge:
    """Judge stand-in: verdict chosen by a marker in the program (``#WA``, ``#TLE``, ``#SANDBOX``, ``#HALF``,
    ``#RAISE_TRANSPORT`` raises ``ConnectionError`` the first ``fail_first`` calls); else accepted. Counts calls and
    the peak number of concurrent calls."""

    def __init__(self, fail_first: int = 0, sleep_s: float = 0.0) -> None:
        self.calls = 0
        self.items = 0
        self.fail_first = fail_first
        self.sleep_s = sleep_s
        self._lock = threading.Lock()
        self._active = 0
        self.peak = 0

    def _one(self, problem: Problem, program: str) -> JudgeResult:
        n = len(problem.tests)
        if "#WA" in program:
            v, passed = "wrong_answer", 0
        elif "#HALF" in program:
            v, passed = "wrong_answer", n // 2
        elif "#TLE" in program:
            v, passed = "timeout", 0
        elif "#SANDBOX" in program:
            v, passed = "sandbox_error", 0
        else:
            v, passed = "accepted", n
        tests = [TestResult(index=i, verdict="accepted" if i < passed else v) for i in range(n)]
        return JudgeResult(
            verdict=v, passed=passed, total=n, pass_ratio=passed / n if n else 0.0, judge_s=0.001, tests=tests
        )

    def judge_many(self, items):
        import time

        with self._lock:
            self.calls += 1
            self.items += len(items)
            self._active += 1
            self.peak = max(self.peak, self._active)
            fail = self.fail_first > 0 and any("#RAISE_TRANSPORT" in s for _, s in items)
            if fail:
                self.fail_first -= 1
        try:
            if self.sleep_s:
                time.sleep(self.sleep_s)
            if fail:
                raise ConnectionError("connection reset by fake judge")
            return [self._one(p, s) for p, s in items]
        finally:
            with self._lock:
                self._active -= 1


class FakeKV:
    """Ray's ``internal_kv`` module as :mod:`rlvr.reward.step_guard` uses it (put/list/get in one namespace);
    remembers which thread put."""

    def __init__(self) -> None:
        self.store: dict[str, str] = {}
        self.put_threads: list[int] = []

    def _internal_kv_put(self, key, value, overwrite, namespace):
        from rlvr.reward.step_guard import KV_NAMESPACE

        assert namespace == KV_NAMESPACE and overwrite
        self.put_threads.append(threading.get_ident())
        self.store[key] = value

    def _internal_kv_list(self, prefix, namespace):
        return [k for k in self.store if k.startswith(prefix)]

    def _internal_kv_get(self, key, namespace):
        return self.store.get(key)


def fake_ray_counts(monkeypatch, interval_s: float = 3600):
    """Make this process look like a Ray worker to :mod:`rlvr.reward.step_guard`: a :class:`FakeKV` store, job
    ``job1``, key ``job1/node-1``, and a fresh counter whose publisher ticks every ``interval_s`` seconds (default:
    never within a test; call ``step_guard.flush()``). Returns ``(kv, counts)``; call ``counts.close()`` at the end."""
    from rlvr.reward import step_guard

    kv = FakeKV()
    counts = step_guard._Counts(interval_s=interval_s)
    monkeypatch.setattr(step_guard, "_ray_kv", lambda: kv)
    monkeypatch.setattr(step_guard, "_job_id", lambda: "job1")
    monkeypatch.setattr(step_guard, "_process_key", lambda job: f"{job}/node-1")
    monkeypatch.setattr(step_guard, "_COUNTS", counts)
    return kv, counts
