"""Build ``reports/index.html``: Final evaluation, Quality, Repair, Cost, Stability and Data sections from the
metrics files that exist, and ``reports/cost.html``, the page of the timings. The evaluation-result sections (Final
evaluation, Quality, Repair) are in :mod:`rlvr.report.quality`; this module holds the Cost, Stability and Data
sections and assembles the pages.

``index.html`` is a cached DVC output, so it holds no timing (:mod:`rlvr.report.timings`: it is rendered from the
metrics without their cost parts, and its Cost section links to ``cost.html``): the same metrics give the same bytes on
any machine. ``cost.html`` (uncached) holds the Cost section and the per-step timing curves.

Reads only files (:func:`rlvr.report.collect.collect`), never WandB, a model or the judge. A section or stage with no
file yet says "not run", so the page grows with the pipeline.

Definitions used in the Cost section (per phase, summed over its datasets; inputs from
:func:`rlvr.eval.metrics.compute_metrics`): generated tokens = Σ ``avg_generated_tokens`` × ``n_samples``; judge
seconds = Σ ``judge_s_mean`` × ``n_samples`` (judge CPU-side wall per sample, summed); tokens per solved = generated
tokens / Σ ``n_solved``; throughput = tokens generated in the run / Σ ``gen_wall_s`` (resumed runs generate less);
judge share of wall = Σ ``judge_wall_s`` / (Σ ``gen_wall_s`` + Σ ``judge_wall_s``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.eval.stats import seed_summary
from rlvr.io import atomic_write_text
from rlvr.layout import COST_KEY
from rlvr.report import charts
from rlvr.report.collect import Collected, Curve, Phase, TrainingRun, collect
from rlvr.report.formats import flatten
from rlvr.report.params import ReportParams
from rlvr.report.quality import final_section, quality_section, repair_section
from rlvr.report.render import Num, chart, fmt, pre, render_page, table, text
from rlvr.report.timings import COST_PAGE, cost_link, cost_sections, is_cost_file, without_timings

__all__ = ["STABILITY_COLUMNS", "ReportParams", "build_report", "build_sections"]

#: Curve columns shown first (in this order) and listed as "not logged" for RL stages that lack them.
STABILITY_COLUMNS = ("reward_mean", "reward_std", "accepted_rate", "pass_ratio", "kl", "entropy", "response_length",
                     "zero_std_frac", "clip_ratio", "judge_s")
_MAX_PANELS = 15


def _phase_cost(p: Phase) -> dict[str, float | None]:
    tok = js = gen_wall = judge_wall = run_tok = 0.0
    solved = 0
    have_gen = have_judge = False
    for m in p.datasets.values():
        n = m.get("n_samples") or 0
        tok += (m.get("avg_generated_tokens") or 0.0) * n
        js += (m.get("judge_s_mean") or 0.0) * n
        solved += m.get("n_solved") or 0
        if m.get("gen_wall_s"):
            have_gen = True
            gen_wall += m["gen_wall_s"]
            run_tok += (m.get("throughput_tokens_per_s") or 0.0) * m["gen_wall_s"]
        if m.get("judge_wall_s") is not None:
            have_judge = True
            judge_wall += m["judge_wall_s"]
    total_wall = (gen_wall if have_gen else 0.0) + (judge_wall if have_judge else 0.0)
    return {
        "tokens": tok, "judge_s": js, "solved": solved,
        "tokens_per_solved": tok / solved if solved else None,
        "judge_s_per_solved": js / solved if solved else None,
        "gen_wall_s": gen_wall if have_gen else None,
        "judge_wall_s": judge_wall if have_judge else None,
        "throughput_tokens_per_s": run_tok / gen_wall if have_gen and gen_wall else None,
        "judge_share": judge_wall / total_wall if have_judge and total_wall else None,
    }


def cost_section(col: Collected, cfg: ReportParams) -> dict[str, Any]:
    """Cost: tokens, judge seconds, throughput, cost per solved problem per phase; judge share of wall; training
    wall time."""
    blocks: list[dict[str, Any]] = []
    if col.phases:
        costs = {p.name: _phase_cost(p) for p in col.phases}
        blocks.append(table(
            ["phase", "generated tokens", "judge s (Σ samples)", "solved", "tokens / solved", "judge s / solved",
             "gen wall s", "judge wall s", "tokens / s", "judge share of wall"],
            [[n, c["tokens"], c["judge_s"], c["solved"], c["tokens_per_solved"], c["judge_s_per_solved"],
              c["gen_wall_s"], c["judge_wall_s"], c["throughput_tokens_per_s"], c["judge_share"]]
             for n, c in costs.items()],
            title="Per phase (all datasets)",
            note="Cost per solved is unbounded (—) when nothing is solved. Throughput counts only what this run "
                 "generated (resumed samples are not re-timed)."))
        detail = [[ds, p.name, m.get("n_samples"), m.get("avg_generated_tokens"), m.get("judge_s_mean"),
                   m.get("judge_s_p95"), m.get("throughput_samples_per_s"), m.get("tokens_per_solved"),
                   m.get("judge_s_per_solved")]
                  for p in col.phases for ds, m in p.datasets.items()]
        blocks.append(table(["dataset", "phase", "samples", "tokens / sample", "judge s / sample", "judge s p95",
                             "samples / s", "tokens / solved", "judge s / solved"], detail,
                            title="Per dataset and phase"))
        tps = {n: {"tokens / solved": c["tokens_per_solved"]} for n, c in costs.items()}
        if any(v["tokens / solved"] for v in tps.values()):
            blocks.append(chart(charts.grouped_bars(tps, "generated tokens per solved problem"),
                                "Generated tokens per solved problem", "bar chart of tokens per solved problem"))
        walls = {n: {"generation": c["gen_wall_s"], "judge": c["judge_wall_s"]} for n, c in costs.items()}
        if any(v["generation"] or v["judge"] for v in walls.values()):
            blocks.append(chart(charts.grouped_bars(walls, "wall seconds", stacked=True),
                                "Wall time: generation vs judge", "stacked bars of generation and judge seconds"))
    trows = []
    for stage, run in _ordered_training(col, cfg):
        for seed, summ in run.summaries.items():
            flat = flatten(summ)
            timing = {k: v for k, v in flat.items()
                      if isinstance(v, int | float) and not isinstance(v, bool)
                      and (k.endswith(("_s", "runtime", "tokens")) or "judge" in k)}
            for k, v in timing.items():
                trows.append([stage, "—" if seed is None else seed, k, v])
    if trows:
        blocks.append(table(["stage", "seed", "key", "value"], trows, title="Training stages: time and tokens"))
    return {"id": "cost", "title": "Cost", "blocks": blocks, "missing": "no eval or training metrics yet"}


def _ordered_training(col: Collected, cfg: ReportParams) -> list[tuple[str, TrainingRun]]:
    order = cfg.phase_order
    return sorted(col.training.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0]))


def stability_section(col: Collected, cfg: ReportParams) -> dict[str, Any]:
    """Stability: per training stage and curve file, every logged column vs step, seeds overlaid; summaries."""
    blocks: list[dict[str, Any]] = []
    for stage, run in _ordered_training(col, cfg):
        by_name: dict[str, list[Any]] = {}
        for c in run.curves:
            by_name.setdefault(c.name, []).append(c)
        for name, curves in by_name.items():
            curves.sort(key=lambda c: -1 if c.seed is None else c.seed)
            # the plot's columns and its cost mirror's (judge seconds per step), drawn together
            present = list(dict.fromkeys(k for c in curves for k in (*c.columns, *c.cost) if k != "step"))
            cols = [k for k in STABILITY_COLUMNS if k in present] + [k for k in present if k not in STABILITY_COLUMNS]
            shown = cols[:_MAX_PANELS]
            series = [(stage if c.seed is None else f"seed {c.seed}", {**c.columns, **c.cost}) for c in curves]
            blocks.append(chart(charts.curves_figure(series, shown), f"{stage}: {name} (vs step)",
                                f"training curves of {stage} ({name}): {', '.join(shown)}"))
            notes = []
            if len(cols) > len(shown):
                notes.append(f"{len(cols) - len(shown)} more columns not drawn: {', '.join(cols[len(shown):])}")
            if any(k.startswith("reward") for k in present):
                # timing columns (judge_s) are drawn on the cost page, not here (rlvr.report.timings)
                missing = [k for k in STABILITY_COLUMNS if k not in present and not COST_KEY.search(k)]
                if missing:
                    notes.append(f"not logged: {', '.join(missing)}")
            if notes:
                blocks.append(text("; ".join(notes), "note"))
        if run.summaries:
            seeds = sorted(run.summaries, key=lambda s: -1 if s is None else s)
            flats = {s: flatten(run.summaries[s]) for s in seeds}
            keys = list(dict.fromkeys(k for f in flats.values() for k, v in f.items() if isinstance(v, int | float)))
            heads = [stage if s is None else f"seed {s}" for s in seeds]
            rows = []
            for k in keys:
                vals = [flats[s].get(k) for s in seeds]
                row: list[Any] = [k, *vals]
                if len(seeds) > 1:
                    ss = seed_summary([v for v in vals if isinstance(v, int | float) and not isinstance(v, bool)])
                    row.append(Num(f"{fmt(ss['mean'])} ± {fmt(ss['std'], 2)}"))
                rows.append(row)
            blocks.append(table(["metric", *heads, *(["mean ± std"] if len(seeds) > 1 else [])], rows,
                                title=f"{stage}: summary ({', '.join(str(p) for p in run.summary_paths)})"))
    return {"id": "stability", "title": "Stability", "blocks": blocks, "missing": "no training stage has run yet"}


def data_section(col: Collected, cfg: ReportParams) -> dict[str, Any]:
    """Data: governance audit numbers, contamination hits, judge_check acceptance of reference solutions."""
    blocks: list[dict[str, Any]] = []
    g = col.governance
    if g is not None:
        blocks.append(table(["problems before", "problems after"],
                            [[g.get("problems_before"), g.get("problems_after")]], title="Governance"))
        per = g.get("problems_per_dataset") or {}
        tests = g.get("tests_per_dataset") or {}
        if per:
            blocks.append(table(["dataset", "problems", "tests"], [[d, n, tests.get(d)] for d, n in per.items()],
                                title="Problems per dataset (after governance)"))
            blocks.append(chart(charts.hbar(per, "problems"), "Problems per dataset", "bar chart of problems"))
        for name, counts in g.items():
            if name in ("problems_per_dataset", "tests_per_dataset") or not isinstance(counts, dict):
                continue
            flat = flatten(counts)
            is_contam = "contamination" in name or any("contamination" in k for k in flat)
            title = f"Contamination audit: {name}" if is_contam else f"Audit: {name}"
            blocks.append(table(["count", "value"], list(flat.items()), title=title))
        loose = {k: v for k, v in g.items() if "contamination" in k and not isinstance(v, dict)}
        if loose:
            blocks.append(table(["count", "value"], list(loose.items()), title="Contamination"))
    else:
        blocks.append(text("Governance: not run (metrics/governance.json missing).", "status-notrun"))
    jc = col.judge_check
    if jc is not None:
        dsets = {k: v for k, v in jc.items() if isinstance(v, dict)}
        blocks.append(table(
            ["dataset", "problems", "with reference", "accepted", "rejected", "accepted fraction", "judge s"],
            [[d, v.get("problems"), v.get("with_reference"), v.get("accepted"), v.get("rejected"),
              v.get("accepted_fraction") if v.get("with_reference") else None, v.get("judge_s")]
             for d, v in dsets.items()],
            title=f"Judge check: reference solutions through the judge (judge {jc.get('judge_version', '?')})"))
        fr = {d: v["accepted_fraction"] for d, v in dsets.items()  # no reference solution: nothing to check
              if isinstance(v.get("accepted_fraction"), int | float) and v.get("with_reference")}
        if fr:
            blocks.append(chart(charts.hbar(fr, "accepted fraction of reference solutions", xlim=(0, 1.1)),
                                "Judge check acceptance", "bar chart of accepted fractions"))
        rej = [f"{d}: {r.get('id')} — {r.get('verdict')} ({r.get('passed')}/{r.get('total')}) {r.get('message', '')}"
               for d, v in dsets.items() for r in (v.get("rejections") or [])[:20] if isinstance(r, dict)]
        if rej:
            blocks.append(pre(f"Rejected reference solutions (first 20 per dataset, {len(rej)} shown)", "\n".join(rej)))
    else:
        blocks.append(text("Judge check: not run (metrics/judge_check/ missing).", "status-notrun"))
    if col.audit_md:
        blocks.append(pre("data/governance/audit.md (full audit)", col.audit_md))
    has_any = g is not None or jc is not None or col.audit_md
    return {"id": "data", "title": "Data", "blocks": blocks if has_any else [],
            "missing": "governance and judge_check have not run"}


def _not_run(col: Collected, cfg: ReportParams) -> list[str]:
    seen = {p.base for p in col.phases} | set(col.training)
    out = []
    if col.governance is None:
        out.append("governance (metrics/governance.json)")
    if col.judge_check is None:
        out.append("judge_check (metrics/judge_check/)")
    if not col.final_phases and col.final_summary is None:
        out.append("eval, the final Dev/Test evaluation (metrics/final/eval.json)")
    for name in cfg.phase_order:
        if name == "baseline":
            if "baseline" not in seen:
                out.append("baseline (metrics/baseline/)")
        elif name == "repair":
            if col.repair is None:
                out.append("repair (metrics/repair/eval/)")
        else:
            if name not in col.training:
                out.append(f"{name} training (metrics/{name}.json, metrics/{name}/*.tsv)")
            if name not in {p.base for p in col.phases}:
                out.append(f"eval of {name} (metrics/eval_{name}/)")
    return out


def build_sections(col: Collected, cfg: ReportParams, cost: bool = True
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(intro blocks, sections)`` of the page for ``col``; with ``cost=False`` the Cost section is only a link to
    the cost page (:func:`rlvr.report.timings.cost_link`), as in the cached ``index.html``."""
    from rlvr.report.render import table as _table

    intro: list[dict[str, Any]] = []
    missing = _not_run(col, cfg)
    if missing:
        intro.append({"kind": "list", "title": "Not run yet", "items": missing, "cls": "notrun"})
    if col.problems:
        intro.append(_table(["file", "problem"], list(col.problems.items()), title="Unreadable files (skipped)"))
    intro.append(pre(f"Inputs ({len(col.sources)} files, sha256)",
                     "\n".join(f"{h[:16]}  {p}" for p, h in sorted(col.sources.items())) or "none"))
    costs = cost_section(col, cfg) if cost else {"id": "cost", "title": "Cost",
                                                 "blocks": [cost_link()] if col.phases or col.training else [],
                                                 "missing": "no eval or training metrics yet"}
    sections = [final_section(col, cfg), quality_section(col, cfg), repair_section(col, cfg), costs,
                stability_section(col, cfg), data_section(col, cfg)]
    return intro, sections


