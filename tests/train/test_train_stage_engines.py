"""Stage scripts with ``engine: verl`` (a fake verl runner: no GPU) and the post-stage baseline-keyed eval."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_verl_launch import STEPS, FakeRunner
from train_fixtures import FakeJudge, small_family

from rlvr.data.schema import write_problems
from rlvr.layout import read_metrics

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "qwen7b_8xh100.yaml"


def _stage(name):
    spec = importlib.util.spec_from_file_location(f"stage_{name}_engines", ROOT / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PARAMS = f"""\
engine: verl
profile: partial.yaml
reward: sparse
seeds: [1]
train: {{train_sets: [synthetic/train], eval_sets: [synthetic/dev]}}
manifests: {{verl_train: [synthetic/train]}}
sft: {{epochs: 1, learning_rate: 1.0e-5, per_device_train_batch_size: 1, gradient_accumulation_steps: 8, bf16: true}}
grpo: {{learning_rate: 1.0e-6, num_generations: 8, per_device_train_batch_size: 2, gradient_accumulation_steps: 4,
        bf16: true}}
verl: {{profile: {PROFILE}, train_batch_size: 16, ppo_mini_batch_size: 8}}
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "params.yaml").write_text(PARAMS)
    # engine verl needs a selected scale profile (rlvr.config.profiles.require_scale_profile): a partial one that sets
    # nothing, so this file's small values and verl.profile's hardware recipe are what the stages read
    (tmp_path / "partial.yaml").write_text("complete: false\n")
    write_problems(tmp_path / "problems" / "synthetic.jsonl", small_family())
    return tmp_path


def _patch(monkeypatch, mod, fn_name, runner):
    import rlvr.train.verl.launch as launch

    monkeypatch.setattr(launch, fn_name, functools.partial(getattr(launch, fn_name), runner=runner))
    evals = []
    monkeypatch.setattr(mod, "get_judge", lambda: FakeJudge())
    monkeypatch.setattr(mod, "stage_eval", lambda model, judge, *a: evals.append((model, a)) or {"synthetic": {}})
    return evals


def test_grpo_stage_verl_writes_overrides(env, monkeypatch):
    mod = _stage("grpo")
    runner = FakeRunner(STEPS)
    evals = _patch(monkeypatch, mod, "run_grpo_verl", runner)
    res = CliRunner().invoke(mod.main, ["--seed", "1", "--problems-dir", "problems", "--model", "Qwen/X"])
    assert res.exit_code == 0, res.output
    ov = (env / "models/grpo/seed-1/verl_overrides.txt").read_text()
    assert "algorithm.adv_estimator=rlvr_grpo" in ov and "actor_rollout_ref.model.path=Qwen/X" in ov
    assert "data.train_batch_size=16" in ov
    assert any("verl.trainer.main_ppo" in a for a, _ in runner.calls)
    m = read_metrics(env / "metrics/grpo/seed-1.json")
    assert m["engine"] == "verl" and m["seed"] == 1 and m["reward_mode"] == "sparse"
    assert (env / "metrics/grpo/seed-1.tsv").is_file()
    ev = read_metrics(env / "metrics/eval_grpo_seed1.json")
    # the datasets' scores, and in provenance the selected profile's effective values (issue 42, item 4)
    assert {k: v for k, v in ev.items() if k != "protocol"} == {"synthetic": {}}
    assert ev["protocol"]["effective_params"]["profile"] == "partial.yaml"
    assert evals[0][0] == "models/grpo/seed-1"


def test_grpo_stage_verl_refuses_train_sets_it_would_ignore(env, monkeypatch):
    (env / "params.yaml").write_text(PARAMS.replace("verl_train: [synthetic/train]", "verl_train: [mbpp/train]"))
    mod = _stage("grpo")
    runner = FakeRunner(STEPS)
    _patch(monkeypatch, mod, "run_grpo_verl", runner)
    res = CliRunner().invoke(mod.main, ["--seed", "1", "--problems-dir", "problems", "--model", "Qwen/X"])
    assert res.exit_code != 0 and runner.calls == []
    assert "train.train_sets ['synthetic/train'] differs from manifests.verl_train ['mbpp/train']" in res.output


def test_sft_stage_verl_writes_parquet_and_overrides(env, monkeypatch):
    import pyarrow.parquet as pq
    import transformers

    from rlvr.model.tiny import build_tokenizer

    mod = _stage("sft")
    runner = FakeRunner({1: {"train/loss": 1.0}, 2: {"train/loss": 0.5}}, role=None)
    _patch(monkeypatch, mod, "run_sft_verl", runner)
    tok = build_tokenizer(["print(int(input()) + 1)", "Read a number and print it"] * 20, vocab_size=400)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: tok)
    res = CliRunner().invoke(mod.main, ["--problems-dir", "problems", "--model", "Qwen/X"])
    assert res.exit_code == 0, res.output
    assert "verl.trainer.sft_trainer" in (env / "models/sft/verl_overrides.txt").read_text() or any(
        "verl.trainer.sft_trainer" in a for a, _ in runner.calls)
    m = read_metrics(env / "metrics/sft.json")
    assert m["engine"] == "verl" and m["sft_set"]["accepted"] == 12  # the 12 train references of the small family
    parquet = next((env / "cache/train/sft").glob("*/sft_train.parquet"))
    assert pq.read_table(parquet).num_rows == 12
    # no flash_attn on CPU: SDPA, with padding removal through transformers' packed-sequence masks, token-packed
    assert m["attention"] == {"attn_implementation": "sdpa", "use_remove_padding": True, "use_dynamic_bsz": True}
    assert m["sft_set"]["length"]["dropped_over_length"] == 0 and m["sft_set"]["length"]["rows_kept"] == 12
    assert m["sft_set"]["val_length"]["rows_in"] == 4 and m["sft_set"]["val_length"]["dropped_over_length"] == 0
    assert (env / "metrics/eval_sft/synthetic.json").is_file()  # a scores file per dataset


def test_stage_eval_is_the_baseline_eval_of_the_trained_model(tmp_path, monkeypatch):
    import rlvr.eval.baseline as baseline
    from rlvr.train.local.common import stage_eval

    (tmp_path / "p.yaml").write_text(
        "baseline:\n  model: models/base\n  datasets: [{name: synthetic, splits: [dev]}]\n  n: 2\n  ks: [1, 2]\n")
    stale = tmp_path / "ev" / "samples" / "synthetic.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}\n")
    seen = {}

    def fake_run(cfg, judge, problems_dir, out_dir):
        seen.update(cfg=cfg, problems_dir=problems_dir, out_dir=out_dir)
        return {"synthetic": {"accepted@1": 0.5}, "protocol": {"model": cfg.model}}

    monkeypatch.setattr(baseline, "run_baseline", fake_run)
    report = stage_eval("models/sft", object(), tmp_path / "p.yaml", "probs", tmp_path / "ev")
    assert not stale.exists()  # samples of the previous weights at the same path are never reused
    assert report == {"synthetic": {"accepted@1": 0.5}, "protocol": {"model": "models/sft"}}
    assert seen["cfg"].model == "models/sft" and seen["cfg"].n == 2 and seen["cfg"].ks == [1, 2]
    assert [d.name for d in seen["cfg"].datasets] == ["synthetic"] and seen["out_dir"] == tmp_path / "ev"
    from rlvr.config import ConfigError

    (tmp_path / "q.yaml").write_text("train: {}\n")
    with pytest.raises(ConfigError, match="baseline"):
        stage_eval("models/sft", object(), tmp_path / "q.yaml")
