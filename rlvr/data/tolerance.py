"""Per-problem float tolerance declared by the problem statement (CodeContests / APPS / Codeforces phrasing).

Codeforces-style statements say how real-valued answers are checked, e.g. "Your answer will be considered correct if
its absolute or relative error does not exceed 10^{-6}" — the problem's testlib checker then compares every real token
with testlib's ``doubleCompare(expected, result, 1e-6)`` (testlib.h, github.com/MikeMirzayanov/testlib): accepted when
``|result - expected| <= eps`` *or* ``result`` lies within ``expected · (1 ± eps)``, i.e.
``|a - b| <= eps · max(1, |b|)`` — the formula such statements spell out ("\\frac{|a-b|}{max(1, |b|)} ≤ 10^{-6}"), and
the rule :func:`rlvr.judge.compare.compare_stdout` applies to ``Problem.float_tolerance``.

Rule (:func:`detect_float_tolerance`), applied to the statement text:

1. A *phrase* naming the error: ``absolute`` and/or ``relative`` (either order, joined by ``or``), optionally
   ``measure of the``, followed by ``error``, ``inaccuracy``, ``difference`` or ``precision``.
2. Within the same sentence after it (at most 250 characters, no full stop other than one inside a number) — or,
   failing that, within the 60 characters before it ("correct up to 10^{-6} relative or absolute precision") — a
   *value*: ``10^{-k}``, ``10^-k``, ``10^{−k}``, ``10<sup>-k</sup>``, ``1e-k`` / ``1E-k``, an optional mantissa
   (``5·10^{-7}``), or CodeContests' flattened rendering of a superscript, ``10 - k`` / ``10-k``.
3. Kind: both words → ``abs_or_rel`` (testlib semantics above); only ``absolute`` → ``abs``; only ``relative`` →
   ``rel``; "differs from the correct one by at most 10^{-9}" (no phrase, the value right after) → ``abs``. Every
   match of the statement must agree on value and kind, else the statement is ambiguous → ``None``.

Only ``abs_or_rel`` maps onto ``Problem.float_tolerance`` (:func:`statement_float_tolerance`): the schema carries one
number with the combined semantics, which would be looser than an absolute-only (for ``|b| > 1``) or relative-only
(for ``|b| < 1``) rule, so those statements declare nothing and stay exact (they are rare in the bundled sets).
Statements that ask for a fixed number of digits without an error bound ("print with five digits after the decimal
point") are not tolerance declarations either. Known limits: English only; a tolerance given in words ("one
millionth") is missed. On the bundled sets (``tests/data/test_tolerance.py``): CodeContests-300 declares 22
``abs_or_rel`` tolerances (1e-4 to 1e-9) and one ``abs`` (``442_b``, left exact); APPS-150 one ``abs_or_rel``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["FloatTolerance", "detect_float_tolerance", "statement_float_tolerance"]

_WORD = r"(?:absolute|relative)"
_PHRASE = re.compile(
    rf"\b(?P<words>{_WORD}(?:\s+(?:or|and/or)\s+{_WORD})?)\s+(?:measure\s+of\s+(?:the\s+)?)?"
    r"(?:errors?|inaccurac(?:y|ies)|differences?|precision)\b",
    re.IGNORECASE,
)
# a value: optional mantissa then 10^{-k} in its renderings, or 1e-k
_MANT = r"(?:(?P<mant>\d+(?:\.\d+)?)\s*[·*×x]\s*)?"
_VALUE = re.compile(
    rf"{_MANT}10\s*(?:\^\s*\{{?\s*-\s*(?P<k1>\d{{1,2}})\s*\}}?|<sup>\s*-\s*(?P<k2>\d{{1,2}})\s*</sup>"
    r"|\s*-\s*(?P<k3>\d{1,2})\b)"
    r"|\b(?P<emant>\d+(?:\.\d+)?)[eE]\s*-\s*(?P<k4>\d{1,2})\b"
)
_SENTENCE_END = re.compile(r"\.(?!\d)")
# "… if it differs from the correct one by at most 10^{-9}": an absolute bound
_DIFFERS = re.compile(
    r"\bdiffers?\s+from\s+the\s+(?:correct|right|jury'?s?)\s+(?:one|answer|value)\s+by\s+"
    r"(?:at\s+most|no\s+more\s+than|not\s+more\s+than|less\s+than)\s+",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class FloatTolerance:
    """A float tolerance declared by a statement.

    Attributes:
        value: the bound (e.g. ``1e-6``), dimensionless.
        kind: ``abs_or_rel`` (testlib ``doubleCompare``), ``abs`` (absolute only) or ``rel`` (relative only).
        evidence: the statement text it was read from (phrase through value), for audits.
    """

    value: float
    kind: Literal["abs_or_rel", "abs", "rel"]
    evidence: str


def _normalise(text: str) -> str:
    text = text.replace("\u2212", "-").replace("\u2013", "-").replace("\u2014", "-").replace("\u2009", " ")
    text = text.replace("\\cdot", "·").replace("\\times", "×").replace("$", "")
    return re.sub(r"\s+", " ", text)


def _value(m: re.Match[str]) -> float:
    k = m.group("k1") or m.group("k2") or m.group("k3")
    if k is not None:
        return float(m.group("mant") or 1) * 10.0 ** -int(k)
    return float(f"{m.group('emant')}e-{m.group('k4')}")


def detect_float_tolerance(statement: str) -> FloatTolerance | None:
    """The float tolerance a problem statement declares (rule in the module docstring), or ``None``.

    Args:
        statement: the problem statement (plain text or Markdown; LaTeX ``$…$`` and Unicode minus signs accepted).
    Returns:
        a :class:`FloatTolerance`, or ``None`` when the statement declares no tolerance, or declares several that
        disagree (value or kind). Never raises on any string.
    """
    text = _normalise(statement)
    found: list[FloatTolerance] = []
    for pm in _PHRASE.finditer(text):
        rest = text[pm.end() : pm.end() + 250]
        end = _SENTENCE_END.search(rest)
        window = rest[: end.start()] if end else rest
        vm = _VALUE.search(window)
        if vm is not None:
            evidence = text[pm.start() : pm.end() + vm.end()]
        else:  # "correct up to 10^{-6} relative or absolute precision": the value just before the phrase
            before = text[max(0, pm.start() - 60) : pm.start()]
            before = before[max((e.end() for e in _SENTENCE_END.finditer(before)), default=0) :]
            vms = list(_VALUE.finditer(before))
            if not vms:
                continue
            vm = vms[-1]
            evidence = before[vm.start() :] + text[pm.start() : pm.end()]
        words = pm.group("words").lower()
        kind: Literal["abs_or_rel", "abs", "rel"]
        if "absolute" in words and "relative" in words:
            kind = "abs_or_rel"
        elif "absolute" in words:
            kind = "abs"
        else:
            kind = "rel"
        value = _value(vm)
        if not 0.0 < value < 1.0:
            continue
        found.append(FloatTolerance(value, kind, evidence))
    for dm in _DIFFERS.finditer(text):
        vm = _VALUE.match(text, dm.end())
        if vm is not None and 0.0 < (value := _value(vm)) < 1.0:
            found.append(FloatTolerance(value, "abs", text[dm.start() : vm.end()]))
    if not found:
        return None
    if len({(f.value, f.kind) for f in found}) > 1:
        return None
    return found[0]


def statement_float_tolerance(statement: str) -> float | None:
    """``Problem.float_tolerance`` declared by ``statement``: the bound of an ``abs_or_rel`` declaration (the only kind
    :func:`rlvr.judge.compare.compare_stdout` implements, testlib ``doubleCompare``), else ``None`` (exact tokens).
    Never raises."""
    tol = detect_float_tolerance(statement)
    return tol.value if tol is not None and tol.kind == "abs_or_rel" else None
