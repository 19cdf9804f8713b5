"""The report page from fixture metrics: sections, CIs, flips, graceful "not run", self-containedness, determinism."""

from __future__ import annotations

import base64
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="the report draws with matplotlib (add it to the project dependencies)")

from rlvr.layout import read_metrics, read_metrics_folder
from rlvr.report import ReportParams, build_report
from rlvr.report.summary import read_summary

IMG_RE = re.compile(r'<img class="chart" src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)">')
CFG = ReportParams(bootstrap=200, seed=0)


def _build(root: Path) -> tuple[Path, dict, str]:
    """Build the report of the metrics tree at ``root``: (root, summary, page html)."""
    summary = build_report(CFG, root / "metrics", root / "data", root / "reports" / "index.html")
    return root, summary, (root / "reports" / "index.html").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict, str]:
    from conftest import write_full_tree

    return _build(write_full_tree(tmp_path_factory.mktemp("full")))


@pytest.mark.slow
def test_full_report_sections_and_charts(built):
    _, summary, html = built
    assert summary["phases"] == ["baseline", "sft", "grpo_seed1", "grpo_seed2"]
    assert summary["training"] == ["grpo", "sft"]
    for sid in ("quality", "cost", "stability", "data"):
        assert f'<section id="{sid}">' in html
    imgs = IMG_RE.findall(html)
    assert len(imgs) == summary["charts"] >= 8
    cost_imgs = IMG_RE.findall(Path(summary["cost_page"]).read_text(encoding="utf-8"))
    assert len(cost_imgs) >= 2  # tokens per solved, generation vs judge wall: on the uncached cost page
    imgs += cost_imgs
    for b64, alt in imgs:
        svg = base64.b64decode(b64)
        tree = ET.fromstring(svg)  # well-formed SVG
        assert tree.tag.endswith("svg") and alt
        assert svg.count(b"<path") >= 3  # something is drawn
    # dpo never ran: listed as not run; repair too
    assert "eval of dpo (metrics/eval_dpo/)" in html and "repair (metrics/repair/eval/)" in html


@pytest.mark.slow
def test_full_report_numbers(built):
    root, _, html = built
    base = read_metrics(root / "metrics" / "baseline.json")
    acc = base["synthetic"]["accepted@1"]
    # accepted@1 with its CI: "value [lo, hi]"
    m = re.search(r'<td class="text">synthetic</td><td class="text">baseline</td><td>30</td><td>4</td>'
                  r"<td>([0-9.]+) \[([0-9.]+), ([0-9.]+)\]</td>", html)
    assert m, "baseline row with CI missing"
    v, lo, hi = map(float, m.groups())
    assert v == pytest.approx(acc, abs=1e-4) and lo <= v <= hi and lo < hi
    # flips table: baseline → sft on synthetic, counts recomputed from the per-task arrays
    pt_a = json.loads((root / "data" / "baseline" / "per_task" / "synthetic.json").read_text())
    pt_b = json.loads((root / "data" / "eval_sft" / "per_task" / "synthetic.json").read_text())
    won = sum(pt_b[t]["first"] == "accepted" and pt_a[t]["first"] != "accepted" for t in pt_a)
    lost = sum(pt_a[t]["first"] == "accepted" and pt_b[t]["first"] != "accepted" for t in pt_a)
    row = re.search(r'<td class="text">synthetic</td><td class="text">baseline → sft</td>(.*?)</tr>',
                    html.replace("\n", ""), re.S)
    assert row, "flips row missing"
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert int(cells[3]) == won and int(cells[4]) == lost
    # seeds summary, stability columns, data section numbers
    assert "Across seeds" in html and "mean ± std" in html
    assert re.search(r'alt="training curves of grpo \(train\): reward_mean, reward_std, [^"]*zero_std_frac', html)
    assert "Contamination audit: contamination" in html and "contamination_flagged" in html
    assert "0.9978" in html  # judge_check accepted fraction of mbpp
    assert "mbpp/12" in html  # listed rejection


@pytest.mark.slow
def test_page_is_self_contained(built):
    _, _, html = built
    assert "<script" not in html and "<link" not in html and "@import" not in html
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "url(" not in html


@pytest.mark.slow
def test_deterministic_output(built, tmp_path):
    root, _, html = built
    build_report(CFG, root / "metrics", root / "data", tmp_path / "again.html")
    assert (tmp_path / "again.html").read_text(encoding="utf-8") == html


