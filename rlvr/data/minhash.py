"""Shingles and MinHash signatures of the near-duplicate detector (steps 1–2 of :mod:`rlvr.data.neardup`, whose
module doc states the method and its sources), with its parameters :class:`NearDupConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import chain
from typing import Literal

import numpy as np
from datasketch import MinHash
from pydantic import Field, model_validator

from rlvr.config import Section
from rlvr.data.textnorm import char_shingle_hashes, ngram_hashes, ngram_hashes_batch, token_hashes, word_tokens

__all__ = ["NearDupConfig", "exact_jaccard", "minhash_signatures", "shingle_set", "shingle_sets"]

_FMIX32 = (np.uint32(16), np.uint32(0x85EBCA6B), np.uint32(13), np.uint32(0xC2B2AE35), np.uint32(16))


class NearDupConfig(Section):
    """``governance.near_dup`` params.

    ``threshold``: minimum *exact* Jaccard similarity of two shingle sets to call them near-duplicates (0–1);
    ``num_perm``: MinHash permutations (signature length); ``shingle``: ``word`` | ``char``; ``shingle_size``: words
    or characters per shingle; ``seed``: MinHash permutation seed; ``lsh_weights``: datasketch's (false-positive,
    false-negative) weights for choosing bands × rows (sum 1); ``verify``: apply the threshold on exact Jaccard
    (``False`` = accept every LSH candidate; only for ablations); ``drop_eval_duplicates``: also drop non-representative
    dev/test members; ``batch_size``: statements per signature batch (memory ≈ batch shingles × num_perm × 4 bytes);
    ``workers``: processes that shingle and sign batches (1 = in the calling process; results are identical; more
    only pays on idle cores: on the shared 2-core VM, 2 workers were slower than 1, ``bench/governance/README.md``)."""

    threshold: float = Field(default=0.7, gt=0.0, le=1.0)
    num_perm: int = Field(default=128, ge=16, le=1024)
    shingle: Literal["word", "char"] = "word"
    shingle_size: int = Field(default=3, ge=1, le=64)
    seed: int = Field(default=1, ge=0)
    lsh_weights: tuple[float, float] = (0.5, 0.5)
    verify: bool = True
    drop_eval_duplicates: bool = False
    batch_size: int = Field(default=2048, ge=1)
    workers: int = Field(default=1, ge=1, le=64)

    @model_validator(mode="after")
    def _weights_sum_to_one(self) -> NearDupConfig:
        if abs(sum(self.lsh_weights) - 1.0) > 1e-9 or min(self.lsh_weights) < 0:
            raise ValueError(f"lsh_weights must be two non-negative numbers summing to 1, got {self.lsh_weights}")
        return self


def shingle_set(text: str, cfg: NearDupConfig) -> np.ndarray:
    """Sorted unique 64-bit shingle hashes of ``text`` (module doc, step 1); shape ``(S,)``, dtype ``uint64``."""
    if cfg.shingle == "word":
        h = ngram_hashes(token_hashes(word_tokens(text)), cfg.shingle_size, short="whole")
    else:
        h = char_shingle_hashes(text, cfg.shingle_size)
    return np.unique(h)


def shingle_sets(texts: Sequence[str], cfg: NearDupConfig) -> tuple[np.ndarray, np.ndarray]:
    """Batch form of :func:`shingle_set`: ``(flat, sizes)`` with ``flat`` (``uint64``) the concatenation of
    ``shingle_set(t, cfg)`` for every ``t`` in ``texts`` and ``sizes`` (``int64``, shape ``(len(texts),)``) their
    lengths; bit-identical to the per-text function (a unit test compares them).

    Word shingles are computed for the whole batch at once: one token-hash pass over all tokens,
    :func:`~rlvr.data.textnorm.ngram_hashes_batch` over the concatenation, and one ``lexsort`` by (text, hash) for the
    per-text sort + unique. Character shingles
    fall back to the per-text function."""
    if cfg.shingle != "word":
        sets = [shingle_set(t, cfg) for t in texts]
        sizes = np.fromiter((x.size for x in sets), dtype=np.int64, count=len(sets))
        return (np.concatenate(sets) if sets else np.zeros(0, dtype=np.uint64)), sizes
    toks = [word_tokens(t) for t in texts]
    lens = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
    hh, dd = ngram_hashes_batch(token_hashes(list(chain.from_iterable(toks))), lens, cfg.shingle_size, short="whole")
    order = np.lexsort((hh, dd))
    hh, dd = hh[order], dd[order]
    keep = np.ones(hh.size, dtype=bool)
    keep[1:] = (hh[1:] != hh[:-1]) | (dd[1:] != dd[:-1])
    return hh[keep], np.bincount(dd[keep], minlength=len(texts)).astype(np.int64)


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard ``|a ∩ b| / |a ∪ b|`` of two sorted-unique hash arrays; 0.0 when both are empty."""
    if a.size == 0 and b.size == 0:
        return 0.0
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / (a.size + b.size - inter)


