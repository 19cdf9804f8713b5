"""Behaviour kept from the old in-process guards: stdlib class factories work in call/assert tests, and a candidate
that looks for its caller's expected constants finds nothing (assert tests now run in the separate driver sandbox)."""

from __future__ import annotations

import pytest

from rlvr.data.schema import Problem

LEGIT = """
from collections import namedtuple, Counter, defaultdict
from typing import NamedTuple
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache, wraps
from fractions import Fraction
from decimal import Decimal
import re, heapq, math, bisect
P = namedtuple("P", "x y")
class Q(NamedTuple):
    a: int
    b: int = 2
Color = Enum("Color", "RED GREEN")
class E(Enum):
    A = 1
@dataclass
class D:
    v: int
    w: list = field(default_factory=list)
def deco(f):
    @wraps(f)
    def g(*a):
        return f(*a)
    return g
@lru_cache(None)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
@deco
def f(n):
    c = Counter("abca")
    dd = defaultdict(int)
    dd[1] += 1
    h = [3, 1, 2]
    heapq.heapify(h)
    return [fib(n), P(1, 2).x, Q(1).b, Color.RED.value, E.A.value, D(3).v, float(Fraction(1, 2)),
            str(Decimal("1.5")), re.sub(r"a", "b", "aa"), c["a"], heapq.heappop(h), math.gcd(12, 8),
            bisect.bisect([1, 2, 3], 2)]
"""

EXPECTED = repr([55, 1, 2, 1, 1, 3, 0.5, "1.5", "bb", 2, 1, 4, 2])

PEEK_DIS = """
import sys, dis
def f(n):
    fr = sys._getframe(1)
    for ins in dis.get_instructions(fr.f_code):
        if ins.offset > fr.f_lasti and ins.opname == "LOAD_CONST":
            return ins.argval
"""

PEEK_TB = """
def f(n):
    try:
        raise ValueError
    except ValueError as e:
        fr = e.__traceback__.tb_frame.f_back
    return fr.f_code.co_consts[-1]
"""

PEEK_INSPECT = """
import inspect
def f(n):
    return inspect.stack()[1].frame.f_code.co_consts[-1]
"""


def problem():
    return Problem(
        id="t/l",
        source="t",
        split="test",
        statement="",
        entry_point="f",
        tests=[
            {"kind": "call", "args": "[10]", "expected": EXPECTED},
            {"kind": "assert", "code": f"assert candidate(10) == {EXPECTED}"},
        ],
    )


def test_stdlib_class_factories_work_under_the_audit_hook(judge):
    # namedtuple / NamedTuple / Enum call sys._getframe themselves; dataclasses reads __code__
    res = judge.judge(problem(), LEGIT)
    assert res.verdict == "accepted", res.message


@pytest.mark.parametrize("code", [PEEK_DIS, PEEK_TB, PEEK_INSPECT], ids=["getframe+dis", "tb_frame", "inspect.stack"])
def test_candidate_cannot_read_the_callers_expected_constants(judge, code):
    res = judge.judge(problem(), code)
    assert res.verdict != "accepted"
    assert res.passed == 0
