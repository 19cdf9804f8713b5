"""Near-duplicate detection of problem statements with MinHash + LSH (``datasketch``), verified by exact Jaccard.

Method (Broder 1997 for MinHash; Leskovec, Rajaraman & Ullman, *Mining of Massive Datasets*, ch. 3, for LSH banding):

1. **Shingles.** Each statement is normalised and tokenised by :mod:`rlvr.data.textnorm` (NFKC, lower-case, ``\\w+``
   word tokens) and turned into the *set* of its 64-bit shingle hashes: ``shingle: word`` = every ``shingle_size``
   consecutive words, ``shingle: char`` = every ``shingle_size`` consecutive characters of the whitespace-collapsed
   text. A statement shorter than one shingle is one shingle. An empty statement has no shingles and is never
   clustered (exact dedup and the schema checks report empty statements).
2. **Signatures.** A MinHash signature of ``num_perm`` 32-bit values per statement, bit-identical to datasketch's
   ``MinHash(num_perm, seed, scheme="affine32")`` updated with the low 32 bits of the shingle hashes (the
   permutations are datasketch's own; the arithmetic is vectorised over a batch of statements with numpy, which a
   unit test checks against ``MinHash.update_batch``). Signatures live only for their batch (memory: a batch of
   ``batch_size`` statements). Steps 1–2 run in ``workers`` processes (batches in input order, at most
   ``workers + 1`` in flight), overlapping with steps 3–4 in the calling process; the result does not depend on
   ``workers``.
3. **Candidates.** A :class:`datasketch.MinHashLSH` with ``threshold`` and ``num_perm`` (bands/rows chosen by datasketch
   to minimise the weighted false-positive/false-negative area, ``lsh_weights``). Statements are processed in input
   order; each is *queried before it is inserted*, so every candidate pair ``(earlier, later)`` is seen exactly once.
   The band keys of a whole batch come from one byte string (``signatures.byteswap().tobytes()``, sliced per band: the
   same bytes as datasketch's ``MinHashLSH._H`` of each band) and go straight to the index's own storage
   (``lsh.hashtables[b].get/insert``, ``lsh.keys.insert``), exactly what ``MinHashLSH.query``/``insert`` do, without
   a :class:`datasketch.LeanMinHash` and 28 small numpy copies per statement; the index stays a complete
   ``MinHashLSH`` (a unit test checks ``lsh.query`` on it against these candidates).
4. **Verification.** LSH banding is probabilistic. For every candidate pair the *exact* Jaccard similarity of the two
   shingle-hash sets is computed (``|A ∩ B| / |A ∪ B|``, on 64-bit hashes, so exact up to 2^-64 hash collisions;
   the sets are recomputed from the texts for candidates only, so memory holds no shingle sets) and
   the pair is kept only if it is ``>= threshold``. The threshold is therefore a statement about true Jaccard, not
   about band collisions; what LSH can still do is *miss* a pair (false negative, probability given by the banding
   S-curve; ``lsh_weights`` trades this against candidate count).
5. **Clusters.** Verified pairs are joined into connected components (union–find; single linkage, so two members of
   one cluster may be below the threshold with each other while each chain link is above it).
6. **Representative and drops.** The representative of a cluster is its first member with an evaluation role
   (``dev``/``test``) in input order, else its first member in input order: evaluation problems are never replaced
   by training problems, and among equals the first-loaded wins (deterministic). Every other member with role
   ``train`` is dropped (reason ``near_duplicate``); other evaluation members are kept and only reported unless
   ``drop_eval_duplicates`` is set. A problem's role is ``role_of[id]`` when given, else ``meta["role"]``, else
   ``"test"`` (unknown = never dropped; the same default as :mod:`rlvr.data.dedup`).

Determinism: shingle hashes are BLAKE2b-based, the permutations come from ``seed``, pairs and clusters are sorted by
input position; the same input gives the same report in any process.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import numpy as np
from datasketch import MinHashLSH
from pydantic import BaseModel

from rlvr.data.minhash import NearDupConfig, _sign_batch, exact_jaccard, minhash_signatures, shingle_set, shingle_sets
from rlvr.data.schema import Problem

__all__ = [
    "EVAL_ROLES",
    "NearDupCluster",
    "NearDupConfig",
    "NearDupIndex",
    "NearDupReport",
    "apply_near_dedup",
    "exact_jaccard",
    "find_near_duplicates",
    "minhash_signatures",
    "near_dedup",
    "near_duplicate_pairs",
    "shingle_set",
    "shingle_sets",
]

EVAL_ROLES = frozenset({"dev", "test", "eval"})



class NearDupCluster(BaseModel):
    """One cluster: ``members`` (ids, input order), the kept ``representative``, ``roles`` (per member),
    ``dropped`` (members removed), and ``pairs`` (verified edges ``[id_a, id_b, jaccard]``)."""

    representative: str
    members: list[str]
    roles: list[str]
    dropped: list[str]
    pairs: list[tuple[str, str, float]]


class NearDupReport(BaseModel):
    """Outcome of :func:`find_near_duplicates`. ``lsh_bands``/``lsh_rows``: the banding datasketch chose;
    ``n_candidates``: LSH candidate pairs; ``n_verified``: pairs with exact Jaccard ≥ threshold; ``n_empty``: problems
    without shingles (not clustered); ``dropped``: ``{"id", "duplicate_of", "reason", "jaccard"}`` per removed id,
    ``jaccard`` = max exact Jaccard of that member to any neighbour in its cluster."""

    config: NearDupConfig
    n_problems: int
    n_empty: int
    lsh_bands: int
    lsh_rows: int
    n_candidates: int
    n_verified: int
    clusters: list[NearDupCluster]
    dropped: list[dict[str, str | float]]

    def dropped_ids(self) -> set[str]:
        """Ids to remove."""
        return {str(d["id"]) for d in self.dropped}

    def counts(self) -> dict[str, int]:
        """Flat numbers for ``metrics/governance.json``."""
        return {"near_dup_candidates": self.n_candidates, "near_dup_pairs": self.n_verified,
                "near_dup_clusters": len(self.clusters), "near_dup_dropped": len(self.dropped),
                "near_dup_empty": self.n_empty}



class _Inline:
    """Stand-in for a process pool when ``workers == 1``: runs each job at submission."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        fut: Future = Future()
        fut.set_result(fn(*args))
        return fut

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class NearDupIndex:
    """Streaming near-duplicate finder over texts (module doc, steps 1–4): :meth:`add` texts (any number of calls),
    then read :attr:`pairs` (verified ``(i, j, jaccard)`` with ``i < j`` positions in the order added).

    Memory per text: a reference to it (the caller's string) and its LSH entries (``b`` band keys in datasketch's
    dict storage, ~5 KB per text at 14 bands); no signatures or shingle sets are kept."""

    def __init__(self, cfg: NearDupConfig) -> None:
        self.cfg = cfg
        self.lsh = MinHashLSH(threshold=cfg.threshold, num_perm=cfg.num_perm, weights=cfg.lsh_weights)
        if self.lsh.hashfunc is not None or self.lsh.prepickle:
            raise ValueError("NearDupIndex: expects MinHashLSH without hashfunc/prepickle")
        self.texts: list[str] = []
        self.pairs: list[tuple[int, int, float]] = []
        self.n_candidates = 0
        self.n_empty = 0

    def shingles(self, i: int) -> np.ndarray:
        """Shingle set of the ``i``-th text added (:func:`shingle_set`)."""
        return shingle_set(self.texts[i], self.cfg)

    def _batches(self, texts: Sequence[str]) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """``(offset, live, signatures)`` per batch of ``texts``, in order, signed in ``cfg.workers`` forked processes
        (in this process when ``workers == 1``, the input is one batch, or ``fork`` is unavailable). Each batch's
        texts are pickled to a worker (~1 ms per 2,048 texts): reading the parent's inherited objects instead would
        touch their reference counts and copy those pages into every worker."""
        cfg = self.cfg
        size = max(cfg.batch_size, 1)
        starts = range(0, len(texts), size)
        parallel = cfg.workers > 1 and len(starts) > 1 and "fork" in multiprocessing.get_all_start_methods()
        pool: ProcessPoolExecutor | _Inline = (
            ProcessPoolExecutor(cfg.workers, mp_context=multiprocessing.get_context("fork")) if parallel
            else _Inline())
        with pool:
            todo = iter(starts)
            inflight: deque[tuple[int, Future]] = deque()
            for lo in todo:
                inflight.append((lo, pool.submit(_sign_batch, list(texts[lo : lo + size]), cfg)))
                if len(inflight) > cfg.workers:
                    break
            while inflight:
                lo, fut = inflight.popleft()
                nxt = next(todo, None)
                if nxt is not None:
                    inflight.append((nxt, pool.submit(_sign_batch, list(texts[nxt : nxt + size]), cfg)))
                live, sigs = fut.result()
                yield lo, live, sigs

    def add(self, texts: Sequence[str]) -> None:
        """Shingle, sign, query-then-insert ``texts`` (positions continue from previous calls), verifying each
        candidate pair by exact Jaccard (module doc)."""
        cfg = self.cfg
        base = len(self.texts)
        self.texts.extend(texts)
        lsh = self.lsh
        ranges = lsh.hashranges
        tables = lsh.hashtables
        keys = lsh.keys
        for lo, live, sigs in self._batches(texts):
            self.n_empty += min(len(texts) - lo, max(cfg.batch_size, 1)) - live.size
            if live.size == 0:
                continue
            sigs = np.ascontiguousarray(sigs, dtype=np.uint32)
            width = sigs.shape[1] * 4
            blob = sigs.byteswap().tobytes()  # datasketch's band key = bytes of the byte-swapped band values
            for k, pos in enumerate(live.tolist()):
                j = base + lo + pos
                row = k * width
                hs = [blob[row + 4 * s : row + 4 * e] for s, e in ranges]
                cands: set[int] = set()
                for h, table in zip(hs, tables, strict=True):
                    got = table.get(h)
                    if got:
                        cands |= got
                if cands:
                    self.n_candidates += len(cands)
                    mine = self.shingles(j) if cfg.verify else None
                    for i in sorted(cands):
                        jac = exact_jaccard(self.shingles(i), mine) if mine is not None else 1.0
                        if jac >= cfg.threshold:
                            self.pairs.append((i, j, jac))
                keys.insert(j, *hs)
                for h, table in zip(hs, tables, strict=True):
                    table.insert(h, j)


