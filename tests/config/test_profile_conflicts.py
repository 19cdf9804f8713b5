"""No silent params (issue 42, item 4): a params.yaml / ``dvc exp run -S`` value for a key the selected scale profile
sets stops the stage at start with one line naming the key, both values and the files (it used to be recorded by DVC
and ignored by the run); the effective values are in every stage's provenance."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rlvr.config import ConfigError, load_params
from rlvr.config.profiles import (
    EMBEDDED_DEFAULTS_FILE,
    _leaves,
    effective_params,
    embedded_defaults,
    load_scale_profile,
)

ROOT = Path(__file__).resolve().parents[2]
PROFILE = "profiles/qwen7b_4xh100.yaml"


def _workspace(tmp_path: Path, profile: str | None = PROFILE) -> Path:
    """params.yaml (as shipped, with ``profile`` selected) and the profiles, as `dvc exp run -S profile=…` leaves
    them."""
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    data = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    data["profile"] = profile
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _dash_s(path: Path, *overrides: str) -> None:
    """What `dvc exp run -S <file>:<override>` does to the file: DVC's own override code path."""
    hydra = pytest.importorskip("dvc.utils.hydra", reason="dvc is not installed")
    hydra.apply_overrides(path, list(overrides))


def test_dash_s_on_a_profile_key_fails_at_start_naming_key_values_and_files(tmp_path):
    """`dvc exp run -S grpo.learning_rate=2e-6` with the 7B profile selected: the run would train at the profile's
    1e-6 while DVC records 2e-6. It stops with one line naming the key, both values, params.yaml and the profile."""
    path = _workspace(tmp_path)
    assert load_params(path)["grpo"]["learning_rate"] == 1e-6  # the profile alone loads: tiny defaults are replaced
    _dash_s(path, "grpo.learning_rate=2e-6")
    with pytest.raises(ConfigError) as exc:
        load_params(path)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: profile: grpo.learning_rate='2e-06' but ")
    assert f"{tmp_path / PROFILE} sets grpo.learning_rate=1e-06" in msg
    assert f"dvc exp run -S {PROFILE}:params.<key>=<value>" in msg


def test_every_conflicting_key_is_named_and_non_profile_keys_pass(tmp_path):
    path = _workspace(tmp_path)
    _dash_s(path, "sft.epochs=3", "train.train_sets=[mbpp/train]", "grpo.entropy_coef=0.01")
    with pytest.raises(ConfigError) as exc:
        load_params(path)
    msg = str(exc.value)
    assert "sft.epochs=3 but" in msg and "sets sft.epochs=2" in msg
    assert "train.train_sets=['mbpp/train'] but" in msg
    assert "entropy_coef" not in msg  # a key the profile does not set: params.yaml's value is the effective one


def test_the_profiles_value_or_the_embedded_default_passes(tmp_path):
    path = _workspace(tmp_path)
    _dash_s(path, "grpo.learning_rate=1e-6", "sft.epochs=80")  # the profile's value; params.yaml's own default
    p = load_params(path)
    assert p["grpo"]["learning_rate"] == 1e-6 and p["sft"]["epochs"] == 2


def test_a_change_in_the_profile_file_is_the_effective_value(tmp_path):
    """The way to change such a key: -S on the profile file (a dep of every stage that reads the profile)."""
    path = _workspace(tmp_path)
    _dash_s(tmp_path / PROFILE, "params.grpo.learning_rate=2e-6")
    from rlvr.config import load_section
    from rlvr.train.local.grpo import GRPOParams

    assert load_section("grpo", GRPOParams, path).learning_rate == 2e-6  # DVC writes 2e-06: PyYAML reads a string
    assert float(effective_params(load_params(path, raw=True), path)["from_profile"]["grpo.learning_rate"]) == 2e-6


def test_a_conflict_names_the_base_file_that_sets_the_key(tmp_path):
    (tmp_path / "base.yaml").write_text("complete: false\nparams: {sft: {epochs: 2}}\n")
    (tmp_path / "top.yaml").write_text("base: base.yaml\ncomplete: false\nparams: {sft: {learning_rate: 1.0e-5}}\n")
    (tmp_path / "params.yaml").write_text("profile: top.yaml\nsft: {epochs: 5, learning_rate: 1.0e-3}\n")
    with pytest.raises(ConfigError, match=r"sft\.epochs=5 but .*base\.yaml sets sft\.epochs=2"):
        load_params(tmp_path / "params.yaml")


