"""The ``repair`` stage end to end: params → samples-backend policy → real judge → metrics/repair/eval/ + traces."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rlvr.data.synthetic import SyntheticParams, completion_for, generate_from_params
from rlvr.eval.baseline import DatasetSelection
from rlvr.layout import read_metrics
from rlvr.repair.eval import RepairParams, default_model, select_repair_problems
from rlvr.report.collect import repair_report

ROOT = Path(__file__).resolve().parents[2]


def _stage():
    spec = importlib.util.spec_from_file_location("repair_stage", ROOT / "stages" / "repair.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


def test_default_model_prefers_last_trained(tmp_path):
    assert default_model(tmp_path) == "models/base"
    (tmp_path / "models" / "sft").mkdir(parents=True)
    assert default_model(tmp_path) == "models/sft"
    (tmp_path / "models" / "grpo" / "seed-1").mkdir(parents=True)
    assert default_model(tmp_path) == "models/grpo/seed-1"


def test_params_validation():
    with pytest.raises(ValueError, match="mode"):
        RepairParams(datasets=[], mode="chat")
    cfg = RepairParams(datasets=[DatasetSelection(name="x")], turns=4, visible_tests=2)
    assert cfg.env().turns == 4 and cfg.env().visible_tests == 2


def test_repair_stage_cli(tmp_path):
    syn = SyntheticParams(templates=["add", "mul"], n_tests=3)
    dev = [p for p in generate_from_params(syn) if p.split == "dev"][:3]
    assert select_repair_problems(tmp_path, DatasetSelection(name="synthetic", splits=["dev"], limit=3), syn) == dev
    samples = tmp_path / "s.jsonl"
    rows = []
    for i, p in enumerate(dev):  # problem 0 is fixed on turn 2, problem 1 never, problem 2 right at once
        answers = [[p.incorrect_solutions[0], p.solutions[0]], [p.incorrect_solutions[0]], [p.solutions[0]]][i]
        rows += [{"task_id": p.id, "solution": completion_for(a)} for a in answers]
    samples.write_text("\n".join(json.dumps(r) for r in rows))
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({
        "synthetic": syn.model_dump(),
        "repair": {"turns": 3, "backend": "samples", "samples": {"synthetic": str(samples)},
                   "datasets": [{"name": "synthetic", "splits": ["dev"], "limit": 3}]},
    }))
    metrics = tmp_path / "metrics" / "repair" / "eval"
    res = CliRunner().invoke(_stage(), ["--params", str(params), "--problems-dir", str(tmp_path / "none"),
                                        "--out-dir", str(tmp_path / "out"), "--metrics", str(metrics)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in metrics.iterdir()) == ["after"]  # the samples backend trains nothing: no before
    m = repair_report(read_metrics(tmp_path / "metrics" / "repair.json"))["synthetic"]
    assert m["recovery_rate"] == 0.5 and m["first_turn_failures"] == 2
    assert m["accepted_at_turn"] == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert m["mean_turns"] == pytest.approx((2 + 3 + 1) / 3) and m["sandbox_errors"] == 0
    protocol = repair_report(read_metrics(tmp_path / "metrics" / "repair.json"))["protocol"]
    assert protocol["backend"] == "samples" and protocol["enforce_eager"] is False and protocol["turns"] == 3
    traces = (tmp_path / "out" / "traces" / "synthetic.jsonl").read_text().splitlines()
    assert len(traces) == 3 and json.loads(traces[0])["accepted"] is True


def test_hf_backend_tiny_model_multi_turn(tmp_path, judge):
    from rlvr.data.synthetic import corpus_texts, generate
    from rlvr.generate import SamplingParams, make_generator
    from rlvr.model import build_tiny_model
    from rlvr.repair import EnvConfig, run_repair

    problems = generate(templates=["add"], max_constant=3, n_tests=3)
    model = build_tiny_model(tmp_path / "m", corpus_texts(problems), hidden_size=32, layers=1, heads=2, kv_heads=1,
                             intermediate_size=64)
    gen = make_generator("hf", model=str(model), device="cpu", batch_size=2, num_threads=1)
    m = run_repair(problems, gen, judge, EnvConfig(turns=2), SamplingParams(max_new_tokens=8),
                   tmp_path / "t.jsonl")
    assert m["n"] == 2 and len(m["accepted_at_turn"]) == 2 and m["first_turn_failures"] == 2
    rows = [json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert all(len(r["turns"]) == 2 and r["tokens"] > 0 for r in rows)  # a random model never passes: 2 turns
    assert all(r["messages"][2]["role"] == "user" for r in rows)  # feedback went back into the conversation


def test_verl_repair_without_steps_still_writes_its_declared_curves(tmp_path):
    """repair.train.max_steps: 0 under engine verl publishes the input model unchanged and, like the local engine,
    writes the curves dvc.yaml declares (metrics/repair/curves.tsv and its cost mirror), header only."""
    from rlvr.data.schema import write_problems
    from rlvr.stage import Params

    syn = SyntheticParams(templates=["add"], n_tests=2)
    write_problems(tmp_path / "problems" / "synthetic.jsonl", generate_from_params(syn))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "config.json").write_text("{}")
    (tmp_path / "partial.yaml").write_text("complete: false\n")  # engine verl needs a selected profile
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({
        "engine": "verl", "profile": "partial.yaml", "train": {"train_sets": ["synthetic/train"]},
        "repair": {"datasets": [{"name": "synthetic"}], "train": {"max_steps": 0, "warmup_epochs": 0}}}))
    spec = importlib.util.spec_from_file_location("repair_stage_t", ROOT / "stages" / "repair.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    curves = tmp_path / "metrics" / "repair" / "curves.tsv"
    out = mod._train(Params(params), Params(params).section("repair", RepairParams), tmp_path / "problems",
                     str(tmp_path / "in"), None, tmp_path / "models" / "repair", curves)
    assert out["skipped"] and (tmp_path / "models" / "repair" / "config.json").is_file()
    assert curves.read_text().startswith("step\treward_mean\t") and "judge_s" not in curves.read_text()
    cost_header = (tmp_path / "metrics" / "cost" / "repair" / "curves.tsv").read_text()
    assert cost_header.startswith("step\tjudge_s\tjudge_wall_s\tstep_s\t") and cost_header.count("\n") == 1
