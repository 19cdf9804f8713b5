"""Stage ``governance``: load the configured benchmarks, validate, dedup (exact + near), decontaminate, fill call-test
oracles, amplify weak training suites (``governance.amplify``, :mod:`rlvr.data.amplify`), verify reference
solutions.

Reads ``params.yaml`` section ``governance`` (:class:`rlvr.data.governance.GovernanceParams`). Writes, all atomically,
under ``data/governance/``: ``problems/<dataset>.jsonl`` (one Problem per line), ``audit.md``,
``near_dup_clusters.jsonl``, ``contamination.jsonl``, ``references.jsonl`` (judge verdicts of reference and incorrect
solutions), ``removed.jsonl`` (every removed problem: id, step, reason, duplicate/eval item, file),
``params.resolved.json``; and ``metrics/governance.json``. EvalPlus per-test time limits are read from the committed
``data/evalplus_time_limits.json`` (``--time-limits``; re-measured only on request with ``rlvr time-limits``,
:mod:`rlvr.data.evalplus_limits`), never measured here; the settle margins of trusted programs whose CPU need straddles
a limit from the committed ``data/recorded_margins.json`` (``--recorded-margins``, :mod:`rlvr.judge.recorded`).

Run: ``python stages/governance.py`` from the repository root.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from rlvr.data import audit
from rlvr.data import governance as gov
from rlvr.data.bundled import sha256_file
from rlvr.data.evalplus_limits import DEFAULT_FILE, read_table
from rlvr.data.schema import write_problems
from rlvr.io import atomic_dir, atomic_write_jsonl, atomic_write_text
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.judge.recorded import DEFAULT_FILE as RECORDED_FILE
from rlvr.judge.recorded import RecordedMargins
from rlvr.stage import Params, Result, option, stage


@stage(option("--out-dir", default="data/governance", path=True),
       option("--metrics", "metrics_path", default="metrics/governance.json", path=True),
       option("--raw-dir", path=True, help="bundled data folder (default data/raw)"),
       option("--time-limits", "limits_path", default=DEFAULT_FILE, path=True,
              help="committed EvalPlus per-test time limits (`rlvr time-limits` re-measures them)"),
       option("--recorded-margins", "recorded_path", default=RECORDED_FILE, path=True,
              help="committed settle margins of trusted programs near a limit (rlvr.judge.recorded)"))
def main(params: Params, out_dir: Path, metrics_path: Path, raw_dir: Path | None, limits_path: Path,
         recorded_path: Path) -> Result:
    """Normalise, audit and verify the benchmark problems."""
    cfg = params.section("governance", gov.GovernanceParams)
    by_slug = gov.load_configured(cfg, raw_dir)
    slug_of = {p.id: slug for slug, ps in by_slug.items() for p in ps}
    problems = [p for ps in by_slug.values() for p in ps]
    needs_judge = cfg.compute_expected or cfg.references.verify or cfg.amplify.enabled
    # a missing file is an empty table: an EvalPlus dataset then fails with the command that measures it
    limits = read_table(limits_path) if limits_path.is_file() else {"datasets": {}, "source_path": str(limits_path)}
    recorded = RecordedMargins.read(recorded_path)  # a missing file: no program is recorded
    with open_judge(params.path, get_judge) if needs_judge else contextlib.nullcontext() as judge:
        kept, report = gov.run_governance(problems, cfg, judge=judge, origin_of=gov.origins(cfg, by_slug),
                                          time_limits=limits, recorded=recorded)
    kept_by_slug: dict[str, list] = {slug: [] for slug in by_slug}
    for p in kept:
        kept_by_slug[slug_of[p.id]].append(p)
    if cfg.include_synthetic:
        # The procedural smoke-profile family (params section `synthetic`) bypasses the audits on purpose: its
        # instances differ only by a constant, so near-dedup would collapse them, and its held-out split is defined
        # by unseen (template, constant) pairs (rlvr/data/synthetic.py). It shares no text with any benchmark.
        from rlvr.data.synthetic import SyntheticParams, generate_from_params

        kept_by_slug["synthetic"] = generate_from_params(params.section("synthetic", SyntheticParams))
    with atomic_dir(out_dir / "problems") as prob_dir:  # replaced whole: no stale datasets of an earlier config
        for slug, ps in kept_by_slug.items():
            write_problems(prob_dir / f"{slug}.jsonl", ps)
    files = {"near_dup_clusters.jsonl": audit.near_dup_rows(report),
             "contamination.jsonl": audit.contamination_rows(report),
             "references.jsonl": report["reference_rows"], "removed.jsonl": report["removed"]}
    for name, rows in files.items():
        atomic_write_jsonl(out_dir / name, rows)
    outputs = [{"path": str(f.relative_to(out_dir)), "sha256": sha256_file(f)}
               for f in [*sorted((out_dir / "problems").glob("*.jsonl")), *(out_dir / n for n in files)]]
    atomic_write_text(out_dir / "audit.md", audit.audit_markdown(report, gov.input_checksums(cfg, raw_dir), cfg,
                                                               outputs=outputs, versions=audit.library_versions()))
    echo = (f"governance: {len(problems)} → {len(kept)} problems in {len(kept_by_slug)} datasets; "
            f"{len(report['removed'])} removed (listed in {out_dir / 'removed.jsonl'})")
    return Result(metrics={metrics_path: audit.governance_metrics(report, kept_by_slug)}, resolved={out_dir: cfg},
                  echo=echo)


if __name__ == "__main__":
    main()
