"""Complexity tests of the host-side functions that read submission-controlled bytes (issue 28, items 1-2).

For each function (the list and the stated bounds are in ``docs/judge/threat-model.md``, "Host-side work on submission
output") and each adversarial family of inputs, the input doubles from 64 kB; the test asserts that

* the CPU time per byte at the largest size is at most :data:`FLAT` times that at 64 kB (a ratio between sizes of one
  run, never an absolute time: a quadratic function gives 4x at 256 kB, 256x at 16 MiB), and
* the host memory the call allocates (``tracemalloc`` peak, the input itself excluded) stays under the function's
  stated multiple of the input, plus :data:`SLACK` bytes of fixed overhead.

Default sizes: 64 kB and 256 kB. ``slow``: doubling from 64 kB to 1 MiB, and 64 kB against the largest input the
judge admits for that function (16 MiB of stdout per test, ``Judge(output_limit_mb=16)``; 16 MiB per returned value,
``wire.VALUE_CAP``, read as scoring reads it; 32 MiB request bodies, ``RLVR_SANDBOX_MAX_BODY_MB``, for code
extraction; representative families at the caps, every family to 1 MiB, the literal parser alone, unbounded by an
expected value, to 512 KiB). The families are generated, not
only the issue's examples: near-miss and digit-run float tokens, many tiny lines, one long line, deep and wide
literals, escapes, long integers, unterminated fences, tag and backtick runs.
"""

from __future__ import annotations

import functools
import gc
import time
import tracemalloc
from collections.abc import Callable

import pytest

from rlvr.data.schema import Problem
from rlvr.generate.extract import extract_code
from rlvr.judge.api.scalebox import extract_fenced
from rlvr.judge.compare import compare_stdout, first_difference
from rlvr.judge.fallback import failure_from_stderr, split_reports
from rlvr.judge.literal import parse_literal
from rlvr.judge.sandbox.host import names_zygote_module
from rlvr.judge.scoring import parse_bounds
from rlvr.repair.env import find_tool_call
from rlvr.reward.extract import clean_completion

KB = 1 << 10
MB = 1 << 20
SIZES = [64 * KB, 256 * KB]
#: Largest per-byte time ratio (largest size / 64 kB) accepted as "flat"; generous for a shared 2-core machine.
FLAT = 2.5
#: Fixed allocation overhead allowed on top of the multiple (compiled patterns, frames, small objects), bytes.
SLACK = 256 * KB
MAX_STDOUT = 16 * MB  # Judge(output_limit_mb=16): larger stdout is a wrong answer before any comparison
MAX_VALUE = 16 * MB  # wire.VALUE_CAP: a returned value's literal
MAX_BODY = 32 * MB  # RLVR_SANDBOX_MAX_BODY_MB: a request's completion