def test_empty_pipeline_says_not_run(tmp_path):
    summary = build_report(CFG, tmp_path / "metrics", tmp_path / "data", tmp_path / "index.html")
    html = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert summary["charts"] == 0 and summary["phases"] == []
    assert html.count('class="status-notrun">not run:') == 6
    assert "governance (metrics/governance.json)" in summary["not_run"]
    assert "eval, the final Dev/Test evaluation (metrics/final/eval.json)" in summary["not_run"]
    assert "not run: the eval stage has not run (metrics/final/eval.json)" in html
    assert "not run: repair has not run (metrics/repair/eval/)" in html
    assert "<html" in html and "</html>" in html


def test_partial_pipeline_and_bad_file(tmp_path):
    from conftest import write_phase

    write_phase(tmp_path, "baseline", {"synthetic": 0.2}, seed=0)
    (tmp_path / "metrics" / "eval_sft.json").write_text("{not json")
    (tmp_path / "data" / "baseline" / "per_task" / "synthetic.json").unlink()  # CI from counts only
    summary = build_report(CFG, tmp_path / "metrics", tmp_path / "data", tmp_path / "index.html")
    html = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert summary["phases"] == ["baseline"]
    assert "Unreadable files" in html and "eval_sft.json" in html and "invalid JSON at line 1" in html
    assert "<td class=\"text\">counts</td>" in html  # accepted@1 CI from counts
    assert "Phase-to-phase flips: not available" in html
    assert 'id="stability">\n<h2>Stability</h2>\n<p class="status-notrun">not run:' in html
    assert "not run: governance and judge_check have not run" in html
    # governance alone: the Data section renders it and names judge_check as not run
    (tmp_path / "metrics" / "governance.json").write_text(json.dumps({"problems_before": 10, "problems_after": 9}))
    build_report(CFG, tmp_path / "metrics", tmp_path / "data", tmp_path / "index.html")
    html = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert "Judge check: not run" in html and "<td>10</td><td>9</td>" in html


