"""The evaluation-result sections of the report: *Final evaluation* (the ``eval`` stage's ``metrics/final/``: every
phase on Dev **and Test** under one protocol, its CIs, mean ± std over seeds, the ``eval.headline`` block), *Quality*
(the post-stage Dev evaluations ``metrics/baseline/`` / ``metrics/eval_<stage>/``) and *Repair*
(``metrics/repair/eval/``, before / after repair training when present).

Uncertainty follows :mod:`rlvr.eval.stats`: percentile bootstrap CIs over problems (Efron & Tibshirani 1993) from the
per-task arrays, or, for accepted@1 without them, from the counts; paired flips with McNemar's exact test (McNemar
1947); mean ± std over seeds. Each function returns one section dict for :func:`rlvr.report.render.render_page`;
page assembly is :mod:`rlvr.report.build`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlvr.eval.stats import paired_flips, per_task_metric_cis, proportion_ci, seed_summary
from rlvr.judge.verdict import VERDICTS
from rlvr.report import charts
from rlvr.report.collect import Collected, Phase
from rlvr.report.formats import flatten
from rlvr.report.params import ReportParams
from rlvr.report.render import Num, chart, fmt, table, text

__all__ = ["final_section", "quality_section", "repair_section"]


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
        return {"accepted@1": proportion_ci(round(acc * n), n, n_boot=cfg.bootstrap, alpha=cfg.alpha)}
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
def _verdict_panels(phases: Sequence[Phase], datasets: Sequence[str],
                    label: Callable[[str], str] = lambda ds: ds) -> dict[str, dict[str, dict[str, float]]]:
    """``{label(dataset): {phase: {verdict: fraction of samples}}}`` from each phase's ``verdicts`` block, for the
    stacked verdict bars; phases without the block and datasets with no phase left are omitted."""
    panels = {label(ds): {p.name: {v: float(c.get("fraction", 0.0)) for v, c in p.datasets[ds]["verdicts"].items()
                                   if isinstance(c, dict)}
                          for p in phases if ds in p.datasets and isinstance(p.datasets[ds].get("verdicts"), dict)}
              for ds in datasets}
    return {k: v for k, v in panels.items() if v}


def quality_section(col: Collected, cfg: ReportParams) -> dict[str, Any]:
    """Quality: accepted@1 / pass@k with CIs per dataset and phase, seed summaries, verdict breakdown, flips."""
    blocks: list[dict[str, Any]] = []
    phases = col.phases
    if phases:
        blocks.append(text("Post-stage evaluations on Dev sets (metrics/baseline/, metrics/eval_<stage>/: "
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
            title=f"accepted@1 and pass@k with {level} CIs",
            note="accepted@1: Wilson score interval (Wilson 1927); pass@k: percentile bootstrap over problems, "
                 f"B = {cfg.bootstrap}, seed {cfg.seed} (Efron & Tibshirani 1993), Wilson where it is exactly 0 or 1; "
                 "the same intervals as the metrics files and rlvr summary. pass@k is the unbiased estimator of Chen "
                 "et al. 2021. CIs of pass@k need the per-task arrays."))
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
        vpanels = _verdict_panels(phases, datasets)
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
    protocol. Values and 95 % CIs are read from ``metrics/final/eval_<phase>/`` as the stage computed them (not
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
        vpanels = _verdict_panels(phases, datasets, label=lambda ds: f"{ds} ({_role(phases, ds)})")
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
    """Multi-turn repair (``metrics/repair/eval/``, :func:`rlvr.report.collect.repair_report`): every scalar key per
    dataset, *before* vs *after* training when the report has a ``before`` block, accepted rate vs turn, and the
    ``training`` / ``protocol`` blocks. Renders the keys that exist (the stage's schema may grow), so a missing key is
    simply not shown."""
    r = col.repair
    blocks: list[dict[str, Any]] = []
    if not isinstance(r, dict):
        return {"id": "repair", "title": "Repair", "blocks": [], "missing": "repair has not run (metrics/repair/eval/)"}
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
    return {"id": "repair", "title": "Repair", "blocks": blocks, "missing": "repair has not run (metrics/repair/eval/)"}


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
