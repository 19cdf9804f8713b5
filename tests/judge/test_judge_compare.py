import pytest

from rlvr.judge.compare import compare_stdout, first_difference, parse_literal, values_equal


@pytest.mark.parametrize(
    "actual",
    ["1 2\n3\n", "1 2   \n3", "1 2\r\n3\r\n", "1 2\n3\n\n\n", "1  2\n3\n", "  1 2\n3\n"],
)
def test_whitespace_insensitive_variants_accepted(actual):
    assert compare_stdout("1 2\n3\n", actual)


@pytest.mark.parametrize(
    "actual",
    ["1 2\n", "1 2\n3\n4\n", "1 2 3\n", "1\n2\n3\n", "1 2\n4\n", ""],
)
def test_prefix_extra_or_different_rejected(actual):
    assert not compare_stdout("1 2\n3\n", actual)


def test_case_sensitive():
    assert not compare_stdout("YES\n", "yes\n")


def test_float_tokens_exact_by_default_and_tolerant_when_declared():
    assert not compare_stdout("1\n", "1.0\n")
    assert compare_stdout("1\n", "1.0\n", float_tolerance=1e-6)
    assert compare_stdout("0.333333\n", "0.3333334\n", float_tolerance=1e-6)
    assert not compare_stdout("0.3\n", "0.4\n", float_tolerance=1e-6)
    assert not compare_stdout("abc\n", "abd\n", float_tolerance=1e-6)


def test_float_tolerance_follows_testlib_double_compare():
    # absolute bound when |expected| <= 1, relative above (|a-b| <= tol * max(1, |b|))
    assert compare_stdout("0.5\n", "0.5000009\n", float_tolerance=1e-6)
    assert not compare_stdout("0.5\n", "0.5000011\n", float_tolerance=1e-6)
    assert compare_stdout("1000000\n", "1000000.9\n", float_tolerance=1e-6)
    assert not compare_stdout("1000000\n", "1000001.1\n", float_tolerance=1e-6)
    assert compare_stdout("-2000\n", "-2000.0019\n", float_tolerance=1e-6)
    # testlib's 1e-15 slack: a difference that is 1e-6 up to binary rounding is accepted
    assert compare_stdout("0.5\n", "0.500001\n", float_tolerance=1e-6)
    # testlib's stringToDouble reads no "nan"/"inf" spelling (only 0-9 . e E + -): such tokens match only themselves;
    # an overflowing literal is infinite and only matches a same-signed infinity
    assert not compare_stdout("nan\n", "NaN\n", float_tolerance=1e-6)
    assert compare_stdout("nan\n", "nan\n", float_tolerance=1e-6)
    assert not compare_stdout("1\n", "nan\n", float_tolerance=1e-6)
    assert not compare_stdout("inf\n", "Infinity\n", float_tolerance=1e-6)
    assert compare_stdout("1e400\n", "2e999\n", float_tolerance=1e-6)
    assert not compare_stdout("1e400\n", "-1e400\n", float_tolerance=1e-6)
    assert not compare_stdout("1e308\n", "5\n", float_tolerance=1e-6)
    assert not compare_stdout("5\n", "inf\n", float_tolerance=1e-6)


def test_first_difference_never_shows_expected_tokens():
    msg = first_difference("secret_answer 42\n", "wrong 1\n")
    assert "secret_answer" not in msg and "42" not in msg and "wrong" in msg


def test_parse_literal_roundtrips_reprs():
    for value in [(1, 2), {1, 2}, 1 + 2j, float("inf"), [(-1.5, "a")], {"k": (None, True)}, frozenset({3})]:
        assert parse_literal(repr(value)) == value
    with pytest.raises(ValueError):
        parse_literal("__import__('os').system('true')")


