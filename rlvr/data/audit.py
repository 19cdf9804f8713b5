"""The governance audit as files: ``audit.md`` (:func:`audit_markdown`), ``metrics/governance.json``
(:func:`governance_metrics`) and the per-item JSONL rows (:func:`near_dup_rows`, :func:`contamination_rows`), all
rendered from the report dict that :func:`rlvr.data.governance.run_governance` returns. Pure functions of that report:
no I/O, no judge.
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlvr.data.schema import Problem

if TYPE_CHECKING:
    from rlvr.data.governance import GovernanceParams

__all__ = ["amplify_metrics", "audit_markdown", "contamination_rows", "governance_metrics", "library_versions",
           "near_dup_rows"]


def near_dup_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of ``data/governance/near_dup_clusters.jsonl``: one per cluster ``{"representative", "members", "places",
    "roles", "dropped", "pairs": [[id_a, id_b, jaccard]]}`` (empty without a ``near_dedup`` audit)."""
    rep = report["audits"].get("near_dedup") or {}
    return list(rep.get("clusters", []))


def contamination_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of ``data/governance/contamination.jsonl``: one per training problem with any overlap (``flagged`` says
    whether it was removed): ``{"id", "flagged", "reasons", "hits": [{eval_set, eval_id, n, shared, train_fields,
    eval_fields, sample}], "input_leaks": [{eval_set, eval_id, shared, sample}]}``."""
    rep = report["audits"].get("contamination") or {}
    return list(rep.get("items", []))


def library_versions() -> dict[str, str]:
    """Versions of the libraries the audit's numbers depend on (``"not installed"`` when absent) and Python's
    ``major.minor``: ``audit.md`` is part of the hashed ``data/governance`` output, and the libraries are pinned by
    ``requirements/lock.txt`` while the interpreter's patch release is whatever the machine has, which must not
    change the hash (docs/development.md, Reproducibility)."""
    out = {"python": "{}.{}".format(*sys.version_info[:2])}
    for name in ("rlvr", "datasketch", "numpy", "polars", "pyarrow", "pydantic"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def governance_metrics(report: dict[str, Any], kept_by_slug: dict[str, list[Problem]]) -> dict[str, Any]:
    """Numbers for ``metrics/governance.json``: flat numeric keys (``dvc metrics diff`` / ``dvc exp show``), plus the
    two per-dataset dicts the report stage reads (``problems_per_dataset``, ``tests_per_dataset``; DVC shows them as
    ``problems_per_dataset.<dataset>``). Per-eval-set contamination keys are ``contamination_flagged/<source>/<split>``
    (training problems removed for overlapping that set)."""
    before, after = report["counts_before"], report["counts_after"]
    audits = report["audits"]
    m: dict[str, Any] = {
        "problems_before": sum(before.values()),
        "problems_after": sum(after.values()),
        "problems_per_dataset": {slug: len(ps) for slug, ps in sorted(kept_by_slug.items())},
        "tests_per_dataset": {slug: sum(len(p.tests) for p in ps) for slug, ps in sorted(kept_by_slug.items())},
    }
    v = (audits.get("validate") or {}).get("counts", {})
    m["bad_data"] = v.get("dropped", 0)
    ex = (audits.get("exact_dedup") or {}).get("counts", {})
    m.update(exact_dups=ex.get("dropped", 0), exact_dup_groups=ex.get("dup_groups", 0),
             exact_cross_split_groups=ex.get("groups_cross_split", 0),
             exact_cross_source_groups=ex.get("groups_cross_source", 0))
    nd = (audits.get("near_dedup") or {}).get("counts", {})
    m.update(near_dups=nd.get("near_dup_dropped", 0), near_dup_clusters=nd.get("near_dup_clusters", 0),
             near_dup_pairs=nd.get("near_dup_pairs", 0),
             near_dup_cross_place_clusters=nd.get("cross_place_clusters", 0))
    ct = audits.get("contamination") or {}
    if ct:
        c = ct["counts"]
        m["contamination_flagged"] = c["contamination_flagged"]
        m["contamination_with_overlap"] = c["contamination_with_overlap"]
        m["contamination_input_leaks"] = c["contamination_input_leaks"]
        for s, kinds in sorted(ct["by_eval_set"].items()):
            m[f"contamination_flagged/{s}"] = kinds.get("flagged", 0)
    exp = report.get("expected")
    if exp:
        m.update(expected_problems_computed=exp["problems_computed"], expected_tests_computed=exp["tests_computed"],
                 expected_tests_failed=exp["tests_failed"], expected_problems_dropped=len(exp["dropped"]),
                 expected_tests_sum_dependent=exp.get("tests_sum_dependent", 0))
    ref = report.get("references")
    if ref:
        m.update(ref["counts"])
    amp = report.get("amplify")
    if amp:
        m["amplify"] = amplify_metrics(amp)
    return m


def amplify_metrics(amp: dict[str, Any]) -> dict[str, Any]:
    """The ``amplify`` block of ``metrics/governance.json`` (provenance: counts) from the report of
    :func:`rlvr.data.amplify.amplify_problems`: totals (discards by reason), then per source ``tests_before``/
    ``tests_after`` (``mean``/``median``/``min`` tests per training problem), ``problems``, ``problems_amplified``,
    ``weak_before``/``weak_after`` (suites under ``min_tests``) and the near-miss counts
    (:func:`rlvr.data.mutants.near_miss_report`: ``near_miss_mutants``, ``near_miss_accepted_original``,
    ``near_miss_rejected_amplified``)."""
    out: dict[str, Any] = {k: amp[k] for k in ("problems_eligible", "problems_amplified", "tests_added",
                                               "inputs_discarded")}
    out["discarded_by_reason"] = dict(amp["discarded_by_reason"])
    out["problems_reverted"] = amp.get("problems_reverted", 0)
    for src, b in sorted(amp["before"].items()):
        a = amp["after"].get(src, b)
        row: dict[str, Any] = {
            "problems": b["problems"], "problems_amplified": a["amplified"], "weak_before": b["weak"],
            "weak_after": a["weak"],
            "tests_before": {"mean": b["tests_mean"], "median": b["tests_median"], "min": b["tests_min"]},
            "tests_after": {"mean": a["tests_mean"], "median": a["tests_median"], "min": a["tests_min"]}}
        nm = (amp.get("near_miss") or {}).get(src)
        if nm:
            row.update(near_miss_problems=nm["problems"], near_miss_mutants=nm["mutants"],
                       near_miss_accepted_original=nm["accepted_original"],
                       near_miss_rejected_amplified=nm["rejected_amplified"])
        out[src] = row
    return out


def _amplify_lines(amp: dict[str, Any] | None, max_rows: int) -> list[str]:
    if not amp:  # off: audit.md as before amplification existed
        return []
    lines = ["## Test amplification (weak training suites)", ""]
    prm = amp["params"]
    lines += [f"Call-style training problems of {prm['sources']} with fewer than {prm['min_tests']} tests get "
              f"type-aware mutated inputs (seed {prm['seed']}, at most {prm['max_tests']} tests, "
              f"{prm['max_attempts']} mutants drawn per problem), expected outputs from the reference "
              "(`rlvr.data.amplify`). Eligible: "
              f"{amp['problems_eligible']}; without call-style tests: {amp['problems_no_call_tests']}; amplified: "
              f"{amp['problems_amplified']}; tests added: {amp['tests_added']}; inputs discarded: "
              f"{amp['inputs_discarded']} (" + ", ".join(f"{k}: {v}" for k, v in amp["discarded_by_reason"].items())
              + "; `oracle`: the reference raised, timed out or returned a non-literal; `output_type`: a type it "
              "never returns on the original inputs; `output_size`: an expected literal over the size cap); "
              f"reverted to the original suite because reference verification rejected the reference: "
              f"{amp.get('problems_reverted', 0)}.", ""]
    rows = [[src, r["problems"], r["problems_amplified"],
             f"{r['tests_before']['mean']} / {r['tests_before']['median']} / {r['tests_before']['min']}",
             f"{r['tests_after']['mean']} / {r['tests_after']['median']} / {r['tests_after']['min']}",
             f"{r['weak_before']} → {r['weak_after']}",
             f"{r.get('near_miss_rejected_amplified', '–')} of {r.get('near_miss_accepted_original', '–')} "
             f"({r.get('near_miss_mutants', 0)} mutants, {r.get('near_miss_problems', 0)} problems)"]
            for src, r in amplify_metrics(amp).items() if src in amp["before"]]
    lines += _table(["source", "problems", "amplified", "tests before (mean / median / min)", "tests after",
                     "weak suites", "near misses the original tests accept, amplified reject"], rows, max_rows)
    return lines


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], max_rows: int) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(x).replace("|", "\\|").replace("\n", " ") for x in r) + " |" for r in rows[:max_rows]]
    if len(rows) > max_rows:
        out.append(f"| … {len(rows) - max_rows} more rows (full list: the JSONL files) |" + " |" * (len(header) - 1))
    return [*out, ""]


def _collisions(report: dict[str, Any]) -> list[list[Any]]:
    """Rows ``[place A, place B, exact groups, near-dup pairs]`` for every pair of different places."""
    pairs: dict[tuple[str, str], list[int]] = {}
    for g in (report["audits"].get("exact_dedup") or {}).get("groups", []):
        ps = sorted(set(g["places"]))
        for i, a in enumerate(ps):
            for b in ps[i + 1:]:
                pairs.setdefault((a, b), [0, 0])[0] += 1
    for c in (report["audits"].get("near_dedup") or {}).get("clusters", []):
        place = dict(zip(c["members"], c["places"], strict=True))
        for a_id, b_id, _j in c["pairs"]:
            a, b = sorted((place[a_id], place[b_id]))
            if a != b:
                pairs.setdefault((a, b), [0, 0])[1] += 1
    return [[a, b, e, n] for (a, b), (e, n) in sorted(pairs.items())]


def audit_markdown(report: dict[str, Any], checksums: list[dict[str, str]], cfg: GovernanceParams,
                   max_rows: int = 200, outputs: Sequence[dict[str, str]] = (),
                   versions: Mapping[str, str] | None = None) -> str:
    """Human-readable ``audit.md``: thresholds, library versions, inputs and outputs (sha256), counts per split
    before/after, bad data, exact and near duplicates, cross-split collisions, contamination hits by eval set and
    test-input leakage, oracle filling, reference verification, and the list of every removed problem. Long lists are
    cut at ``max_rows`` rows (the JSONL outputs hold everything). ``outputs``: ``[{path, sha256}]`` of the files
    written next to this audit."""
    audits = report["audits"]
    nd_cfg, ct_cfg = cfg.near_dup_config(), cfg.contamination
    lines = ["# Data governance audit", "", f"Source: `{cfg.source}`. Roles (params.yaml `governance.datasets`):", ""]
    lines += _table(["dataset", "splits", "role"],
                    [[d.name, ",".join(d.splits) if d.splits else "all", d.role] for d in cfg.datasets], max_rows)
    lines += ["## Thresholds", "",
              f"- exact dedup: normalised statement sha256; drop within split: {cfg.dedup.drop_within_split}; "
              f"drop train overlapping eval: {cfg.dedup.drop_train_overlapping_eval}",
              f"- near dedup: exact Jaccard ≥ {nd_cfg.threshold} over {nd_cfg.shingle} {nd_cfg.shingle_size}-shingles "
              f"(MinHash {nd_cfg.num_perm} perms, seed {nd_cfg.seed}, LSH weights {list(nd_cfg.lsh_weights)})",
              f"- contamination: flag at ≥ {ct_cfg.min_shared_ngrams} shared {ct_cfg.main_n}-grams with one eval "
              f"problem (sizes reported: {ct_cfg.ngram_sizes}); train fields {ct_cfg.train_fields} vs eval fields "
              f"{ct_cfg.eval_fields}; ≤ {ct_cfg.eval_max_tests} tests per eval problem; boilerplate n-grams in "
              f"> {ct_cfg.max_eval_df} eval problems ignored",
              f"- test-input leakage: {'on' if ct_cfg.input_leakage else 'off'}; ≥ {ct_cfg.min_shared_inputs} shared "
              f"inputs of ≥ {ct_cfg.min_input_chars} characters with one eval problem", ""]
    if versions:
        lines += ["## Library versions", "", *_table(["library", "version"], sorted(versions.items()), max_rows)]
    if checksums:
        lines += ["## Input files", ""]
        lines += _table(["dataset", "file", "sha256"], [[c["dataset"], f"`{c['path']}`", f"`{c['sha256']}`"]
                                                        for c in checksums], max_rows)
    lines += ["## Output files", "",
              "sha256 of the governed problem files written by this stage. The per-split manifests derived from them "
              "(one `{id, sha256}` line per problem) and their sha256 are in `data/manifests/index.json`, written by "
              "the downstream `manifests` stage (this stage runs before them); the training sets' hashes are in "
              "`data/manifests/training_sets.json`.", ""]
    if outputs:
        lines += _table(["file", "sha256"], [[f"`{o['path']}`", f"`{o['sha256']}`"] for o in outputs], max_rows)
    lines += ["## Counts per source/split", ""]
    keys = sorted(set(report["counts_before"]) | set(report["counts_after"]))
    lines += _table(["source/split", "before", "after", "removed"],
                    [[k, report["counts_before"].get(k, 0), report["counts_after"].get(k, 0),
                      report["counts_before"].get(k, 0) - report["counts_after"].get(k, 0)] for k in keys], max_rows)
    by_step = Counter((r["step"], r["reason"].split(":")[0]) for r in report.get("removed", []))
    if by_step:
        lines += ["Removals by step and reason:", ""]
        lines += _table(["step", "reason", "problems"], [[s, r, n] for (s, r), n in sorted(by_step.items())], max_rows)
    v = audits.get("validate")
    if v is not None:
        lines += ["## Bad data", "", f"{len(v['dropped'])} problems removed (no tests, empty statement, repeated id, "
                  "text not encodable as UTF-8)." + ("" if v["dropped"] else " None found."), ""]
        if v["dropped"]:
            lines += _table(["file", "id", "reason", "duplicate of"],
                            [[d.get("file", ""), d["id"], d["reason"], d.get("duplicate_of", "")]
                             for d in v["dropped"]], max_rows)
    ex = audits.get("exact_dedup")
    if ex is not None:
        lines += ["## Exact duplicates", ""] + [f"- {k}: {v}" for k, v in sorted(ex["counts"].items())] + [""]
        if ex["groups"]:
            lines += _table(["kind", "ids", "places"], [[g["kind"], ", ".join(g["ids"]), ", ".join(g["places"])]
                                                        for g in ex["groups"]], max_rows)
    nd = audits.get("near_dedup")
    if nd is not None:
        lines += ["## Near duplicates", "",
                  f"{nd['n_candidates']} LSH candidate pairs ({nd['lsh_bands']} bands × {nd['lsh_rows']} rows), "
                  f"{nd['n_verified']} verified pairs, {len(nd['clusters'])} clusters, {len(nd['dropped'])} training "
                  f"problems removed; {nd['n_empty']} problems without shingles. Clusters with the kept "
                  "representative: `data/governance/near_dup_clusters.jsonl`.", ""]
        if nd["clusters"]:
            lines += _table(["representative", "members (place)", "removed"],
                            [[c["representative"], ", ".join(f"{m} ({pl})" for m, pl in zip(c["members"], c["places"],
                                                                                          strict=True)),
                              ", ".join(c["dropped"])] for c in nd["clusters"]], max_rows)
    lines += ["## Cross-split collisions", "",
              "Pairs of different source/split sharing an exact-duplicate statement group or a verified near-duplicate "
              "pair (eval–eval collisions are reported, never removed; train members are removed).", ""]
    coll = _collisions(report)
    lines += _table(["place A", "place B", "exact groups", "near-dup pairs"], coll, max_rows) if coll else ["None.", ""]
    ct = audits.get("contamination")
    if ct is not None:
        lines += ["## Contamination", "",
                  f"{ct['n_train']} training problems audited against {sum(ct['eval_sets'].values())} eval problems; "
                  f"{len(ct['items'])} share at least one n-gram or test input, {len(ct['flagged_ids'])} flagged and "
                  "removed. Per item details (eval set/item, n, shared count, sample): "
                  "`data/governance/contamination.jsonl`.", ""]
        sizes = sorted({int(n) for n in ct["index_ngrams"]}, reverse=True)
        rows = []
        for s, kinds in sorted(ct["by_eval_set"].items()):
            rows.append([s, ct["eval_sets"][s], *[kinds.get(f"ngram_{n}", 0) for n in sizes],
                         kinds.get("test_input_leak", 0), kinds.get("flagged", 0)])
        lines += ["Training problems hitting each eval set:", ""]
        lines += _table(["eval set", "eval problems", *[f"{n}-gram overlap" for n in sizes], "test-input leak",
                         "flagged (removed)"], rows, max_rows)
        leaks = [it for it in ct["items"] if "test_input_leak" in it["reasons"]]
        lines += ["### Test-input leakage", "", f"{len(leaks)} training problems contain ≥ {ct_cfg.min_shared_inputs} "
                  "non-trivial test inputs of one eval problem.", ""]
        if leaks:
            lines += _table(["training id", "eval id", "shared inputs", "sample"],
                            [[it["id"], x["eval_id"], x["shared"], (x["sample"] or [""])[0][:80]]
                             for it in leaks for x in it["input_leaks"] if x["shared"] >= ct_cfg.min_shared_inputs],
                            max_rows)
        flagged = [it for it in ct["items"] if it["flagged"]]
        if flagged:
            lines += ["### Flagged training problems", ""]
            rows = []
            for it in flagged:
                h = max(it["hits"], key=lambda h: (h["n"] == ct_cfg.main_n, h["shared"]), default=None)
                rows.append([it["id"], ",".join(it["reasons"]), h["eval_id"] if h else "", h["n"] if h else "",
                             h["shared"] if h else "", (h["sample"] or [""])[0][:80] if h else ""])
            lines += _table(["training id", "reasons", "eval id", "n", "shared n-grams", "sample"], rows, max_rows)
    exp = report.get("expected")
    lines += ["## Call-test oracles (reference solution through the judge)", ""]
    if not exp:
        lines += ["Not computed (no pending call tests, or `compute_expected: false`).", ""]
    else:
        lines += [f"- problems computed: {exp['problems_computed']}", f"- tests computed: {exp['tests_computed']}",
                  f"- tests removed (reference failed on them): {exp['tests_failed']}",
                  "- tests removed (the reference passes them or not depending on the interpreter's float `sum`: "
                  f"CPython <= 3.11 vs >= 3.12): {exp.get('tests_sum_dependent', 0)}",
                  f"- problems dropped: {len(exp['dropped'])}", ""]
        if exp["failed_tests"]:
            lines += _table(["problem", "tests removed"], sorted(exp["failed_tests"].items()), max_rows)
        if exp.get("sum_dependent_tests"):
            lines += _table(["problem", "float-sum dependent tests removed"],
                            sorted(exp["sum_dependent_tests"].items()), max_rows)
        if exp["dropped"]:
            lines += _table(["problem dropped", "file", "reason"],
                            [[d["id"], d.get("file", ""), d["reason"]] for d in exp["dropped"]], max_rows)
    lines += _amplify_lines(report.get("amplify"), max_rows)
    ref = report.get("references")
    lines += ["## Reference solutions (judge-verified; SFT/DPO source)", ""]
    if not ref:
        lines += ["Not verified (`references.verify: false`, or no problem of the verified roles).", ""]
    else:
        lines += [f"Roles verified: {cfg.references.roles}. Verdicts: `data/governance/references.jsonl`.", ""]
        lines += [f"- {k}: {v}" for k, v in ref["counts"].items()]
        lines += [f"- reference verdicts: {ref['verdicts']}", ""]
        if ref["rejected"]:
            lines += ["References the judge rejects (not used for SFT):", ""]
            lines += _table(["problem", "solution #", "verdict"],
                            [[r["id"], r["index"], r["verdict"]] for r in ref["rejected"]], max_rows)
    removed = report.get("removed", [])
    lines += ["## Every removed problem", "", f"{len(removed)} problems removed in total.", ""]
    if removed:
        lines += _table(["id", "step", "reason", "duplicate of / eval item", "file"],
                        [[r["id"], r["step"], r["reason"], r["duplicate_of"], r["file"]] for r in removed], max_rows)
    return "\n".join(lines) + "\n"
