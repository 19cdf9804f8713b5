"""Build ``reports/index.html``: Final evaluation, Quality, Repair, Cost, Stability and Data sections from the
metrics files that exist.

*Final evaluation* shows the ``eval`` stage (``metrics/final/``: every phase on Dev **and Test** under one protocol,
its CIs, mean ± std over seeds, the ``eval.headline`` block); *Quality* the post-stage Dev evaluations
(``metrics/baseline.json``, ``metrics/eval_<stage>.json``); *Repair* ``metrics/repair.json`` (before / after repair
training when present).

Reads only files (:func:`rlvr.report.collect.collect`), never WandB, a model or the judge. A section or stage with no
file yet says "not run", so the page grows with the pipeline. Uncertainty follows :mod:`rlvr.eval.stats`: percentile
bootstrap CIs over problems (Efron & Tibshirani 1993) from the per-task arrays, or, for accepted@1 without them, from
the counts; paired flips with McNemar's exact test (McNemar 1947); mean ± std over seeds.

Definitions used in the Cost section (per phase, summed over its datasets; inputs from
:func:`rlvr.eval.metrics.compute_metrics`): generated tokens = Σ ``avg_generated_tokens`` × ``n_samples``; judge
seconds = Σ ``judge_s_mean`` × ``n_samples`` (judge CPU-side wall per sample, summed); tokens per solved = generated
tokens / Σ ``n_solved``; throughput = tokens generated in the run / Σ ``gen_wall_s`` (resumed runs generate less);
judge share of wall = Σ ``judge_wall_s`` / (Σ ``gen_wall_s`` + Σ ``judge_wall_s``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from rlvr.config import Section
from rlvr.eval.stats import bootstrap_counts_ci, paired_flips, per_task_metric_cis, seed_summary
from rlvr.io import atomic_write_text
from rlvr.judge.verdict import VERDICTS
from rlvr.report import charts
from rlvr.report.collect import Collected, Phase, TrainingRun, collect, flatten
from rlvr.report.render import Num, chart, fmt, pre, render_page, table, text

__all__ = ["STABILITY_COLUMNS", "ReportParams", "build_report", "build_sections", "final_section", "repair_section"]

#: Curve columns shown first (in this order) and listed as "not logged" for RL stages that lack them.
STABILITY_COLUMNS = ("reward_mean", "reward_std", "accepted_rate", "pass_ratio", "kl", "entropy", "response_length",
                     "zero_std_frac", "clip_ratio", "judge_s")
_MAX_PANELS = 15


class ReportParams(Section):
    """``params.yaml`` section ``report``.

    ``bootstrap``: resamples B of the bootstrap CIs; ``seed``: their RNG seed; ``alpha``: 1 - CI coverage (0.05 →
    95 %); ``phase_order``: pipeline order of phases/stages (flips compare each phase with the previous one; unknown
    names go last); ``title``: page title."""

    bootstrap: int = Field(1000, ge=1)
    seed: int = 0
    alpha: float = Field(0.05, gt=0, lt=1)
    phase_order: list[str] = Field(default_factory=lambda: ["baseline", "sft", "dpo", "grpo", "repair"])
    title: str = "rlvr report: quality, cost, stability, data"


# ----------------------------------------------------------------------------------------------------------- helpers
def _ci_cell(ci: Mapping[str, Any] | None, value: float | None = None) -> Num | None:
    if ci is None or ci.get("value") is None:
        return None if value is None else Num(fmt(value))
    if ci.get("lo") is None:
        return Num(fmt(ci["value"]))
    return Num(f"{fmt(ci['value'])} [{fmt(ci['lo'], 3)}, {fmt(ci['hi'], 3)}]")


def _ks(phases: Sequence[Phase]) -> list[str]:
    keys = {k for p in phases for m in p.datasets.values() for k in m if k.startswith("pass@") and k[5:].isdigit()}
    return sorted(keys, key=lambda k: int(k[5:]))


def _datasets(phases: Sequence[Phase]) -> list[str]:
    return list(dict.fromkeys(ds for p in phases for ds in p.datasets))


def _phase_cis(phase: Phase, ds: str, cfg: ReportParams) -> dict[str, dict[str, Any]]:
    """CIs for one phase × dataset: from per-task arrays when present, else accepted@1 from its counts."""
    if phase.per_task.get(ds):
        return per_task_metric_cis(phase.per_task[ds], n_boot=cfg.bootstrap, seed=cfg.seed, alpha=cfg.alpha)
    m = phase.datasets[ds]
    acc, n = m.get("accepted@1"), m.get("n_tasks")
    if isinstance(acc, int | float) and isinstance(n, int) and n > 0:
        return {"accepted@1": bootstrap_counts_ci(round(acc * n), n, n_boot=cfg.bootstrap, seed=cfg.seed,
                                                  alpha=cfg.alpha)}
    return {}


def _predecessors(phases: Sequence[Phase]) -> list[tuple[Phase, Phase]]:
    """(A, B) pairs to compare: each phase with the last phase of the previous base in pipeline order, and with the
    baseline when that is not already its predecessor."""
    bases = list(dict.fromkeys(p.base for p in phases))
    by_base: dict[str, list[Phase]] = {}
    for p in phases:
        by_base.setdefault(p.base, []).append(p)
    pairs: list[tuple[Phase, Phase]] = []
    first = by_base[bases[0]][0] if bases and len(by_base[bases[0]]) == 1 else None
    for i, base in enumerate(bases[1:], 1):
        prev = by_base[bases[i - 1]]
        for p in by_base[base]:
            if len(prev) == 1:  # several seeds before: no single predecessor, compare with the first phase only
                pairs.append((prev[0], p))
            if i > 1 and first is not None:
                pairs.append((first, p))
    return pairs


def _solved_first(per_task: Mapping[str, Mapping[str, Any]]) -> dict[str, bool]:
    return {t: v.get("first") == "accepted" for t, v in per_task.items()}


# ---------------------------------------------------------------------------------------------------------- sections
def quality_section(col: Collected, cfg: ReportParams) -> dict[str, Any]:
    """Quality: accepted@1 / pass@k with CIs per dataset and phase, seed summaries, verdict breakdown, flips."""
    blocks: list[dict[str, Any]] = []
    phases = col.phases
    if phases:
        blocks.append(text("Post-stage evaluations on Dev sets (metrics/baseline.json, metrics/eval_<stage>.json: "
                           "the baseline protocol run by each training stage on its own model). Test sets are scored "
                           "only in Final evaluation.", "note"))
        ks = _ks(phases)
        datasets = _datasets(phases)
        cis = {(p.name, ds): _phase_cis(p, ds, cfg) for p in phases for ds in p.datasets}
        level = f"{100 * (1 - cfg.alpha):g} %"
        rows = []
        for ds in datasets:
            for p in phases:
                if ds not in p.datasets:
                    continue
                m, ci = p.datasets[ds], cis[(p.name, ds)]
                rows.append([ds, p.name, m.get("n_tasks"), m.get("samples_per_task"),
                             _ci_cell(ci.get("accepted@1"), m.get("accepted@1")),
                             *[_ci_cell(ci.get(k), m.get(k)) for k in ks],
                             m.get("pass_ratio_mean"), m.get("exec_success_rate"),
                             "per-task" if ds in p.per_task else "counts" if ci else "—"])
        blocks.append(table(
            ["dataset", "phase", "tasks", "samples/task", "accepted@1 [CI]", *[f"{k} [CI]" for k in ks],
             "pass_ratio mean", "exec success", "CI from"], rows,
            title=f"accepted@1 and pass@k with {level} bootstrap CIs",
            note=f"Percentile bootstrap over problems, B = {cfg.bootstrap}, seed {cfg.seed} (Efron & Tibshirani "
                 "1993); pass@k is the unbiased estimator of Chen et al. 2021. CIs of pass@k need the per-task "
                 "arrays."))
        seeded = {}
        for p in phases:
            if p.seed is not None:
                seeded.setdefault(p.base, []).append(p)
        srows = []
        for base, ps in seeded.items():
            for ds in datasets:
                vals = {k: seed_summary([p.datasets[ds].get(k) for p in ps if ds in p.datasets])
                        for k in ["accepted@1", *ks]}
                if vals["accepted@1"]["n"]:
                    srows.append([ds, base, vals["accepted@1"]["n"],
                                  *[Num(f"{fmt(v['mean'])} ± {fmt(v['std'], 2)}") for v in vals.values()]])
        if srows:
            heads = ["dataset", "phase", "seeds", "accepted@1 mean ± std", *[f"{k} mean ± std" for k in ks]]
            blocks.append(table(heads, srows, title="Across seeds", note="Sample standard deviation (ddof = 1)."))
        for metric in ["accepted@1", *[k for k in ks if k != "pass@1"]]:
            panels = {ds: {p.name: ((p.datasets[ds].get(metric), cis[(p.name, ds)].get(metric, {}).get("lo"),
                                     cis[(p.name, ds)].get(metric, {}).get("hi"))
                                    if isinstance(p.datasets[ds].get(metric), int | float) else None)
                           for p in phases if ds in p.datasets} for ds in datasets}
            blocks.append(chart(charts.bars_with_ci(panels, metric), f"{metric} per dataset and phase ({level} CI)",
                                f"bar chart of {metric} with confidence intervals"))
        vpanels = {ds: {p.name: {v: float(c.get("fraction", 0.0)) for v, c in p.datasets[ds]["verdicts"].items()
                                 if isinstance(c, dict)}
                        for p in phases if ds in p.datasets and isinstance(p.datasets[ds].get("verdicts"), dict)}
                   for ds in datasets}
        vpanels = {ds: b for ds, b in vpanels.items() if b}
        if vpanels:
            blocks.append(chart(charts.verdict_breakdown(vpanels), "Error breakdown: verdicts of all samples",
                                "stacked bars of verdict fractions"))
            unknown = sorted({v for b in vpanels.values() for f in b.values() for v in f} - set(VERDICTS))
            if unknown:
                blocks.append(text(f"Verdicts outside the closed vocabulary (not drawn): {', '.join(unknown)}",
                                   "status-notrun"))
        blocks += _flips_blocks(phases, datasets)
        protos = [[p.name, *[fmt(v) for v in (p.protocol.get("model"), p.protocol.get("backend"), p.protocol.get("n"),
                                              p.protocol.get("ks"), p.protocol.get("judge_version"))],
                   fmt(flatten(p.protocol.get("sampling", {})) or None)] for p in phases]
        blocks.append(table(["phase", "model", "backend", "n", "ks", "judge version", "sampling"], protos,
                            title="Protocol recorded in each metrics file"))
    return {"id": "quality", "title": "Quality", "blocks": blocks, "missing": "no baseline/eval metrics yet"}


_ROLE_ORDER = {"test": 0, "dev": 1}


def _final_ci(m: Mapping[str, Any], metric: str) -> Num | None:
    """``value [lo, hi]`` of ``metric`` from the CI block the eval stage wrote into a dataset entry."""
    ci = m.get("ci") if isinstance(m.get("ci"), dict) else {}
    return _ci_cell(ci.get(metric), m.get(metric) if isinstance(m.get(metric), int | float) else None)


def _bar(m: Mapping[str, Any], metric: str) -> tuple[float, float | None, float | None] | None:
    v = m.get(metric)
    if not isinstance(v, int | float) or isinstance(v, bool):
        return None
    ci = (m.get("ci") or {}).get(metric) or {}
    return float(v), ci.get("lo"), ci.get("hi")


def final_section(col: Collected, cfg: ReportParams) -> dict[str, Any]:
    """Final evaluation (stage ``eval``, :mod:`rlvr.eval.final`): every phase on the Dev and Test sets under one
    protocol. Values and 95 % CIs are read from ``metrics/final/eval_<phase>.json`` as the stage computed them (not
    recomputed); seeds from ``metrics/final/eval.json`` (``seeds``: mean ± std, ddof = 1), else from the phase files;
    headline and not-run phases from the summary; flips from ``data/eval/final/<phase>/per_task`` when present."""
    phases, summ = col.final_phases, col.final_summary or {}
    blocks: list[dict[str, Any]] = []
    if not phases and not summ:
        return {"id": "final", "title": "Final evaluation", "blocks": [],
                "missing": "the eval stage has not run (metrics/final/eval.json)"}
    ks = _ks(phases)
    datasets = sorted(_datasets(phases), key=lambda d: (min(_ROLE_ORDER.get(str(p.datasets[d].get("role")), 2)
                                                            for p in phases if d in p.datasets), d))
    proto = phases[0].protocol if phases else {}
    level = f"{100 * (1 - float((proto.get('bootstrap') or {}).get('alpha', cfg.alpha))):g} %"
    notes = []
    if proto:
        g, smp = proto.get("greedy") or {}, proto.get("sampling") or {}
        notes.append(f"EVAL@1: greedy, max_new_tokens {g.get('max_new_tokens')}; EVAL@k: n = {proto.get('n')} samples "
                     f"at temperature {smp.get('temperature')}, top_p {smp.get('top_p')}, pass@k unbiased "
                     f"(Chen et al. 2021); EVAL@budget: accepted and ≤ {proto.get('budget_tokens')} generated "
                     f"tokens; judge {(proto.get('judge') or {}).get('version')}; CIs: percentile bootstrap over "
                     f"problems, B = {(proto.get('bootstrap') or {}).get('B')} (Efron & Tibshirani 1993), as "
                     "written by the eval stage.")
    if summ.get("not_run"):
        notes.append(f"Phases without a model (not run): {', '.join(map(str, summ['not_run']))}.")
    blocks += [text(n, "note") for n in notes]

    head = summ.get("headline")
    if isinstance(head, dict) and head.get("not_run"):
        blocks.append(text(f"Headline (eval.headline = {head.get('phase')}): that phase has not run.",
                           "status-notrun"))
    elif isinstance(head, dict) and head.get("phase"):
        hds = {k: v for k, v in head.items() if isinstance(v, dict)}
        hks = sorted({k for v in hds.values() for k in v if k.startswith("pass@") and k[5:].isdigit()},
                     key=lambda k: int(k[5:]))
        blocks.append(table(
            ["dataset", "role", "accepted@1", *hks],
            [[ds, v.get("role"), v.get("accepted@1"), *[v.get(k) for k in hks]] for ds, v in hds.items()],
            title=f"Headline: {head['phase']} (eval.headline; metrics/final/eval.json → headline)",
            note="The phase chosen by the eval.headline param (mean over seeds for a seeded phase), so "
                 "`dvc exp diff` between two values of eval.headline shows what one phase changed."))

    if phases:
        budget_ks = [k for k in ks if k != "pass@1"][-1:] or ["pass@1"]
        rows = []
        for ds in datasets:
            for p in phases:
                if ds not in p.datasets:
                    continue
                m = p.datasets[ds]
                b = m.get("eval@budget") if isinstance(m.get("eval@budget"), dict) else {}
                rows.append([ds, m.get("role"), p.name, (m.get("dataset") or {}).get("n_problems", m.get("n_tasks")),
                             _final_ci(m, "accepted@1"), *[_final_ci(m, k) for k in ks],
                             b.get("accepted@1"), *[b.get(k) for k in budget_ks if k in ks],
                             m.get("exec_success_rate")])
        blocks.append(table(
            ["dataset", "role", "phase", "problems", "accepted@1 [CI]", *[f"{k} [CI]" for k in ks],
             "EVAL@budget accepted@1", *[f"EVAL@budget {k}" for k in budget_ks if k in ks], "exec success"], rows,
            title=f"Dev and Test sets, every phase, one protocol ({level} CIs)",
            note="Test sets are scored only here (never used for selection). pass@k only on datasets with EVAL@k."))
        for metric in ["accepted@1", *[k for k in ks if k != "pass@1"][-1:]]:
            panels = {f"{ds} ({_role(phases, ds)})": {p.name: _bar(p.datasets[ds], metric)
                                                      for p in phases if ds in p.datasets}
                      for ds in datasets if any(_bar(p.datasets[ds], metric) for p in phases if ds in p.datasets)}
            if panels:
                blocks.append(chart(charts.bars_with_ci(panels, metric),
                                    f"Final eval: {metric} per dataset and phase ({level} CI)",
                                    f"bar chart of final-eval {metric} with confidence intervals"))
        blocks += _final_seed_blocks(phases, summ, datasets, ks)
        vpanels = {f"{ds} ({_role(phases, ds)})": {
            p.name: {v: float(c.get("fraction", 0.0)) for v, c in p.datasets[ds]["verdicts"].items()
                     if isinstance(c, dict)}
            for p in phases if ds in p.datasets and isinstance(p.datasets[ds].get("verdicts"), dict)}
            for ds in datasets}
        vpanels = {k: v for k, v in vpanels.items() if v}
        if vpanels:
            blocks.append(chart(charts.verdict_breakdown(vpanels), "Final eval: verdicts of the greedy samples",
                                "stacked bars of final-eval verdict fractions"))
        if any(p.per_task for p in phases):
            blocks += _flips_blocks(phases, datasets)
        prow = []
        for p in phases:
            pr, model = p.protocol, p.protocol.get("model") if isinstance(p.protocol.get("model"), dict) else {}
            prow.append([p.name, model.get("id"), str(model.get("sha256", ""))[:16] or None, pr.get("backend"),
                         _kv(pr.get("greedy")), _kv(pr.get("sampling")),
                         pr.get("n"), pr.get("ks"), pr.get("budget_tokens"), (pr.get("judge") or {}).get("version"),
                         str(pr.get("prompt_template_sha256", ""))[:12] or None])
        blocks.append(table(["phase", "model", "model sha256", "backend", "greedy", "sampling", "n", "ks",
                             "budget tokens", "judge", "prompt template sha256"], prow,
                            title="Final eval protocol recorded in each metrics file"))
    return {"id": "final", "title": "Final evaluation", "blocks": blocks,
            "missing": "the eval stage has not run (metrics/final/eval.json)"}


def _role(phases: Sequence[Phase], ds: str) -> str:
    return next((str(p.datasets[ds].get("role")) for p in phases if ds in p.datasets and p.datasets[ds].get("role")),
                "?")


def _final_seed_blocks(phases: Sequence[Phase], summ: Mapping[str, Any], datasets: Sequence[str],
                       ks: Sequence[str]) -> list[dict[str, Any]]:
    """Mean ± std over seeds: the summary's ``seeds`` block when present, else from the seeded phase files."""
    seeds = summ.get("seeds") if isinstance(summ.get("seeds"), dict) else {}
    if not seeds:
        groups: dict[str, list[Phase]] = {}
        for p in phases:
            if p.seed is not None:
                groups.setdefault(p.base, []).append(p)
        seeds = {b: {ds: {k: seed_summary([p.datasets[ds].get(k) for p in ps if ds in p.datasets])
                          for k in ["accepted@1", *ks]} for ds in datasets} for b, ps in groups.items()}
    metrics = ["accepted@1", *ks]
    rows = []
    for base, by_ds in seeds.items():
        for ds in datasets:
            vals = (by_ds or {}).get(ds) or {}
            acc = vals.get("accepted@1") or {}
            if not acc.get("n"):
                continue
            rows.append([ds, _role(phases, ds), base, acc.get("n"),
                         *[Num(f"{fmt(v.get('mean'))} ± {fmt(v.get('std'), 2)}") if (v := vals.get(k) or {}).get("n")
                           else None for k in metrics]])
    if not rows:
        return []
    return [table(["dataset", "role", "phase", "seeds", *[f"{k} mean ± std" for k in metrics]], rows,
                  title="Final eval across seeds",
                  note="Sample standard deviation over seeds (ddof = 1); — when one seed only.")]