def seed_overlays(col: Collected) -> dict[str, str]:
    """DVC-plots data for the seeded training curves, seeds overlaid: ``{file name: TSV text}``, one long-format file
    per seeded stage and curve name (``grpo.tsv``; ``<stage>_<name>.tsv`` for a named curve file), columns ``step``,
    ``seed`` and every column of the plot TSVs (empty cell where a seed did not log it; not their cost mirrors' timing
    columns, so a clean re-run writes the same bytes), rows by seed then step. dvc.yaml's
    top-level ``plots`` draw them with the ``.dvc/plots/seeds.json`` template (one line per seed), so the overlay
    follows the ``seeds`` param instead of listing seed files by hand."""
    out: dict[str, str] = {}
    for stage, run in sorted(col.training.items()):
        by_name: dict[str, list[Curve]] = {}
        for c in run.curves:
            if c.seed is not None:
                by_name.setdefault(c.name, []).append(c)
        for name, curves in sorted(by_name.items()):
            curves.sort(key=lambda c: c.seed)
            cols = list(dict.fromkeys(k for c in curves for k in c.columns if k != "step"))
            lines = ["\t".join(["step", "seed", *cols])]
            for c in curves:
                for i in range(len(c.columns["step"])):
                    cells = [c.columns[k][i] if k in c.columns else None for k in ("step", *cols)]
                    lines.append("\t".join([_cell(cells[0]), str(c.seed), *(_cell(v) for v in cells[1:])]))
            out[f"{stage}.tsv" if name == "curves" else f"{stage}_{name}.tsv"] = "\n".join(lines) + "\n"
    return out


