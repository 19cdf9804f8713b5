"""Scale benchmark of the governance dedup path: exact dedup (:func:`rlvr.data.dedup.group_by_statement`, the grouping
:func:`~rlvr.data.dedup.exact_dedup` runs) + near-duplicate detection
(:mod:`rlvr.data.neardup`, MinHash + LSH + exact-Jaccard verification) over N synthetic problem statements.

Synthetic data (no network; only the repo): seed statements are the bundled benchmarks' statements (``data/raw`` via
:func:`rlvr.data.loaders.load`) or a ``--seed-file`` (JSONL with a ``statement`` field). Each synthetic statement is
one of:

* fresh (default ~93%): a random seed statement, truncated to ``--max-words``, with ~35% of its words replaced by
  words from the seed vocabulary, a few random identifiers inserted and numbers renamed — distinct problems that
  still read like the bundled ones;
* planted exact duplicate (``--exact-rate``, 2%): an earlier synthetic statement with case and whitespace changed;
* planted near duplicate (``--near-rate``, 5%): an earlier synthetic statement with 1–3 word swaps, insertions or
  renames.

Reports wall and CPU seconds (this process + the signing workers) per phase, the 1-minute load average at start and
end (the VM is shared: wall time alone is not comparable between runs), problems/s, peak RSS of this process
(``resource.getrusage``, MB) and the recall of planted duplicates into ``bench/governance/results.json`` (one entry
per N, with the exact command) and a markdown table
``bench/governance/results.md``. Run from the repo root::

    .venv/bin/python bench/governance/bench_governance.py --n 100000

The near-duplicate phase is :func:`rlvr.data.neardup.near_duplicate_pairs`, the function the governance stage's
``find_near_duplicates`` runs (same batching, workers and LSH code path).
"""

from __future__ import annotations

import json
import os
import platform
import random
import resource
import sys
import time
from pathlib import Path

import click
import datasketch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rlvr.data.dedup import group_by_statement  # noqa: E402
from rlvr.data.neardup import NearDupConfig, exact_jaccard, near_duplicate_pairs  # noqa: E402
from rlvr.io import atomic_write_json, atomic_write_text  # noqa: E402

SEED_SPECS = ["humaneval", "mbpp", "leetcode", "leetcode_contest", "codecontests", "apps", "mbppplus"]


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children (the signing workers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KB


def load_seeds(seed_file: str | None) -> list[str]:
    """Seed statements from ``seed_file`` (JSONL, field ``statement``) or the bundled data."""
    if seed_file:
        out = []
        with open(seed_file, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line)["statement"])
                    except (json.JSONDecodeError, KeyError) as exc:
                        raise click.ClickException(f"{seed_file}:{lineno}: field 'statement': {exc}") from exc
        return out
    from rlvr.data.loaders import load

    return [p.statement for spec in SEED_SPECS for p in load(spec) if p.statement.strip()]


def synthesise(n: int, seeds: list[str], rng: random.Random, exact_rate: float, near_rate: float,
               max_words: int) -> tuple[list[str], list[int], list[str]]:
    """``n`` statements, the index each planted duplicate copies (-1 = fresh), and its kind."""
    seed_words = [s.split()[:max_words] for s in seeds]
    vocab = sorted({w for ws in seed_words for w in ws if w.isalpha()})
    texts: list[str] = []
    src: list[int] = []
    kind: list[str] = []
    for i in range(n):
        r = rng.random()
        if i > 0 and r < exact_rate:
            j = rng.randrange(i)
            t = texts[j]
            texts.append(t.upper() if rng.random() < 0.5 else "  " + t.replace(" ", "\n", 3) + " ")
            src.append(j)
            kind.append("exact")
        elif i > 0 and r < exact_rate + near_rate:
            j = rng.randrange(i)
            w = texts[j].split()
            for _ in range(rng.randint(1, 3)):
                op, k = rng.random(), rng.randrange(len(w))
                if op < 0.4:
                    w[k] = rng.choice(vocab)
                elif op < 0.7:
                    w.insert(k, rng.choice(vocab))
                elif k + 1 < len(w):
                    w[k], w[k + 1] = w[k + 1], w[k]
            texts.append(" ".join(w))
            src.append(j)
            kind.append("near")
        else:
            w = list(rng.choice(seed_words))
            for k in range(len(w)):
                if rng.random() < 0.35:
                    w[k] = rng.choice(vocab)
            for _ in range(3):
                w.insert(rng.randrange(len(w) + 1), f"x{rng.randrange(10**6)}")
            texts.append(" ".join(w) + f" n <= {rng.randrange(10**9)}")
            src.append(-1)
            kind.append("fresh")
    return texts, src, kind