def repair_section(col: Collected, cfg: ReportParams) -> dict[str, Any]:
    """Multi-turn repair (``metrics/repair.json``): every scalar key per dataset, *before* vs *after* training when
    the file has a ``before`` block, accepted rate vs turn, and the ``training`` / ``protocol`` blocks. Renders the
    keys that exist (the stage's schema may grow), so a missing key is simply not shown."""
    r = col.repair
    blocks: list[dict[str, Any]] = []
    if not isinstance(r, dict):
        return {"id": "repair", "title": "Repair", "blocks": [], "missing": "repair has not run (metrics/repair.json)"}
    meta = {"before", "training", "protocol"}
    after = {k: v for k, v in r.items() if k not in meta and isinstance(v, dict)}
    before = {k: v for k, v in (r.get("before") or {}).items() if isinstance(v, dict)} \
        if isinstance(r.get("before"), dict) else {}
    for ds, m in after.items():
        fa, fb = flatten(m), flatten(before.get(ds) or {})
        keys = [k for k in dict.fromkeys([*fa, *fb]) if not isinstance(fa.get(k, fb.get(k)), dict)]
        if fb:
            rows = [[k, fb.get(k), fa.get(k), _delta(fb.get(k), fa.get(k))] for k in keys]
            blocks.append(table(["metric", "before training", "after training", "change"], rows,
                                title=f"{ds}: repair before vs after training"))
        else:
            blocks.append(table(["metric", "value"], [[k, fa.get(k)] for k in keys], title=f"{ds}: repair"))
    bars = {f"{ds}: {k}": {when: v for when, src in (("before training", before.get(ds) or {}),
                                                     ("after training" if before else "repair", m))
                           if isinstance(v := src.get(k), int | float)}
            for ds, m in after.items() for k in ("recovery_rate", "final_accepted")}
    bars = {g: v for g, v in bars.items() if v}
    if bars:
        blocks.append(chart(charts.grouped_bars(bars, "fraction of problems"),
                            "Repair: recovery rate and final accepted" + (" (before / after training)" if before
                                                                          else ""),
                            "bar chart of repair recovery rate and final accepted"))
    series = [(when, {"turn": list(range(1, 1 + max(len(v) for v in turns.values()))), **turns})
              for when, src in (("before training", before), ("after training" if before else "repair", after))
              if (turns := {ds: [float(x) for x in m["accepted_at_turn"]] for ds, m in src.items()
                            if isinstance(m.get("accepted_at_turn"), list) and m["accepted_at_turn"]})]
    if series:
        cols = list(dict.fromkeys(c for _, s in series for c in s if c != "turn"))
        series = [(lab, {**s, **{c: s[c] + [float("nan")] * (len(s["turn"]) - len(s[c])) for c in cols if c in s}})
                  for lab, s in series]
        blocks.append(chart(charts.curves_figure(series, cols, x="turn"), "Repair: accepted rate after each turn",
                            "accepted rate vs turn per dataset"))
    for key in ("training", "protocol"):
        if isinstance(r.get(key), dict):
            flat = flatten(r[key])
            blocks.append(table(["key", "value"], [[k, v] for k, v in flat.items() if not isinstance(v, dict)],
                                title=f"Repair {key}"))
    return {"id": "repair", "title": "Repair", "blocks": blocks, "missing": "repair has not run (metrics/repair.json)"}