def test_the_embedded_defaults_record_is_params_yaml():
    """The record holds params.yaml's value of every key a shipped profile sets (so the profile alone never
    conflicts, and a changed tiny default must be re-recorded: `python -m rlvr.config.profiles`)."""
    tiny = _leaves(yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8")))
    keys = {k for f in (ROOT / "profiles").rglob("*.yaml") for k in _leaves(load_scale_profile(f)["params"])}
    want = {k: tiny[k] for k in keys if k in tiny}
    record = embedded_defaults()
    assert {k: record.get(k) for k in want} == want, EMBEDDED_DEFAULTS_FILE


def test_stage_provenance_holds_the_effective_values(tmp_path, monkeypatch):
    """A stage that read a profile-set section writes ``protocol.effective_params`` (the selected profile and the
    effective value of each key it set) to its provenance file, never to the scores file; a data stage does not."""
    from click.testing import CliRunner

    from rlvr.stage import Params, Result, stage
    from rlvr.train.local.grpo import GRPOParams

    path = _workspace(tmp_path)
    monkeypatch.chdir(tmp_path)

    @stage()
    def main(params: Params) -> Result:
        cfg = params.section("grpo", GRPOParams)
        return Result(metrics={"metrics/grpo/seed-1.json": {"pass_ratio": 0.5, "lr": cfg.learning_rate}})

    res = CliRunner().invoke(main, ["--params", str(path)])
    assert res.exit_code == 0, res.output
    prov = json.loads((tmp_path / "metrics/provenance/grpo/seed-1.json").read_text())
    eff = prov["protocol"]["effective_params"]
    assert eff["profile"] == PROFILE
    assert eff["from_profile"]["grpo.learning_rate"] == 1e-6 and eff["from_profile"]["verl.sft_max_length"] == 4096
    assert prov["lr"] == 1e-6
    assert json.loads((tmp_path / "metrics/grpo/seed-1.json").read_text()) == {"pass_ratio": 0.5}

    from pydantic import BaseModel

    class AnyJudge(BaseModel):
        model_config = {"extra": "allow"}

    @stage()
    def data_stage2(params: Params) -> Result:
        params.section("judge", AnyJudge)
        return Result(metrics={"metrics/gov.json": {"kept": 3}})

    res = CliRunner().invoke(data_stage2, ["--params", str(path)])
    assert res.exit_code == 0, res.output
    assert "protocol" not in json.loads((tmp_path / "metrics/provenance/gov.json").read_text())


def test_the_gpu_suites_7b_params_load(tmp_path):
    """bench/gpu/prepare.py's params.7b.yaml (the overlay's params with the lent 7B profile) holds no value the
    profile would ignore: it loads, with the profile's values."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_gpu_prepare_7b", ROOT / "bench" / "gpu" / "prepare.py")
    prep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prep)
    params = prep.merge(yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8")),
                        yaml.safe_load((ROOT / "bench" / "gpu" / "overlay.yaml").read_text(encoding="utf-8")))
    shutil.copytree(ROOT / "profiles", tmp_path / "profiles")
    path = tmp_path / "params.7b.yaml"
    path.write_text(yaml.safe_dump(prep.with_profile(params, prep.BIG7_PROFILE), sort_keys=False), encoding="utf-8")
    p = load_params(path)
    assert p["grpo"]["max_steps"] == load_scale_profile(ROOT / prep.BIG7_PROFILE)["params"]["grpo"]["max_steps"]
    assert p["governance"] == params["governance"]  # the overlay's data sections stay


def test_a_stage_stops_at_start_with_the_line(tmp_path):
    """Through a real stage script (what `dvc exp run` runs after writing -S into params.yaml): exit status 1, the
    one line on stderr, before anything is loaded."""
    import importlib.util

    from click.testing import CliRunner

    path = _workspace(tmp_path)
    _dash_s(path, "sft.learning_rate=3e-5")
    spec = importlib.util.spec_from_file_location("sft_stage_conflict", ROOT / "stages" / "sft.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = CliRunner().invoke(mod.main, ["--params", str(path), "--problems-dir", str(tmp_path / "none")])
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.strip() and " rlvr." not in ln]
    assert len(lines) == 1
    assert "sft.learning_rate='3e-05' but" in lines[0] and "sets sft.learning_rate=1e-05" in lines[0]