def exact_dedup_first(texts: list[str]) -> list[int]:
    """Positions kept by exact dedup: the first text of each :func:`rlvr.data.dedup.group_by_statement` group (the
    governance stage's grouping: NFKC + lower-case + whitespace collapse, sha256) plus texts that normalise to empty
    (never grouped), in input order."""
    groups = group_by_statement(texts)
    drop = {i for pos in groups.values() for i in pos[1:]}
    return [i for i in range(len(texts)) if i not in drop]


@click.command()
@click.option("--n", "n", type=int, default=1_000_000, show_default=True, help="Synthetic problems.")
@click.option("--seed-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="JSONL of seed statements (field 'statement'); default: bundled data/raw via the loaders.")
@click.option("--exact-rate", type=float, default=0.02, show_default=True)
@click.option("--near-rate", type=float, default=0.05, show_default=True)
@click.option("--max-words", type=int, default=120, show_default=True, help="Seed statements truncated to this.")
@click.option("--threshold", type=float, default=0.7, show_default=True)
@click.option("--num-perm", type=int, default=128, show_default=True)
@click.option("--shingle-size", type=int, default=3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--workers", type=int, default=NearDupConfig().workers, show_default=True,
              help="Processes that shingle and sign (NearDupConfig.workers).")
@click.option("--out", type=click.Path(), default=str(ROOT / "bench/governance/results.json"), show_default=True)
def main(n: int, seed_file: str | None, exact_rate: float, near_rate: float, max_words: int, threshold: float,
         num_perm: int, shingle_size: int, seed: int, workers: int, out: str) -> None:
    """Run the benchmark and merge its entry (keyed by N) into ``--out`` and the markdown table next to it."""
    cmd = " ".join([".venv/bin/python", "bench/governance/bench_governance.py", *sys.argv[1:]])
    t0 = time.perf_counter()
    seeds = load_seeds(seed_file)
    texts, src, kind = synthesise(n, seeds, random.Random(seed), exact_rate, near_rate, max_words)
    t_gen = time.perf_counter() - t0
    rss_gen = _rss_mb()
    load_start = os.getloadavg()[0]
    t1, c1 = time.perf_counter(), _cpu_s()
    kept = exact_dedup_first(texts)
    t_exact, c_exact = time.perf_counter() - t1, _cpu_s() - c1
    kept_set = set(kept)
    cfg = NearDupConfig(threshold=threshold, num_perm=num_perm, shingle_size=shingle_size, workers=workers)
    t2, c2 = time.perf_counter(), _cpu_s()
    pairs, idx = near_duplicate_pairs([texts[i] for i in kept], cfg)  # what find_near_duplicates runs
    t_near, c_near = time.perf_counter() - t2, _cpu_s() - c2
    in_pair = {kept[i] for i, _, _ in pairs} | {kept[j] for _, j, _ in pairs}
    planted_exact = [i for i, k in enumerate(kind) if k == "exact"]
    planted_near = [i for i, k in enumerate(kind) if k == "near" and i in kept_set and src[i] in kept_set]
    # a planted near copy is "found" when it is in a verified pair; lsh_recall counts only planted pairs whose exact
    # Jaccard is >= threshold (3 edits on a short statement can push a planted copy below the threshold)
    where = {pos: k for k, pos in enumerate(kept)}
    found = {(kept[i], kept[j]) for i, j, _ in pairs}
    true_pairs = [(src[i], i) for i in planted_near
                  if exact_jaccard(idx.shingles(where[src[i]]), idx.shingles(where[i])) >= threshold]
    res = {
        "n": n, "command": cmd, "machine": f"{platform.node()} {platform.machine()}, shared CPU (other agents running)",
        "python": platform.python_version(), "datasketch": datasketch.__version__,
        "params": cfg.model_dump(mode="json") | {"exact_rate": exact_rate, "near_rate": near_rate,
                                                 "max_words": max_words, "seed": seed, "seeds": len(seeds)},
        "lsh_bands": idx.lsh.b, "lsh_rows": idx.lsh.r,
        "wall_s": {"generate": round(t_gen, 2), "exact_dedup": round(t_exact, 2), "near_dedup": round(t_near, 2),
                   "dedup_total": round(t_exact + t_near, 2)},
        "cpu_s": {"exact_dedup": round(c_exact, 2), "near_dedup": round(c_near, 2),
                  "dedup_total": round(c_exact + c_near, 2)},
        "load_avg_1m": {"start": round(load_start, 1), "end": round(os.getloadavg()[0], 1)},
        "problems_per_s": {"exact_dedup": round(n / t_exact), "near_dedup": round(len(kept) / t_near),
                           "dedup_total": round(n / (t_exact + t_near))},
        "peak_rss_mb": round(_rss_mb(), 1), "rss_after_generate_mb": round(rss_gen, 1),
        "exact_dropped": n - len(kept),
        "exact_recall_planted": round(sum(i not in kept_set for i in planted_exact) / max(len(planted_exact), 1), 4),
        "near_candidates": idx.n_candidates, "near_pairs": len(pairs),
        "near_recall_planted": round(sum(i in in_pair for i in planted_near) / max(len(planted_near), 1), 4),
        "near_lsh_recall_above_threshold": round(sum(p in found for p in true_pairs) / max(len(true_pairs), 1), 4),
        "planted": {"near_above_threshold": len(true_pairs), "exact": len(planted_exact), "near": len(planted_near)},
    }
    outp = Path(out)
    allres = json.loads(outp.read_text()) if outp.is_file() else {}
    allres[str(n)] = res
    atomic_write_json(outp, allres)
    rows = ["| N | workers | exact dedup s | near dedup s | total s | CPU s | load avg | problems/s | peak RSS MB | "
            "exact dropped | near pairs | planted exact recall | planted near recall | LSH recall (J>=t) |",
            "|---" * 14 + "|"]
    for r in sorted(allres.values(), key=lambda r: r["n"]):
        w = r["wall_s"]
        cpu = r.get("cpu_s", {}).get("dedup_total", "")
        load = r.get("load_avg_1m", {})
        rows.append(f"| {r['n']:,} | {r['params'].get('workers', 1)} | {w['exact_dedup']} | {w['near_dedup']} | "
                    f"{w['dedup_total']} | {cpu} | {load.get('start', '')}–{load.get('end', '')} | "
                    f"{r['problems_per_s']['dedup_total']:,} | {r['peak_rss_mb']:,} | {r['exact_dropped']:,} | "
                    f"{r['near_pairs']:,} | {r['exact_recall_planted']} | {r['near_recall_planted']} | "
                    f"{r['near_lsh_recall_above_threshold']} |")
    cmds = "\n".join(f"- N={r['n']:,}: `{r['command']}`" for r in sorted(allres.values(), key=lambda r: r["n"]))
    atomic_write_text(outp.with_suffix(".md"), "\n".join(rows) + "\n\nCommands:\n" + cmds + "\n")
    click.echo(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