def _kv(d: Any) -> str | None:
    """``{"temperature": 0.8, "top_p": 0.95}`` → ``"temperature=0.8 top_p=0.95"`` (``None`` when empty)."""
    return " ".join(f"{k}={fmt(v)}" for k, v in flatten(d).items()) if isinstance(d, dict) and d else None


def _delta(a: Any, b: Any) -> float | None:
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        return b - a
    return None


def _flips_blocks(phases: Sequence[Phase], datasets: Sequence[str]) -> list[dict[str, Any]]:
    rows, bars = [], []
    for a, b in _predecessors(phases):
        for ds in datasets:
            if ds in a.per_task and ds in b.per_task:
                f = paired_flips(_solved_first(a.per_task[ds]), _solved_first(b.per_task[ds]))
                if not f["n_common"]:
                    continue
                rows.append([ds, f"{a.name} → {b.name}", f["n_common"], f["a_rate"], f["b_rate"], f["won"], f["lost"],
                             f["net"], f["p_value"]])
                bars.append((f"{ds}: {a.name} → {b.name}", f["won"], f["lost"]))
    if not rows:
        return [text("Phase-to-phase flips: not available (needs per-task arrays of two phases on one dataset).",
                     "note")]
    return [
        table(["dataset", "phases", "common tasks", "accepted@1 before", "accepted@1 after", "won", "lost", "net",
               "McNemar p"], rows, title="Phase-to-phase flips (accepted@1 per problem)",
              note="won = solved only after, lost = solved only before; two-sided exact McNemar test on the "
                   "discordant problems (McNemar 1947)."),
        chart(charts.flips_chart(bars), "Flips won / lost", "diverging bars of flips"),
    ]


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
            present = list(dict.fromkeys(k for c in curves for k in c.columns if k != "step"))
            cols = [k for k in STABILITY_COLUMNS if k in present] + [k for k in present if k not in STABILITY_COLUMNS]
            shown = cols[:_MAX_PANELS]
            series = [(stage if c.seed is None else f"seed {c.seed}", c.columns) for c in curves]
            blocks.append(chart(charts.curves_figure(series, shown), f"{stage}: {name} (vs step)",
                                f"training curves of {stage} ({name}): {', '.join(shown)}"))
            notes = []
            if len(cols) > len(shown):
                notes.append(f"{len(cols) - len(shown)} more columns not drawn: {', '.join(cols[len(shown):])}")
            if any(k.startswith("reward") for k in present):
                missing = [k for k in STABILITY_COLUMNS if k not in present]
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
        blocks.append(text("Judge check: not run (metrics/judge_check.json missing).", "status-notrun"))
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
        out.append("judge_check (metrics/judge_check.json)")
    if not col.final_phases and col.final_summary is None:
        out.append("eval, the final Dev/Test evaluation (metrics/final/eval.json)")
    for name in cfg.phase_order:
        if name == "baseline":
            if "baseline" not in seen:
                out.append("baseline (metrics/baseline.json)")
        elif name == "repair":
            if col.repair is None:
                out.append("repair (metrics/repair.json)")
        else:
            if name not in col.training:
                out.append(f"{name} training (metrics/{name}.json, metrics/{name}/*.tsv)")
            if name not in {p.base for p in col.phases}:
                out.append(f"eval of {name} (metrics/eval_{name}.json)")
    return out


