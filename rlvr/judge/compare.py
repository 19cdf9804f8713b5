"""Output and value comparison, done on the host (expected outputs never enter the sandbox).

stdio (:func:`compare_stdout`): token-wise and whitespace-insensitive, as Codeforces/CodeContests checkers and
``prime_code`` do — trailing spaces, CRLF, extra blank lines at the end and runs of spaces inside a line are accepted;
comparison is case-sensitive; tokens must match exactly unless the problem declares a float tolerance (then two tokens
that are both doubles as testlib's ``stringToDouble`` reads them — only ``0-9 . e E + -``, the whole token; so not
``1_0``, ``nan``, ``inf`` — match when ``|a-b| <= tol * max(1, |b|)``, ``b`` the expected value, up to testlib's 1e-15
slack: the ``doubleCompare`` rule of testlib.h, github.com/MikeMirzayanov/testlib, which Codeforces checkers such as
``rcmp6``/``rcmp9`` apply to every token; a statement's tolerance is read by :mod:`rlvr.data.tolerance`). A prefix of
the expected output, or extra output lines, are rejected. Line structure is kept: ``"1 2"`` vs ``"1\\n2"`` differ.

call tests (:func:`values_equal`): EvalPlus's own rule (Liu et al. 2023; ``evalplus`` 0.3.1,
``evalplus/eval/__init__.py::unsafe_execute``), so that verdicts agree with EvalPlus's task by task
(``docs/judge/parity.md``): the result passes when ``actual == expected`` (Python equality: ``True == 1``,
``2.0 == 2``); otherwise, when a tolerance applies (``atol != 0``, and ``atol`` becomes 1e-6 when the expectation is
a float or a non-empty flat list/tuple of floats), it passes iff ``type(actual) is type(expected)``, lists/tuples have
the same length and ``numpy.allclose(actual, expected, rtol=1e-7, atol=atol)`` holds (``|a-b| <= atol + 1e-7*|b|``
elementwise; NaN never matches, as in EvalPlus). ``semantics="strict"`` keeps the former stricter rule (exact types
everywhere, ``bool`` never for ``int``, NaN matches NaN) for callers that want it. EvalPlus's task-specific oracles
(set comparison, "not None", ``find_zero``, …) are data, not this function: :mod:`rlvr.data.evalplus_oracles`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from itertools import zip_longest
from typing import Any

from rlvr.judge.literal import parse_literal

__all__ = ["compare_stdout", "first_difference", "is_floats", "parse_literal", "values_equal"]


_TOKEN = re.compile(r"\S+")
#: Lines at most this long are split with ``str.split`` (fast); longer ones are walked token by token, so the memory a
#: line costs stays bounded whatever the program printed (a 16 MB line of two-character tokens would be a list of
#: 5 million strings, ~20x its size).
_SPLIT_MAX = 1 << 12


def _normal(text: str) -> str:
    r"""``text`` with ``\r\n``/``\r`` as ``\n`` and trailing whitespace (trailing blank lines included) removed: the
    lines of the result are the lines compared (str.split's whitespace = str.rstrip's = ``re``'s ``\s``)."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.rstrip()


def _iter_lines(text: str) -> Iterator[str]:
    r"""The ``\n``-separated lines of ``text`` one at a time (no list of every line: O(longest line) extra memory)."""
    pos, n = 0, len(text)
    while True:
        end = text.find("\n", pos)
        if end < 0:
            yield text[pos:n]
            return
        yield text[pos:end]
        pos = end + 1


def _tokens(line: str) -> Iterator[str]:
    """Whitespace-separated tokens of ``line``, lazily for long lines."""
    if len(line) <= _SPLIT_MAX:
        return iter(line.split())
    return (m.group() for m in _TOKEN.finditer(line))


def _line_equal(le: str, la: str, float_tolerance: float | None) -> bool:
    if le == la:
        return True
    for te, ta in zip_longest(_tokens(le), _tokens(la)):  # stops at the first difference
        if te == ta:
            continue
        if te is None or ta is None:
            return False
        if float_tolerance is None or not _float_tok_equal(ta, te, float_tolerance):
            return False
    return True


# testlib ``stringToDouble``: only digits, '.', 'e'/'E', '-', '+' (at least one digit, <= 2 '-', <= 1 '+', '.', 'e'),
# then the whole token must scan as a double: so ``1_0``, ``inf``, ``nan``, ``0x10`` are not numbers there.
# Unambiguous (``\d+`` then an optional ``.\d*``, never ``\d+\.?\d*``, whose two digit runs made a failing match on a
# long digit run backtrack quadratically: 8,000 digits then a letter took ~1 s), so matching is linear in the token.
_TESTLIB_DOUBLE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def _float_tok_equal(a: str, b: str, tol: float) -> bool:
    """testlib ``doubleCompare(expected=b, result=a, tol)`` on tokens that are testlib doubles (else no match): NaN only
    matches NaN, an infinite expectation (``|b| >
    1e300``) only a same-signed infinite result, else ``|a-b| <= tol'`` or ``a`` within ``b·(1 ± tol')`` (± 1e-15),
    with ``tol' = tol + 1e-15``. Linear in the tokens' length (``float()`` of a digit string is)."""
    if not (_TESTLIB_DOUBLE.fullmatch(a) and _TESTLIB_DOUBLE.fullmatch(b)):
        return False
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if abs(y) > 1e300:
        return abs(x) > 1e300 and (x > 0) == (y > 0)
    if abs(x) > 1e300:
        return False
    eps = tol + 1e-15
    return abs(x - y) <= eps or abs(x - y) <= eps * abs(y) + 1e-15


def compare_stdout(expected: str, actual: str, float_tolerance: float | None = None) -> bool:
    """True iff ``actual`` matches ``expected`` under the module's token rules.

    Args:
        expected: the test's expected stdout. actual: the program's stdout.
        float_tolerance: ``None`` for exact tokens; else the absolute/relative tolerance for float tokens.

    Cost (``actual`` is the program's): O(len(expected) + len(actual)) time, lines compared one at a time and only
    while they agree (different line counts are found by ``str.count`` before any line is split); extra memory at
    most ~3x the texts (the normalised copies) plus ~80 KB for one line. docs/judge/threat-model.md lists the bound."""
    if expected == actual:  # the common case of a correct program: the same tokens whatever the rules
        return True
    exp, act = _normal(expected), _normal(actual)
    if exp.count("\n") != act.count("\n"):
        return False
    return all(_line_equal(le, la, float_tolerance) for le, la in zip(_iter_lines(exp), _iter_lines(act), strict=True))


def _shown(line: str, cap: int = 80) -> str:
    """The first ``cap`` characters of ``line``'s tokens joined by single spaces (reads only what it shows)."""
    out: list[str] = []
    size = 0
    for m in _TOKEN.finditer(line):
        out.append(m.group()[: cap - size + 1])
        size += len(out[-1]) + 1
        if size > cap:
            break
    return " ".join(out)[:cap]


def first_difference(expected: str, actual: str) -> str:
    """A short, human description of where ``actual`` first departs from ``expected`` (for feedback/QA logs).

    It names line numbers and the *actual* token only, never the expected token, so it is safe for hidden tests.
    Linear in the texts, with the memory bound of :func:`compare_stdout`."""
    exp, act = _normal(expected), _normal(actual)
    n_exp = exp.count("\n") + 1 if exp else 0
    n_act = act.count("\n") + 1 if act else 0
    for n, (le, la) in enumerate(zip(_iter_lines(exp), _iter_lines(act), strict=False), 1):
        if n > min(n_exp, n_act):
            break
        if le != la and not _line_equal(le, la, None):
            return f"line {n} differs (got: {_shown(la)!r})"
    if n_act < n_exp:
        return f"output ended after {n_act} line(s); more expected"
    if n_act > n_exp:
        return f"{n_act - n_exp} extra line(s) after the expected output"
    return "outputs match"


def _num(x: Any) -> bool:
    return type(x) in (int, float)


def _strict_equal(expected: Any, actual: Any, atol: float = 0.0) -> bool:
    te, ta = type(expected), type(actual)
    if te is float and _num(actual):
        tol = atol if atol > 0 else 1e-6
        if math.isnan(expected) or math.isnan(actual):
            return math.isnan(expected) and math.isnan(actual)
        if math.isinf(expected) or math.isinf(actual):
            return expected == actual
        return abs(actual - expected) <= tol + 1e-7 * abs(expected)
    if te is complex and ta is complex:
        tol = atol if atol > 0 else 1e-6
        return abs(actual - expected) <= tol + 1e-7 * abs(expected)
    if te is not ta:
        return False
    if te in (list, tuple):
        return len(expected) == len(actual) and all(
            _strict_equal(e, a, atol) for e, a in zip(expected, actual, strict=True)
        )
    if te is dict:
        return expected.keys() == actual.keys() and all(_strict_equal(expected[k], actual[k], atol) for k in expected)
    return bool(expected == actual)


def is_floats(x: Any) -> bool:
    """EvalPlus's ``is_floats``: ``x`` is a float, or a non-empty list/tuple whose items are all floats."""
    if isinstance(x, float):
        return True
    if isinstance(x, list | tuple) and x:
        return all(isinstance(i, float) for i in x)
    return False


def values_equal(expected: Any, actual: Any, atol: float = 0.0, semantics: str = "evalplus") -> bool:
    """Compare a call test's return value with the expected one (rules in the module docstring).

    Args:
        expected / actual: plain Python values (parsed literals). atol: the test's absolute float tolerance (0 = the
            EvalPlus default: exact, or 1e-6 for float expectations). semantics: ``"evalplus"`` (default) or
            ``"strict"``.
    Never raises for odd values (a comparison that raises is a mismatch); ``ValueError`` for an unknown semantics."""
    if semantics == "strict":
        return _strict_equal(expected, actual, atol)
    if semantics != "evalplus":
        raise ValueError(f"values_equal: unknown semantics {semantics!r} (expected 'evalplus' or 'strict')")
    try:
        exact = bool(actual == expected)
    except Exception:  # e.g. a comparison that raises: EvalPlus's assert fails too
        exact = False
    if exact:
        return True
    if atol == 0 and is_floats(expected):
        atol = 1e-6
    if atol == 0 or type(actual) is not type(expected):
        return False
    if isinstance(expected, list | tuple) and len(actual) != len(expected):
        return False
    import numpy as np

    try:
        return bool(np.allclose(actual, expected, rtol=1e-07, atol=atol))
    except Exception:  # non-numeric values: numpy raises, EvalPlus's assert fails
        return False
