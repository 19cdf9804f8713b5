"""The report's DVC-cached outputs hold no timing (issue 45): metrics that differ only in their timings give
byte-identical ``reports/index.html`` and ``reports/plots/``, so a shared DVC cache restores them on any machine; the
timings reach the uncached ``reports/cost.html``, and dvc.yaml declares it so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

pytest.importorskip("matplotlib", reason="the report draws with matplotlib")

from rlvr.layout import read_metrics, write_curves, write_metrics
from rlvr.report import ReportParams, build_report
from rlvr.report.formats import read_tsv
from rlvr.report.timings import COST_PAGE, drop_cost, is_cost_file

ROOT = Path(__file__).resolve().parents[2]
CFG = ReportParams(bootstrap=50, seed=0)


def _pipeline_tree(root: Path) -> Path:
    """The fixture tree of a full pipeline, rewritten as the stages write it: every metrics file split into scores,
    cost and provenance (:func:`rlvr.layout.write_metrics`), every curve with its timing columns in a cost mirror
    (:func:`rlvr.layout.write_curves`)."""
    from conftest import write_full_tree

    write_full_tree(root)
    metrics = root / "metrics"
    for path in sorted(metrics.glob("*.json")):
        report = read_metrics(path)
        write_metrics(path, report)
    for path in sorted(metrics.rglob("*.tsv")):
        cols = read_tsv(path)
        names = [c for c in cols if c != "step"]
        rows = [{"step": int(s), **{c: "" if cols[c][i] != cols[c][i] else cols[c][i] for c in names}}
                for i, s in enumerate(cols["step"])]
        write_curves(path, names, rows)
    assert (metrics / "cost" / "grpo" / "seed-1" / "train.tsv").is_file()  # judge_s went to the mirror
    return root


def _retime(root: Path, factor: float) -> None:
    """Multiply every number in every ``metrics/cost/`` file (JSON leaves, TSV cells but ``step``) by ``factor``: what
    another machine, or the same one under another load, measures."""
    def scale(node):
        if isinstance(node, dict):
            return {k: scale(v) for k, v in node.items()}
        if isinstance(node, int | float) and not isinstance(node, bool):
            return node * factor
        return node

    for path in sorted((root / "metrics" / "cost").rglob("*")):
        if path.suffix == ".json":
            path.write_text(json.dumps(scale(json.loads(path.read_text()))))
        elif path.suffix == ".tsv":
            lines = path.read_text().splitlines()
            out = [lines[0]]
            for line in lines[1:]:
                step, *cells = line.split("\t")
                out.append("\t".join([step, *(repr(float(c) * factor) if c else "" for c in cells)]))
            path.write_text("\n".join(out) + "\n")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_cached_outputs_do_not_depend_on_timings(tmp_path):
    root = _pipeline_tree(tmp_path / "run")
    build_report(CFG, root / "metrics", root / "data", tmp_path / "a" / "index.html")
    _retime(root, 3.0)
    summary = build_report(CFG, root / "metrics", root / "data", tmp_path / "b" / "index.html")
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert set(a) == set(b) and COST_PAGE in a and "index.html" in a and any(n.startswith("plots/") for n in a)
    cached = sorted(n for n in a if n != COST_PAGE)
    assert [n for n in cached if a[n] != b[n]] == []  # index.html and plots/*: byte-identical
    assert a[COST_PAGE] != b[COST_PAGE]
    # the timings reach the uncached page: sft's train_runtime_s 61.2 s, then 183.6 s; the cached page links to it
    assert b"61.2" in a[COST_PAGE] and b"183.6" in b[COST_PAGE] and b"183.6" not in b["index.html"]
    assert f'href="{COST_PAGE}"'.encode() in b["index.html"] and b'href="index.html"' in b[COST_PAGE]
    assert b"judge_s" not in b["index.html"] and b"judge_s" in b[COST_PAGE]  # not even "not logged: judge_s"
    assert b"metrics/cost/sft.json" in b[COST_PAGE] and b"metrics/cost/sft.json" not in b["index.html"]
    assert summary["cost_page"] == str(tmp_path / "b" / COST_PAGE)


def test_drop_cost_keeps_scores_and_provenance_in_order():
    report = {"mbpp": {"accepted@1": 0.5, "judge_s_mean": 0.2, "n": 3, "verdicts": {"accepted": 2}},
              "training": {"train_runtime_s": 9.0, "stage_wall_s": 12.0}, "throughput_tokens_per_s": 40.0,
              "protocol": {"output_limit_mb": 8}, "train_loss": 1.0}
    assert drop_cost(report) == {"mbpp": {"accepted@1": 0.5, "n": 3, "verdicts": {"accepted": 2}},
                                 "protocol": {"output_limit_mb": 8}, "train_loss": 1.0}
    assert list(drop_cost(report)["mbpp"]) == ["accepted@1", "n", "verdicts"]
    assert drop_cost(None) is None


def test_is_cost_file():
    assert is_cost_file("metrics/cost/sft.json") and is_cost_file("/x/metrics/cost/grpo/seed-1.tsv")
    assert not is_cost_file("metrics/sft.json") and not is_cost_file("metrics/provenance/cost/a.json")
    assert not is_cost_file("metrics/cost") and not is_cost_file("data/cost/a.json")


def test_dvc_yaml_caches_no_timing_of_the_report():
    """dvc.yaml's report stage: the cost page is an uncached out, every other file the stage writes is a cached one
    (a whole ``reports`` folder out would cache the cost page with it)."""
    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["report"]
    outs = {}
    for out in stage["outs"]:
        name, opts = next(iter(out.items())) if isinstance(out, dict) else (out, {})
        outs[name] = (opts or {}).get("cache", True)
    assert outs.get(f"reports/{COST_PAGE}") is False
    assert "reports" not in outs
    assert {n for n, cached in outs.items() if cached} == {"reports/index.html", "reports/plots",
                                                          "reports/params.resolved.json"}
