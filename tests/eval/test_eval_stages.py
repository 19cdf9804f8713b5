"""Stage scripts ``model`` and ``baseline``: --help, the non-tiny model reference, a tiny build, and a baseline run
through the samples backend with the real embedded judge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlvr.data.schema import AssertTest, Problem, write_problems
from rlvr.layout import read_metrics

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("stage", ["model", "baseline"])
def test_stage_help(stage):
    r = _run([str(ROOT / "stages" / f"{stage}.py"), "--help"], ROOT)
    assert r.returncode == 0, r.stderr
    assert "--params" in r.stdout


def _problems(tmp: Path) -> Path:
    pdir = tmp / "problems"
    ps = [Problem(id=f"humaneval/HumanEval/{i}", source="humaneval", split="test", statement=f"Add {i}.",
                  starter_code="def add(a, b):\n", entry_point="add",
                  tests=[AssertTest(code="assert candidate(1, 2) == 3")],
                  solutions=["def add(a, b):\n    return a + b\n"]) for i in range(3)]
    write_problems(pdir / "humaneval.jsonl", ps)
    return pdir


def test_model_stage_records_hub_id(tmp_path):
    (tmp_path / "params.yaml").write_text("model:\n  name: Qwen/Qwen2.5-Coder-7B-Instruct\n")
    r = _run([str(ROOT / "stages" / "model.py"), "--problems-dir", str(tmp_path / "none")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "models" / "base" / "model.json").read_text()) == {
        "name": "Qwen/Qwen2.5-Coder-7B-Instruct"}
    assert not (tmp_path / "models" / "base" / "config.json").exists()


@pytest.mark.slow
def test_model_stage_builds_tiny(tmp_path):
    pdir = _problems(tmp_path)
    (tmp_path / "params.yaml").write_text("model:\n  name: tiny\n  vocab_size: 320\n  hidden_size: 32\n")
    r = _run([str(ROOT / "stages" / "model.py"), "--problems-dir", str(pdir)], tmp_path)
    assert r.returncode == 0, r.stderr
    cfg = json.loads((tmp_path / "models" / "base" / "config.json").read_text())
    assert cfg["hidden_size"] == 32 and cfg["architectures"] == ["Qwen2ForCausalLM"]
    assert (tmp_path / "models" / "base" / "params.resolved.json").is_file()


@pytest.mark.slow
def test_baseline_stage_samples_backend_real_judge(tmp_path):
    pdir = _problems(tmp_path)
    samples = tmp_path / "samples.jsonl"
    samples.write_text("\n".join(json.dumps(x) for x in [
        {"task_id": "HumanEval/0", "completion": "    return a + b\n"},
        {"task_id": "HumanEval/1", "solution": "def add(a, b):\n    return a - b\n"},
        {"task_id": "HumanEval/2", "solution": "def add(a, b:\n"},
    ]) + "\n")
    (tmp_path / "params.yaml").write_text(
        "baseline:\n  backend: samples\n  datasets: [{name: humaneval}]\n"
        f"  samples: {{humaneval: {samples}}}\n")
    r = _run([str(ROOT / "stages" / "baseline.py"), "--problems-dir", str(pdir)], tmp_path)
    assert r.returncode == 0, r.stderr
    m = read_metrics(tmp_path / "metrics" / "baseline.json")
    v = {k: c["count"] for k, c in m["humaneval"]["verdicts"].items() if c["count"]}
    assert v == {"accepted": 1, "wrong_answer": 1, "syntax_error": 1}
    assert m["humaneval"]["accepted@1"] == pytest.approx(1 / 3)
    assert m["protocol"]["sampling"] == {"temperature": 0.0, "top_p": 1.0, "max_new_tokens": 128, "seed": 0}
    qa = tmp_path / "data" / "baseline" / "qa" / "humaneval"
    assert json.loads((qa / "wrong_answer.jsonl").read_text())["task_id"] == "humaneval/HumanEval/1"
