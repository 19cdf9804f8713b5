"""Hash flooding (issue 43, item 3): wrong programs whose returned value is a set, frozenset or dict of values that
all share one hash, so that building it on the host would cost O(N^2) inside one C call holding the GIL (40,000
integers that are multiples of 2**61 - 1 froze a server's ``/v1/ping`` for ~10 s).

Building such a value in the sandbox is quadratic too, and charged to the program; so each program builds it from
subclasses whose ``__hash__`` is the object's identity (cheap), which the runner writes as the plain values they hold
(``inside/wire.py``): the host reads them back as plain integers, tuples, frozensets… that all collide.

Judged on :func:`probe`, a call problem whose expected value is a list of :data:`N` integers (as a ScaleBox tenant may
send), so the bound on a value's items (the expected one's + 64) lets every value through. Every program is wrong;
each flooding value must be refused as such (``hash flooding`` in the test's message) rather than built.
"""

from __future__ import annotations

from rlvr.data.schema import Problem

from . import Hostile, hostile

H = "hash_flood"
#: Values in the probe's expected list, and in each flooding value.
N = 60_000
P = (1 << 61) - 1


def probe() -> Problem:
    """``f()`` returns ``list(range(N))``: one call test with a large expected value."""
    return Problem(id="adv/call_big", source="adv", split="test", statement="list(range(N))", entry_point="f",
                   tests=[{"kind": "call", "args": "[]", "expected": repr(list(range(N)))}], time_limit_s=10.0,
                   memory_limit_mb=1024)


# name -> (Python expression of the returned value, what it tries). The program defines P, N and the subclasses I
# (int), Fl (float), C (complex), T (tuple), F (frozenset), each hashing by identity in the sandbox. Each value holds
# at most N values and containers in all (the item bound lets N + 64 through).
_VALUES = {
    "int_set": ("{I(k * P) for k in range(1, N + 1)}", "a set of integers congruent modulo 2**61 - 1"),
    "negative_int_set": ("{I(-k * P - 1) for k in range(N)}", "negative integers hashing to -2 (hash(-1) is -2)"),
    "int_dict": ("{I(k * P): k for k in range(1, N // 2)}", "a dict whose keys all hash to 0"),
    "frozenset_of_ints": ("F(I(k * P) for k in range(1, N + 1))", "a frozenset of colliding integers"),
    "tuple_set": ("{T((I(k * P), 'x')) for k in range(1, N // 3)}", "tuples whose elements collide"),
    "frozenset_set": ("{F({I(k * P)}) for k in range(1, N // 3)}", "frozensets of colliding integers"),
    "complex_set": ("{C(-1_000_003 * k, k) for k in range(1, N + 1)}",
                    "complex numbers a+bj with hash(a) + 1000003*hash(b) = 0"),
    "float_and_int_set": ("{Fl(2.0 ** (61 * j)) for j in range(-16, 17)} | {I(k * P + 1) for k in range(1, N)}",
                          "floats 2**(61j) and integers 1 modulo 2**61 - 1, all hashing to 1"),
    "tuple_key_dict": ("{T((I(k * P), T((I(k * P),)))): 0 for k in range(1, N // 5)}",
                       "nested tuple keys that collide"),
    "long_int_set": ("{I((10 ** 4000 + k) * P) for k in range(1, 3000)}",
                     "4,000-digit integers that collide and differ only in their last digits (costly comparisons)"),
    "sets_in_a_list": ("[{I((k + 1000 * i) * P) for k in range(1, 1001)} for i in range(N // 1000)]",
                       "many sets of 1,000 colliding values each"),
}
#: Not floods: the most a readable value may hold (32 distinct values per hash), and a value with duplicates of one
#: hash. Both are wrong answers, read and compared as Python would.
_READABLE = {
    "groups_at_the_bound": ("{I(g + k * P) for g in range(N // 32) for k in range(32)}",
                            "groups of 32 distinct values of one hash, the most a readable value holds"),
    "colliding_ints_in_a_list": ("{'a': [k * P for k in range(N)]}", "colliding values in a list (never hashed)"),
}


_PRELUDE = """\
P = (1 << 61) - 1
N = {n}
class I(int): __hash__ = object.__hash__
class Fl(float): __hash__ = object.__hash__
class C(complex): __hash__ = object.__hash__
class T(tuple): __hash__ = object.__hash__
class F(frozenset): __hash__ = object.__hash__
"""


def _program(expr: str) -> str:
    return _PRELUDE.format(n=N) + f"_value = {expr}\n\ndef f():\n    return _value\n"


PROGRAMS: list[Hostile] = [hostile(f"flood_{name}", H, "call_big", _program(expr), attempt)
                           for name, (expr, attempt) in _VALUES.items()]
READABLE: list[Hostile] = [hostile(f"readable_{name}", H, "call_big", _program(expr), attempt)
                           for name, (expr, attempt) in _READABLE.items()]
