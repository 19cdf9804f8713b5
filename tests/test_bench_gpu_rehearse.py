"""bench/gpu/rehearse.py: the scripted programs, their marks, and the per-step comparison of a run's rollout dump
with the scores the script predicts."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from argparse import Namespace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("rehearse", ROOT / "bench/gpu/rehearse.py")
rehearse = importlib.util.module_from_spec(_spec)
sys.modules["rehearse"] = rehearse
_spec.loader.exec_module(rehearse)

REF = "def f(a, b):\n    if a < b:\n        return a + b\n    return 1\n"


def test_mutants_are_single_edits_that_parse_and_differ():
    ms = list(rehearse.mutants(REF))
    assert ms and all(ast.parse(m) for m in ms)
    assert ast.unparse(ast.parse(REF)) not in ms
    assert any("a <= b" in m for m in ms) and any("a - b" in m for m in ms) and any("return 2" in m for m in ms)
    assert list(rehearse.mutants("def (")) == []


def test_every_label_is_marked_and_the_mark_names_the_sample():
    for label in ("reference", "mutant", "syntax_error", "runtime_error", "timeout", "no_program"):
        text = rehearse.program(label, "mbpp/7", 3, REF, REF.replace("<", "<="))
        m = rehearse.MARK.search(text)
        assert (m["id"], m["n"], m["label"]) == ("mbpp/7", "3", label)
    assert "```" not in rehearse.program("no_program", "p", 0, REF, None)
    body = rehearse.program("syntax_error", "p", 0, REF, None).split("```python\n")[1].rstrip("`\n")
    try:
        ast.parse(body)
        raise AssertionError("the syntax_error program parses")
    except SyntaxError:
        pass


def test_grpo_kinds_have_the_documented_proportions():
    assert [len(v) for v in rehearse.GRPO_LABELS.values()] == [8, 8, 8]
    assert rehearse.GRPO_LABELS["mixed"].count("reference") == 3
    assert set(rehearse.GRPO_LABELS["all_fail"]).isdisjoint({"reference", "mutant"})


def test_collect_compares_each_sample_with_its_expected_score(tmp_path):
    """Two steps; one reference timed out on the node (a false timeout), one group is all-pass (zero variance)."""
    d = tmp_path / "grpo"
    d.mkdir()
    exp = {"kind": "grpo", "reward_mode": "dense", "problems": {
        "p/1": {"kind": "all_pass", "samples": [{"n": n, "label": "reference", "score": 1.0} for n in range(2)]},
        "p/2": {"kind": "mixed", "samples": [{"n": 0, "label": "reference", "score": 1.0},
                                             {"n": 1, "label": "mutant", "score": 0.5}]}}}
    (d / "expected.json").write_text(json.dumps(exp))
    run = tmp_path / "run"
    (run / "rollouts").mkdir(parents=True)

    def row(pid, n, label, score, status):
        return json.dumps({"output": rehearse.program(label, pid, n, REF, REF), "score": score, "status": status})

    (run / "rollouts" / "1.jsonl").write_text("\n".join([
        row("p/1", 0, "reference", 1.0, "accepted"), row("p/1", 1, "reference", 1.0, "accepted"),
        row("p/2", 0, "reference", 0.0, "timeout"), row("p/2", 1, "mutant", 0.5, "wrong_answer")]) + "\n")
    (run / "rollouts" / "2.jsonl").write_text(json.dumps({"output": "no mark here", "score": 0.0}) + "\n")
    # verl's file logger: step 1 evicted 2 zero-variance groups; a line cut by the run's end is skipped
    (run / "logs").mkdir()
    (run / "logs" / "attempt-1.jsonl").write_text(json.dumps({"step": 1, "data": {
        "training/filter_groups/evicted_samples": 2.0, "timing_s/step": 80.0, "timing_s/gen": 66.0}})
        + "\n{\"step\": 2, \"da")
    out = tmp_path / "r.json"
    rehearse.cmd_collect(Namespace(dir=str(d), run=str(run), out=str(out)))
    res = json.loads(out.read_text())
    s1, s2 = res["steps"]
    assert (s1["step"], s1["samples"], s1["unmatched"]) == (1, 4, 0)
    assert s1["reward_expected"] == (1 + 1 + 1 + 0.5) / 4 and s1["reward_observed"] == (1 + 1 + 0 + 0.5) / 4
    assert s1["zero_variance_share"] == 0.5 and s1["groups"] == 2
    assert (s1["groups_evicted"], s1["zero_variance_share_drawn"], s1["step_s"], s1["gen_s"]) == (2.0, 0.5, 80.0, 66.0)
    assert s2["groups_evicted"] is None and "step_s" not in s2
    assert res["scores_by_label"] == {"reference": {"1": 2, "0": 1}, "mutant": {"0.5": 1}}
    assert (s2["samples"], s2["unmatched"]) == (1, 1)
    assert res["false_timeouts"] == 1
    assert res["below_expected"] == [{"step": 1, "id": "p/2", "n": 0, "label": "reference", "expected": 1.0,
                                      "observed": 0.0, "status": "timeout"}]


def test_judge_log_groups_compare_multisets_and_count_false_timeouts(tmp_path):
    """The judge log has no rollout_n: groups compare as multisets; a timeout on a sample the script did not make an
    infinite loop is false, the script's own infinite loops are not."""
    exp = {"kind": "grpo", "reward_mode": "dense", "problems": {
        "p/1": {"kind": "mixed", "samples": [{"n": 0, "score": 1.0, "status": "accepted"},
                                             {"n": 1, "score": 0.0, "status": "timeout"}]},
        "p/2": {"kind": "all_pass", "samples": [{"n": 0, "score": 1.0}, {"n": 1, "score": 1.0}]}}}
    (tmp_path / "judge").mkdir()
    lines = [{"t": 1.0, "id": "p/1", "status": "timeout", "pass_ratio": 0.0, "judge_s": 45.0},
             {"t": 2.0, "id": "p/1", "status": "accepted", "pass_ratio": 1.0, "judge_s": 0.1},
             {"t": 3.0, "id": "p/2", "status": "accepted", "pass_ratio": 1.0, "judge_s": 0.1},
             {"t": 4.0, "id": "p/2", "status": "timeout", "pass_ratio": 0.0, "judge_s": 30.0},
             {"t": 5.0, "id": "x/9", "status": "syntax_error", "pass_ratio": 0.0, "judge_s": 0.0}]
    (tmp_path / "judge" / "w1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    g = rehearse.judge_log_groups(tmp_path, exp)
    assert (g["samples"], g["problems"], g["unscripted_samples"]) == (5, 3, 1)
    assert g["groups_as_expected"] == 1 and [d["id"] for d in g["groups_differing"]] == ["p/2"]
    assert (g["timeouts"], g["timeouts_scripted"], g["false_timeouts"]) == (2, 1, 1)
    assert g["judge_s"]["max"] == 45.0 and g["log_span_s"] == 4.0


def test_the_script_draws_only_problems_inside_the_runs_rl_share(monkeypatch):
    """A lent profile at ``train.rl_share`` 0.5 trains on the hashed half of the RL prompts: the script must hold
    those, not problems the run never draws."""
    from types import SimpleNamespace

    import rlvr.config
    import rlvr.train.local.common
    from rlvr.train.overlap import in_rl_share

    probs = [SimpleNamespace(id=f"mbpp/{i}", source="mbpp", solutions=[REF], tests=[0] * 5) for i in range(40)]
    share = {"v": 0.5}
    monkeypatch.setattr(rlvr.config, "load_params", lambda path: {
        "manifests": {"verl_train": ["mbpp/train"]}, "train": {"train_sets": ["mbpp/train"], "rl_share": share["v"]}})
    monkeypatch.setattr(rlvr.train.local.common, "load_problem_sets", lambda d, sets: list(probs))
    half = rehearse._problems("params.yaml", "grpo", 40, 5, "unused")
    assert half and {p.id for p in half} == {p.id for p in probs if in_rl_share(p.id, 0.5)} != {p.id for p in probs}
    share["v"] = 1.0
    assert len(rehearse._problems("params.yaml", "grpo", 40, 5, "unused")) == 40


def test_a_scripted_reference_fits_its_turn_budget():
    """The repair turn cap (768 tokens at the 7B profiles) bounds the references a repair script may use: the
    2026-11-29 sitting cut a 1,999-character reference there and its episodes scored 0 against an expected pass."""
    assert rehearse.max_reference_chars({"repair": {"turn_tokens": 768}}, "repair") == 768 * 2 - 200
    assert rehearse.max_reference_chars({"repair": {"sampling": {"max_new_tokens": 512}}}, "repair") == 824
    assert rehearse.max_reference_chars({}, "grpo") == 3000  # 2,048 x 2 - 200, capped at 3,000
    assert rehearse.max_reference_chars({"verl": {"max_response_length": 1024}}, "grpo") == 1848
    assert 1999 > rehearse.max_reference_chars({"repair": {"turn_tokens": 768}}, "repair")