def _fit(unit: str, n: int) -> str:
    return unit * max(1, n // len(unit))


# ------------------------------------------------------------------------------------------------ adversarial inputs
def _stdout_families() -> dict[str, Callable[[int], tuple[str, str, float | None]]]:
    """name -> n -> (expected, actual, float_tolerance); ``actual`` about n bytes."""
    return {
        # the example: one long token of digits then a letter, against a float expectation
        "digits_then_letter": lambda n: ("1.5\n", "1" * n + "x\n", 1e-6),
        # many near-miss float tokens that match up to the last one (every token is float-compared)
        "near_miss_tokens": lambda n: (_fit("1.5 ", n), _fit("1.5000000001 ", n - 20) + "1.5" + "9" * 16 + "x", 1e-6),
        # digit runs in every token, same count as expected, on many lines
        "digit_runs": lambda n: (_fit("7\n", n // 64), _fit("7" + "0" * 61 + "\n", n), 1e-6),
        # many tiny lines equal up to whitespace (every line is compared)
        "tiny_lines": lambda n: (_fit("1\n", n // 2), _fit("1 \n", n), None),
        # blank and CR lines only
        "blank_lines": lambda n: ("0\n", _fit("\r\n \n", n), None),
        # one long line of equal tokens with other spacing (compared token by token)
        "one_long_line": lambda n: (_fit("ab ", n * 3 // 4), _fit("ab  ", n), None),
        # one long line, a different token at the end
        "long_line_last_differs": lambda n: (_fit("ab ", n) + "c", _fit("ab ", n) + "d", 1e-9),
    }


def _literal_families() -> dict[str, Callable[[int], str]]:
    return {
        "wide_tuple": lambda n: "(" + _fit("0,", n) + ")",
        "wide_float_list": lambda n: "[" + _fit("1.5e-07, ", n) + "0.]",
        "deep_and_wide": lambda n: "[" + _fit("[" * 100 + "1" + "]" * 100 + ",", n) + "]",
        "empty_sets": lambda n: "[" + _fit("set(), ", n) + "]",
        "empty_lists": lambda n: "[" + _fit("[], ", n) + "]",
        "strings_with_escapes": lambda n: "[" + _fit("'\\n\\x00\\u1234é', ", n) + "]",
        "dict_of_ints": lambda n: "{" + ", ".join(f"{i}: {i}" for i in range(n // 10)) + "}",
        "long_ints": lambda n: "[" + _fit("9" * 4300 + ", ", n) + "]",
        "digit_run_then_letter": lambda n: "1" * n + "x",
        "complex_pairs": lambda n: "[" + _fit("(1.5-2j), ", n) + "]",
        "unterminated_string": lambda n: "['" + "a" * n,
        "unclosed_brackets": lambda n: "[" * n,
        **{f"hash_flood_{name}": functools.partial(f, c=True) for name, f in _HASH_FLOODS.items()},
    }


P61 = (1 << 61) - 1  # CPython's hash modulus: integers congruent modulo it hash alike


def _values_text(render: Callable[[int], str], n: int, per: int, open_: str = "{", close: str = "}") -> str:
    return open_ + ", ".join(render(k) for k in range(1, max(2, n // per))) + close


#: Adversarial-hash families (issue 43, item 3): name -> (n, colliding) -> a text of about n bytes holding one set or
#: dict of values that all share one hash (``colliding``), or its twin of the same shape and size whose values hash
#: apart. A quadratic build shows as a 4x per-byte ratio from 64 to 256 kB, and as a ratio to the twin.
_HASH_FLOODS: dict[str, Callable[[int, bool], str]] = {
    "int_set": lambda n, c: _values_text(lambda k: str(k * P61 + (0 if c else k)), n, 22),
    "int_dict": lambda n, c: _values_text(lambda k: f"{k * P61 + (0 if c else k)}: {k}", n, 27),
    "negative_int_set": lambda n, c: _values_text(lambda k: str(-k * P61 - (1 if c else k)), n, 23),
    "tuple_set": lambda n, c: _values_text(lambda k: f"({k * P61 + (0 if c else k)}, 'x')", n, 29),
    "frozenset_set": lambda n, c: _values_text(lambda k: f"frozenset({{{k * P61 + (0 if c else k)}}})", n, 35),
    "complex_set": lambda n, c: _values_text(lambda k: f"({-1_000_003 * k if c else 1_000_003 * k}+{k}j)", n, 20),
    "set_call": lambda n, c: _values_text(lambda k: str(k * P61 + (0 if c else k)), n, 22, "set([", "])"),
    "float_and_int_set": lambda n, c: "{" + ", ".join(repr(2.0 ** (61 * j if c else j)) for j in range(-16, 17))
    + ", " + _values_text(lambda k: str(k * P61 + (1 if c else k)), n - 800, 22, "", "}"),
    # the most a readable value may hold: groups of MAX_HASH_GROUP distinct values of one hash, back to back
    "groups_at_the_bound": lambda n, c: _values_text(lambda k: str((k // 32) + (k % 32) * P61 if c else k * P61 + k),
                                                     n, 22),
}


def _completion_families() -> dict[str, Callable[[int], str]]:
    return {
        "backtick_run": lambda n: "`" * n,
        "fence_then_long_tag": lambda n: "```" + "a" * n,
        "fence_then_spaces": lambda n: "```" + " " * n,
        "unterminated_fences": lambda n: _fit("```python\nx = 1\n", n),
        "nested_fence_lengths": lambda n: _fit("````python\n```\n", n),
        "think_runs": lambda n: _fit("<think>", n),
        "tool_openings": lambda n: _fit("```python-run\n", n),
        "many_tiny_lines": lambda n: "\n" * n,
        "indented_defs": lambda n: _fit(" " * 60 + "def\n", n),
    }


def _cpu_per_byte(call: Callable[[], object], size: int, repeat: int) -> float:
    """Least CPU seconds per byte over ``repeat`` calls, with the cyclic GC paused: its collections are the
    interpreter's (amortised linear: a full one runs when the long-lived containers grew by a quarter), and where they
    fall inside a 64 kB-256 kB run makes the per-byte time of container-heavy readers swing ~3x either way."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            call()
            best = min(best, time.process_time() - t0)
        finally:
            gc.enable()
    return best / size


def _peak(call: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _check(call_for: Callable[[int], tuple[Callable[[], object], int]], multiple: float, sizes: list[int]) -> None:
    """``call_for(n)`` -> (zero-argument call on an input of about n bytes, its size in bytes)."""
    per_byte, peaks = {}, {}
    for n in sizes:
        call, size = call_for(n)
        per_byte[n] = _cpu_per_byte(call, size, repeat=3 if n <= 64 * KB else 2 if n <= 256 * KB else 1)
        peaks[n] = (_peak(call), size)
    ratio = per_byte[sizes[-1]] / max(per_byte[sizes[0]], 1e-9)
    over = {n: f"{p / s:.1f}x" for n, (p, s) in peaks.items() if p > multiple * s + SLACK}
    assert not over, f"memory over {multiple}x the input: {over}"
    # very cheap calls (< 20 ns/byte at the top size) are C-speed scans: their ratio is noise
    assert ratio <= FLAT or per_byte[sizes[-1]] < 2e-8, (
        f"time per byte grew {ratio:.1f}x from {sizes[0]} to {sizes[-1]} bytes: "
        + ", ".join(f"{n}: {v * 1e9:.0f} ns/B" for n, v in per_byte.items()))


def _compare_call(family: str, n: int) -> tuple[Callable[[], object], int]:
    exp, act, tol = _stdout_families()[family](n)
    return (lambda: (compare_stdout(exp, act, tol), first_difference(exp, act))), len(exp) + len(act)


def _literal_call(family: str, n: int) -> tuple[Callable[[], object], int]:
    text = _literal_families()[family](n)

    def call() -> object:
        try:
            return parse_literal(text)
        except ValueError:
            return None

    return call, len(text)


def _scored_literal_call(family: str, n: int) -> tuple[Callable[[], object], int]:
    """The literal read the way scoring reads a submission's value: bounded by a small expected value."""
    text = _literal_families()[family](n)
    bounds = parse_bounds([1.5, (2, "x")])

    def call() -> object:
        try:
            return parse_literal(text, **bounds)
        except ValueError:
            return None

    return call, len(text)


_PROBLEM = Problem(id="t/1", source="t", split="test", statement="add", starter_code="def add(a, b):\n",
                   entry_point="add", tests=[{"kind": "call", "args": "[1, 2]", "expected": "3"}])


@pytest.mark.parametrize("scored", [False, True], ids=["parser", "scored"])
@pytest.mark.parametrize("family", list(_HASH_FLOODS))
def test_colliding_hashes_cost_what_distinct_ones_do(family, scored):
    """Issue 43, item 3: values that all share one hash against a twin of the same shape and size whose values hash
    apart, side by side in one run at 128 kB (a quadratic set build was ~12x its twin there), read by the parser
    alone and as scoring reads a value compared with a large expected one (a list of as many integers, so the item
    bound lets every value through)."""
    n = 128 * KB
    flood, twin = _HASH_FLOODS[family](n, True), _HASH_FLOODS[family](n, False)
    bounds = parse_bounds(list(range(n // 4))) if scored else {}
    assert bounds.get("max_items", n) > 3 * flood.count(",")

    def reader(text: str) -> Callable[[], object]:
        def call() -> object:
            try:
                return parse_literal(text, **bounds)
            except ValueError:
                return None
        return call

    assert reader(twin)() is not None  # the twin is read whole
    cost = {name: _cpu_per_byte(reader(text), len(text), repeat=3) for name, text in (("flood", flood), ("twin", twin))}
    assert cost["flood"] <= FLAT * cost["twin"], (
        f"{family}: {cost['flood'] * 1e9:.0f} ns/B with one hash, {cost['twin'] * 1e9:.0f} ns/B without")


def _extract_call(family: str, n: int) -> tuple[Callable[[], object], int]:
    text = _completion_families()[family](n)
    return (lambda: (extract_code(clean_completion(text), _PROBLEM), extract_fenced(text, "python"),
                     find_tool_call(text))), len(text)


def _stderr_call(family: str, n: int) -> tuple[Callable[[], object], int]:
    mark = "@@rlvr-0123456789abcdef@@"
    text = {"tiny_lines": "\n" * n, "reports": _fit(mark + "value 1\n", n),
            "near_marks": _fit("@@rlvr-0123456789abcdeX@@\n", n)}[family]
    return (lambda: (split_reports(text, mark), failure_from_stderr(text, "python"))), len(text)


# The stated multiples (docs/judge/threat-model.md): compare, extraction and stderr splitting hold normalised copies
# and sliced blocks of their input; the literal scanner holds the value it builds (densest: set() at ~40 B/char).
@pytest.mark.parametrize("family", list(_stdout_families()))
def test_stdout_comparison_is_linear(family):
    _check(lambda n: _compare_call(family, n), multiple=4, sizes=SIZES)


@pytest.mark.parametrize("family", list(_literal_families()))
def test_literal_parser_is_linear(family):
    _check(lambda n: _literal_call(family, n), multiple=48, sizes=SIZES)


@pytest.mark.parametrize("family", list(_literal_families()))
def test_scored_value_costs_no_more_than_the_expected_one(family):
    _check(lambda n: _scored_literal_call(family, n), multiple=1, sizes=SIZES)


@pytest.mark.parametrize("family", list(_completion_families()))
def test_code_extraction_is_linear(family):
    _check(lambda n: _extract_call(family, n), multiple=6, sizes=SIZES)


@pytest.mark.parametrize("family", ["tiny_lines", "reports", "near_marks"])
def test_fallback_stderr_splitting_is_linear(family):
    _check(lambda n: _stderr_call(family, n), multiple=3, sizes=SIZES)


def _zygote_families() -> dict[str, Callable[[int], str]]:
    """name -> n -> a submission's text of about n bytes for :func:`names_zygote_module` (the routing bit): no
    match anywhere (the whole text scanned), prefixes of the names, attribute uses, one long identifier, a match only
    at the very end."""
    return {
        "plain_code": lambda n: _fit("x = int(input())\nprint(x * 2)\n", n),
        "name_prefixes": lambda n: _fit("typ rando dateti heap deci strin cop ", n),
        "attributes": lambda n: _fit("a.copy() b.string c.random ", n),
        "one_identifier": lambda n: "typing_" * (n // 7) + "x",
        "word_glued": lambda n: _fit("xtyping randomx _copy ", n),
        "match_at_end": lambda n: _fit("y = 1\n", n) + "import heapq\n",
    }


@pytest.mark.parametrize("family", list(_zygote_families()))
def test_zygote_routing_is_linear(family):
    # one regex scan, no copy: nothing but the match object
    _check(lambda n: ((lambda t: (lambda: names_zygote_module(t, None)))(_zygote_families()[family](n)),
                      len(_zygote_families()[family](n))), multiple=0.01, sizes=SIZES)


# ------------------------------------------------------------------------------------------------ up to the caps
DOUBLING = [64 * KB << k for k in range(5)]


@pytest.mark.slow
@pytest.mark.parametrize("family", list(_zygote_families()))
def test_zygote_routing_doubling_to_1_mib(family):
    _check(lambda n: ((lambda t: (lambda: names_zygote_module(t, None)))(_zygote_families()[family](n)),
                      len(_zygote_families()[family](n))), multiple=0.01, sizes=DOUBLING)


@pytest.mark.slow
@pytest.mark.parametrize("family", list(_stdout_families()))
def test_stdout_comparison_doubling_to_1_mib(family):
    _check(lambda n: _compare_call(family, n), multiple=4, sizes=DOUBLING)


@pytest.mark.slow
@pytest.mark.parametrize("family", list(_literal_families()))
def test_literal_parser_doubling_to_512_kib(family):
    # the parser alone, unbounded by an expected value (scoring bounds it: the value-cap test below)
    _check(lambda n: _literal_call(family, n), multiple=48, sizes=DOUBLING[:4])


@pytest.mark.slow
@pytest.mark.parametrize("family", list(_completion_families()))
def test_code_extraction_doubling_to_1_mib(family):
    _check(lambda n: _extract_call(family, n), multiple=6, sizes=DOUBLING)

@pytest.mark.slow
@pytest.mark.parametrize("family", ["digits_then_letter", "tiny_lines", "long_line_last_differs"])
def test_stdout_comparison_is_linear_up_to_the_output_cap(family):
    _check(lambda n: _compare_call(family, n // 2), multiple=4, sizes=[64 * KB, MAX_STDOUT])


@pytest.mark.slow
@pytest.mark.parametrize("family", list(_literal_families()))
def test_scored_value_is_bounded_up_to_the_value_cap(family):
    _check(lambda n: _scored_literal_call(family, n), multiple=1, sizes=[64 * KB, MAX_VALUE])


@pytest.mark.slow
@pytest.mark.parametrize("family", ["backtick_run", "unterminated_fences", "tool_openings"])
def test_code_extraction_is_linear_up_to_the_body_cap(family):
    _check(lambda n: _extract_call(family, n), multiple=6, sizes=[64 * KB, MAX_BODY])


# ------------------------------------------------------------------------------------------------ ScaleBox JSON lines
def _json_lines_call(family: str, n: int) -> tuple[Callable[[], object], int]:
    from rlvr.judge.api.common import BadRequest
    from rlvr.judge.api.scalebox import _scalebox_batch

    text = {"int_lines": _fit("1\n", n)[:-1], "blank_lines": "\n" * n, "digit_run": "1" * n,
            "nested_arrays": _fit("[[[1]]]\n", n)[:-1]}[family]
    case = {"type": "function_call", "fn_name": "f", "input": [text], "output": ["1"], "json_input": True}

    def call() -> object:
        try:
            return _scalebox_batch(case, "python")
        except BadRequest:
            return None

    return call, len(text)


@pytest.mark.parametrize("family", ["int_lines", "blank_lines", "digit_run", "nested_arrays"])
def test_scalebox_json_input_lines_are_linear(family):
    # the test's own text, not the submission's, but read on the server from a tenant's request: a JSON line of a
    # million digits was ~4 s with json.loads (quadratic); the bounded parser refuses integers over ~4,300 digits
    _check(lambda n: _json_lines_call(family, n), multiple=48, sizes=SIZES)


def test_a_frame_with_a_huge_integer_is_malformed_not_converted():
    import os
    import struct

    from rlvr.judge.sandbox.session import Session

    r, w = os.pipe()
    try:  # under the pipe's 64 KiB buffer, so it is written whole before anyone reads
        body = b'{"id": "x", "recs": [{"exit_code": ' + b"1" * 60_000 + b"}]}"
        os.write(w, struct.pack(">Q", len(body)) + body)
        assert Session("x", -1, r).recv(time.monotonic() + 10) is None  # malformed: the session ends
    finally:
        os.close(w)
        os.close(r)
