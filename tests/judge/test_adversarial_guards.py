"""Adversarial suite, guard bypasses, builtin shadowing and reading expected values (issue 14, item 1).

Guard programs return values that compare equal to anything (or entry points that are not functions); shadowing
programs pair a wrong stub with a rebinding of a name the benchmark-shaped test reads; readers search everything they
can reach for the expected value of the ``secret_*`` probes. None may be accepted, none may be a ``sandbox_error``.
The benchmark-shaped probes accept their correct solutions (so the tests can fail)."""

from __future__ import annotations

import pytest
from hostile import OK_VERDICTS, PROBES, SECRET_VALUE, cases, describe, guards, judge_hostile, reading, shadowing

SHAPE_CORRECT = {
    "set_mbpp": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
    "tuple_mbpp": "def rev(x):\n    return x[::-1]\n",
    "isclose_sanitized": "import math\ndef area(r):\n    return math.pi * r * r\n",
    "abs_he": "def mean(xs):\n    return sum(xs) / len(xs)\n",
    "sorted_he": "def uniq(xs):\n    return list(set(xs))\n",
    "len_he": "def triples(n):\n    return [(i, i, i) for i in range(n)]\n",
    "isinstance_he": "def words(s):\n    return s.split()\n",
    "round_he": "def half(x):\n    return x + 0.5\n",
    "math_import_he": "import math\ndef area(r):\n    return math.pi * r * r\n",
}


@pytest.mark.parametrize("shape", sorted(SHAPE_CORRECT))
def test_shape_accepts_its_correct_solution(judge, shape):
    res = judge.judge(shadowing.SHAPES[shape](), SHAPE_CORRECT[shape])
    assert res.verdict == "accepted", describe(res)


@pytest.mark.parametrize("probe", ["secret_call", "secret_assert", "secret_mbpp"])
def test_secret_probe_accepts_the_secret(judge, probe):
    res = judge.judge(PROBES[probe](), f"def f(x):\n    return {SECRET_VALUE}\n")
    assert res.verdict == "accepted", describe(res)


@pytest.mark.parametrize(("h", "target"), cases(guards.PROGRAMS))
def test_guard_bypass_is_rejected(judge, h, target):
    res, _ = judge_hostile(judge, h, target)
    assert res.verdict in OK_VERDICTS, f"{h.name} ({h.attempt}): {describe(res)}"


@pytest.mark.parametrize(("h", "target"), cases(shadowing.PROGRAMS))
def test_shadowing_is_rejected(judge, h, target):
    res, _ = judge_hostile(judge, h, target, shadowing.SHAPES[target]())
    assert res.verdict in OK_VERDICTS, f"{h.name} ({h.attempt}): {describe(res)}"


@pytest.mark.parametrize(("h", "target"), cases(reading.PROGRAMS))
def test_expected_values_are_unreachable(judge, h, target):
    res, _ = judge_hostile(judge, h, target)
    assert res.verdict in OK_VERDICTS, f"{h.name} ({h.attempt}): {describe(res)}"
    leaked = [t.index for t in res.tests if str(SECRET_VALUE) in t.stdout + t.stderr + t.message]
    assert not leaked, f"{h.name}: expected value visible in the output of tests {leaked}"
