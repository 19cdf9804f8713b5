"""Float tolerance declared by problem statements (rlvr.data.tolerance) and its use by the loaders."""

from __future__ import annotations

import pytest

from rlvr.data.tolerance import detect_float_tolerance, statement_float_tolerance


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Your answer will be considered correct if its absolute or relative error does not exceed 10^{-6}.", 1e-6),
        ("The answer will be accepted if it has absolute or relative error not exceeding 10 - 6.", 1e-6),
        ("The answer is considered to be correct if its absolute or relative error does not exceed 10 - 9.", 1e-9),
        ("the relative or absolute error of each number doesn't exceed 10 - 9. Examples", 1e-9),
        ("Your answer must have an absolute or relative error less than 10 - 9.", 1e-9),
        ("The answer will be considered valid if its absolute or relative inaccuracy does not exceed 10 - 6.", 1e-6),
        ("The absolute or relative measure of the inaccuracy of your answer should not exceed 10 - 6.", 1e-6),
        ("Relative or absolute error should not be greater than 10 - 9.", 1e-9),
        ("All numbers should be correct up to $10^{-6}$ relative or absolute precision.", 1e-6),
        ("absolute or relative error does not exceed $10^{\u22124}$.", 1e-4),
        ("absolute or relative error at most 1e-7.", 1e-7),
        ("absolute or relative error does not exceed 5·10^{-7}.", 5e-7),
        ("absolute or relative error does not exceed 10<sup>-6</sup>.", 1e-6),
        (
            "Your answer is accepted if its absolute or relative error does not exceed 10^{-6}. Formally, ... "
            "\\frac{|a-b|}{max(1, |b|)} \u2264 10^{-6}.",
            1e-6,
        ),
    ],
)
def test_abs_or_rel_declarations_are_read(text: str, value: float) -> None:
    tol = detect_float_tolerance(text)
    assert tol is not None and tol.kind == "abs_or_rel"
    assert tol.value == pytest.approx(value, rel=1e-12)
    assert statement_float_tolerance(text) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Your answer is correct if its absolute error does not exceed 10^{-6}.", "abs"),
        ("The relative error of your answer must not exceed 10 - 6.", "rel"),
        ("The answer will be considered valid if it differs from the correct one by at most 10 - 6.", "abs"),
    ],
)
def test_absolute_only_or_relative_only_is_detected_but_not_declared(text: str, kind: str) -> None:
    tol = detect_float_tolerance(text)
    assert tol is not None and tol.kind == kind and tol.value == pytest.approx(1e-6)
    assert statement_float_tolerance(text) is None  # the schema's single number means abs-or-rel: would be looser


@pytest.mark.parametrize(
    "text",
    [
        "Print the coordinates of the required point with five digits after the decimal point.",
        "All coordinates do not exceed 10 - 8 by absolute value.",  # "absolute value", not an error bound
        "The absolute value of all coordinates does not exceed 104.",
        "Help him minimize the relative total frustration. Print 10 - 6 lines.",
        "Print the answer modulo 10^9 + 7.",
        "An error occurs when n = 10 - 6.",
        "",
    ],
)
def test_statements_without_a_tolerance_declare_none(text: str) -> None:
    assert detect_float_tolerance(text) is None
    assert statement_float_tolerance(text) is None


def test_conflicting_declarations_are_ambiguous() -> None:
    text = "Absolute or relative error up to 10^{-6} for the area. Absolute or relative error up to 10^{-9} for x."
    assert detect_float_tolerance(text) is None


def test_bundled_codecontests_and_apps_declare_statement_tolerance() -> None:
    from rlvr.data.loaders import load

    cc = {p.id: p for p in load("codecontests")}
    assert cc["codecontests/1086_b_minimum_diameter_tree_8860"].float_tolerance == pytest.approx(1e-6)
    assert cc["codecontests/261_b_maxim_and_restaurant_4932"].float_tolerance == pytest.approx(1e-4)
    assert cc["codecontests/540_d_bad_luck_island_6817"].float_tolerance == pytest.approx(1e-9)
    assert cc["codecontests/2_c_commentator_problem_4414"].float_tolerance is None  # fixed digits, no error bound
    assert cc["codecontests/1031_e_triple_flips_11983"].float_tolerance is None
    assert sum(p.float_tolerance is not None for p in cc.values()) == 22
    apps = {p.id: p for p in load("apps")}
    assert apps["apps/2162"].float_tolerance == pytest.approx(1e-6)
    assert sum(p.float_tolerance is not None for p in apps.values()) == 1
    # an explicit loader option still overrides the statement
    from rlvr.data.loaders import load_bundled

    over = {p.id: p for p in load_bundled("codecontests", options={"float_tolerance": 1e-3})}
    assert over["codecontests/1086_b_minimum_diameter_tree_8860"].float_tolerance == pytest.approx(1e-3)
