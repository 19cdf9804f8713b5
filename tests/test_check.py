"""``rlvr check`` (rlvr.check): params against every section's schema, dataset names, the model id, the judge and
GPUs; one line per problem with the nearest valid name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rlvr.check import SCALARS, SECTIONS, check_judge, run_checks
from rlvr.cli import main
from rlvr.config import SECTION_NAMES
from rlvr.judge.verdict import JudgeResult

ROOT = Path(__file__).resolve().parents[1]
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def _write(tmp: Path, edit=None) -> Path:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    if edit is not None:
        edit(params)
    p = tmp / "params.yaml"
    p.write_text(yaml.safe_dump(params, sort_keys=False))
    return p


def test_every_section_has_a_schema_and_params_yaml_passes(tmp_path: Path) -> None:
    assert set(SECTIONS) | set(SCALARS) == set(SECTION_NAMES)
    assert set(PARAMS) <= set(SECTION_NAMES)  # a new params section must be registered (and checked)
    report = run_checks(ROOT / "params.yaml", judge=False, lookup=lambda name: True, gpu_counter=lambda: 0)
    assert report.ok, report.errors
    assert "GPUs: not needed" in report.passed and "model: tiny" in report.passed


def test_typos_are_one_line_each_with_the_nearest_valid_name(tmp_path: Path) -> None:
    def edit(p: dict) -> None:
        p["baselin"] = {"n": 2}
        p["baseline"]["qa_per_verdikt"] = p["baseline"].pop("qa_per_verdict")
        p["governance"]["datasets"][0]["name"] = "leetcod"
        p["eval"]["datasets"][1]["name"] = "mbpp_rg"
        p["train"]["train_sets"] = ["synthetik/train"]
        p["grpo"]["learning_rat"] = 0.1

    path = _write(tmp_path, edit)
    report = run_checks(path, judge=False, lookup=lambda name: True, gpu_counter=lambda: 0)
    assert sorted(report.errors) == sorted([
        f"{path}: baselin: unknown params section (did you mean 'baseline'?)",
        f"{path}: baseline.qa_per_verdikt: Extra inputs are not permitted (did you mean 'qa_per_verdict'?)",
        f"{path}: grpo.learning_rat: Extra inputs are not permitted (did you mean 'learning_rate'?)",
        f"{path}: governance.datasets[0].name: unknown bundled dataset 'leetcod' (did you mean 'leetcode'?)",
        f"{path}: eval.datasets[1].name: dataset 'mbpp_rg' is not written by governance (governance.datasets) "
        "(did you mean 'mbpp_reg'?)",
        f"{path}: train.train_sets[0]: dataset 'synthetik' is not written by governance (governance.datasets) "
        "(did you mean 'synthetic'?)",
    ])
    res = CliRunner().invoke(main, ["check", "--params", str(path), "--no-judge"])
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert lines[-1] == "rlvr check: 6 problem(s)" and "Traceback" not in res.output


def test_model_id_local_folder_or_hub(tmp_path: Path) -> None:
    def with_model(name: str):
        return _write(tmp_path, lambda p: p["model"].update(name=name))

    path = with_model("Qwen/Qwen2.5-Coder-7B-Instrukt")
    report = run_checks(path, judge=False, lookup=lambda name: False, gpu_counter=lambda: 0)
    assert report.errors == [f"{path}: model.name: 'Qwen/Qwen2.5-Coder-7B-Instrukt' not found on the HuggingFace Hub "
                             "nor as a local folder (private: set HF_TOKEN)"]
    report = run_checks(path, judge=False, lookup=lambda name: None, gpu_counter=lambda: 0)
    assert report.ok and report.notes == ["model.name 'Qwen/Qwen2.5-Coder-7B-Instrukt': the HuggingFace Hub is not "
                                          "reachable, the id was not checked"]
    folder = tmp_path / "my-model"
    folder.mkdir()
    path = with_model(str(folder))
    assert "not a model folder" in run_checks(path, judge=False, gpu_counter=lambda: 0).errors[0]
    (folder / "config.json").write_text("{}")
    assert run_checks(path, judge=False, lookup=lambda name: pytest.fail("no Hub lookup for a local folder"),
                      gpu_counter=lambda: 0).ok
    path = with_model("./no/such/folder")
    assert run_checks(path, judge=False, gpu_counter=lambda: 0).errors == [
        f"{path}: model.name: local folder './no/such/folder' not found"]


def _verl(p: dict) -> None:
    p.update(engine="verl")
    p["train"]["train_sets"] = list(reversed(p["manifests"]["verl_train"]))  # the same sets: order is free


def test_gpus_needed_by_the_verl_engine_or_vllm(tmp_path: Path) -> None:
    path = _write(tmp_path, _verl)
    report = run_checks(path, judge=False, lookup=lambda name: True, gpu_counter=lambda: 0)
    assert report.errors == [f"{path}: engine: needs GPUs (engine: verl) but nvidia-smi lists none"]
    assert run_checks(path, judge=False, lookup=lambda name: True, gpu_counter=lambda: 8).ok
    path = _write(tmp_path, lambda p: p["baseline"].update(backend="vllm"))
    assert "baseline.backend: vllm" in run_checks(path, judge=False, gpu_counter=lambda: 0).errors[0]


def test_verl_grpo_sets_must_be_the_local_engines(tmp_path: Path) -> None:
    """Under verl, GRPO trains on manifests.verl_train's parquet: a train.train_sets naming other sets would be
    ignored, so the two engines would train on different problems (the embedded default's synthetic/train)."""
    path = _write(tmp_path, lambda p: p.update(engine="verl"))
    report = run_checks(path, judge=False, lookup=lambda name: True, gpu_counter=lambda: 8)
    assert report.errors == [
        f"{path}: train.train_sets ['synthetic/train'] differs from manifests.verl_train ['leetcode/train', "
        "'codecontests/train', 'mbpp/train']: under engine verl GRPO trains on manifests.verl_train's parquet and "
        "ignores train.train_sets; make them name the same sets (the 7B profiles do)"]
    assert run_checks(_write(tmp_path), judge=False, lookup=lambda name: True, gpu_counter=lambda: 0).ok  # local


class _Judge:
    def __init__(self, verdict: str) -> None:
        self.verdict, self.closed = verdict, False

    def judge_many(self, items):
        return [JudgeResult(verdict=self.verdict, passed=0, total=1, pass_ratio=0.0, judge_s=0.0,
                            message="sandbox failure: boom") for _ in items]

    def close(self) -> None:
        self.closed = True


def test_judge_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLVR_SANDBOX_URL", raising=False)
    j = _Judge("sandbox_error")
    assert check_judge(lambda: j) == ["the judge (embedded) does not work: a trivial program was judged sandbox_error "
                                      "(sandbox failure: boom)"]
    assert j.closed
    assert check_judge(lambda: _Judge("accepted")) == []
    monkeypatch.setenv("RLVR_BWRAP", "/no/such/bwrap")
    assert "bubblewrap (/no/such/bwrap) not found" in check_judge()[0]


def test_cli_bad_yaml_is_one_line_and_ok_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLVR_DEBUG", raising=False)
    bad = tmp_path / "params.yaml"
    bad.write_text("baseline:\n  n: [1,\n")
    res = CliRunner().invoke(main, ["check", "--params", str(bad), "--no-judge"])
    assert res.exit_code == 1
    assert res.output.splitlines()[0].startswith(f"{bad}:3:1: invalid YAML: ")
    monkeypatch.setattr("rlvr.model.params.hub_lookup", lambda name, timeout_s=10.0: True)
    res = CliRunner().invoke(main, ["check", "--params", str(ROOT / "params.yaml"), "--no-judge"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("rlvr check: ok (params: every section valid; datasets: every name known")


def _stage(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"stage_{name}_check", ROOT / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_model_stage_refuses_an_unresolvable_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("rlvr.model.params.hub_lookup", lambda name, timeout_s=10.0: False)
    (tmp_path / "params.yaml").write_text("model: {name: Qwen/Qwen2.5-Coder-7B-Instrukt}\n")
    res = CliRunner().invoke(_stage("model").main, ["--problems-dir", str(tmp_path)])
    assert res.exit_code == 1
    assert res.output.strip() == ("params.yaml: model.name: 'Qwen/Qwen2.5-Coder-7B-Instrukt' not found on the "
                                  "HuggingFace Hub nor as a local folder (private: set HF_TOKEN)")
    assert not (tmp_path / "models").exists()


def test_baseline_finds_every_dataset_before_it_judges_any(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from rlvr.data.schema import Problem, StdioTest, write_problems

    monkeypatch.chdir(tmp_path)
    write_problems(tmp_path / "problems" / "toy.jsonl", [
        Problem(id="toy/0", source="toy", split="dev", statement="print 1", tests=[StdioTest(stdin="", stdout="1")])])
    (tmp_path / "s.jsonl").write_text(json.dumps({"task_id": "toy/0", "solution": "print(1)"}) + "\n")
    (tmp_path / "params.yaml").write_text(
        "baseline: {backend: samples, datasets: [{name: toy}, {name: tyo}], samples: {toy: s.jsonl, tyo: s.jsonl}}\n")
    mod = _stage("baseline")
    judged = []
    monkeypatch.setattr(mod, "get_judge", lambda: judged.append(1) or _Judge("accepted"))
    res = CliRunner().invoke(mod.main, ["--problems-dir", "problems"])
    assert res.exit_code == 1
    assert "dataset 'tyo' not found (is it in governance.datasets?) (did you mean 'toy'?)" in res.output
    assert not (tmp_path / "data" / "baseline" / "samples").exists() and not (tmp_path / "metrics").exists()
