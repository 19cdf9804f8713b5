"""Contamination audit (decontamination) of training problems against every Dev/Test set: word n-gram overlap and
test-input leakage.

**n-gram overlap.** Texts are normalised and split into word tokens by :mod:`rlvr.data.textnorm` (NFKC, lower-case,
``\\w+`` runs; punctuation and whitespace only separate tokens), and every window of ``n`` consecutive tokens is hashed
to 64 bits. Two conventions are computed side by side (``ngram_sizes``):

* ``n = 13``: the GPT-3 / Codex convention (Brown et al. 2020, "Language Models are Few-Shot Learners", appendix C:
  a benchmark example is "dirty" if it shares any 13-gram with the training data);
* ``n = 10``: Qwen2.5-Coder's decontamination (Hui et al. 2024, "Qwen2.5-Coder Technical Report": training data with
  a 10-gram word overlap with HumanEval, MBPP, … removed).

Sides compared: every *training* problem's ``train_fields`` (default its statement — with the starter code — and each
reference solution) against every *evaluation* problem's ``eval_fields`` (default statement + starter code, tests,
reference solutions). Each text is its own token sequence (n-grams never span two solutions or two tests); an eval
problem contributes at most ``eval_max_tests`` tests (public ones first) so that giant generated inputs (EvalPlus) do
not dominate the index. Optionally (``max_eval_df > 0``) an n-gram found in more than ``max_eval_df`` eval problems is
treated as boilerplate and ignored (default 4: a genuine copy sits in at most ~3 eval sets, e.g. MBPP, sanitized
MBPP and MBPP+; boilerplate such as ``1 1 1 … 1`` or ``definition for a binary tree node class treenode …`` sits in
many). Likewise (``max_train_df > 0``) an n-gram found in more than ``max_train_df`` *training* problems is ignored:
a copied eval item sits in a handful of training problems, while LeetCode's house style (``a subsequence is an array
that can be derived from another array by deleting …``, the ``ListNode``/``TreeNode`` comment blocks, ``0 1`` grid
examples) recurs in dozens. On the bundled data (params defaults) this cut takes the flagged count from 582 to the
number in ``data/governance/audit.md``; the removed flags were LeetCode phrasing shared with unrelated problems.
Measured on the bundled data (LeetCodeDataset train + CodeContests-300 + APPS-150 + MBPP train vs HumanEval(+),
MBPP test, MBPP+, LeetCodeDataset test, LeetCode contests): 766 of 2,714 training problems share a 13-gram without
the cut-off, 635 with it; the rest of the flagged set is real (LeetCodeDataset train holds the contest problems of
``leetcode_contest`` verbatim, MBPP 608 duplicates MBPP 67) or shared LeetCode phrasing (``a substring is a
contiguous non empty sequence of characters within a string``), which GPT-3's any-13-gram rule deliberately
over-removes; ``min_shared_ngrams`` raises the bar (≥ 3: 462, ≥ 10: 256).

**Flag rule.** A training problem is *flagged* when it shares at least ``min_shared_ngrams`` distinct ``main_n``-grams
(default 13, ≥ 1 — GPT-3's rule) with one evaluation problem, or when it leaks test inputs (below). Overlaps at the
other sizes are reported, not flagged.

**Test-input leakage.** Each test gives a normalised input key: ``stdio`` → ``"stdin:"`` + whitespace-collapsed stdin;
``call`` → ``"call:"`` + the argument list re-printed by :func:`ast.unparse` (so ``"[1,  'a']"`` and the assert call
``candidate(1, "a")`` give the same key) with whitespace removed; ``assert`` → one key per call of ``candidate`` /
the entry point found in the assert code (positional args, then ``k=v`` keywords). Keys whose payload is shorter
than ``min_input_chars`` characters (keyword names and the outer brackets not counted: ``""``, ``"1"``,
``nums=[1,2,3]``…) are trivial and ignored. A training problem is flagged
when its tests contain at least ``min_shared_inputs`` distinct non-trivial input keys of one eval problem (exact
match). Default 2: toy inputs such as ``[1,2,3,4,5,6,7,8,9,10]`` recur across unrelated LeetCode problems (107
training problems share that single input with some eval problem; 51 share ≥ 2 inputs with one).

Cost: the eval side is indexed once as sorted ``uint64`` arrays per ``n`` (16 bytes per distinct (n-gram, eval
problem, field)); training problems are streamed and looked up with ``numpy.searchsorted``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from rlvr.config import Section
from rlvr.data.input_keys import _payload_len, input_keys
from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest
from rlvr.data.textnorm import ngram_hashes, token_hashes, word_tokens

__all__ = [
    "ContaminationConfig",
    "ContaminationHit",
    "ContaminationReport",
    "EvalIndex",
    "InputLeak",
    "TrainItemReport",
    "audit_contamination",
    "field_texts",
    "input_keys",
]

FieldName = Literal["statement", "solutions", "tests"]
_FIELDS: tuple[FieldName, ...] = ("statement", "solutions", "tests")


class ContaminationConfig(Section):
    """``governance.contamination`` params (module doc): ``ngram_sizes`` (word n-gram lengths audited),
    ``main_n`` (the size that flags; must be in ``ngram_sizes``), ``min_shared_ngrams`` (distinct ``main_n``-grams
    shared with one eval problem to flag), ``train_fields`` / ``eval_fields`` (which texts are compared),
    ``eval_max_tests`` (tests per eval problem indexed), ``max_eval_df`` (boilerplate cut-off, 0 = off),
    ``max_train_df`` (n-grams in more than this many training problems are boilerplate, 0 = off),
    ``input_leakage`` (run the test-input check), ``min_input_chars`` (shorter input keys are trivial),
    ``min_shared_inputs`` (distinct shared inputs with one eval problem to flag), ``sample_ngrams`` (overlapping
    n-grams quoted per hit)."""

    ngram_sizes: list[int] = Field(default_factory=lambda: [13, 10])
    main_n: int = 13
    min_shared_ngrams: int = Field(default=1, ge=1)
    train_fields: list[FieldName] = Field(default_factory=lambda: ["statement", "solutions"])
    eval_fields: list[FieldName] = Field(default_factory=lambda: ["statement", "tests", "solutions"])
    eval_max_tests: int = Field(default=100, ge=0)
    max_eval_df: int = Field(default=4, ge=0)
    max_train_df: int = Field(default=0, ge=0)
    input_leakage: bool = True
    min_input_chars: int = Field(default=16, ge=0)
    min_shared_inputs: int = Field(default=2, ge=1)
    sample_ngrams: int = Field(default=3, ge=0)

    @model_validator(mode="after")
    def _check(self) -> ContaminationConfig:
        if not self.ngram_sizes or min(self.ngram_sizes) < 1:
            raise ValueError(f"ngram_sizes must be non-empty positive integers, got {self.ngram_sizes}")
        if self.main_n not in self.ngram_sizes:
            raise ValueError(f"main_n={self.main_n} must be one of ngram_sizes={self.ngram_sizes}")
        return self


class ContaminationHit(BaseModel):
    """Overlap of one training problem with one eval problem at one ``n``: ``shared`` distinct n-grams, the training
    fields they occur in, the eval fields they come from, and up to ``sample_ngrams`` of them as text."""

    eval_set: str
    eval_id: str
    n: int
    shared: int
    train_fields: list[str]
    eval_fields: list[str]
    sample: list[str]


class InputLeak(BaseModel):
    """Non-trivial test inputs of an eval problem found in a training problem's tests (``shared`` distinct keys)."""

    eval_set: str
    eval_id: str
    shared: int
    sample: list[str]


