"""The metrics layout (issue 29, rlvr.layout.write_metrics): the DVC metrics files hold scores only; cost and provenance
go beside them, losslessly; dvc.yaml declares the parts of every metrics file, the seeds follow `seeds`, and every
plot is declared once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rlvr.layout import (
    layout_paths,
    merge_metrics,
    metric_names,
    read_metrics,
    read_metrics_folder,
    split_metrics,
    write_metrics,
    write_metrics_folder,
)

ROOT = Path(__file__).resolve().parents[1]
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())

#: the shapes the stages write (baseline-style eval, final eval, repair, training summary), abridged
EVAL = {"synthetic": {"accepted@1": 0.5, "pass@1": 0.5, "pass@4": 0.75, "pass_ratio_mean": 0.6, "n_tasks": 18,
                      "gen_wall_s": 3.2, "judge_s_mean": 0.01, "judge_s_p95": 0.02, "throughput_tokens_per_s": 400.0,
                      "avg_generated_tokens": 52.5, "resumed_tasks": 0,
                      "verdicts": {"accepted": {"count": 9, "fraction": 0.5},
                                   "runtime_error": {"count": 9, "fraction": 0.5}},
                      "ci": {"accepted@1": {"lo": 0.3, "hi": 0.7, "value": 0.5, "n": 18, "B": 1000, "alpha": 0.05}},
                      "eval@k": {"pass@1": 0.5, "gen_wall_s": 1.0}, "role": "dev", "greedy": True,
                      "eval@budget": {"accepted@1": 0.4}, "evalplus": {"base": {"accepted@1": 0.6}},
                      "dataset": {"problems_sha256": "ab" * 32, "n_problems": 18}},
        "protocol": {"model": "models/sft", "judge": {"version": "rlvr-judge/2", "output_limit_mb": 64},
                     "libraries": {"torch": "2.5.1"}}}
TRAIN = {"dev": {"accepted@1": 0.7, "pass_ratio": 0.7, "by_template": {"add": 1.0}}, "train_loss": 1.01437,
         "train_runtime_s": 1.8, "steps": 240, "seed": 1, "reward_last": 0.4, "resumed_from_step": 240}
#: the verl engine's GRPO summary: dev from verl's validation (rlvr.train.verl.validation.validation_scores)
VERL_TRAIN = {"engine": "verl", "steps": 2, "reward_last": 0.75,
              "dev": {"accepted@1": 0.6, "pass_ratio": 0.7, "n": 10, "step": 2,
                      "by_source": {"mbpp_reg": {"accepted@1": 0.6, "pass_ratio": 0.7, "n": 10}}}}
REPAIR = {"synthetic": {"recovery_rate": 0.8, "final_accepted": 0.9, "accepted_at_turn": [0.6, 0.9], "judge_s": 0.3},
          "training": {"rollout_s": 56.6, "stage_wall_s": 69.4, "steps": 20, "engine": "local",
                       "resumed_from_step": 0, "warmup": {"rows": 596, "steps": 75, "loss": 0.5,
                                                          "resumed_from_step": 75}}}
SUMMARY = {"phases": {"sft": {"synthetic": {"accepted@1": 0.5, "ci": {"accepted@1": {"lo": 0.3, "hi": 0.7}}}}},
           "seeds": {"grpo": {"synthetic": {"accepted@1": {"mean": 0.6, "std": 0.1, "n": 2}}}},
           "headline": {"phase": "grpo", "seeds": 2, "synthetic": {"accepted@1": 0.6, "role": "dev"}}, "not_run": []}


def _leaves(obj: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in obj.items():
        out.update(_leaves(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}": v})
    return out


@pytest.mark.parametrize("report", [EVAL, TRAIN, VERL_TRAIN, REPAIR, SUMMARY])
def test_split_is_lossless(report):
    assert merge_metrics(*split_metrics(report)) == report


def test_scores_are_scores_cost_is_measured_and_the_rest_is_provenance():
    scores, cost, prov = (_leaves(p) for p in split_metrics(EVAL))
    assert set(scores) == {"synthetic.accepted@1", "synthetic.pass@1", "synthetic.pass@4", "synthetic.pass_ratio_mean",
                           "synthetic.ci.accepted@1.lo", "synthetic.ci.accepted@1.hi"}
    assert set(cost) == {"synthetic.gen_wall_s", "synthetic.judge_s_mean", "synthetic.judge_s_p95",
                         "synthetic.throughput_tokens_per_s", "synthetic.avg_generated_tokens",
                         "synthetic.eval@k.gen_wall_s", "synthetic.resumed_tasks"}
    assert {"synthetic.verdicts.accepted.count", "synthetic.ci.accepted@1.value", "synthetic.eval@k.pass@1",
            "synthetic.dataset.problems_sha256", "protocol.judge.output_limit_mb", "protocol.libraries.torch",
            "synthetic.role", "synthetic.greedy", "synthetic.eval@budget.accepted@1",
            "synthetic.evalplus.base.accepted@1"} <= set(prov)
    # training summaries: the dev scores only; loss and reward (last bits vary run to run) are provenance; the step a
    # run resumed from (and an eval's tasks resumed from its journal) follows the local cache: cost, as the seconds
    scores, cost, prov = (_leaves(p) for p in split_metrics(TRAIN))
    assert set(scores) == {"dev.accepted@1", "dev.pass_ratio"}
    assert set(cost) == {"train_runtime_s", "resumed_from_step"}
    assert {"train_loss", "reward_last", "dev.by_template.add"} <= set(prov)
    # the verl engine's dev: the same two scores; the step it was validated at and the per-source breakdown are not
    scores, _, prov = (_leaves(p) for p in split_metrics(VERL_TRAIN))
    assert set(scores) == {"dev.accepted@1", "dev.pass_ratio"}
    assert {"dev.n", "dev.step", "dev.by_source.mbpp_reg.accepted@1", "dev.by_source.mbpp_reg.pass_ratio"} <= set(prov)
    scores, cost, prov = (_leaves(p) for p in split_metrics(REPAIR))
    assert set(scores) == {"synthetic.recovery_rate", "synthetic.final_accepted"}
    assert set(cost) == {"synthetic.judge_s", "training.rollout_s", "training.stage_wall_s",
                         "training.resumed_from_step", "training.warmup.resumed_from_step"}
    assert {"training.warmup.steps", "training.warmup.loss", "training.steps"} <= set(prov)
    scores, _, _ = (_leaves(p) for p in split_metrics(SUMMARY))
    assert set(scores) == {"seeds.grpo.synthetic.accepted@1.mean", "seeds.grpo.synthetic.accepted@1.std",
                           "headline.synthetic.accepted@1"}  # the phases copy is provenance


def test_layout_paths_mirror_under_the_metrics_folder(tmp_path):
    assert layout_paths("metrics/final/eval_sft.json") == (
        Path("metrics/final/eval_sft.json"), Path("metrics/cost/final/eval_sft.json"),
        Path("metrics/provenance/final/eval_sft.json"))
    assert layout_paths(tmp_path / "m.json")[1:] == (tmp_path / "cost" / "m.json", tmp_path / "provenance" / "m.json")


def test_write_then_read_gives_the_report_back(tmp_path):
    root = tmp_path / "metrics"
    scores, cost, prov = write_metrics(root / "eval_sft.json", EVAL)
    assert json.loads(scores.read_text())["synthetic"]["accepted@1"] == 0.5
    assert "gen_wall_s" in cost.read_text() and "problems_sha256" in prov.read_text()
    assert read_metrics(root / "eval_sft.json") == EVAL
    write_metrics(root / "governance.json", {"problems_after": 10})  # no scores: still found, read whole
    assert metric_names(root) == ["eval_sft.json", "governance.json"]
    assert read_metrics(root / "governance.json") == {"problems_after": 10}
    assert read_metrics(root / "absent.json") is None
    (root / "bad.json").write_text("[1]")
    with pytest.raises(ValueError, match=r"bad\.json: expected a JSON object"):
        read_metrics(root / "bad.json")


def test_a_metrics_folder_is_one_file_per_entry_and_reads_back_whole(tmp_path):
    """The final eval's layout (rlvr.layout.write_metrics_folder): one scores file per dataset with short keys (a row
    each in `dvc metrics show <folder>`), the protocol in provenance only (its output_limit_mb is a setting, not
    cost)."""
    folder = tmp_path / "metrics" / "final" / "eval_sft"
    write_metrics_folder(folder, EVAL)
    assert sorted(p.name for p in folder.iterdir()) == ["synthetic.json"]
    assert set(_leaves(json.loads((folder / "synthetic.json").read_text()))) == {
        "accepted@1", "pass@1", "pass@4", "pass_ratio_mean", "ci.accepted@1.lo", "ci.accepted@1.hi"}
    _, cost, prov = layout_paths(folder / "protocol.json")
    assert not cost.exists() and json.loads(prov.read_text()) == EVAL["protocol"]
    assert read_metrics_folder(folder) == json.loads(json.dumps(EVAL, sort_keys=True))
    assert read_metrics_folder(tmp_path / "nothing") is None
    with pytest.raises(ValueError, match="plain file name"):
        write_metrics_folder(folder, {"../x": {"accepted@1": 1.0}})
    with pytest.raises(TypeError, match="must be a dict"):
        write_metrics_folder(folder, [("n", 3)])


def test_a_resume_from_the_local_cache_changes_the_cost_file_only(tmp_path):
    """The same training run written twice, once as it trained from step 0 and once as it found its finished
    checkpoint in $RLVR_CACHE_DIR (resumed_from_step = steps, almost no seconds; the repair warm start reused; an
    eval's tasks resumed from its journal): the scores and provenance files are byte-identical, only the cost file
    differs (DVC-tracked provenance must follow the stage's inputs, not the machine's cache)."""
    fresh = {**TRAIN, "resumed_from_step": 0, "train_runtime_s": 61.2,
             "training": {**REPAIR["training"], "resumed_from_step": 0, "warmup": {"rows": 596, "steps": 75,
                                                                                   "loss": 0.5,
                                                                                   "resumed_from_step": 0}},
             "eval": {**EVAL["synthetic"], "resumed_tasks": 0}}
    cached = {**fresh, "resumed_from_step": 240, "train_runtime_s": 0.02,
              "training": {**fresh["training"], "resumed_from_step": 20,
                           "warmup": {**fresh["training"]["warmup"], "resumed_from_step": 75}},
              "eval": {**fresh["eval"], "resumed_tasks": 18}}
    a = write_metrics(tmp_path / "a" / "metrics" / "sft.json", fresh)
    b = write_metrics(tmp_path / "b" / "metrics" / "sft.json", cached)
    assert a[0].read_bytes() == b[0].read_bytes() and a[2].read_bytes() == b[2].read_bytes()
    assert "resumed" not in a[2].read_text() and a[1].read_bytes() != b[1].read_bytes()
    assert json.loads(b[1].read_text())["resumed_from_step"] == 240  # still recorded: rlvr cost shows it


def test_a_report_in_folder_form_reads_back_through_its_file_name(tmp_path):
    """rlvr.layout.write_metrics_folder: each entry split as it would be inside the whole report (training's seconds are
    cost, its loss provenance; no scores file for it), a value that is not a dict (judge_check's judge_version) in the
    report's own file beside the folder, sub-folders read as nested entries, and read_metrics(<folder>.json) gives the
    whole report back; the file of the one-file layout is removed, not merged back; a dataset's three parts always
    exist (DVC declares the folders)."""
    root = tmp_path / "metrics"
    write_metrics(root / "repair.json", {"stale": {"accepted@1": 0.1}})  # the earlier one-file layout
    report = {**REPAIR, "judge_version": "rlvr-judge/2", "empty": {}}
    write_metrics_folder(root / "repair", report)
    assert not any(p.is_file() for p in layout_paths(root / "repair.json")[:2])
    assert json.loads((root / "provenance" / "repair.json").read_text()) == {"judge_version": "rlvr-judge/2"}
    assert json.loads((root / "cost" / "repair" / "training.json").read_text()) == {
        "rollout_s": 56.6, "stage_wall_s": 69.4, "resumed_from_step": 0, "warmup": {"resumed_from_step": 75}}
    assert not (root / "repair" / "training.json").exists()  # no scores in it: no empty row in dvc metrics show
    assert read_metrics(root / "repair.json") == json.loads(json.dumps(report, sort_keys=True))
    write_metrics_folder(root / "repair" / "before", {"synthetic": {"recovery_rate": 0.5, "n": 4}})
    assert read_metrics(root / "repair.json")["before"] == {"synthetic": {"n": 4, "recovery_rate": 0.5}}
    write_metrics_folder(root / "repair", {"synthetic": {"recovery_rate": 0.9}})  # no judge seconds this time
    assert json.loads((root / "cost" / "repair" / "synthetic.json").read_text()) == {}  # the part exists, empty
    assert not (root / "provenance" / "repair.json").exists()  # no judge_version this time
    assert read_metrics(root / "repair.json")["synthetic"] == {"recovery_rate": 0.9}
    write_metrics_folder(root / "seeds", {"synthetic": {"accepted@1": {"mean": 0.5}}, "none": {}}, empty=False)
    assert not (root / "cost" / "seeds").exists() and not (root / "provenance" / "seeds" / "synthetic.json").exists()
    assert read_metrics(root / "seeds.json") == {"none": {}, "synthetic": {"accepted@1": {"mean": 0.5}}}


def test_committed_metrics_files_keep_a_few_dozen_scores_each():
    """Every committed metrics file, whatever layout it was written in, splits into at most 50 scores."""
    metrics = ROOT / "metrics"
    mirrors = {metrics / "cost", metrics / "provenance"}
    folders = [metrics, *sorted(d for d in metrics.rglob("*") if d.is_dir() and not mirrors & {d, *d.parents})]
    for folder in folders:
        for name in metric_names(folder):
            scores = _leaves(split_metrics(read_metrics(folder / name))[0])
            assert len(scores) <= 50, f"{folder / name}: {len(scores)} scores"


def _stage_defs():
    for name, st in DVC["stages"].items():
        yield name, st.get("do", st)


def _paths(entries) -> list[str]:
    return [e if isinstance(e, str) else next(iter(e)) for e in entries or []]


def test_every_declared_metrics_file_declares_its_cost_and_provenance_parts():
    for name, st in _stage_defs():
        outs = set(_paths(st.get("outs")))
        for m in _paths(st.get("metrics")):
            _, cost, prov = layout_paths(m if m.endswith(".json") else f"{m}/x.json")
            want = {str(cost), str(prov)} if m.endswith(".json") else {str(cost.parent), str(prov.parent)}
            assert want <= outs, f"stage {name}: metrics {m} without outs {sorted(want - outs)}"


def _curves(path: str, props: dict | None) -> list[tuple[str, str]]:
    """(file, column) pairs a plot definition draws."""
    y = (props or {}).get("y")
    if isinstance(y, dict):
        return [(f, c) for f, cols in y.items() for c in ([cols] if isinstance(cols, str) else cols)]
    return [(path, c) for c in ([y] if isinstance(y, str) else (y or ["*"]))]


def test_each_curve_is_declared_once_and_no_seed_is_listed_by_hand():
    curves: list[tuple[str, str]] = []
    for entry in DVC.get("plots", []):
        key, props = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        curves += _curves(key, props)
    for _, st in _stage_defs():
        for entry in st.get("plots") or []:
            key, props = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
            curves += [(f, "*") for f, _ in _curves(key, props)]  # a stage plot draws its whole file
    files = {f for f, _ in curves}
    assert len(curves) == len(set(curves)), f"a curve declared twice: {sorted(curves)}"
    assert all((f, "*") not in curves or sum(g == f for g, _ in curves) == 1 for f in files), "file drawn twice"
    assert not [f for f in files if "seed-" in f and "${" not in f], "seed files listed by hand in plots"
