"""Reading metrics files generically (rlvr.report.collect; one file's format: test_report_formats.py) and the wandb-sync
command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlvr.report.collect import collect, split_seed
from rlvr.report.wandb_sync import find_runs, sync_command
from rlvr.report.wandb_sync import main as wandb_sync


@pytest.mark.parametrize("name, expected", [
    ("grpo_seed2", ("grpo", 2)), ("grpo-seed-1", ("grpo", 1)), ("sft", ("sft", None)), ("seed-3", ("", 3)),
    ("train/seed_4", ("train", 4)), ("grpo", ("grpo", None)),
])
def test_split_seed(name, expected):
    assert split_seed(name) == expected


def test_collect_full_tree(full_tree):
    col = collect(full_tree / "metrics", full_tree / "data")
    assert [p.name for p in col.phases] == ["baseline", "sft", "grpo_seed1", "grpo_seed2"]
    grpo = [p for p in col.phases if p.base == "grpo"]
    assert [p.seed for p in grpo] == [1, 2]
    assert set(col.phases[0].per_task) == {"synthetic", "mbpp"}  # data/baseline/per_task/*.json
    assert col.phases[0].protocol["judge_version"] == "test-1"
    assert set(col.training) == {"sft", "grpo"}
    assert sorted(c.seed for c in col.training["grpo"].curves) == [1, 2]
    assert {c.name for c in col.training["grpo"].curves} == {"train"}
    assert set(col.training["grpo"].summaries) == {1, 2} and set(col.training["sft"].summaries) == {None}
    assert col.governance["problems_after"] == 2900 and col.judge_check["mbpp"]["rejected"] == 1
    assert col.audit_md.startswith("# Data governance audit")
    assert len(col.sources) == 4 + 3 + 3 + 2 + 1 and not col.problems  # phases, training json, tsv, data, audit


def test_collect_missing_dir_and_repair_shapes(tmp_path):
    assert collect(tmp_path / "nope").phases == []
    m = tmp_path / "metrics"
    m.mkdir()
    (m / "repair.json").write_text(json.dumps({"turns": 3, "accepted_after_turn": [0.1, 0.2, 0.25]}))
    (m / "eval_x.json").write_text(json.dumps({"protocol": {}}))
    col = collect(m, tmp_path)
    assert col.repair["turns"] == 3 and col.phases == []
    assert "no dataset entries" in col.problems[str(m / "eval_x.json")]


def _fake_run(root: Path, name: str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / f"run-{name.rsplit('-', 1)[-1]}.wandb").write_bytes(b"x")
    return d


def test_find_runs_and_command(tmp_path):
    a = _fake_run(tmp_path / "wandb", "offline-run-20250101_000001-aaa")
    b = _fake_run(tmp_path / ".cache" / "wandb" / "wandb", "offline-run-20250101_000000-bbb")
    (tmp_path / "wandb" / "run-empty").mkdir()  # no .wandb file: not a run
    runs = find_runs([tmp_path / "wandb", tmp_path / ".cache", tmp_path / "missing"])
    assert runs == [b.resolve(), a.resolve()]  # start-time order
    cmd = sync_command(runs, project="p", dry_run=True)
    assert cmd[1:5] == ["-m", "wandb", "sync", "--yes"] and cmd[5:8] == ["--project", "p", "--dry-run"]
    assert cmd[-2:] == [str(b.resolve()), str(a.resolve())]


def test_wandb_sync_cli(tmp_path, monkeypatch):
    _fake_run(tmp_path / "w", "offline-run-20250101_000000-ccc")
    calls = []

    def fake_run(cmd, check=False):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    res = CliRunner().invoke(wandb_sync, ["--dir", str(tmp_path / "w"), "--entity", "me"])
    assert res.exit_code == 0, res.output
    assert calls and "--entity" in calls[0] and calls[0][-1].endswith("offline-run-20250101_000000-ccc")
    res = CliRunner().invoke(wandb_sync, ["--dir", str(tmp_path / "empty")])
    assert res.exit_code != 0 and "no WandB run folders" in res.output


def test_final_phases_read_from_folders_and_from_the_earlier_one_file_layout(tmp_path):
    """metrics/final/eval_<phase>/<dataset>.json (rlvr.layout.write_metrics_folder) and the earlier eval_<phase>.json
    give the same phase; where both exist (a leftover file), the folder wins."""
    from rlvr.layout import write_metrics, write_metrics_folder

    report = {"syn": {"accepted@1": 0.5, "pass@1": 0.5, "n_tasks": 4, "judge_s_mean": 0.1,
                      "ci": {"accepted@1": {"lo": 0.1, "hi": 0.9}}}, "protocol": {"n": 1}}
    final = tmp_path / "metrics" / "final"
    write_metrics_folder(final / "eval_sft", report)
    write_metrics(final / "eval_baseline.json", report)
    write_metrics(final / "eval_sft.json", {"syn": {"accepted@1": 0.0}})  # stale, beside the folder
    col = collect(tmp_path / "metrics", tmp_path / "data")
    phases = {p.name: p for p in col.final_phases}
    assert sorted(phases) == ["baseline", "sft"] and not col.problems
    assert phases["sft"].datasets == phases["baseline"].datasets == {"syn": {k: report["syn"][k] for k in sorted(
        report["syn"])}}
    assert phases["sft"].protocol == {"n": 1}
    assert str(tmp_path / "metrics" / "provenance" / "final" / "eval_sft" / "protocol.json") in col.sources


def _to_folder_form(metrics: Path) -> None:
    """Rewrite the tree's one-file reports the way the stages now write them: baseline, judge_check and
    eval_<stage> as a folder of one file per dataset, repair as metrics/repair/eval/{after,before}/."""
    from rlvr.layout import layout_paths, read_metrics, write_metrics_folder

    for name in ("baseline", "judge_check", *(p.stem for p in metrics.glob("eval_*.json")), "repair"):
        report = read_metrics(metrics / f"{name}.json")
        for part in layout_paths(metrics / f"{name}.json"):
            part.unlink(missing_ok=True)
        if name != "repair":
            write_metrics_folder(metrics / name, report)
            continue
        write_metrics_folder(metrics / "repair" / "eval" / "after", {k: v for k, v in report.items() if k != "before"})
        write_metrics_folder(metrics / "repair" / "eval" / "before", report["before"])


def test_collect_reads_reports_in_folder_form_as_in_one_file(tmp_path):
    """The report sees the same phases, judge check and repair whether a stage wrote one file or a folder of one
    file per dataset (rlvr.layout.write_metrics_folder; rlvr.report.collect.repair_report)."""
    from conftest import write_complete_tree

    def seen(root: Path) -> dict:
        col = collect(root / "metrics", root / "data")
        return {"phases": [(p.name, p.datasets, p.protocol, p.per_task) for p in col.phases],
                "judge_check": col.judge_check, "repair": col.repair, "governance": col.governance,
                "training": sorted(col.training), "problems": col.problems}

    one, folders = write_complete_tree(tmp_path / "one"), write_complete_tree(tmp_path / "folders")
    _to_folder_form(folders / "metrics")
    assert not (folders / "metrics" / "baseline.json").exists()
    assert sorted(p.name for p in (folders / "metrics" / "judge_check").iterdir()) == ["humaneval.json", "mbpp.json"]
    want = seen(one)
    assert want["repair"]["before"] and want["judge_check"]["judge_version"] and len(want["phases"]) == 5  # with repair
    assert seen(folders) == want