class TrainItemReport(BaseModel):
    """A training problem with at least one overlap; ``reasons`` ⊆ {``ngram_<main_n>``, ``test_input_leak``}."""

    id: str
    flagged: bool
    reasons: list[str]
    hits: list[ContaminationHit]
    input_leaks: list[InputLeak]


class ContaminationReport(BaseModel):
    """Outcome of :func:`audit_contamination`. ``eval_sets``: name → problem count; ``items``: training problems
    with any overlap (flagged or not), input order; ``flagged_ids``: the ones to remove; ``by_eval_set``: eval set →
    ``{"ngram_<n>": training problems hitting it at n, "test_input_leak": …, "flagged": …}``."""

    config: ContaminationConfig
    n_train: int
    eval_sets: dict[str, int]
    index_ngrams: dict[str, int]
    items: list[TrainItemReport]
    flagged_ids: list[str]
    by_eval_set: dict[str, dict[str, int]]

    def counts(self) -> dict[str, int]:
        """Flat numbers for ``metrics/governance.json``."""
        out = {"contamination_train": self.n_train, "contamination_flagged": len(self.flagged_ids),
               "contamination_with_overlap": len(self.items)}
        for s, c in self.by_eval_set.items():
            for k, v in c.items():
                out[f"contamination_{s}_{k}"] = v
        return out


def _test_text(t: StdioTest | CallTest | AssertTest) -> str:
    if isinstance(t, StdioTest):
        return f"{t.stdin}\n{t.stdout}"
    if isinstance(t, CallTest):
        return t.args if t.expected is None else f"{t.args}\n{t.expected}"
    return t.code


