"""Hash flooding in the host's value parser (issue 43, item 3): what the collision guard
(:func:`rlvr.judge.literal_scan.check_hash_groups`) refuses, what it keeps exactly as Python builds it, and that a
value equal to a readable expected one is always read back (so verdicts stay those of Python's ``==``).

The cost bounds (colliding values cost what distinct ones do, side by side) are in ``tests/judge/test_host_bounds.py``.
"""

from __future__ import annotations

import pytest

from rlvr.data.schema import CallTest, Problem
from rlvr.judge import literal
from rlvr.judge.literal import parse_literal
from rlvr.judge.literal_scan import MAX_HASH_GROUP, check_hash_groups
from rlvr.judge.scoring import parse_bounds, score

P = (1 << 61) - 1  # CPython's hash modulus (sys.hash_info.modulus): k * P hashes to 0 for every integer k


def _colliding(kind: str, n: int) -> list:
    """``n`` distinct values of one hash, of the given kind."""
    return {
        "int": lambda: [k * P for k in range(1, n + 1)],
        "negative_int": lambda: [-k * P - 1 for k in range(n)],  # hash -1 is -2, like hash(-2)
        "tuple": lambda: [(k * P, "x") for k in range(1, n + 1)],
        "frozenset": lambda: [frozenset({k * P}) for k in range(1, n + 1)],
        "complex": lambda: [complex(-1_000_003 * k, k) for k in range(1, n + 1)],  # hash(a) + 1000003 * hash(b) = 0
        "float_and_int": lambda: [2.0 ** (61 * j) for j in range(-16, 17)][:n] + [k * P + 1 for k in range(1, n - 32)],
    }[kind]()


KINDS = ["int", "negative_int", "tuple", "frozenset", "complex", "float_and_int"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_families_really_collide(kind):
    values = _colliding(kind, MAX_HASH_GROUP + 1)
    assert len({hash(v) for v in values}) == 1 and len(set(values)) == MAX_HASH_GROUP + 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape", ["set", "dict", "set_call", "frozenset_call"])
def test_more_distinct_values_of_one_hash_than_the_bound_are_refused(kind, shape):
    values = _colliding(kind, MAX_HASH_GROUP + 1)
    ok = values[:MAX_HASH_GROUP]
    render = {"set": lambda vs: "{" + ", ".join(map(repr, vs)) + "}",
              "dict": lambda vs: "{" + ", ".join(f"{v!r}: {i}" for i, v in enumerate(vs)) + "}",
              "set_call": lambda vs: f"set({list(vs)!r})",
              "frozenset_call": lambda vs: f"frozenset({tuple(vs)!r})"}[shape]
    text_ok = render(ok)
    assert parse_literal(text_ok) == eval(text_ok)  # at the bound: built exactly as Python builds it
    with pytest.raises(ValueError, match="hash flooding"):
        parse_literal(render(values))


def test_duplicates_and_equal_values_do_not_count():
    # equal values of one hash collapse as in Python (1 == 1.0 == True == 1+0j): only distinct ones are counted
    text = "set(" + repr([1, 1.0, True, 1 + 0j] * 50 + [P] * 200) + ")"
    assert parse_literal(text) == eval(text) == {1, P}
    dup_keys = "{" + ", ".join(f"{P}: {i}" for i in range(300)) + ", 1: 'a', 1.0: 'b'}"
    got = parse_literal(dup_keys)
    assert got == eval(dup_keys) == {P: 299, 1: "b"} and type(next(iter(got.keys() - {P}))) is int  # first key kept


def test_many_groups_each_within_the_bound_are_read():
    values = [g + k * P for g in range(50) for k in range(MAX_HASH_GROUP)]
    text = "{" + ", ".join(map(str, values)) + "}"
    assert parse_literal(text) == set(values)


def test_the_ast_fallback_is_guarded_too():
    # texts the scanner does not read go through the AST (short ones; the dataset's expected values at any length)
    text = "{" + ", ".join(str(k * P) for k in range(1, 40)) + "}"
    with pytest.raises(ValueError, match="hash flooding"):
        literal._parse_ast(text, None, None)
    with pytest.raises(ValueError, match="hash flooding"):
        literal._parse_ast(f"set({[k * P for k in range(1, 40)]!r})", None, None)
    ok = "{" + ", ".join(str(k * P) for k in range(1, 30)) + "}"
    assert literal._parse_ast(ok, None, None) == eval(ok)


def test_wire_forms_inside_the_sandboxes_are_left_as_python_builds_them():
    # with ``objects`` (the driver's and call server's wire forms, parsed within the sandbox's own limits) a class of
    # the test's own may hash every instance alike: nothing is refused there
    text = "{" + ", ".join(str(k * P) for k in range(1, 40)) + "}"
    assert parse_literal(text, objects=lambda name: None) == eval(text)


def test_unhashable_values_are_still_not_literals():
    with pytest.raises(ValueError, match="unhashable"):
        parse_literal("{" + ", ".join(["[1]"] * 40) + "}")
    with pytest.raises(TypeError):
        check_hash_groups([[1]] * 40)


def _call_problem(expected: str) -> Problem:
    return Problem(id="t/flood", source="t", split="test", statement="", entry_point="f",
                   tests=[CallTest(args="[]", expected=expected)])


@pytest.mark.parametrize("kind", KINDS)
def test_an_equal_answer_is_read_back_and_accepted(kind):
    # the expected value holds MAX_HASH_GROUP values of one hash: any equal answer has the same groups
    values = _colliding(kind, MAX_HASH_GROUP)
    p = _call_problem(repr(set(values)))
    answer = "{" + ", ".join(map(repr, reversed(values))) + "}"
    res = score(p, p.tests[0], 0, {"status": "ok", "value": answer}, judge=None)
    assert res.verdict == "accepted", res.message


def test_a_flooding_answer_is_a_wrong_answer_even_against_a_large_expected_value():
    # issue 43: a large expected value (a ScaleBox tenant's list of 40,000 ints) lets 40,000 values through the
    # item bound; 40,000 values of one hash were ~10 s of one C call holding the GIL
    expected = repr(list(range(40_000)))
    p = _call_problem(expected)
    assert parse_bounds(list(range(40_000)))["max_items"] > 40_000
    flood = "{" + ", ".join(str(k * P) for k in range(1, 40_001)) + "}"
    res = score(p, p.tests[0], 0, {"status": "ok", "value": flood}, judge=None)
    assert res.verdict == "wrong_answer" and "hash flooding" in res.message
