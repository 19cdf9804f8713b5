"""bench/parity/published.py: a model's published EvalPlus verdicts are re-derived with ``rlvr judge`` and every
task whose statuses differ is listed with rlvr's verdict line."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("published", ROOT / "bench/parity/published.py")
published = importlib.util.module_from_spec(spec)
spec.loader.exec_module(published)

REVERSED = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b), reverse=True))\n"
SQUARE = "def is_not_prime(n):\n    return n * n\n"  # wrong on every input


def _published(repo: Path, rows: dict[str, tuple[str, str, str]], digest: str) -> None:
    """A checkout-style folder holding model ``m``'s ``mbpp`` files: task → (solution, base, plus)."""
    d = repo / published.PREFIX.format(model="m", dataset="mbpp")
    d.mkdir(parents=True)
    d.joinpath("generated.jsonl").write_text(
        "".join(json.dumps({"task_id": t, "solution": s}) + "\n" for t, (s, _, _) in rows.items()))
    ev = {t: [{"task_id": t, "solution": s, "base_status": b, "plus_status": p, "base_fail_tests": [],
               "plus_fail_tests": []}] for t, (s, b, p) in rows.items()}
    d.joinpath("generated_eval_results.json").write_text(json.dumps({"date": "2024-09-24", "hash": digest,
                                                                     "eval": ev}))


def test_pass_at_1_is_evalplus_two_columns():
    st = {"a": ("pass", "pass"), "b": ("pass", "fail"), "c": ("fail", "pass"), "d": ("fail", "fail")}
    assert published.pass_at_1(st) == {"base": 0.5, "plus": 0.25}


def test_a_file_of_another_release_is_refused(tmp_path):
    _published(tmp_path / "repo", {"Mbpp/3": (SQUARE, "fail", "fail")}, "0" * 32)
    msg = r"m/mbpp: published results are for dataset hash 0{32}, not mbppplus:v0\.1\.0"
    with pytest.raises(SystemExit, match=msg):
        published.compare("m", "mbpp", tmp_path / "repo", tmp_path / "work", "rlvr")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_disagreeing_tasks_are_listed_with_rlvrs_verdict(tmp_path):
    digest = published.DATASETS["mbpp"][1]
    # Mbpp/2 in another element order: pre-set-eq fails it (as the published tables do); the published row here
    # claims a pass, so it must come out as the one disagreement. Mbpp/3 agrees (fail, fail).
    _published(tmp_path / "repo", {"Mbpp/2": (REVERSED, "pass", "pass"), "Mbpp/3": (SQUARE, "fail", "fail")}, digest)
    rlvr = str(Path(sys.executable).with_name("rlvr"))
    got = published.compare("m", "mbpp", tmp_path / "repo", tmp_path / "work", rlvr)
    assert got["tasks"] == 2 and got["agreeing"] == 1
    assert got["pass@1_published"] == {"base": 0.5, "plus": 0.5} and got["pass@1_rlvr"] == {"base": 0.0, "plus": 0.0}
    (row,) = got["disagreeing"]
    assert row["task_id"] == "Mbpp/2" and row["published"] == ["pass", "pass"] and row["rlvr"] == ["fail", "fail"]
    assert row["rlvr_verdict"]["verdict"] == "wrong_answer"


def test_table_lists_each_disagreement_with_rlvrs_verdict():
    doc = {"runs": [{"model": "M", "dataset": "mbppplus:v0.1.0", "options": ["--evalplus-release", "pre-set-eq"],
                     "published_date": "2024-09-24", "tasks": 3, "agreeing": 2,
                     "pass@1_published": {"base": 1.0, "plus": 1.0}, "pass@1_rlvr": {"base": 1.0, "plus": 2 / 3},
                     "disagreeing": [{"task_id": "Mbpp/599", "published": ["pass", "pass"], "rlvr": ["pass", "fail"],
                                      "rlvr_verdict": {"verdict": "timeout", "passed": 89, "total": 91,
                                                       "message": "time limit exceeded"}}]}]}
    head, _, row = published.table(doc).splitlines()
    assert head.startswith("| published run | tasks | agreeing |")
    assert row.startswith("| M, `mbppplus:v0.1.0` --evalplus-release pre-set-eq (2024-09-24) | 3 | 2 | 1.000 / 1.000 "
                          "| 1.000 / 0.667 |")
    assert row.endswith("| Mbpp/599: pass/pass → pass/fail (timeout, 89/91) |")