def field_texts(p: Problem, name: FieldName, max_tests: int | None = None) -> list[str]:
    """Texts of field ``name`` of ``p``: ``statement`` → ``[statement + "\\n" + starter_code]``; ``solutions`` → each
    reference solution; ``tests`` → one text per test (stdin + stdout, args + expected, or assert code), public tests
    first, at most ``max_tests`` (``None`` = all)."""
    if name == "statement":
        return [p.statement]
    if name == "solutions":
        return list(p.solutions)
    tests = sorted(p.tests, key=lambda t: not t.public)
    if max_tests is not None:
        tests = tests[:max_tests]
    return [_test_text(t) for t in tests]



@dataclass
class EvalIndex:
    """Sorted n-gram index of the evaluation problems. ``hashes[n]`` (sorted ``uint64``), ``owner[n]`` (eval
    problem position, ``int32``) and ``fields[n]`` (index into ``_FIELDS``, ``int8``) are parallel arrays;
    ``inputs`` maps a non-trivial input key to the eval positions holding it."""

    problems: list[Problem]
    sets: list[str]
    hashes: dict[int, np.ndarray] = field(default_factory=dict)
    owner: dict[int, np.ndarray] = field(default_factory=dict)
    fields: dict[int, np.ndarray] = field(default_factory=dict)
    inputs: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, eval_sets: Mapping[str, Sequence[Problem]], cfg: ContaminationConfig) -> EvalIndex:
        """Index every problem of every eval set (module doc)."""
        probs = [p for ps in eval_sets.values() for p in ps]
        idx = cls(problems=probs, sets=[s for s, ps in eval_sets.items() for _ in ps])
        parts: dict[int, list[tuple[np.ndarray, int, int]]] = {n: [] for n in cfg.ngram_sizes}
        for k, p in enumerate(probs):
            for f in cfg.eval_fields:
                for text in field_texts(p, f, cfg.eval_max_tests):
                    th = token_hashes(word_tokens(text))
                    for n in cfg.ngram_sizes:
                        h = ngram_hashes(th, n)
                        if h.size:
                            parts[n].append((h, k, _FIELDS.index(f)))
            if cfg.input_leakage:
                for key in input_keys(p):
                    if _payload_len(key) >= cfg.min_input_chars:
                        lst = idx.inputs.setdefault(key, [])
                        if not lst or lst[-1] != k:
                            lst.append(k)
        for n, lst in parts.items():
            if lst:
                h = np.concatenate([x[0] for x in lst])
                o = np.concatenate([np.full(x[0].size, x[1], dtype=np.int32) for x in lst])
                fl = np.concatenate([np.full(x[0].size, x[2], dtype=np.int8) for x in lst])
            else:
                h, o, fl = np.zeros(0, np.uint64), np.zeros(0, np.int32), np.zeros(0, np.int8)
            order = np.lexsort((fl, o, h))
            h, o, fl = h[order], o[order], fl[order]
            keep = np.ones(h.size, dtype=bool)
            keep[1:] = (h[1:] != h[:-1]) | (o[1:] != o[:-1]) | (fl[1:] != fl[:-1])
            h, o, fl = h[keep], o[keep], fl[keep]
            if cfg.max_eval_df > 0 and h.size:
                ho = np.ones(h.size, dtype=bool)
                ho[1:] = (h[1:] != h[:-1]) | (o[1:] != o[:-1])  # first entry of each (hash, owner)
                uh, inv = np.unique(h[ho], return_inverse=True)
                df = np.bincount(inv)
                bad = uh[df > cfg.max_eval_df]
                ok = ~np.isin(h, bad)
                h, o, fl = h[ok], o[ok], fl[ok]
            idx.hashes[n], idx.owner[n], idx.fields[n] = h, o, fl
        return idx


class _Acc:
    __slots__ = ("eval_fields", "hashes", "sample", "train_fields")

    def __init__(self) -> None:
        self.hashes: set[int] = set()
        self.train_fields: set[str] = set()
        self.eval_fields: set[str] = set()
        self.sample: list[str] = []


