"""run_governance end to end on fixtures: planted bad data, exact and near duplicates, n-gram contamination and
test-input leakage are removed and listed; a clean fixture loses nothing; reference verification; params knobs."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from rlvr.data.audit import audit_markdown, contamination_rows, governance_metrics, near_dup_rows
from rlvr.data.governance import GovernanceParams, run_governance, validate_problems, verify_references
from rlvr.data.schema import Problem, StdioTest

VOCAB = [f"w{i}" for i in range(20000)]


def _text(rng: random.Random, n: int = 60) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def _p(pid: str, role: str, statement: str, split: str = "s", tests=None, solutions=None, incorrect=None) -> Problem:
    src = pid.split("/")[0]
    return Problem(id=pid, source=src, split=split, statement=statement,
                   tests=tests if tests is not None else [StdioTest(stdin="1", stdout="1")],
                   solutions=solutions or [], incorrect_solutions=incorrect or [], meta={"role": role})


def _cfg(**kw) -> GovernanceParams:
    base = {"datasets": [{"name": "x"}], "compute_expected": False, "references": {"verify": False}}
    base.update(kw)
    return GovernanceParams.model_validate(base)


def _clean(seed: int = 0) -> list[Problem]:
    rng = random.Random(seed)
    ev = [_p(f"ev/{i}", "test", _text(rng), split="test",
             tests=[StdioTest(stdin=f"{i} {_text(rng, 5)}", stdout="1"),
                    StdioTest(stdin=f"{i + 1} {_text(rng, 5)}", stdout="2")],
             solutions=[f"print({_text(rng, 20)!r})"]) for i in range(20)]
    dev = [_p(f"dv/{i}", "dev", _text(rng), split="validation") for i in range(10)]
    tr = [_p(f"tr/{i}", "train", _text(rng), split="train", solutions=[f"print({_text(rng, 20)!r})"],
             tests=[StdioTest(stdin=f"train {i} {_text(rng, 5)}", stdout="0")]) for i in range(60)]
    return ev + dev + tr


def _planted() -> tuple[list[Problem], dict[str, str]]:
    """Clean fixture + one planted case per audit; returns (problems, expected removed id -> step)."""
    ps = _clean()
    ev0, ev1, ev2, ev3 = ps[0], ps[1], ps[2], ps[3]
    rng = random.Random(99)
    words = ev1.statement.split()
    words[30] = "changed"
    ps += [
        _p("tr/exact", "train", ev0.statement.upper() + "  ", split="train"),  # exact (normalised) copy of an eval
        _p("tr/near", "train", " ".join(words), split="train"),  # 1 of 60 words changed: Jaccard 0.9
        _p("tr/ngram", "train", _text(rng, 30) + " " + " ".join(ev2.statement.split()[10:24]) + " " + _text(rng, 30),
           split="train"),  # one 14-word span of an eval statement: two shared 13-grams
        _p("tr/sol", "train", _text(rng), split="train", solutions=[ev2.solutions[0]]),  # eval solution copied
        _p("tr/leak", "train", _text(rng), split="train",
           tests=[StdioTest(stdin=t.stdin, stdout="x") for t in ev3.tests]),  # eval test inputs in train tests
        _p("tr/notests", "train", _text(rng), split="train", tests=[]),
        _p("tr/empty", "train", "   ", split="train"),
        _p("tr/bad\udc80", "train", _text(rng), split="train"),
        _p("tr/x", "train", _text(rng), split="train").model_copy(update={"meta": {"role": "train",
                                                                                   "repeat_of": "tr/0"}}),
    ]
    expected = {"tr/exact": "exact_dedup", "tr/near": "near_dedup", "tr/ngram": "contamination",
                "tr/sol": "contamination", "tr/leak": "contamination", "tr/notests": "validate",
                "tr/empty": "validate", "tr/bad\\udc80": "validate", "tr/x": "validate"}
    return ps, expected


def test_clean_fixture_no_false_positives() -> None:
    ps = _clean()
    kept, rep = run_governance(ps, _cfg())
    assert [p.id for p in kept] == [p.id for p in ps]
    assert rep["removed"] == []
    m = governance_metrics(rep, {})
    assert m["bad_data"] == m["exact_dups"] == m["near_dups"] == m["contamination_flagged"] == 0
    assert m["contamination_input_leaks"] == 0 and near_dup_rows(rep) == []


def test_planted_removed_and_listed() -> None:
    ps, expected = _planted()
    origin = {p.id: f"raw/{p.source}.jsonl" for p in ps}
    kept, rep = run_governance(ps, _cfg(), origin_of=origin)
    removed = {r["id"]: r for r in rep["removed"]}
    assert {k: v["step"] for k, v in removed.items()} == expected  # exactly the planted ones, nothing else
    assert {p.id for p in kept} == {p.id for p in ps} - {p.id for p in ps if p.id.encode("utf-8", "backslashreplace")
                                                         .decode() in expected}
    assert removed["tr/exact"]["duplicate_of"] == "ev/0" and removed["tr/near"]["duplicate_of"] == "ev/1"
    assert removed["tr/ngram"]["reason"] == "contamination: ngram_13" and removed["tr/ngram"]["duplicate_of"] == "ev/2"
    assert "test_input_leak" in removed["tr/leak"]["reason"] and removed["tr/leak"]["duplicate_of"] == "ev/3"
    assert removed["tr/notests"]["reason"] == "no_tests" and removed["tr/empty"]["reason"] == "empty_statement"
    assert removed["tr/bad\\udc80"]["reason"] == "non_utf8_text: id"
    assert removed["tr/x"]["reason"] == "duplicate_id" and removed["tr/x"]["duplicate_of"] == "tr/0"
    assert all(r["file"] == "raw/tr.jsonl" for r in removed.values())
    clusters = near_dup_rows(rep)
    assert len(clusters) == 1 and clusters[0]["representative"] == "ev/1" and clusters[0]["dropped"] == ["tr/near"]
    rows = {r["id"]: r for r in contamination_rows(rep)}
    assert rows["tr/ngram"]["flagged"] and rows["tr/ngram"]["hits"][0]["eval_set"] == "ev/test"
    hit13 = next(h for h in rows["tr/ngram"]["hits"] if h["n"] == 13)
    assert hit13["shared"] == 2 and hit13["eval_id"] == "ev/2" and hit13["sample"]
    assert rows["tr/sol"]["hits"][0]["train_fields"] == ["solutions"]
    m = governance_metrics(rep, {})
    assert (m["bad_data"], m["exact_dups"], m["near_dups"], m["contamination_flagged"]) == (4, 1, 1, 3)
    assert m["contamination_flagged/ev/test"] == 3 and m["contamination_input_leaks"] == 1
    assert all(isinstance(v, int | float) for k, v in m.items() if not k.endswith("_per_dataset"))
    md = audit_markdown(rep, [{"dataset": "x", "path": "raw/x.jsonl", "sha256": "ab" * 32}], _cfg(),
                        outputs=[{"path": "problems/x.jsonl", "sha256": "cd" * 32}], versions={"datasketch": "1"})
    for section in ("## Thresholds", "## Library versions", "## Input files", "## Output files", "## Bad data",
                    "## Exact duplicates", "## Near duplicates", "## Cross-split collisions", "## Contamination",
                    "### Test-input leakage", "## Every removed problem", "data/manifests/index.json"):
        assert section in md, section
    assert "| ev/test | tr/train | 1 | 1 |" in md  # exact group + near pair between an eval and a train split


def test_eval_collisions_reported_not_removed() -> None:
    ps = _clean()
    copy = ps[0].model_copy(update={"id": "ev2/0", "source": "ev2"})
    kept, rep = run_governance([*ps, copy], _cfg())
    assert len(kept) == len(ps) + 1 and rep["removed"] == []
    assert rep["audits"]["exact_dedup"]["counts"]["groups_cross_source"] == 1
    assert rep["audits"]["near_dedup"]["counts"]["cross_place_clusters"] == 1


def test_near_dup_threshold_is_the_knob() -> None:
    ps, _ = _planted()
    assert _cfg().near_dup_config().threshold == 0.7
    _, rep = run_governance(ps, _cfg(near_dup_threshold=0.95))
    assert "tr/near" not in {r["id"] for r in rep["removed"] if r["step"] == "near_dedup"}
    with pytest.raises(ValidationError, match="near_dup_threshold"):
        _cfg(near_dup={"threshold": 0.5})
    with pytest.raises(ValidationError, match="raise num_perm"):
        _cfg(near_dup_threshold=0.999)


def test_validate_problems_lists_every_reason() -> None:
    ps = [_p("a/1", "train", "ok"), _p("a/1", "train", "again"), _p("a/2", "train", ""),
          _p("a/3", "train", "s", tests=[]), _p("a/4", "train", "s", solutions=["x = '\udcff'"])]
    kept, rep = validate_problems(ps)
    assert [p.id for p in kept] == ["a/1"]
    assert [(d["id"], d["reason"]) for d in rep["dropped"]] == [
        ("a/1", "duplicate_id"), ("a/2", "empty_statement"), ("a/3", "no_tests"),
        ("a/4", "non_utf8_text: solutions[0]")]
    assert rep["counts"] == {"dropped": 4, "bad_duplicate_id": 1, "bad_empty_statement": 1, "bad_no_tests": 1,
                             "bad_non_utf8_text": 1}


class FakeJudge:
    """judge_many: accepted iff the program text contains 'good'."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def judge_many(self, items):
        self.seen += [s for _, s in items]
        return [SimpleNamespace(verdict="accepted" if "good" in s else "wrong_answer",
                                pass_ratio=1.0 if "good" in s else 0.0) for _, s in items]


