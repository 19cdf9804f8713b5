"""One hostile sample never stops a batch: the TRL reward functions and verl's compute_score score every completion.

Hostile samples: un-decodable text (lone surrogates, NUL), a giant completion, a completion the extractor crashes on,
a submission the judge raises on while scoring it, an infrastructure failure on one item. The first tests use a fake
judge (the reward layer is under test); the last ones run hostile programs through the real embedded judge.
"""

from __future__ import annotations

import asyncio
import shutil

import pytest
from reward_fixtures import STDIO_SUM, FakeJudge, fenced

from rlvr.data.schema import CallTest, Problem, ground_truth
from rlvr.judge.sandbox import SandboxError
from rlvr.reward import verl as rverl
from rlvr.reward.scorer import set_default_judge
from rlvr.reward.trl import make_reward_funcs

GT = ground_truth(STDIO_SUM)
GOOD = fenced("n = int(input())\nprint(sum(map(int, input().split())))")


class HostileAwareJudge(FakeJudge):
    """:class:`FakeJudge`, plus: a program with ``#OVERFLOW`` makes ``judge_many`` raise ``OverflowError`` (the judge
    failing on that submission's output); ``#DOWN`` raises ``SandboxError`` (infrastructure)."""

    def judge_many(self, items):
        if any("#OVERFLOW" in s for _, s in items):
            raise OverflowError("int too large to convert to float")
        if any("#DOWN" in s for _, s in items):
            raise SandboxError("sandbox failed to start")
        return super().judge_many(items)


@pytest.fixture
def crashing_extractor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The extractor raises on a completion containing ``#CRASH`` (stands for any extractor bug a text can hit)."""
    import rlvr.reward.extract as ex

    real = ex.program_for

    def program_for(problem, completion):
        if "#CRASH" in completion:
            raise RecursionError("maximum recursion depth exceeded in the extractor")
        return real(problem, completion)

    monkeypatch.setattr(ex, "program_for", program_for)


HOSTILE = [
    GOOD,                                       # 0 accepted
    fenced("print(6)\n# \udcff\udcfe lone surrogates and a NUL \x00"),  # 1 un-decodable text: judged, not an error
    fenced("print(6)\n" + "#" * (4 << 20)),     # 2 a 4 MB completion
    fenced("#CRASH"),                            # 3 the extractor crashes: no code
    fenced("#OVERFLOW"),                         # 4 the judge raises on it: a failure
    fenced("#WA"),                               # 5 wrong answer
    fenced("#DOWN"),                             # 6 infrastructure: sandbox_error (excluded)
    None,                                        # 7 not even a string
]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_trl_batch_with_hostile_samples_scores_every_completion(crashing_extractor: None, use_async: bool) -> None:
    [reward] = make_reward_funcs("sparse", judge=HostileAwareJudge(), use_async=use_async)
    kw = {"prompts": ["p"] * len(HOSTILE), "completions": HOSTILE, "ground_truth": [GT] * len(HOSTILE)}
    out = asyncio.run(reward(**kw)) if use_async else reward(**kw)
    assert out == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, None, 0.0]
    [shaped] = make_reward_funcs("shaped", judge=HostileAwareJudge())
    out = shaped(**kw)
    assert out[3] == -0.5 and out[7] == -0.5  # no extractable code: the format penalty, like any code-less answer
    assert out[4] == 0.0 and out[6] is None


def test_verl_compute_score_on_hostile_samples_never_raises(crashing_extractor: None) -> None:
    prev = set_default_judge(HostileAwareJudge())
    try:
        sync = [rverl.compute_score("stdio200", c, GT, reward_mode="sparse") for c in HOSTILE]

        async def main():
            return await asyncio.gather(*(rverl.compute_score_async("stdio200", c, GT, reward_mode="sparse")
                                          for c in HOSTILE))

        asy = asyncio.run(main())
    finally:
        set_default_judge(prev)
    for got in (sync, asy):
        assert [r["score"] for r in got] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        assert [r["status"] for r in got] == ["accepted", "accepted", "accepted", "syntax_error", "wrong_answer",
                                              "wrong_answer", "sandbox_error", "syntax_error"]
        assert [r["valid"] for r in got] == [True] * 6 + [False, True]  # only infrastructure is flagged invalid
        assert got[4]["status"] != "sandbox_error"  # the judge failing on a submission is not an escape


# ------------------------------------------------------------------------------------------- the real judge
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

FLOAT_FN = Problem(id="t/half", source="t", split="test", statement="half", entry_point="half",
                   tests=[CallTest(args="[3]", expected="1.5"), CallTest(args="[1]", expected="0.5")])


@needs_bwrap
def test_real_judge_batch_with_hostile_programs(judge) -> None:
    gt_sum, gt_half = ground_truth(STDIO_SUM), ground_truth(FLOAT_FN)
    batch = [
        (GOOD, gt_sum, 1.0),
        (fenced("import sys\nsys.stdout.buffer.write(b'6\\xff\\xfe\\x00\\n')"), gt_sum, 0.0),  # invalid UTF-8
        (fenced("import sys\nsys.stdout.write('6' * (16 << 20))"), gt_sum, 0.0),                # 16 MB of output
        (fenced("def half(x):\n    return 10 ** 300000\n"), gt_half, 0.0),                    # huge int for a float
        (fenced("def half(x):\n    return x / 2\n"), gt_half, 1.0),
        (GOOD.replace("```\n", "# \udcff\n```\n"), gt_sum, 1.0),                          # surrogate in the text
    ]
    [reward] = make_reward_funcs("sparse", judge=judge)
    out = reward(prompts=["p"] * len(batch), completions=[c for c, _, _ in batch],
                 ground_truth=[g for _, g, _ in batch])
    assert out == [want for _, _, want in batch]