def test_values_equal_follows_evalplus_rule():
    # evalplus 0.3.1 unsafe_execute: out == exp, else type + len + np.allclose(rtol=1e-7, atol) when atol applies
    assert values_equal([1, (2, 3)], [1, (2, 3)])
    assert not values_equal([1, (2, 3)], [1, [2, 3]])  # tuple vs list: == is False, no tolerance for ints
    assert values_equal(1, True)  # True == 1 in Python, so EvalPlus accepts it
    assert values_equal(2, 2.0) and values_equal(2.0, 2)
    assert not values_equal(3.0000001, 3)  # not ==, and type(int) is not type(float): EvalPlus's assert fails
    assert values_equal(0.1 + 0.2, 0.3)  # float expectation: atol 1e-6
    assert values_equal([1.0, 2.0], [1.0000001, 2.0])  # flat list of floats: atol 1e-6
    assert not values_equal([1, 2.5], [1, 2.5000001])  # mixed list: not is_floats, exact only
    assert not values_equal([[1.0]], [[1.0000001]])  # nested: exact only
    assert values_equal([[1.0]], [[1.0000001]], atol=1e-6)  # ...unless the record (or carry-over) sets atol
    assert not values_equal((1.0, 2.0), [1.0, 2.0])  # == False, then types differ
    assert not values_equal(0.3, 0.31)
    assert values_equal(1.0, 1.05, atol=0.1)
    assert not values_equal(float("nan"), float("nan"))  # nan != nan and np.allclose(nan, nan) is False
    assert not values_equal("a", "b", atol=1e-6)  # allclose raises on strings: a mismatch, not an error
    assert not values_equal({"a": 1}, {"a": 1, "b": 2})


def test_values_equal_strict_semantics_kept():
    assert not values_equal(1, True, semantics="strict")
    assert values_equal(2.0, 2, semantics="strict")
    assert values_equal(float("nan"), float("nan"), semantics="strict")
    assert values_equal([[1.0]], [[1.0000001]], semantics="strict")
    with pytest.raises(ValueError, match="unknown semantics"):
        values_equal(1, 1, semantics="loose")


def _random_value(rng, depth=0):
    if depth > 3 or rng.random() < 0.5:
        return rng.choice([
            rng.randint(-10**30, 10**30), rng.random() * 10 ** rng.randint(-300, 300), -0.0, float("inf"),
            float("-inf"), complex(rng.random(), -rng.random()), -0j, True, None, "a'b\"c\\", "\udcff", "é\\涛\n",
            "".join(chr(rng.randint(0, 0x10FFFF) if rng.random() < 0.3 else rng.randint(0, 127)) for _ in range(6)),
            bytes(rng.randint(0, 255) for _ in range(5)),
        ])
    items = [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    kind = rng.randint(0, 4)
    hashable = [x for x in items if isinstance(x, (int, float, str, bytes, complex, type(None)))]
    return [items, tuple(items), {repr(x): x for x in items}, set(hashable), frozenset(hashable)][kind]


def _same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, complex):
        return repr(a) == repr(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def test_linear_scanner_reads_reprs_as_the_ast_does():
    import random

    from rlvr.judge.literal import _parse_ast

    rng = random.Random(28)
    for _ in range(3000):
        text = repr(_random_value(rng))
        assert _same(parse_literal(text, ast_fallback_chars=0), _parse_ast(text, None, None)), text
    for text in ["1_000", "0x1F", "0o17", "0b101", "1.", ".5", "3 + 4j", "-(1)", "((1,),)", "'a' 'b'", "b'\\x00'",
                 "r'\\d'", "'''a'b'''", "[1, # c\n 2]", "{1: 2,}", "set([1, 2])", "frozenset()", "--1",
                 "'\\N{BULLET}'"]:
        assert _same(parse_literal(text, ast_fallback_chars=0), _parse_ast(text, None, None)), text
    for text in ["1 + 2", "1j + 1", "-True", "(,)", "x", "__import__('os')", "012", "{[1]: 2}", "'a' b'b'", "[1 2]"]:
        with pytest.raises(ValueError):
            parse_literal(text)


def test_submission_values_are_bounded_by_the_expected_one():
    from rlvr.judge.scoring import parse_bounds

    big = 10**5000
    ok = parse_bounds([big, (1, 2.5)])
    assert parse_literal(repr([big, (1, 2.5)]), **ok) == [big, (1, 2.5)]  # an equal value always fits
    assert parse_literal(repr([big, (True, 2.5000001)]), **ok) == [big, (1, 2.5000001)]
    with pytest.raises(ValueError, match="more than"):
        parse_literal(repr((0,) * 1000), **parse_bounds(7))  # wide: refused after 65 values
    with pytest.raises(ValueError, match="long-integer"):
        parse_literal(repr([big] * 3), **ok)  # three times the expected value's long digits
    with pytest.raises(ValueError, match="digits"):
        parse_literal(str(10**4400), **parse_bounds(7))  # longer than any integer an equal value could hold