def test_verify_references_and_run_governance_wiring() -> None:
    ps = [_p("t/1", "train", "a", solutions=["good1", "bad1", "good2"], incorrect=["bad2", "good3"]),
          _p("t/2", "train", "b"), _p("e/1", "test", "c", solutions=["good"])]
    cfg = _cfg(references={"verify": True, "max_solutions": 2})
    rows, rep = verify_references(ps, FakeJudge(), cfg.references)
    assert [(r["id"], r["kind"], r["index"], r["accepted"]) for r in rows] == [
        ("t/1", "solution", 0, True), ("t/1", "solution", 1, False), ("t/1", "incorrect", 0, False),
        ("t/1", "incorrect", 1, True)]  # max_solutions=2; test-role e/1 not judged
    assert rep["counts"]["references_rejected"] == 1 and rep["counts"]["incorrect_accepted"] == 1
    assert rep["counts"]["problems_without_solution"] == 1 and rep["rejected"] == [
        {"id": "t/1", "index": 1, "verdict": "wrong_answer"}]
    _, full = run_governance(ps, cfg, judge=FakeJudge())
    assert full["reference_rows"] == rows and governance_metrics(full, {})["references_accepted"] == 1
    with pytest.raises(ValueError, match=r"references\.verify needs a judge"):
        run_governance(ps, cfg)