def test_stage_cli(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from conftest import write_phase

    write_phase(tmp_path, "baseline", {"synthetic": 0.3}, seed=0)
    (tmp_path / "params.yaml").write_text("report:\n  bootstrap: 50\n  seed: 3\n")
    import importlib.util

    spec = importlib.util.spec_from_file_location("report_stage", Path(__file__).parents[2] / "stages" / "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(mod.main, [])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "reports" / "index.html").is_file()
    assert json.loads((tmp_path / "reports" / "params.resolved.json").read_text())["bootstrap"] == 50
    assert "phases ['baseline']" in res.output and "not run yet" in res.output
    (tmp_path / "params.yaml").write_text("report:\n  bootstrapp: 50\n")
    res = CliRunner().invoke(mod.main, [])
    assert res.exit_code != 0 and "report.bootstrapp" in res.output


def _section(html: str, sid: str) -> str:
    start = html.index(f'<section id="{sid}">')
    return html[start: html.index("</section>", start)].replace("\n", "")


@pytest.fixture(scope="module")
def complete(tmp_path_factory) -> tuple[Path, dict, str]:
    from conftest import write_complete_tree

    return _build(write_complete_tree(tmp_path_factory.mktemp("complete")))


@pytest.mark.slow
def test_final_eval_section_shows_metrics_final_numbers(complete):
    root, summary, html = complete
    assert summary["final_phases"] == ["baseline", "sft", "dpo", "grpo_seed1", "grpo_seed2"]
    assert html.index('<section id="final">') < html.index('<section id="quality">')
    sec = _section(html, "final")
    # every phase x dataset row carries the value and the CI the eval stage wrote (not recomputed)
    for phase in summary["final_phases"]:
        m = read_metrics_folder(root / "metrics" / "final" / f"eval_{phase}")
        for ds, role in (("heval", "test"), ("syn", "dev")):
            ci = m[ds]["ci"]["accepted@1"]
            row = re.search(rf'<td class="text">{ds}</td><td class="text">{role}</td><td class="text">{phase}</td>'
                            rf"<td>(\d+)</td><td>([0-9.]+) \[([0-9.]+), ([0-9.]+)\]</td>", sec)
            assert row, f"final row {ds}/{phase} missing"
            n, v, lo, hi = int(row[1]), *map(float, row.groups()[1:])
            assert n == m[ds]["dataset"]["n_problems"]
            assert (v, lo, hi) == pytest.approx((ci["value"], ci["lo"], ci["hi"]), abs=1e-3)
    base = read_metrics_folder(root / "metrics" / "final" / "eval_baseline")
    best = read_metrics_folder(root / "metrics" / "final" / "eval_grpo_seed2")
    assert base["heval"]["accepted@1"] == pytest.approx(0.2) and best["heval"]["accepted@1"] == 1.0  # real spread
    assert re.search(r'<td class="text">syn</td><td class="text">dev</td><td class="text">grpo_seed1</td>'
                     r"<td>12</td><td>[^<]+</td><td>[^<]+</td><td>([0-9.]+) \[", sec)  # pass@2 with CI on syn
    # seeds: mean ± std from metrics/final/seeds/grpo/{mean,std}/heval.json
    s = read_summary(root / "metrics" / "final" / "eval.json")["seeds"]["grpo"]["heval"]["accepted@1"]
    assert s["n"] == 2 and s["std"] > 0
    row = re.search(r'<td class="text">heval</td><td class="text">test</td><td class="text">grpo</td><td>2</td>'
                    r"<td>([0-9.]+) ± ([0-9.]+)</td>", sec)
    assert row and float(row[1]) == pytest.approx(s["mean"], abs=1e-3)
    assert float(row[2]) == pytest.approx(s["std"], rel=0.02)
    # headline, not-run phases, EVAL@budget, flips from data/eval/final per-task arrays, protocol
    assert "Headline: grpo" in sec and "Phases without a model (not run): repair." in sec
    assert "EVAL@budget accepted@1" in sec and "≤ 25 generated tokens" in sec
    assert '<td class="text">heval</td><td class="text">baseline → sft</td>' in sec
    assert "Final eval across seeds" in sec and "fake-judge/1" in sec
    assert len(re.findall(r'alt="bar chart of final-eval (accepted@1|pass@2) with confidence intervals"', sec)) == 2


@pytest.mark.slow
def test_repair_section_before_after(complete):
    _, _, html = complete
    sec = _section(html, "repair")
    row = re.search(r'<td class="text">recovery_rate</td><td>([0-9.]+)</td><td>([0-9.]+)</td><td>([0-9.]+)</td>', sec)
    assert row and tuple(map(float, row.groups())) == pytest.approx((0.25, 0.75, 0.5))
    assert "synthetic: repair before vs after training" in sec
    assert 'alt="accepted rate vs turn per dataset"' in sec and "bar chart of repair recovery rate" in sec
    assert "Repair training" in sec and "models/grpo/seed-1" in sec
    assert "training curves of repair" in _section(html, "stability")  # metrics/repair/curves.tsv


def test_repair_section_tolerates_missing_keys(tmp_path):
    from rlvr.report.collect import collect
    from rlvr.report.quality import repair_section

    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "repair.json").write_text(json.dumps({"mbpp": {"recovery_rate": 0.0, "n": 20}}))
    sec = repair_section(collect(tmp_path / "metrics", tmp_path / "data"), CFG)
    titles = [b.get("title") for b in sec["blocks"]]
    # no before/training/protocol/accepted_at_turn: only what exists
    assert titles == ["mbpp: repair", "Repair: recovery rate and final accepted"]
    assert [c["v"] for c in sec["blocks"][0]["rows"][0]] == ["recovery_rate", "0"]


def test_final_section_headline_of_a_phase_not_run(tmp_path):
    from rlvr.report.collect import collect
    from rlvr.report.quality import final_section

    (tmp_path / "metrics" / "final").mkdir(parents=True)
    (tmp_path / "metrics" / "final" / "eval.json").write_text(json.dumps(
        {"phases": {}, "not_run": ["repair"], "seeds": {}, "headline": {"phase": "repair", "not_run": True}}))
    col = collect(tmp_path / "metrics", tmp_path / "data")
    assert col.final_summary is not None and col.final_phases == []
    texts = [b["text"] for b in final_section(col, CFG)["blocks"] if b["kind"] == "text"]
    assert texts == ["Phases without a model (not run): repair.",
                     "Headline (eval.headline = repair): that phase has not run."]
