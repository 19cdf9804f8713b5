"""The synthetic task family: determinism, splits, statements that carry the constant, correct references."""

from __future__ import annotations

import pytest

from rlvr.data.schema import StdioTest
from rlvr.data.synthetic import (
    SEPARATORS,
    TEMPLATES,
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
    per_constant = {name: len(SEPARATORS) if t.formats else 1 for name, t in TEMPLATES.items()}
    assert len(ps) == sum(per_constant.values()) * 20
    assert len({p.id for p in ps}) == len(ps)
    for name in TEMPLATES:
        mine = [p for p in ps if p.meta["template"] == name]
        assert sum(p.split == "dev" for p in mine) == 5 * per_constant[name]
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


def test_format_template_needs_the_feedback():
    # one statement, three separators: only the expected output (the judge's feedback) tells the instances apart
    ps = [p for p in generate() if p.meta["template"] == "repeat_format" and p.meta["constant"] == 4]
    assert [p.id for p in ps] == [f"synthetic/repeat_format-4-{f}" for f in SEPARATORS]
    assert len({p.statement for p in ps}) == 1 and "4 times" in ps[0].statement
    assert len({p.split for p in ps}) == 1  # a held-out constant holds out all its separators
    for p in ps:
        sep = SEPARATORS[p.meta["format"]]
        assert p.solutions == [f"print({sep!r}.join([input()] * 4))"]
        assert all(t.stdout == sep.join([t.stdin.strip()] * 4) + "\n" for t in p.tests)


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