def near_duplicate_pairs(texts: Sequence[str], cfg: NearDupConfig) -> tuple[list[tuple[int, int, float]], NearDupIndex]:
    """Verified near-duplicate pairs ``(i, j, jaccard)`` (``i < j`` positions in ``texts``, sorted) and the index
    (for its counters). Text-level entry point used by the scale benchmark."""
    idx = NearDupIndex(cfg)
    idx.add(texts)
    idx.pairs.sort()
    return idx.pairs, idx


def _role(p: Problem, role_of: Mapping[str, str] | None) -> str:
    if role_of is not None and p.id in role_of:
        return role_of[p.id]
    return str(p.meta.get("role", "test"))


def find_near_duplicates(
    problems: Sequence[Problem], cfg: NearDupConfig, *, role_of: Mapping[str, str] | None = None
) -> NearDupReport:
    """Near-duplicate clusters of ``problems``' statements (module doc). ``role_of``: id → ``train``|``dev``|``test``
    (overrides ``meta["role"]``). Raises ``ValueError`` naming the id when ids are not unique."""
    seen: set[str] = set()
    for p in problems:
        if p.id in seen:
            raise ValueError(f"find_near_duplicates: duplicate problem id {p.id!r}")
        seen.add(p.id)
    pairs, idx = near_duplicate_pairs([p.statement for p in problems], cfg)
    parent = list(range(len(problems)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j, _ in pairs:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    comps: dict[int, list[int]] = {}
    for k in sorted({k for i, j, _ in pairs for k in (i, j)}):
        comps.setdefault(find(k), []).append(k)  # root = smallest position of the component
    edges: dict[int, list[tuple[int, int, float]]] = {}
    best: dict[int, float] = {}
    for i, j, jac in pairs:
        edges.setdefault(find(i), []).append((i, j, jac))
        best[i] = max(best.get(i, 0.0), jac)
        best[j] = max(best.get(j, 0.0), jac)
    roles = [_role(p, role_of) for p in problems]
    clusters: list[NearDupCluster] = []
    dropped: list[dict[str, str | float]] = []
    for r in sorted(comps):
        members = comps[r]
        rep = next((k for k in members if roles[k] in EVAL_ROLES), members[0])
        drop = [k for k in members if k != rep and (roles[k] == "train" or cfg.drop_eval_duplicates)]
        clusters.append(NearDupCluster(
            representative=problems[rep].id, members=[problems[k].id for k in members],
            roles=[roles[k] for k in members], dropped=[problems[k].id for k in drop],
            pairs=[(problems[i].id, problems[j].id, round(jac, 6)) for i, j, jac in edges[r]]))
        for k in drop:
            dropped.append({"id": problems[k].id, "duplicate_of": problems[rep].id, "reason": "near_duplicate",
                            "jaccard": round(best[k], 6)})
    return NearDupReport(config=cfg, n_problems=len(problems), n_empty=idx.n_empty, lsh_bands=idx.lsh.b,
                         lsh_rows=idx.lsh.r, n_candidates=idx.n_candidates, n_verified=len(pairs),
                         clusters=clusters, dropped=dropped)


def apply_near_dedup(problems: Sequence[Problem], report: NearDupReport) -> list[Problem]:
    """``problems`` without the report's dropped ids, input order kept."""
    drop = report.dropped_ids()
    return [p for p in problems if p.id not in drop]


def near_dedup(
    problems: Sequence[Problem], cfg: NearDupConfig, *, role_of: Mapping[str, str] | None = None
) -> tuple[list[Problem], NearDupReport]:
    """:func:`find_near_duplicates` then :func:`apply_near_dedup`: ``(kept, report)``."""
    report = find_near_duplicates(problems, cfg, role_of=role_of)
    return apply_near_dedup(problems, report), report