def _cell(v: float | None) -> str:
    """A TSV cell: empty for a missing or NaN value, an integral float without ``.0`` (steps), else ``repr``."""
    if v is None or v != v:
        return ""
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def build_report(
    cfg: ReportParams,
    metrics_dir: str | Path = "metrics",
    data_dir: str | Path = "data",
    out_path: str | Path = "reports/index.html",
) -> dict[str, Any]:
    """Collect the metrics files, render the page without timings (:func:`rlvr.report.timings.without_timings`) and
    write it atomically to ``out_path``; write the timings' page to ``<out_path's folder>/cost.html``
    (:data:`rlvr.report.timings.COST_PAGE`: the Cost section, the per-step timing curves and the sha256 of the
    ``metrics/cost/`` files read) and the seeds-overlaid curve data for ``dvc plots`` (:func:`seed_overlays`) to
    ``<out_path's folder>/plots/``. Everything but ``cost.html`` is the same for metrics that differ only in their
    timings.

    Returns a summary ``{"phases": [...], "final_phases": [...], "training": [...], "not_run": [...], "charts": n,
    "bytes": size of out_path, "cost_page": its path}``.
    Never fails because a stage has not run; raises only on I/O errors writing ``out_path``."""
    full = collect(metrics_dir, data_dir, cfg.phase_order)
    col = without_timings(full)
    intro, sections = build_sections(col, cfg, cost=False)
    html = render_page(cfg.title, sections, intro)
    atomic_write_text(out_path, html)
    cost_path = Path(out_path).parent / COST_PAGE
    cost_files = sorted((p, h) for p, h in full.sources.items() if is_cost_file(p))
    cost_intro = [
        {"kind": "link", "href": Path(out_path).name, "text": f"Back to the report ({Path(out_path).name})",
         "note": "The timings of this run: they depend on the machine and its load, so this page is not cached by "
                 "DVC (reports/cost.html, cache: false)."},
        pre(f"Inputs ({len(cost_files)} files, sha256)", "\n".join(f"{h[:16]}  {p}" for p, h in cost_files) or "none"),
    ]
    atomic_write_text(cost_path, render_page(f"{cfg.title}: cost", cost_sections(full, cost_section(full, cfg)),
                                             cost_intro))
    for name, tsv in seed_overlays(col).items():
        atomic_write_text(Path(out_path).parent / "plots" / name, tsv)
    n_charts = sum(1 for s in sections for b in s["blocks"] if b["kind"] == "chart")
    return {"phases": [p.name for p in col.phases], "final_phases": [p.name for p in col.final_phases],
            "training": sorted(col.training), "not_run": _not_run(col, cfg), "charts": n_charts,
            "bytes": len(html.encode()), "cost_page": str(cost_path)}