def build_sections(col: Collected, cfg: ReportParams) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(intro blocks, sections)`` of the page for ``col``."""
    from rlvr.report.render import table as _table

    intro: list[dict[str, Any]] = []
    missing = _not_run(col, cfg)
    if missing:
        intro.append({"kind": "list", "title": "Not run yet", "items": missing, "cls": "notrun"})
    if col.problems:
        intro.append(_table(["file", "problem"], list(col.problems.items()), title="Unreadable files (skipped)"))
    intro.append(pre(f"Inputs ({len(col.sources)} files, sha256)",
                     "\n".join(f"{h[:16]}  {p}" for p, h in sorted(col.sources.items())) or "none"))
    sections = [final_section(col, cfg), quality_section(col, cfg), repair_section(col, cfg), cost_section(col, cfg),
                stability_section(col, cfg), data_section(col, cfg)]
    return intro, sections


def build_report(
    cfg: ReportParams,
    metrics_dir: str | Path = "metrics",
    data_dir: str | Path = "data",
    out_path: str | Path = "reports/index.html",
) -> dict[str, Any]:
    """Collect the metrics files, render the page and write it atomically to ``out_path``.

    Returns a summary ``{"phases": [...], "final_phases": [...], "training": [...], "not_run": [...], "charts": n,
    "bytes": size}``.
    Never fails because a stage has not run; raises only on I/O errors writing ``out_path``."""
    col = collect(metrics_dir, data_dir, cfg.phase_order)
    intro, sections = build_sections(col, cfg)
    html = render_page(cfg.title, sections, intro)
    atomic_write_text(out_path, html)
    n_charts = sum(1 for s in sections for b in s["blocks"] if b["kind"] == "chart")
    return {"phases": [p.name for p in col.phases], "final_phases": [p.name for p in col.final_phases],
            "training": sorted(col.training), "not_run": _not_run(col, cfg), "charts": n_charts,
            "bytes": len(html.encode())}
