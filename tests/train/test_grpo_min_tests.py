"""The RL floor ``manifests.grpo_min_tests`` holds under both engines (issue 42, item 2: a param an engine ignores is an
error, not a no-op).

verl trains on the manifests' parquet (``manifests.verl_train`` through :func:`rlvr.data.manifests.rl_eligible`); the
local (TRL) engine's GRPO stage applies that same filter to ``train.train_sets``, so with the same sets (the 7B
profiles) both engines train on the same problems; a floor that keeps none fails at start naming the key; the
embedded default's synthetic train problems all pass the floor."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from click.testing import CliRunner
from train_fixtures import FakeJudge, small_family

from rlvr.data.manifests import ManifestsParams, rl_eligible
from rlvr.data.schema import Problem, StdioTest, write_problems
from rlvr.data.synthetic import SyntheticParams, generate_from_params
from rlvr.layout import read_metrics

ROOT = Path(__file__).resolve().parents[2]


def _stage(name: str):
    spec = importlib.util.spec_from_file_location(f"stage_{name}", ROOT / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _p(pid: str, n_tests: int) -> Problem:
    return Problem(id=pid, source=pid.split("/")[0], split="train", statement=f"task {pid}",
                   tests=[StdioTest(stdin=str(i), stdout="1") for i in range(n_tests)], solutions=["print(1)"],
                   meta={"role": "train"})


#: 3 tests (below the floor), 5 and 8 (kept), 6 but flagged as contaminated
GOVERNED = [_p("lc/1", 3), _p("lc/2", 5), _p("lc/3", 8), _p("lc/4", 6)]


def _params(tmp_path: Path, min_tests: int, train_sets: list[str]) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({
        "engine": "local", "reward": "sparse", "seeds": [1],
        "manifests": {"verl_train": ["lc/train"], "grpo_min_tests": min_tests},
        "train": {"train_sets": train_sets, "eval_sets": []}, "grpo": {}, "baseline": {}}))
    return path


def _run_grpo(tmp_path, monkeypatch, seen: dict[str, list[str]], judge=FakeJudge):
    mod = _stage("grpo")
    monkeypatch.setattr(mod, "get_judge", judge)
    monkeypatch.setattr(mod, "stage_eval", lambda *a: {"lc": {}})
    monkeypatch.setattr(mod, "run_grpo", lambda cfg, common, model, ps, *a, **k: seen.update(grpo=[p.id for p in ps])
                        or {})
    return CliRunner().invoke(mod.main, ["--seed", "1", "--problems-dir", "gov/problems", "--model", "m"])


def test_local_grpo_trains_on_the_problems_verl_gets(tmp_path, monkeypatch):
    """Same sets, same floor, same contamination flags: the local stage's problems are the rows of the manifests'
    GRPO set and verl parquet, and its provenance ``rl_set`` holds the manifests' counts (on main the local stage
    trained on all four problems, the one with 3 tests and the flagged one included)."""
    monkeypatch.chdir(tmp_path)
    write_problems(tmp_path / "gov" / "problems" / "lc.jsonl", GOVERNED)
    (tmp_path / "gov" / "contamination.jsonl").write_text(json.dumps({"id": "lc/4", "flagged": True}) + "\n")
    params = _params(tmp_path, 5, ["lc/train"])
    res = CliRunner().invoke(_stage("manifests").main, ["--params", str(params), "--in-dir", "gov/problems",
                                                        "--out-dir", "data/manifests"])
    assert res.exit_code == 0, res.output
    verl_ids = [r["extra_info"]["id"] for r in pq.read_table("data/manifests/verl/train.parquet").to_pylist()]
    assert verl_ids == ["lc/2", "lc/3"]
    seen: dict[str, list[str]] = {}
    res = _run_grpo(tmp_path, monkeypatch, seen)
    assert res.exit_code == 0, res.output
    assert seen["grpo"] == verl_ids
    m = read_metrics(tmp_path / "metrics/grpo/seed-1.json")
    manifests = json.loads(Path("data/manifests/training_sets.json").read_text())["grpo"]
    assert m["rl_set"] == manifests
    assert {k: m["rl_set"][k] for k in ("problems", "kept", "too_few_tests", "contaminated", "min_tests")} == {
        "problems": 4, "kept": 2, "too_few_tests": 1, "contaminated": 1, "min_tests": 5}
    assert m["rl_share"] == {"rl_share": 1.0, "rl_prompts_eligible": 2, "rl_prompts": 2}


def test_local_grpo_floor_that_keeps_nothing_fails_at_start(tmp_path, monkeypatch):
    """The small family's problems carry 3 tests: a floor of 5 keeps none, so the stage stops before it opens the
    judge, with one line naming the key, its value and the sets (on main it trained on all of them)."""
    monkeypatch.chdir(tmp_path)
    write_problems(tmp_path / "gov" / "problems" / "synthetic.jsonl", small_family())

    def no_judge():
        raise AssertionError("the judge was opened")

    seen: dict[str, list[str]] = {}
    _params(tmp_path, 3, ["synthetic/train"])
    res = _run_grpo(tmp_path, monkeypatch, seen)
    assert res.exit_code == 0 and len(seen["grpo"]) == 12, res.output  # floor 3: every train problem
    _params(tmp_path, 5, ["synthetic/train"])
    seen.clear()
    res = _run_grpo(tmp_path, monkeypatch, seen, judge=no_judge)
    assert res.exit_code != 0 and not seen
    line = res.output.strip().splitlines()[-1]
    assert "manifests.grpo_min_tests=5" in line and "synthetic/train" in line and "at most 3" in line, res.output


def test_embedded_default_rl_set_survives_the_floor():
    """params.yaml (engine local) trains GRPO on the synthetic family's train split: every one of its problems has
    ``synthetic.n_tests`` tests, at least ``manifests.grpo_min_tests``, so the floor keeps the whole split."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    assert raw["engine"] == "local" and raw["train"]["train_sets"] == ["synthetic/train"]
    floor = ManifestsParams.model_validate(raw["manifests"]).grpo_min_tests
    train = [p for p in generate_from_params(SyntheticParams.model_validate(raw["synthetic"])) if p.split == "train"]
    kept, counts = rl_eligible(train, floor)
    assert len(train) == 42 and len(kept) == len(train) and counts["too_few_tests"] == 0