@lru_cache(maxsize=8)
def _permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
    return a.astype(np.uint32), b.astype(np.uint32)


def minhash_signatures(sets: Sequence[np.ndarray], num_perm: int, seed: int, max_rows: int = 4096) -> np.ndarray:
    """MinHash signatures of shingle-hash sets, vectorised; equal to datasketch ``MinHash(num_perm, seed,
    scheme="affine32")`` after ``update_batch`` with the low 32 bits of each set's hashes.

    Args:
        sets: non-empty ``uint64`` arrays (one per document).
        num_perm: signature length. seed: permutation seed.
        max_rows: shingles processed at once (working memory ≈ ``max_rows × num_perm × 4`` bytes; small chunks
            that stay in the CPU cache are ~10× faster than large ones); a larger single set is one chunk.

    Returns: ``uint32`` array of shape ``(len(sets), num_perm)``. Raises ``ValueError`` on an empty set."""
    sizes = np.fromiter((x.size for x in sets), dtype=np.int64, count=len(sets))
    flat = np.concatenate(list(sets)) if len(sets) else np.zeros(0, dtype=np.uint64)
    return _signatures_flat(flat, sizes, num_perm, seed, max_rows)


def _signatures_flat(flat: np.ndarray, sizes: np.ndarray, num_perm: int, seed: int,
                     max_rows: int = 4096) -> np.ndarray:
    """:func:`minhash_signatures` of the sets ``flat[offset_k : offset_k + sizes[k]]`` (consecutive)."""
    a, b = _permutations(num_perm, seed)
    a, b = a[:, None], b[:, None]
    n_sets = int(sizes.shape[0])
    out = np.empty((n_sets, num_perm), dtype=np.uint32)
    s1, m1, s2, m2, s3 = _FMIX32
    size_list = sizes.tolist()
    start, pos = 0, 0
    while start < n_sets:
        stop, rows = start, 0
        while stop < n_sets and (rows == 0 or rows + size_list[stop] <= max_rows):
            if size_list[stop] == 0:
                raise ValueError(f"minhash_signatures: set {stop} is empty")
            rows += size_list[stop]
            stop += 1
        hv = flat[pos : pos + rows].astype(np.uint32)  # low 32 bits (wrapping cast)
        with np.errstate(over="ignore"):
            hv = hv ^ (hv >> s1)  # MurmurHash3 fmix32: datasketch's affine schemes pre-mix every input hash
            hv = hv * m1
            hv = hv ^ (hv >> s2)
            hv = hv * m2
            hv = hv ^ (hv >> s3)
            phv = a * hv[None, :]  # (num_perm, rows): permutation h -> a*h + b mod 2^32
            phv += b
        offsets = np.zeros(stop - start, dtype=np.int64)
        np.cumsum(sizes[start : stop - 1], out=offsets[1:])
        out[start:stop] = np.minimum.reduceat(phv, offsets, axis=1).T
        start, pos = stop, pos + rows
    return out


def _sign_batch(texts: Sequence[str], cfg: NearDupConfig) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1–2 for one batch (run in a worker process): ``(live, signatures)`` with ``live`` the positions (in
    ``texts``, ``int64``) of the texts that have shingles and ``signatures`` their ``(len(live), num_perm)`` ``uint32``
    MinHash signatures."""
    flat, sizes = shingle_sets(texts, cfg)
    live = np.flatnonzero(sizes).astype(np.int64)
    if live.size == 0:
        return live, np.empty((0, cfg.num_perm), dtype=np.uint32)
    return live, _signatures_flat(flat, sizes[live], cfg.num_perm, cfg.seed)
