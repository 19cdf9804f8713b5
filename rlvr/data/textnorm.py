"""Text normalisation, tokenisation and stable 64-bit n-gram hashing shared by the near-duplicate
(:mod:`rlvr.data.neardup`) and contamination (:mod:`rlvr.data.contamination`) audits.

Pipeline for a text ``s``:

1. :func:`normalise_text`: Unicode NFKC (folds full-width forms, ``\\xa0`` → space), lower-case.
2. :func:`word_tokens`: maximal runs of Unicode word characters (regex ``\\w+``); punctuation and whitespace only
   separate tokens (the "word tokens of normalised text" of GPT-3's contamination study, Brown et al. 2020,
   appendix C, and of Qwen2.5-Coder's 10-gram decontamination, Hui et al. 2024, §4.2).
3. :func:`token_hashes`: each token → a stable unsigned 64-bit hash (first 8 bytes of BLAKE2b, little endian),
   cached per distinct token, so the same text hashes identically in every process (Python's ``hash`` is salted).
4. :func:`ngram_hashes`: every window of ``n`` consecutive tokens → one 64-bit hash, computed with numpy as a
   polynomial over the token hashes (base :data:`_BASE`, arithmetic mod 2^64) followed by the SplitMix64 finaliser
   (Steele et al. 2014) so that nearby windows give unrelated values. Texts with fewer than ``n`` tokens give
   one hash of the whole (shorter) token sequence when ``short="whole"`` (used for shingling short statements) or
   none when ``short="none"`` (used for contamination: an n-gram must be n tokens long).
   Collisions between distinct n-grams are possible in principle but at rate ~2^-64 per pair.

Character shingles (:func:`char_shingle_hashes`) hash every ``k`` consecutive characters of the whitespace-collapsed
normalised text the same way (characters play the role of tokens).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Literal

import numpy as np

__all__ = [
    "char_shingle_hashes",
    "ngram_hashes",
    "ngram_hashes_batch",
    "normalise_text",
    "token_hashes",
    "word_tokens",
]

_WORD_RE = re.compile(r"\w+")
_BASE = np.uint64(0x100000001B3)  # FNV-1a 64-bit prime, odd: the polynomial base of n-gram hashing
_SM1 = np.uint64(0xBF58476D1CE4E5B9)
_SM2 = np.uint64(0x94D049BB133111EB)
_EMPTY = np.zeros(0, dtype=np.uint64)


def normalise_text(text: str) -> str:
    """NFKC + lower-case (no whitespace change): ``"Ｓum\\xa0OF"`` → ``"sum of"``."""
    return unicodedata.normalize("NFKC", text).lower()


def word_tokens(text: str) -> list[str]:
    """Word tokens (regex ``\\w+``) of :func:`normalise_text`: ``"Sum of A, B."`` → ``["sum", "of", "a", "b"]``."""
    return _WORD_RE.findall(normalise_text(text))


class _TokenHashCache(dict):
    """token → BLAKE2b-64 hash; computed on first use (``__missing__``), cleared when it exceeds ``_CACHE_MAX``."""

    def __missing__(self, tok: str) -> int:
        if len(self) >= _CACHE_MAX:
            self.clear()
        h = self[tok] = int.from_bytes(hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest(), "little")
        return h


_CACHE_MAX = 1 << 21
_TOKEN_HASH = _TokenHashCache()


def token_hashes(tokens: list[str]) -> np.ndarray:
    """Stable 64-bit hash of each token (BLAKE2b-64, cached): shape ``(len(tokens),)``, dtype ``uint64``."""
    return np.fromiter(map(_TOKEN_HASH.__getitem__, tokens), dtype=np.uint64, count=len(tokens))


def _splitmix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser (element-wise, wrapping uint64 arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _SM1
    x = x ^ (x >> np.uint64(27))
    x = x * _SM2
    return x ^ (x >> np.uint64(31))


def ngram_hashes(hashes: np.ndarray, n: int, short: Literal["whole", "none"] = "none") -> np.ndarray:
    """64-bit hashes of all windows of ``n`` consecutive items of ``hashes`` (module doc, step 4).

    Args:
        hashes: token (or character) hashes, shape ``(T,)``, dtype ``uint64``.
        n: window length, ``>= 1``.
        short: what a sequence with ``0 < T < n`` gives: ``"whole"`` = one hash of all ``T`` items, ``"none"`` = none.

    Returns:
        ``uint64`` array of shape ``(max(T - n + 1, 0),)`` (or ``(1,)`` for a short sequence with ``"whole"``), in
        window order (not deduplicated). Raises ``ValueError`` if ``n < 1``.
    """
    if n < 1:
        raise ValueError(f"ngram_hashes: n must be >= 1, got {n}")
    t = int(hashes.shape[0])
    if t == 0:
        return _EMPTY
    if t < n:
        if short == "none":
            return _EMPTY
        n = t
    m = t - n + 1
    with np.errstate(over="ignore"):
        acc = hashes[:m].copy()
        for j in range(1, n):
            acc *= _BASE
            acc += hashes[j : j + m]
        acc += np.uint64(n)  # windows of different lengths never share a polynomial value by construction
        return _splitmix(acc)


def ngram_hashes_batch(hashes: np.ndarray, lengths: np.ndarray, n: int,
                       short: Literal["whole", "none"] = "none") -> tuple[np.ndarray, np.ndarray]:
    """:func:`ngram_hashes` of many sequences at once: ``hashes`` is their concatenation (``uint64``), ``lengths``
    (``int64``, shape ``(D,)``) their lengths. Returns ``(ngrams, doc)``: every n-gram hash of every sequence and the
    index of its sequence, grouped by sequence in window order except that the ``short="whole"`` hashes of
    sequences shorter than ``n`` come last. The windows are the same polynomial over the concatenation, minus the
    windows that cross a sequence boundary, so each sequence's hashes equal ``ngram_hashes(seq, n, short)``.
    Raises ``ValueError`` if ``n < 1``."""
    if n < 1:
        raise ValueError(f"ngram_hashes_batch: n must be >= 1, got {n}")
    ends = np.cumsum(lengths)
    out_h: list[np.ndarray] = []
    out_d: list[np.ndarray] = []
    m = int(hashes.shape[0]) - n + 1
    if m > 0:
        with np.errstate(over="ignore"):
            acc = hashes[:m].copy()
            for j in range(1, n):
                acc *= _BASE
                acc += hashes[j : j + m]
            acc += np.uint64(n)
        valid = np.ones(m, dtype=bool)
        for k in range(1, n):  # a window starting k < n items before a sequence's end crosses into the next one
            at = ends - k
            valid[at[(at >= 0) & (at < m)]] = False
        out_h.append(_splitmix(acc[valid]))
        out_d.append(np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)[:m][valid])
    if short == "whole":
        few = np.flatnonzero((lengths > 0) & (lengths < n))
        if few.size:
            out_h.append(np.concatenate([ngram_hashes(hashes[ends[d] - lengths[d] : ends[d]], n, short="whole")
                                         for d in few]))
            out_d.append(few.astype(np.int64))
    if not out_h:
        return _EMPTY, np.zeros(0, dtype=np.int64)
    return np.concatenate(out_h), np.concatenate(out_d)


def char_shingle_hashes(text: str, k: int) -> np.ndarray:
    """64-bit hashes of every ``k`` consecutive characters of ``" ".join(normalise_text(text).split())``.

    Characters are hashed by code point through SplitMix64 (no cache needed). A text shorter than ``k`` gives one
    hash of the whole text; an empty text gives an empty array. Shape ``(max(L-k+1, 1),)``, dtype ``uint64``."""
    s = " ".join(normalise_text(text).split())
    if not s:
        return _EMPTY
    cps = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    return ngram_hashes(_splitmix(cps + np.uint64(1)), k, short="whole")
