"""MkDocs hook (``hooks:`` in mkdocs.yml): results pages render their tables from the committed metrics files at build
time, so no number on a results page is hand-copied.

A page asks for a table with an HTML comment on its own line, ``<!-- rlvr:table NAME -->``; :data:`TABLES` lists the
names and the files each reads (paths relative to the repository root, the folder of mkdocs.yml). An unknown name or
a missing file stops the build with an error naming the page, the marker and the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

from rlvr.layout import read_metrics

MARKER = re.compile(r"^<!-- rlvr:table ([\w-]+) -->$", re.M)


def _read(root: Path, rel: str) -> Any:
    """The whole report behind the metrics file ``rel``: its scores, cost and provenance parts merged
    (:func:`rlvr.layout.read_metrics`). Raises ``FileNotFoundError`` naming ``rel`` when no part exists."""
    data = read_metrics(root / rel)
    if data is None:
        raise FileNotFoundError(rel)
    return data


def _summary(root: Path) -> dict[str, Any]:
    """The final eval's summary (:func:`rlvr.report.summary.read_summary`: ``metrics/final/eval.json`` with the
    ``headline/`` and ``seeds/`` files beside it). Raises ``FileNotFoundError`` naming it when nothing is there."""
    from rlvr.report.summary import read_summary

    data = read_summary(root / "metrics/final/eval.json")
    if data is None:
        raise FileNotFoundError("metrics/final/eval.json")
    return data


def _repair(root: Path) -> dict[str, Any]:
    """The repair stage's report as one dict (:func:`rlvr.report.collect.repair_report`: ``metrics/repair/eval/``,
    or the earlier ``metrics/repair.json``)."""
    from rlvr.report.collect import repair_report

    return repair_report(_read(root, "metrics/repair.json"))


def _f(v: Any, nd: int = 3) -> str:
    """``None`` → "–", an int with thousands separators, a float with ``nd`` decimals, anything else as ``str``."""
    if v is None:
        return "–"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    return f"{v:,}" if isinstance(v, int) else f"{v:.{nd}f}"


def _table(head: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_f(c) if not isinstance(c, str) else c for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _where(root: Path, rel: str, folder: str | None = None) -> str:
    """``rel`` (``metrics/<name>.json``) as a caption names it: its folder (``folder``, default ``metrics/<name>/``)
    when the report is written in folder form (:func:`rlvr.layout.write_metrics_folder`), else the file."""
    folder = folder or rel[: -len(".json")] + "/"
    return folder if (root / folder).is_dir() and not (root / rel).is_file() else rel


def _source(*files: str) -> str:
    return "\n\n*Generated when the site is built, from " + ", ".join(f"`{f}`" for f in files) + ".*"


def final_eval(root: Path) -> str:
    """Every phase on every Dev and Test set of the final ``eval`` stage, with CIs and the change from the previous
    phase (:func:`rlvr.report.summary.summary_rows`)."""
    from rlvr.report.summary import summary_rows

    data = _summary(root)
    parts = []
    by = summary_rows(data)
    for ds in sorted(by, key=lambda d: (0 if by[d] and by[d][0]["role"] == "dev" else 1, d)):
        rows = by[ds]
        if not rows:
            continue
        pk = rows[0]["k"] or "pass@k"

        def ci(c: Any) -> str:
            return "" if c is None else f"[{c[0]:.2f}, {c[1]:.2f}]"

        def d(v: Any) -> str:
            return "" if v is None else f"{v:+.3f}"

        parts.append(f"**{ds}** ({rows[0]['role']})\n\n" + _table(
            ["phase", "accepted@1", "95 % CI", "Δ", pk, "95 % CI", "Δ", "compared with"],
            [[r["phase"], r["accepted@1"], ci(r["accepted@1_ci"]), d(r["delta_accepted@1"]), r["pass@k"],
              ci(r["pass@k_ci"]), d(r["delta_pass@k"]), r["previous"] or ""] for r in rows]))
    if data.get("not_run"):
        parts.append("Not run: " + ", ".join(data["not_run"]) + ".")
    return "\n\n".join(parts) + _source("metrics/final/eval.json", "metrics/final/seeds/")


def headline(root: Path) -> str:
    """The headline block of the final eval (``metrics/final/headline/``: the phase named by ``eval.headline``)."""
    h = _summary(root).get("headline") or {}
    if not h or h.get("not_run"):
        return f"No headline block (phase {h.get('phase')!r} not run)." + _source("metrics/final/eval.json")
    keys = sorted({k for v in h.values() if isinstance(v, dict) for k in v if k != "role"},
                  key=lambda k: (k != "accepted@1", int(k.split("@")[1])))
    rows = [[ds, v.get("role", ""), *[v.get(k) for k in keys]] for ds, v in sorted(h.items()) if isinstance(v, dict)]
    return (f"Headline phase **{h['phase']}** (mean over {h.get('seeds', 1)} seed(s)):\n\n"
            + _table(["dataset", "role", *keys], rows) + _source("metrics/final/headline/"))


def smoke_phases(root: Path) -> str:
    """Smoke profile: held-out synthetic dev accepted@1 after each phase (post-stage evals), GRPO reward first vs last
    quarter, training seconds."""
    files = [("base (random init)", "metrics/baseline.json", None),
             ("after SFT", "metrics/eval_sft.json", "metrics/sft.json"),
             ("after DPO", "metrics/eval_dpo.json", "metrics/dpo.json")]
    seeds = sorted(p.stem.split("-")[1] for p in (root / "metrics/grpo").glob("seed-*.json"))
    files += [(f"after GRPO, seed {s}", f"metrics/eval_grpo_seed{s}.json", f"metrics/grpo/seed-{s}.json")
              for s in seeds]
    rows, used = [], []
    for label, ev, tr in files:
        e = _read(root, ev)
        t = _read(root, tr) if tr else {}
        used += [_where(root, ev)] + ([tr] if tr else [])
        syn = e.get("synthetic") or {}
        reward = (f"{t['reward_first']:.3f} → {t['reward_last']:.3f}" if "reward_first" in t else "")
        rows.append([label, syn.get("accepted@1"), syn.get("n_tasks"), reward, t.get("steps"),
                     t.get("train_runtime_s")])
    rep = _repair(root)
    syn = rep.get("synthetic") or {}
    tr = rep.get("training") or {}
    turns = " / ".join(f"{v:.3f}" for v in syn.get("accepted_at_turn") or [])
    rows.append([f"after repair training (turn 1 / 2 / …: {turns})", (syn.get("accepted_at_turn") or [None])[0],
                 syn.get("n"), "", tr.get("steps"), tr.get("train_runtime_s")])
    used.append(_where(root, "metrics/repair.json", "metrics/repair/eval/"))
    return _table(["phase", "dev accepted@1 (synthetic)", "dev problems", "GRPO reward, first → last quarter",
                   "steps", "training s"], rows) + _source(*used)


def repair(root: Path) -> str:
    """Multi-turn repair before (input model) and after repair training, per dataset."""
    rep = _repair(root)
    before = rep.get("before") or {}
    rows = []
    for ds, m in sorted(rep.items()):
        if not isinstance(m, dict) or "recovery_rate" not in m:
            continue
        b = before.get(ds) or {}

        def turns(x: dict[str, Any]) -> str:
            return " / ".join(f"{v:.3f}" for v in x.get("accepted_at_turn") or [])

        rows.append([ds, f"{b.get('recovered')}/{b.get('first_turn_failures')}",
                     f"{m.get('recovered')}/{m.get('first_turn_failures')}", b.get("recovery_rate"),
                     m.get("recovery_rate"), turns(b), turns(m)])
    return _table(["dataset", "recovered before", "recovered after", "recovery_rate before", "recovery_rate after",
                   "accepted after turn 1 / 2 / … (before)", "(after)"], rows) + _source(
        _where(root, "metrics/repair.json", "metrics/repair/eval/"))


def governance(root: Path) -> str:
    """The governance stage's counts (problems in and out, removals by step)."""
    g = _read(root, "metrics/governance.json")
    keys = [("problems_before", "problems loaded"), ("bad_data", "removed: bad data"),
            ("exact_dups", "removed: exact duplicates"), ("near_dups", "removed: near duplicates (train only)"),
            ("contamination_flagged", "removed: contaminated training problems"),
            ("contamination_input_leaks", "of which test-input leaks"),
            ("expected_tests_computed", "call-test oracles filled"), ("expected_tests_failed", "oracle tests removed"),
            ("expected_tests_sum_dependent", "oracle tests removed: float-sum dependent"),
            ("problems_after", "problems kept")]
    rows = [[label, g.get(k)] for k, label in keys if k in g]
    per = g.get("problems_per_dataset") or {}
    return (_table(["count", "value"], rows) + "\n\nProblems kept per dataset:\n\n"
            + _table(["dataset", "problems"], [[k, v] for k, v in sorted(per.items())])
            + _source("metrics/governance.json"))


