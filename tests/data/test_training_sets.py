"""Training sets from the governance outputs: SFT (judge-accepted references), DPO seed pairs (accepted vs rejected),
GRPO prompts (enough tests, not contaminated), Dev/Test isolation, and the manifests stage writing every engine file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from rlvr.data.manifests import build_dpo, build_grpo, build_sft
from rlvr.data.schema import Problem, StdioTest, from_ground_truth, write_problems

ROOT = Path(__file__).resolve().parents[2]


def _p(pid: str, n_tests: int = 3, role: str = "train", sols=("print(1)",), bad=()) -> Problem:
    return Problem(id=pid, source=pid.split("/")[0], split="train", statement=f"task {pid}",
                   tests=[StdioTest(stdin=str(i), stdout="1") for i in range(n_tests)], solutions=list(sols),
                   incorrect_solutions=list(bad), meta={"role": role})


def _row(pid: str, kind: str, i: int, ok: bool) -> dict:
    return {"id": pid, "kind": kind, "index": i, "verdict": "accepted" if ok else "wrong_answer", "accepted": ok,
            "pass_ratio": float(ok)}


PS = [_p("a/1", sols=("s0", "s1"), bad=("w0", "w1")), _p("a/2", sols=("r0",)), _p("a/3", n_tests=1), _p("a/4")]
ROWS = [_row("a/1", "solution", 0, False), _row("a/1", "solution", 1, True), _row("a/1", "incorrect", 0, True),
        _row("a/1", "incorrect", 1, False), _row("a/2", "solution", 0, False), _row("a/3", "solution", 0, True)]


def test_build_sft_only_accepted() -> None:
    pairs, n = build_sft(PS, ROWS)
    assert [(p.id, a) for p, a in pairs] == [("a/1", "```python\ns1\n```"), ("a/3", "```python\nprint(1)\n```")]
    assert n == {"problems": 4, "pairs": 2, "references_rejected": 2, "problems_unverified": 1,
                 "problems_without_accepted": 1}


def test_build_dpo_accepted_vs_rejected() -> None:
    pairs, n = build_dpo(PS, ROWS)
    assert [(p.id, c, r) for p, c, r in pairs] == [("a/1", "```python\ns1\n```", "```python\nw1\n```")]
    assert n == {"problems_with_incorrect": 1, "pairs": 1, "incorrect_accepted": 1, "problems_without_pair": 0}
    assert build_dpo([_p("b/1")], [])[0] == []  # no incorrect solutions (bundled CodeContests): no pairs


def test_build_grpo_filters() -> None:
    kept, n = build_grpo(PS, min_tests=2, flagged_ids={"a/4"})
    assert [p.id for p in kept] == ["a/1", "a/2"]
    assert {k: n[k] for k in ("problems", "kept", "too_few_tests", "contaminated", "min_tests")} == {
        "problems": 4, "kept": 2, "too_few_tests": 1, "contaminated": 1, "min_tests": 2}


def test_rl_rows_need_enough_tests_counted_per_source() -> None:
    """Issue 42: the RL rows' test-count floor (manifests.grpo_min_tests 5 since then), with per-source tests per
    problem before and after in training_sets.json."""
    ps = [_p("lc/1", n_tests=3), _p("lc/2", n_tests=5), _p("cc/1", n_tests=10), _p("cc/2", n_tests=6)]
    kept, n = build_grpo(ps, min_tests=5)
    assert [p.id for p in kept] == ["lc/2", "cc/1", "cc/2"] and n["too_few_tests"] == 1
    lc = n["by_source"]["lc"]
    assert lc["problems"] == 2 and lc["kept"] == 1
    assert lc["tests_per_problem_before"] == {"min": 3, "median": 5, "mean": 4.0, "max": 5}
    assert lc["tests_per_problem_after"] == {"min": 5, "median": 5, "mean": 5.0, "max": 5}
    assert n["by_source"]["cc"]["kept"] == 2


def test_params_yaml_rl_rows_need_five_tests() -> None:
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    assert params["manifests"]["grpo_min_tests"] == 5


@pytest.mark.parametrize("build", [lambda ps: build_sft(ps, []), lambda ps: build_dpo(ps, []),
                                   lambda ps: build_grpo(ps, 1)])
def test_eval_roles_never_enter_training_sets(build) -> None:
    with pytest.raises(ValueError, match="role 'test'"):
        build([_p("a/1"), _p("e/1", role="test")])


def test_manifests_stage_writes_engine_files(tmp_path) -> None:
    sys.path.insert(0, str(ROOT / "stages"))
    try:
        import manifests as man_stage
    finally:
        sys.path.pop(0)
    gov = tmp_path / "gov"
    write_problems(gov / "problems" / "a.jsonl", PS)
    write_problems(gov / "problems" / "d.jsonl", [_p("d/1", role="dev").model_copy(update={"split": "validation"})])
    (gov / "references.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (gov / "contamination.jsonl").write_text(json.dumps({"id": "a/4", "flagged": True}) + "\n")
    params = tmp_path / "params.yaml"
    params.write_text("manifests:\n  verl_train: [a/train]\n  verl_val: [d/validation]\n  sft_sets: [a/train]\n"
                      "  dpo_sets: [a/train]\n  grpo_min_tests: 2\n")
    r = CliRunner().invoke(man_stage.main, ["--params", str(params), "--in-dir", str(gov / "problems"),
                                            "--out-dir", str(tmp_path / "man")])
    assert r.exit_code == 0, r.output
    out = tmp_path / "man"
    sft = datasets.load_dataset("json", data_files=str(out / "sft" / "train.jsonl"), split="train")
    assert sft["id"] == ["a/1", "a/3"] and sft[0]["completion"] == [{"role": "assistant",
                                                                    "content": "```python\ns1\n```"}]
    assert sft[0]["prompt"][0]["role"] == "user"
    verl_sft = pq.read_table(out / "sft" / "train.parquet").to_pylist()
    assert [m["role"] for m in verl_sft[0]["messages"]] == ["user", "assistant"]
    dpo = [json.loads(line) for line in (out / "dpo" / "train.jsonl").read_text().splitlines()]
    assert len(dpo) == 1 and dpo[0]["chosen"][0]["content"] != dpo[0]["rejected"][0]["content"]
    grpo = [json.loads(line) for line in (out / "grpo" / "train.jsonl").read_text().splitlines()]
    assert [g["id"] for g in grpo] == ["a/1", "a/2"] and from_ground_truth(grpo[0]["ground_truth"]).tests == PS[0].tests
    verl = pq.read_table(out / "verl" / "train.parquet").to_pylist()
    assert [v["extra_info"]["id"] for v in verl] == ["a/1", "a/2"]
    summary = json.loads((out / "training_sets.json").read_text())
    assert summary["grpo"]["contaminated"] == 1 and summary["files"]["sft/train.jsonl"]["rows"] == 2
    assert len(summary["files"]["verl/val.parquet"]["sha256"]) == 64
    index = json.loads((out / "index.json").read_text())
    assert set(index) == {"a.train.manifest.jsonl", "d.validation.manifest.jsonl"}


def test_repair_rows_count_hidden_tests_after_the_split() -> None:
    """repair.train.min_hidden_tests counts what stays hidden once one test is shown (rlvr.repair.env.split_tests)."""
    from rlvr.data.manifests import min_tests_filter
    from rlvr.repair.env import split_tests

    ps = [_p("cc/1", n_tests=6), _p("cc/2", n_tests=5)]
    kept, n = min_tests_filter(ps, 5, lambda p: len(split_tests(p, 1)[1].tests))
    assert [p.id for p in kept] == ["cc/1"] and n["too_few_tests"] == 1
    assert n["by_source"]["cc"]["tests_per_problem_before"]["min"] == 4
    with pytest.raises(ValueError, match="min_tests=0"):
        min_tests_filter(ps, 0)
