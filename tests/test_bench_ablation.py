"""bench/ablation: run.py's collection reads the files the grpo and eval stages write (built here with the stages'
own writers), render.py turns a results file into the per-seed rows, the spread and the paired difference, and the
committed docs section is the rendering of the committed results file."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from rlvr.layout import write_curves, write_metrics, write_metrics_folder

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"ablation_{name}", ROOT / "bench/ablation" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


run = _load("run")
render = _load("render")


def _write_seed(work: Path, seed: int, dev_acc: float) -> None:
    """What ``stages/grpo.py --seed n`` and ``stages/eval.py`` write under ``work`` (a mode's folder)."""
    m = work / "metrics"
    write_metrics(m / "grpo" / f"seed-{seed}.json",
                  {"seed": seed, "reward_mode": "dense", "reward_first": 0.25, "reward_last": 0.5, "steps": 10,
                   "train_runtime_s": 12.5, "dev": {"accepted@1": dev_acc, "pass_ratio": dev_acc, "n": 4}})
    write_curves(m / "grpo" / f"seed-{seed}.tsv", ["reward_mean", "accepted", "pass_ratio", "judge_step_s"],
                 [{"step": 5, "reward_mean": 0.25, "accepted": 0.125, "pass_ratio": 0.25, "judge_step_s": 1.5},
                  {"step": 10, "reward_mean": 0.5, "accepted": "", "pass_ratio": 0.5, "judge_step_s": 1.0}])
    write_metrics_folder(m / f"eval_grpo_seed{seed}", {"synthetic": {"accepted@1": dev_acc, "gen_wall_s": 3.0}})
    write_metrics_folder(m / "final" / f"eval_grpo_seed{seed}", {
        "synthetic": {"accepted@1": dev_acc, "pass_ratio_mean": dev_acc, "pass@4": 1.0, "gen_wall_s": 0.5},
        "humanevalplus-v0.1.10": {"accepted@1": 0.0, "pass_ratio_mean": 0.0}})


def test_collect_reads_the_stage_files_and_no_seconds(tmp_path):
    _write_seed(tmp_path / "dense", 1, 0.75)
    roles = run.dataset_roles({"governance": {"datasets": [{"name": "humanevalplus:v0.1.10", "role": "test"}]}})
    got = run.collect(tmp_path, ["dense", "sparse"], [1, 2], roles)
    assert set(got) == {"dense", "sparse"} and got["sparse"] == {} and list(got["dense"]) == ["1"]
    e = got["dense"]["1"]
    assert e["grpo"] == {"dev": {"accepted@1": 0.75, "pass_ratio": 0.75, "n": 4}, "reward_mode": "dense",
                         "reward_first": 0.25, "reward_last": 0.5, "steps": 10}
    assert e["final_eval"] == {"synthetic": {"role": "dev", "accepted@1": 0.75, "pass_ratio_mean": 0.75, "pass@4": 1.0},
                               "humanevalplus-v0.1.10": {"role": "test", "accepted@1": 0.0, "pass_ratio_mean": 0.0}}
    assert e["stage_eval"] == {"synthetic": {"role": "dev", "accepted@1": 0.75}}
    assert e["curve"] == [{"step": 5, "reward_mean": 0.25, "accepted": 0.125, "pass_ratio": 0.25},
                          {"step": 10, "reward_mean": 0.5, "accepted": None, "pass_ratio": 0.5}]
    text = json.dumps(e)  # no seconds: they stay in metrics/cost/
    assert not any(k in text for k in ("train_runtime_s", "gen_wall_s", "judge_step_s"))


def test_read_curve_names_the_file_and_line_of_a_bad_step(tmp_path):
    f = tmp_path / "seed-1.tsv"
    f.write_text("step\treward_mean\n5\t0.1\nx\t0.2\n")
    with pytest.raises(ValueError, match=r"seed-1.tsv:3: field 'step'"):
        run.read_curve(f)


def test_stage_cmd_is_the_dvc_yaml_command():
    assert run.stage_cmd(ROOT / "dvc.yaml", "grpo", 3) == ["sh", "stages/run.sh", "stages/grpo.py", "--seed", "3"]
    assert run.stage_cmd(ROOT / "dvc.yaml", "eval")[:3] == ["sh", "stages/run.sh", "stages/eval.py"]
    with pytest.raises(KeyError, match="no stage 'nope'"):
        run.stage_cmd(ROOT / "dvc.yaml", "nope")


def test_mode_params_sets_reward_seeds_and_the_eval_phases():
    base = {"reward": "dense", "seeds": [1, 2], "eval": {"headline": "dpo", "n": 4}}
    p = run.mode_params(base, "sparse", [1, 2, 3], ".cache/ablation/sparse")
    assert p["reward"] == "sparse" and p["seeds"] == [1, 2, 3] and p["eval"]["n"] == 4
    assert p["eval"]["phases"] == [{"name": "grpo", "model": ".cache/ablation/sparse/models/grpo", "seeded": True}]
    assert base["reward"] == "dense" and "phases" not in base["eval"]  # the base is not modified


def _entry(acc: float, rollout: list[float]) -> dict:
    return {"final_eval": {"synthetic": {"role": "dev", "accepted@1": acc, "pass_ratio_mean": acc},
                           "humaneval": {"role": "test", "accepted@1": 0.0, "pass_ratio_mean": 0.0}},
            "curve": [{"step": 5 * (i + 1), "accepted": a, "pass_ratio": a} for i, a in enumerate(rollout)]}


def _results() -> dict:
    dense = [0.5, 0.5, 0.25, 0.75, 0.5]
    sparse = [0.75, 0.75, 0.5, 0.75, 0.25]
    return {"modes": ["dense", "sparse"], "seeds_done": [1, 2, 3, 4, 5], "seeds_requested": [1, 2, 3, 4, 5],
            "roles": {"synthetic": "dev", "humaneval": "test"}, "commit": "abc", "params": {"grpo": {}},
            "runs": {"dense": {str(s + 1): _entry(a, [0.1, 0.2, 0.3, 0.4]) for s, a in enumerate(dense)},
                     "sparse": {str(s + 1): _entry(a, [0.2, 0.2, 0.2, 0.6]) for s, a in enumerate(sparse)}}}


def test_render_rows_spread_and_paired_difference():
    text = render.render_section(_results(), png=None)
    assert "## Sparse vs dense, 5 seeds" in text
    rows = text.splitlines()
    assert "| 1 | dense | 0.500 | 0.500 | 0.000 | 0.400 | 0.400 |" in rows
    assert "| 4 | sparse | 0.750 | 0.750 | 0.000 | 0.600 | 0.600 |" in rows
    # dense 0.5 0.5 0.25 0.75 0.5: mean 0.5, std sqrt(0.125/4) = 0.177; sparse mean 0.6, std 0.224
    # per-seed Δ +0.25 +0.25 +0.25 0 -0.25: mean 0.1, 3 wins / 1 loss / 1 tie, sign test p = 2 * 5/16 = 0.625
    line = next(r for r in rows if r.startswith("| synthetic (dev) accepted@1 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1] == "0.500 ± 0.177 [0.250–0.750]" and cells[2] == "0.600 ± 0.224 [0.250–0.750]"
    assert cells[3].startswith("0.100 [") and cells[4] == "3 / 1 / 1" and cells[5] == "0.6250"
    lo, hi = (float(x) for x in cells[3][len("0.100 ["):-1].split(", "))
    assert -0.25 <= lo < 0.1 < hi <= 0.25
    line = next(r for r in rows if r.startswith("| rollout accepted, last ¼ of steps |"))
    assert "0.400 ± 0.000 [0.400–0.400]" in line and "0.600 ± 0.000" in line and "| 5 / 0 / 0 | 0.0625 |" in line
    with pytest.raises(ValueError, match="seeds_done is empty"):
        render.render_section({**_results(), "seeds_done": []})


def test_the_page_has_the_markers():
    page = (ROOT / "docs/results/ablations.md").read_text()
    assert render.BEGIN in page and render.END in page and page.index(render.BEGIN) < page.index(render.END)


def test_splice_keeps_the_rest_of_the_page():
    page = f"# A\n\nold run\n\n{render.BEGIN}\nstale\n{render.END}\n\ntail\n"
    assert render.splice(page, "new\n") == f"# A\n\nold run\n\n{render.BEGIN}\nnew\n{render.END}\n\ntail\n"
    with pytest.raises(ValueError, match="markers"):
        render.splice("# no markers\n", "x")


def test_each_results_file_has_its_own_section_and_png():
    assert render.png_name("bench/ablation/results.json") == "ablation_sparse_dense.png"
    assert render.png_name("bench/ablation/results_1xh200.json") == "ablation_sparse_dense_1xh200.png"
    a, b = (render.begin_marker(f"bench/ablation/{n}.json") for n in ("results", "results_1xh200"))
    page = f"# A\n{a}\nold a\n{render.END}\nmiddle\n{b}\nold b\n{render.END}\ntail\n"
    page = render.splice(render.splice(page, "new b\n", b), "new a\n", a)
    assert page == f"# A\n{a}\nnew a\n{render.END}\nmiddle\n{b}\nnew b\n{render.END}\ntail\n"
    gpu = {**_results(), "machine": {"cpus": 16, "gpus": ["NVIDIA H200"]}}
    text = render.render_section(gpu, png=None)
    assert "## Sparse vs dense, 5 seeds, 1 × NVIDIA H200" in text and "1 × NVIDIA H200, 16 CPUs" in text
    assert "## Sparse vs dense, 5 seeds, CPU" in render.render_section({**_results(), "machine": {"cpus": 2}}, None)


@pytest.mark.parametrize("results", render.RESULTS)
def test_committed_section_is_the_rendering_of_the_committed_results(results):
    if not (ROOT / results).is_file():
        pytest.skip(f"{results} not recorded yet (run.py)")
    res = json.loads((ROOT / results).read_text())
    page = (ROOT / "docs/results/ablations.md").read_text()
    name = render.png_name(results)
    png = name if (ROOT / "docs/results" / name).is_file() else None
    assert render.splice(page, render.render_section(res, png), render.begin_marker(results)) == page, \
        "re-run bench/ablation/render.py"