def judge_check(root: Path) -> str:
    """Every reference solution through the judge, per dataset."""
    j = _read(root, "metrics/judge_check.json")
    rows = [[ds, m.get("problems"), m.get("with_reference"), m.get("accepted"), m.get("accepted_fraction"),
             m.get("judge_s")] for ds, m in sorted(j.items()) if isinstance(m, dict) and "problems" in m]
    return (_table(["dataset", "problems", "with a reference", "accepted", "accepted fraction", "judge s"], rows)
            + f"\n\nJudge version `{j.get('judge_version')}`." + _source(_where(root, "metrics/judge_check.json")))


TABLES: dict[str, Callable[[Path], str]] = {
    "final-eval": final_eval,
    "headline": headline,
    "smoke-phases": smoke_phases,
    "repair": repair,
    "governance": governance,
    "judge-check": judge_check,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace every ``<!-- rlvr:table NAME -->`` line of a page by the generated table."""
    root = Path(config["config_file_path"]).resolve().parent

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in TABLES:
            raise PluginError(f"{page.file.src_path}: unknown results table {name!r} (known: {sorted(TABLES)})")
        try:
            return TABLES[name](root)
        except FileNotFoundError as exc:
            raise PluginError(f"{page.file.src_path}: table {name!r} needs {exc.args[0]}, which does not exist "
                              "(run the pipeline or restore the committed metrics)") from exc

    return MARKER.sub(sub, markdown)
