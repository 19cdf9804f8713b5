"""``train.rl_share`` (issue 42): a stated, hashed share of the RL-eligible prompts is RL's; SFT/DPO leave out only it.

Every consumer sees the same subset: the local engine's GRPO problems, the verl stage's parquet (filtered into the
run's folder), repair's rows and SFT/DPO's exclusion; the 7B profiles' value is what the stages read."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_verl_launch import STEPS, FakeRunner
from train_fixtures import FakeJudge, small_family

from rlvr.config import load_section
from rlvr.data.export import write_verl_parquet
from rlvr.data.schema import Problem, write_problems
from rlvr.layout import read_metrics
from rlvr.train.local.common import TrainCommon
from rlvr.train.overlap import (
    apply_rl_share,
    apply_sft_rl_overlap,
    in_rl_share,
    rl_share_verl_train,
    unit_hash,
)

ROOT = Path(__file__).resolve().parents[2]


def _many(n: int = 2000) -> list[Problem]:
    """``n`` problems with distinct ids (copies of one synthetic problem)."""
    p = small_family()[0]
    return [p.model_copy(update={"id": f"leetcode/train/{i}"}) for i in range(n)]


def _ids(ps) -> list[str]:
    return [p.id for p in ps]


def test_subset_is_stable_across_order_and_runs_and_nested():
    ps = _many()
    kept, n = apply_rl_share(ps, 0.5)
    shuffled = list(ps)
    random.Random(3).shuffle(shuffled)
    assert set(_ids(apply_rl_share(shuffled, 0.5)[0])) == set(_ids(kept))  # file order does not matter
    assert _ids(apply_rl_share(ps, 0.5)[0]) == _ids(kept)                  # nor the run
    assert set(_ids(kept)) == {p.id for p in ps if unit_hash(f"rl_share:{p.id}") < 0.5}
    assert set(_ids(apply_rl_share(ps, 0.3)[0])) <= set(_ids(kept))        # a larger share keeps a superset
    assert n == {"rl_share": 0.5, "rl_prompts_eligible": 2000, "rl_prompts": len(kept)}


@pytest.mark.parametrize("share", [0.25, 0.5, 0.8])
def test_subset_size_matches_the_share(share):
    kept, _ = apply_rl_share(_many(), share)
    assert abs(len(kept) / 2000 - share) < 0.04  # binomial sd at n 2000 is <= 0.011


def test_default_keeps_every_eligible_prompt():
    ps = small_family()
    assert TrainCommon().rl_share == 1.0
    assert apply_rl_share(ps, 1.0)[0] == ps


def test_sft_dpo_exclude_exactly_the_prompts_rl_uses(tmp_path):
    ps = _many(400)
    eligible = ps[:300]                        # the RL set: 300 of the 400 train problems have >= 5 tests
    f = tmp_path / "grpo" / "train.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text("".join(json.dumps({"id": p.id}) + "\n" for p in eligible))
    used = set(_ids(apply_rl_share(eligible, 0.5)[0]))
    kept, n = apply_sft_rl_overlap(ps, 0.0, f, rl_share=0.5)
    assert set(_ids(kept)) == set(_ids(ps)) - used  # the unused half of the eligible ones and the ineligible stay
    assert n["rl_prompts_eligible"] == 300 and n["rl_prompts_used"] == len(used) == n["rl_prompts_dropped"]
    assert n["kept"] == 400 - len(used) and n["rl_share"] == 0.5
    # the overlap's hash is independent of the share's: 0.5 keeps about half of the used ones, not all or none
    half = apply_sft_rl_overlap(ps, 0.5, f, rl_share=0.5)[1]
    assert 0.35 < half["rl_prompts_kept"] / len(used) < 0.65


def test_verl_parquet_subset_equals_the_local_engines(tmp_path):
    import pyarrow.parquet as pq

    ps = _many(300)
    src = tmp_path / "manifests" / "verl" / "train.parquet"
    write_verl_parquet(ps, src)
    before = hashlib.sha256(src.read_bytes()).hexdigest()
    path, n = rl_share_verl_train(src, tmp_path / "run", 0.5)
    rows = pq.read_table(path).to_pylist()
    assert path == tmp_path / "run" / "data" / "train.parquet"
    assert [r["extra_info"]["id"] for r in rows] == _ids(apply_rl_share(ps, 0.5)[0])  # same ids, same order
    assert pq.read_table(path).schema == pq.read_table(src).schema
    assert hashlib.sha256(src.read_bytes()).hexdigest() == before  # the manifests' output is not touched
    assert n == {"rl_share": 0.5, "rl_prompts_eligible": 300, "rl_prompts": len(rows)}
    assert rl_share_verl_train(src, tmp_path / "run1", 1.0)[0] == src  # the default trains on the file itself
    assert not (tmp_path / "run1").exists()


def test_bad_share_is_one_line_naming_the_key(tmp_path):
    from rlvr.check import check_params

    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match=rf"train\.rl_share={bad}: must be within \(0, 1\]"):
            in_rl_share("x", bad)
        data = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
        data["train"]["rl_share"] = bad
        path = tmp_path / f"p{bad}.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        errors = [e for e in check_params(path)[0] if "rl_share" in e]
        assert len(errors) == 1 and "\n" not in errors[0] and "train.rl_share" in errors[0], errors


def _stage(name):
    spec = importlib.util.spec_from_file_location(f"stage_{name}_rl_share", ROOT / "stages" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_7b_profiles_set_the_share_the_stages_read(tmp_path):
    tiny = load_section("train", TrainCommon, ROOT / "params.yaml")
    assert tiny.rl_share == 1.0
    for gpus in (2, 4, 8):
        d = tmp_path / str(gpus)
        d.mkdir()
        data = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
        data.update(profile=str(ROOT / "profiles" / f"qwen7b_{gpus}xh100.yaml"), engine="verl")
        (d / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        train = load_section("train", TrainCommon, d / "params.yaml")
        assert train.rl_share == 0.5 and train.sft_rl_overlap == 0.0


def test_verl_grpo_stage_trains_on_the_share(tmp_path, monkeypatch):
    """The grpo stage under verl hands verl the hashed subset of the manifests' parquet, written in its run folder,
    and records the counts; the parquet the manifests stage wrote stays as it was."""
    import functools

    import pyarrow.parquet as pq

    import rlvr.train.verl.launch as launch

    profile = ROOT / "profiles" / "qwen7b_8xh100.yaml"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLVR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "params.yaml").write_text(
        "engine: verl\nprofile: partial.yaml\nreward: sparse\nseeds: [1]\n"
        "train: {train_sets: [synthetic/train], eval_sets: [synthetic/dev], rl_share: 0.5}\n"
        "manifests: {verl_train: [synthetic/train]}\n"
        "grpo: {learning_rate: 1.0e-6, num_generations: 8, per_device_train_batch_size: 2,"
        " gradient_accumulation_steps: 4, bf16: true}\n"
        f"verl: {{profile: {profile}, train_batch_size: 16, ppo_mini_batch_size: 8}}\n")
    (tmp_path / "partial.yaml").write_text("complete: false\n")
    write_problems(tmp_path / "problems" / "synthetic.jsonl", small_family())
    ps = _many(200)
    write_verl_parquet(ps, tmp_path / "manifests" / "train.parquet")
    counts = {"problems": 210, "kept": 200, "too_few_tests": 10, "contaminated": 0, "min_tests": 5}
    (tmp_path / "manifests" / "training_sets.json").write_text(json.dumps({"grpo": counts}))
    mod = _stage("grpo")
    monkeypatch.setattr(launch, "run_grpo_verl", functools.partial(launch.run_grpo_verl, runner=FakeRunner(STEPS)))
    monkeypatch.setattr(mod, "get_judge", lambda: FakeJudge())
    monkeypatch.setattr(mod, "stage_eval", lambda *a: {"synthetic": {}})
    res = CliRunner().invoke(mod.main, ["--seed", "1", "--problems-dir", "problems", "--model", "Qwen/X",
                                        "--verl-train", "manifests/train.parquet",
                                        "--training-sets", "manifests/training_sets.json"])
    assert res.exit_code == 0, res.output
    ov = (tmp_path / "models/grpo/seed-1/verl_overrides.txt").read_text()
    assert "data.train_files=<run>/data/train.parquet" in ov  # the run folder's copy, not the manifests' file
    train_file = next((tmp_path / "cache" / "train" / "grpo" / "seed-1").glob("*/data/train.parquet"))
    ids = [r["extra_info"]["id"] for r in pq.read_table(train_file).to_pylist()]
    assert ids == _ids(apply_rl_share(ps, 0.5)[0])
    m = read_metrics(tmp_path / "metrics/grpo/seed-1.json")
    assert m["rl_share"] == {"rl_share": 0.5, "rl_prompts_eligible": 200, "rl_prompts": len(ids)}
    assert m["rl_set"] == counts  # the manifests' floor counts, as the local engine records its own


def _local_params(tmp_path, share: float) -> Path:
    """A local-engine params file over the small family (12 train problems) at ``train.rl_share`` = ``share``."""
    write_problems(tmp_path / "problems" / "synthetic.jsonl", small_family())
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({
        "engine": "local", "reward": "sparse", "seeds": [1], "manifests": {"grpo_min_tests": 3},  # the family: 3 tests
        "train": {"train_sets": ["synthetic/train"], "eval_sets": ["synthetic/dev"], "rl_share": share},
        "grpo": {}, "baseline": {}, "repair": {"datasets": [{"name": "synthetic"}], "train": {"max_steps": 1}}}))
    return path


def test_local_grpo_and_repair_train_on_the_same_share(tmp_path, monkeypatch):
    """The local GRPO stage and the repair stage's training rows are the hashed subset of their problems, by id: the
    same problems GRPO under verl and SFT/DPO's exclusion see."""
    import rlvr.train.local.repair as local_repair
    from rlvr.repair.eval import RepairParams
    from rlvr.stage import Params

    monkeypatch.chdir(tmp_path)
    params = _local_params(tmp_path, 0.5)
    train = [p for p in small_family() if p.split == "train"]
    want = _ids(apply_rl_share(train, 0.5)[0])
    assert 0 < len(want) < len(train)
    seen: dict[str, list[str]] = {}
    mod = _stage("grpo")
    monkeypatch.setattr(mod, "get_judge", lambda: FakeJudge())
    monkeypatch.setattr(mod, "stage_eval", lambda *a: {"synthetic": {}})
    monkeypatch.setattr(mod, "run_grpo", lambda cfg, common, model, ps, *a, **k: seen.update(grpo=_ids(ps)) or {})
    res = CliRunner().invoke(mod.main, ["--seed", "1", "--problems-dir", "problems", "--model", "m"])
    assert res.exit_code == 0, res.output
    assert seen["grpo"] == want
    assert read_metrics(tmp_path / "metrics/grpo/seed-1.json")["rl_share"]["rl_prompts"] == len(want)
    rep = _stage("repair")
    monkeypatch.setattr(local_repair, "run_repair_training",
                        lambda tcfg, env, common, model, ps, *a, **k: seen.update(repair=_ids(ps)) or {})
    out = rep._train(Params(params), Params(params).section("repair", RepairParams), tmp_path / "problems", "m",
                     None, tmp_path / "models" / "repair", tmp_path / "curves.tsv")
    assert seen["repair"] == want and out["train_set"]["rl_share"]["rl_prompts"] == len(want)
