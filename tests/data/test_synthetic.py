"""The synthetic task family: determinism, splits, statements that carry the constant, correct references."""

from __future__ import annotations

import pytest

from rlvr.data.schema import StdioTest
from rlvr.data.synthetic import (
    REPAIR_SPLIT,
    TEMPLATES,
    FeedbackConstants,
    SyntheticParams,
    completion_for,
    corpus_texts,
    generate,
    generate_from_params,
)
from rlvr.reward.extract import extract_code


def test_deterministic_given_seed():
    a, b = generate(seed=3), generate(seed=3)
    assert [p.model_dump() for p in a] == [p.model_dump() for p in b]
    c = generate(seed=4)
    assert [p.split for p in a] != [p.split for p in c] or [p.tests for p in a] != [p.tests for p in c]


def test_splits_hold_out_constants_per_template():
    ps = generate(seed=0, min_constant=2, max_constant=21, dev_fraction=0.25)
    assert len(ps) == len(TEMPLATES) * 20
    assert len({p.id for p in ps}) == len(ps)
    for name in TEMPLATES:
        mine = [p for p in ps if p.meta["template"] == name]
        assert sum(p.split == "dev" for p in mine) == 5
    # every dev constant is seen in train under some other template (dev tests composition, not new tokens)
    train_consts = {p.meta["constant"] for p in ps if p.split == "train"}
    assert {p.meta["constant"] for p in ps if p.split == "dev"} <= train_consts


def test_statement_and_solution_carry_the_constant():
    p = next(q for q in generate() if q.id == "synthetic/add-7")
    assert p.statement == "Read an integer n and print n + 7."
    assert p.solutions == ["print(int(input()) + 7)"]
    assert p.incorrect_solutions == ["print(int(input()) + 8)"]
    assert all(isinstance(t, StdioTest) for t in p.tests) and len(p.tests) == 5
    assert all(int(t.stdout) == int(t.stdin) + 7 for t in p.tests)


def test_feedback_template_hides_the_constant_from_the_statement():
    ps = [p for p in generate() if p.meta["template"] == "judge_number"]
    assert len(ps) == 8 and len({p.statement for p in ps}) == 1 and not any(ch.isdigit() for ch in ps[0].statement)
    # not single-turn training data: split "repair" (trained by the repair stage) or held-out "dev"
    assert {p.split for p in ps} == {REPAIR_SPLIT, "dev"} and all(p.meta["needs_feedback"] for p in ps)
    assert not any(p.meta.get("needs_feedback") for p in generate() if p.meta["template"] != "judge_number")
    for p in ps:  # the expected output is the constant: only the judge's feedback shows it
        assert p.solutions == [f"print({p.meta['constant']})"]
        assert all(t.stdout == f"{p.meta['constant']}\n" for t in p.tests)


def test_feedback_templates_can_have_their_own_wide_range():
    fb = FeedbackConstants(instances=50, min_constant=10, max_constant=999, dev=3)
    ps = generate(feedback=fb)
    mine = [p for p in ps if p.meta["template"] == "judge_number"]
    consts = [p.meta["constant"] for p in mine]
    assert len(mine) == 50 and consts == sorted(set(consts)) and all(10 <= c <= 999 for c in consts)
    assert sum(p.split == "dev" for p in mine) == 3 and {p.split for p in mine} == {REPAIR_SPLIT, "dev"}
    assert any(c >= 100 for c in consts)  # multi-digit targets: the copy is digit by digit
    # the other templates are untouched, and the draw is deterministic
    others = [p.model_dump() for p in ps if p.meta["template"] != "judge_number"]
    assert others == [p.model_dump() for p in generate() if p.meta["template"] != "judge_number"]
    assert [p.model_dump() for p in generate(feedback=fb)] == [p.model_dump() for p in ps]
    # instances = 0: the shared range, as before
    assert [p.model_dump() for p in generate(feedback=FeedbackConstants())] == [p.model_dump() for p in generate()]
    via_params = generate_from_params(SyntheticParams(feedback={"instances": 50, "min_constant": 10, "dev": 3}))
    assert [p.model_dump() for p in via_params] == [p.model_dump() for p in ps]
    with pytest.raises(ValueError, match=r"feedback\.instances=20 > 10 constants"):
        FeedbackConstants(instances=20, min_constant=0, max_constant=9)
    with pytest.raises(ValueError, match=r"feedback\.dev=5 must be < feedback\.instances=5"):
        FeedbackConstants(instances=5, dev=5)


def test_completion_format_is_extractable():
    sol = TEMPLATES["count"].solution.format(c=3)
    assert extract_code(completion_for(sol)).strip() == sol


def test_params_validation_and_corpus():
    with pytest.raises(ValueError, match="unknown"):
        SyntheticParams(templates=["nope"])
    with pytest.raises(ValueError, match="unknown"):
        generate(templates=["nope"])
    ps = generate_from_params(SyntheticParams(templates=["add", "mul"], max_constant=9))
    assert {p.meta["template"] for p in ps} == {"add", "mul"} and len(ps) == 16
    texts = corpus_texts(ps)
    assert len(texts) == 32 and any("```python" in t for t in texts)


def test_references_accepted_and_near_misses_rejected_by_the_judge(judge):
    ps = generate(seed=0)
    res = judge.judge_many([(p, p.solutions[0]) for p in ps])
    bad = [(p.id, r.verdict, r.message) for p, r in zip(ps, res, strict=True) if r.verdict != "accepted"]
    assert not bad
    wrong = judge.judge_many([(p, p.incorrect_solutions[0]) for p in ps])
    rejected = sum(r.verdict != "accepted" for r in wrong)
    assert rejected >= 0.9 * len(ps)  # `mod` near misses can coincide on small inputs; the rest must fail
