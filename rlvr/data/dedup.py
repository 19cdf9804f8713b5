"""Exact deduplication of problems by normalised statement hash, within and across splits and sources.

Normalisation (:func:`normalise_statement`): Unicode NFKC (``\\xa0`` → space, full-width forms folded), lower-case,
whitespace runs collapsed to one space, ends stripped. Punctuation is kept on purpose: exact dedup must be
conservative, and statements that differ only in symbols are different problems (HumanEval/56 and /61 differ only in
``"<"``/``">"`` vs ``"("``/``")"``); fuzzy matches are the near-duplicate audit's job.

Policy (:func:`exact_dedup`), with the role of each problem (``meta['role']``: ``train`` | ``dev`` | ``test``):

* duplicates inside one ``(source, split)``: the first in input order is kept, later ones dropped
  (``drop_within_split``);
* a ``train`` problem whose statement equals any ``dev``/``test`` problem's is dropped (``drop_train_overlapping_eval``,
  exact decontamination of the training data);
* every other collision (across evaluation sets, or train vs train of different sources) is only reported.

Near-duplicate and contamination audits (MinHash, n-grams) live elsewhere and plug in after this step through
:func:`rlvr.data.governance.run_governance`'s ``audits``.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rlvr.data.schema import Problem

__all__ = ["DedupReport", "DupGroup", "exact_dedup", "group_by_statement", "normalise_statement", "statement_hash"]

EVAL_ROLES = frozenset({"dev", "test", "eval"})


def normalise_statement(text: str) -> str:
    """Normalised form for exact-duplicate detection (module doc): ``"Sum  of\\nA, B."`` → ``"sum of a, b."``."""
    return " ".join(unicodedata.normalize("NFKC", text).lower().split())


def statement_hash(text: str) -> str:
    """sha256 (hex) of :func:`normalise_statement` of ``text``."""
    return hashlib.sha256(normalise_statement(text).encode("utf-8")).hexdigest()


def group_by_statement(texts: Iterable[str]) -> dict[str, list[int]]:
    """Positions of ``texts`` grouped by :func:`statement_hash`, in input order (groups ordered by first position);
    texts whose normalised form is empty are left out (never grouped). The grouping step of :func:`exact_dedup`,
    also what the scale benchmark (``bench/governance``) times."""
    by_hash: dict[str, list[int]] = defaultdict(list)
    sha = hashlib.sha256
    for i, text in enumerate(texts):
        norm = normalise_statement(text)
        if norm:
            by_hash[sha(norm.encode("utf-8")).hexdigest()].append(i)
    return dict(by_hash)


@dataclass
class DupGroup:
    """Problems sharing one normalised statement hash. ``kind``: ``within_split`` (all in one source+split),
    ``cross_split`` (one source, several splits) or ``cross_source``."""

    hash: str
    kind: str
    ids: list[str]
    places: list[str]  # "<source>/<split>" per id


@dataclass
class DedupReport:
    """Outcome of :func:`exact_dedup`: counts, collision groups, and each dropped id with the id it duplicates and
    the reason (``duplicate_within_split`` | ``train_overlaps_eval``)."""

    n_in: int = 0
    n_out: int = 0
    groups: list[DupGroup] = field(default_factory=list)
    dropped: list[dict[str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Flat numbers for metrics: groups per kind and drops per reason."""
        out: dict[str, int] = {"dup_groups": len(self.groups), "dropped": len(self.dropped)}
        for g in self.groups:
            out[f"groups_{g.kind}"] = out.get(f"groups_{g.kind}", 0) + 1
        for d in self.dropped:
            out[f"dropped_{d['reason']}"] = out.get(f"dropped_{d['reason']}", 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"n_in": self.n_in, "n_out": self.n_out, "counts": self.counts(),
                "groups": [asdict(g) for g in self.groups], "dropped": self.dropped}


def exact_dedup(
    problems: Sequence[Problem],
    *,
    drop_within_split: bool = True,
    drop_train_overlapping_eval: bool = True,
) -> tuple[list[Problem], DedupReport]:
    """Drop exact duplicate statements per the module policy; returns ``(kept, report)``, ``kept`` in input order.

    Problems whose normalised statement is empty are never grouped. The role is ``p.meta.get('role', 'test')``."""
    by_hash = group_by_statement(p.statement for p in problems)
    report = DedupReport(n_in=len(problems))
    drop: dict[int, tuple[str, str]] = {}
    for h, idx in by_hash.items():
        if len(idx) < 2:
            continue
        places = [f"{problems[i].source}/{problems[i].split}" for i in idx]
        sources = {problems[i].source for i in idx}
        kind = "within_split" if len(set(places)) == 1 else ("cross_split" if len(sources) == 1 else "cross_source")
        report.groups.append(DupGroup(hash=h, kind=kind, ids=[problems[i].id for i in idx], places=places))
        first_at: dict[str, int] = {}
        for i, place in zip(idx, places, strict=True):
            if place in first_at:
                if drop_within_split:
                    drop[i] = (problems[first_at[place]].id, "duplicate_within_split")
            else:
                first_at[place] = i
        evals = [i for i in idx if problems[i].meta.get("role", "test") in EVAL_ROLES]
        if drop_train_overlapping_eval and evals:
            for i in idx:
                if problems[i].meta.get("role", "test") == "train" and i not in drop:
                    drop[i] = (problems[evals[0]].id, "train_overlaps_eval")
    for i in sorted(drop):
        report.dropped.append({"id": problems[i].id, "duplicate_of": drop[i][0], "reason": drop[i][1]})
    kept = [p for i, p in enumerate(problems) if i not in drop]
    report.n_out = len(kept)
    return kept, report
