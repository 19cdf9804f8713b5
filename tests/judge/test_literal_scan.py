"""The plain-literal scanner (rlvr/judge/literal_scan.py) on its own, and the two-file layout the sandbox and the
fallback driver see: literal.py importing it as a top-level module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.judge.literal import LONG_INT_DIGITS, MAX_DEPTH, parse_literal
from rlvr.judge.literal_scan import Unsupported, scan

JUDGE = Path(__file__).resolve().parents[2] / "rlvr" / "judge"


def _scan(text: str, **bounds):
    args = {"max_int_digits": 10**6, "max_long_digits": 10**6, "max_items": len(text) + 1, "max_depth": MAX_DEPTH,
            "long_digits": LONG_INT_DIGITS, **bounds}
    return scan(text, **args)


@pytest.mark.parametrize("text", ["[1, -2.5, 3j, 'a', b'b', None, True]", "{'k': (1,), 2: frozenset({3})}",
                                  "set()", "0x_ff", "'a' \"b\"  # comment", "-inf", "(1.5-nanj)"])
def test_scan_reads_what_parse_literal_reads(text):
    assert repr(_scan(text)) == repr(parse_literal(text))


def test_scan_takes_its_bounds_from_the_caller():
    assert _scan("[[1]]", max_depth=3) == [[1]]  # three levels: two lists and the number
    with pytest.raises(ValueError, match="nested deeper than 2 levels"):
        _scan("[[1]]", max_depth=2)
    with pytest.raises(ValueError, match="long-integer digits"):
        _scan("[1234, 5678]", long_digits=3, max_long_digits=7)
    with pytest.raises(ValueError, match="more than 2 values"):
        _scan("[1, 2]", max_items=2)


def test_what_the_scanner_does_not_read_is_unsupported_not_a_verdict():
    with pytest.raises(Unsupported):
        _scan("(1 if True else 2)")
    assert issubclass(Unsupported, ValueError)


def test_literal_py_imports_the_scanner_as_a_top_level_module():
    # the sandbox's layout: both files in one directory on sys.path, no package (``__package__`` unset)
    code = ("import sys; sys.path[:0] = [sys.argv[1]]; import literal, literal_scan\n"
            "assert literal.scan is literal_scan.scan\n"
            "print(literal.parse_literal('[1, {2}, (3.5,)]'))")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(JUDGE)], capture_output=True, text=True, check=True,
                         timeout=60)
    assert out.stdout.strip() == "[1, {2}, (3.5,)]"