def _train_item(p: Problem, idx: EvalIndex, cfg: ContaminationConfig) -> TrainItemReport | None:
    acc: dict[tuple[int, int], _Acc] = {}
    for f in cfg.train_fields:
        for text in field_texts(p, f):
            toks = word_tokens(text)
            th = token_hashes(toks)
            for n in cfg.ngram_sizes:
                H = idx.hashes[n]
                h = ngram_hashes(th, n)
                if not h.size or not H.size:
                    continue
                lo = np.searchsorted(H, h, side="left")
                hit = (lo < H.size) & (H[np.minimum(lo, H.size - 1)] == h)
                for pos in np.flatnonzero(hit):
                    hv = int(h[pos])
                    r = int(lo[pos])
                    while r < H.size and int(H[r]) == hv:
                        a = acc.setdefault((int(idx.owner[n][r]), n), _Acc())
                        if hv not in a.hashes:
                            a.hashes.add(hv)
                            if len(a.sample) < cfg.sample_ngrams:
                                a.sample.append(" ".join(toks[pos : pos + n]))
                        a.train_fields.add(f)
                        a.eval_fields.add(_FIELDS[int(idx.fields[n][r])])
                        r += 1
    leaks: dict[int, list[str]] = {}
    if cfg.input_leakage and idx.inputs:
        for key in input_keys(p):
            for k in idx.inputs.get(key, ()):
                leaks.setdefault(k, []).append(key)
    if not acc and not leaks:
        return None
    hits = [ContaminationHit(eval_set=idx.sets[k], eval_id=idx.problems[k].id, n=n, shared=len(a.hashes),
                             train_fields=sorted(a.train_fields), eval_fields=sorted(a.eval_fields), sample=a.sample)
            for (k, n), a in sorted(acc.items(), key=lambda kv: (-kv[0][1], kv[0][0]))]
    input_leaks = [InputLeak(eval_set=idx.sets[k], eval_id=idx.problems[k].id, shared=len(v),
                             sample=[s[:200] for s in v[: max(cfg.sample_ngrams, 1)]])
                   for k, v in sorted(leaks.items())]
    reasons = []
    if any(h.n == cfg.main_n and h.shared >= cfg.min_shared_ngrams for h in hits):
        reasons.append(f"ngram_{cfg.main_n}")
    if any(x.shared >= cfg.min_shared_inputs for x in input_leaks):
        reasons.append("test_input_leak")
    return TrainItemReport(id=p.id, flagged=bool(reasons), reasons=reasons, hits=hits, input_leaks=input_leaks)


def _drop_train_boilerplate(idx: EvalIndex, train: Sequence[Problem], cfg: ContaminationConfig) -> None:
    """Remove from ``idx`` every n-gram that occurs in more than ``cfg.max_train_df`` training problems (module doc)."""
    for n in cfg.ngram_sizes:
        per_problem = []
        for p in train:
            hs = [ngram_hashes(token_hashes(word_tokens(t)), n) for f in cfg.train_fields for t in field_texts(p, f)]
            hs = [h for h in hs if h.size]
            if hs:
                per_problem.append(np.unique(np.concatenate(hs)))
        if not per_problem or not idx.hashes[n].size:
            continue
        allh = np.concatenate(per_problem)
        allh = allh[np.isin(allh, idx.hashes[n])]  # only n-grams the eval side has matter
        uh, df = np.unique(allh, return_counts=True)
        bad = uh[df > cfg.max_train_df]
        if bad.size:
            ok = ~np.isin(idx.hashes[n], bad)
            idx.hashes[n], idx.owner[n], idx.fields[n] = idx.hashes[n][ok], idx.owner[n][ok], idx.fields[n][ok]


def audit_contamination(
    train: Iterable[Problem], eval_sets: Mapping[str, Sequence[Problem]], cfg: ContaminationConfig
) -> tuple[ContaminationReport, list[str]]:
    """Audit every training problem against every eval set (module doc).

    Args:
        train: training problems (streamed once).
        eval_sets: eval set name (e.g. ``"humaneval"``, ``"codecontests/valid"``) → its problems (dev and test roles).
        cfg: :class:`ContaminationConfig`.

    Returns:
        ``(report, flagged_ids)``; ``flagged_ids`` (training ids to remove, input order) equals
        ``report.flagged_ids``. Deterministic: same inputs, same report.
    """
    idx = EvalIndex.build(eval_sets, cfg)
    if cfg.max_train_df > 0:
        train = list(train)
        _drop_train_boilerplate(idx, train, cfg)
    items: list[TrainItemReport] = []
    by_set: dict[str, dict[str, int]] = {s: {} for s in eval_sets}
    n_train = 0
    for p in train:
        n_train += 1
        item = _train_item(p, idx, cfg)
        if item is None:
            continue
        items.append(item)
        touched: dict[str, set[str]] = {}
        for h in item.hits:
            touched.setdefault(h.eval_set, set()).add(f"ngram_{h.n}")
            if h.n == cfg.main_n and h.shared >= cfg.min_shared_ngrams:
                touched[h.eval_set].add("flagged")
        for leak in item.input_leaks:
            if leak.shared >= cfg.min_shared_inputs:
                touched.setdefault(leak.eval_set, set()).update({"test_input_leak", "flagged"})
        for s, kinds in touched.items():
            for kind in kinds:
                by_set[s][kind] = by_set[s].get(kind, 0) + 1
    flagged = [it.id for it in items if it.flagged]
    report = ContaminationReport(config=cfg, n_train=n_train, eval_sets={s: len(ps) for s, ps in eval_sets.items()},
                                 index_ngrams={str(n): int(h.size) for n, h in idx.hashes.items()}, items=items,
                                 flagged_ids=flagged, by_eval_set=by_set)
    return report, flagged
