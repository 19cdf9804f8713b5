"""The MBPP regression subset ``mbpp_reg`` (role Dev): a fixed, committed list of MBPP task ids that no Test set holds.

Why: the MBPP *validation* split (511–600) is not disjoint from the Test sets: sanitized-MBPP and MBPP+ (EvalPlus)
re-use task ids of every MBPP split (sanitized: prompt 7, test 257, validation 43, train 120). A Dev set must share no
problem with a Test set, so ``mbpp_reg`` is chosen by id, once, and committed as ``data/raw/mbpp/mbpp_reg_ids.txt``
(sha256-pinned in :mod:`rlvr.data.bundled` like every bundled file; loaded by :func:`rlvr.data.loaders.load` as dataset
``mbpp_reg``, bundled or Hub).

Rule (:func:`derive_ids`, deterministic, no randomness):

1. excluded = every task id of sanitized-MBPP (all splits) ∪ MBPP+ v0.1.0 ∪ MBPP+ v0.2.0 (all task ids), plus every
   MBPP id whose statement has exact Jaccard ≥ :data:`SIMILARITY_EXCLUDE` (0.5) with any statement of those sets
   (word 3-shingles of :func:`rlvr.data.neardup.shingle_set`, all pairs, no LSH): MBPP holds paraphrased repeats
   (e.g. task 658 ≈ 130, J = 0.77; 928 = 427), and a Dev problem must not be a reworded Test problem. 0.5 is
   stricter than the governance near-duplicate threshold (0.7);
2. take every MBPP ``prompt`` (1–10) and ``validation`` (511–600) id not excluded, ascending;
3. top up to ``size`` (default 100) with the smallest MBPP ``train`` (601–974) ids not excluded. The ``test`` split
   (11–510) is never used: it is the MBPP test benchmark others report.

Dev ∩ Test = ∅ by construction, by id and by statement similarity (the governance stage still reports any
eval–eval collision).
The train ids of step 3 stay in the ``mbpp`` train split: the governance stage removes those Train duplicates
(exact dedup, ``train_overlaps_eval``: the statements are identical), and ``tests/data/test_mbpp_reg.py`` checks it.

Regenerate (only if the rule changes; the sha256 in :mod:`rlvr.data.bundled` and ``data/raw/README.md`` then change
too)::

    .venv/bin/python -m rlvr.data.mbpp_reg --write data/raw/mbpp/mbpp_reg_ids.txt
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import click

from rlvr.io import atomic_write_text

__all__ = ["IDS_FILE", "MBPP_PLUS_VERSIONS", "SIMILARITY_EXCLUDE", "SIZE", "derive_from_bundled", "derive_ids",
           "render_ids_file", "similar_ids"]

#: The committed id list, relative to the raw folder.
IDS_FILE = "mbpp/mbpp_reg_ids.txt"
#: Size of the subset (the issue asks for 100–200).
SIZE = 100
#: MBPP+ releases whose ids are excluded (all bundled ones).
MBPP_PLUS_VERSIONS = ("v0.1.0", "v0.2.0")
#: Exact word-3-shingle Jaccard with a Test statement at or above which an MBPP id is excluded too.
SIMILARITY_EXCLUDE = 0.5


def similar_ids(candidates: dict[int, str], tests: Iterable[str], threshold: float = SIMILARITY_EXCLUDE) -> set[int]:
    """Ids of ``candidates`` (id → statement) whose statement has exact Jaccard ``>= threshold`` with any of
    ``tests`` (statements), over :func:`rlvr.data.neardup.shingle_set` with the default
    :class:`~rlvr.data.neardup.NearDupConfig` (word 3-shingles). All pairs are compared (no LSH)."""
    from rlvr.data.neardup import NearDupConfig, exact_jaccard, shingle_set

    cfg = NearDupConfig()
    test_sets = [s for s in (shingle_set(t, cfg) for t in tests) if s.size]
    out = set()
    for tid, text in candidates.items():
        s = shingle_set(text, cfg)
        if s.size and any(exact_jaccard(s, t) >= threshold for t in test_sets):
            out.add(tid)
    return out


def derive_ids(split_of: dict[int, str], excluded: Iterable[int], size: int = SIZE) -> list[int]:
    """The ``mbpp_reg`` ids by the module rule: ``split_of`` maps every MBPP task id to its split (``prompt`` |
    ``test`` | ``validation`` | ``train``), ``excluded`` = ids of any Test set. Returns ``size`` ids, prompt/validation
    ones first then train ones, each ascending.

    Raises ``ValueError`` when fewer than ``size`` ids qualify, or when prompt+validation alone exceed ``size``."""
    ex = set(excluded)
    first = sorted(t for t, s in split_of.items() if s in ("prompt", "validation") and t not in ex)
    if len(first) > size:
        raise ValueError(f"mbpp_reg: {len(first)} prompt/validation ids qualify, more than size={size}")
    train = sorted(t for t, s in split_of.items() if s == "train" and t not in ex)
    if len(first) + len(train) < size:
        raise ValueError(f"mbpp_reg: only {len(first) + len(train)} ids qualify, size={size}")
    return first + train[: size - len(first)]


def derive_from_bundled(raw_dir: str | Path | None = None, size: int = SIZE) -> tuple[list[int], dict[str, int]]:
    """:func:`derive_ids` on the bundled MBPP, sanitized-MBPP and MBPP+ files; returns ``(ids, counts)`` with the
    numbers the id file's header states (``excluded_id``, ``excluded_similar``, ``from_prompt_validation``,
    ``from_train``)."""
    from rlvr.data.loaders import load_bundled

    mbpp = load_bundled("mbpp", raw_dir)
    split_of = {int(p.meta["task_id"]): p.split for p in mbpp}
    tests = load_bundled("mbpp_sanitized", raw_dir)
    for v in MBPP_PLUS_VERSIONS:
        tests += load_bundled(f"mbppplus:{v}", raw_dir)
    by_id = {int(str(p.meta["task_id"]).rsplit("/", 1)[-1]) for p in tests}
    similar = similar_ids({int(p.meta["task_id"]): p.statement for p in mbpp
                           if int(p.meta["task_id"]) not in by_id and p.split != "test"},
                          [p.statement for p in tests])
    ids = derive_ids(split_of, by_id | similar, size)
    n_train = sum(split_of[t] == "train" for t in ids)
    return ids, {"excluded_id": len(by_id), "excluded_similar": len(similar),
                 "from_prompt_validation": len(ids) - n_train, "from_train": n_train}


def render_ids_file(ids: list[int], counts: dict[str, int]) -> str:
    """Text of ``data/raw/mbpp/mbpp_reg_ids.txt``: a ``#`` header stating the rule and counts, then one id a line."""
    header = [
        "# mbpp_reg: MBPP regression subset (role Dev), Austin et al. 2021 task ids, one per line.",
        "# Derived by rlvr/data/mbpp_reg.py (derive_ids) from the bundled data/raw files:",
        f"#   excluded = all task ids of sanitized-MBPP (all splits) and MBPP+ {' and '.join(MBPP_PLUS_VERSIONS)}"
        f" ({counts['excluded_id']} ids),",
        "#     and prompt/validation/train ids whose statement has exact word-3-shingle Jaccard >= "
        f"{SIMILARITY_EXCLUDE} with one of theirs ({counts['excluded_similar']} ids);",
        f"#   every MBPP prompt (1-10) / validation (511-600) id not excluded ({counts['from_prompt_validation']}),",
        f"#   topped up to {len(ids)} with the smallest MBPP train (601-974) ids not excluded"
        f" ({counts['from_train']}).",
        "#   The MBPP test split (11-510) is never used. Dev and Test share no id by construction.",
        "# Regenerate: .venv/bin/python -m rlvr.data.mbpp_reg --write data/raw/mbpp/mbpp_reg_ids.txt",
    ]
    return "\n".join(header + [str(t) for t in ids]) + "\n"


@click.command()
@click.option("--write", "out", type=click.Path(dir_okay=False), default=None,
              help="Write the id file here (atomically); default: print it.")
@click.option("--size", type=int, default=SIZE, show_default=True)
def main(out: str | None, size: int) -> None:
    """Derive the mbpp_reg id list from the bundled files and print or write it."""
    ids, counts = derive_from_bundled(size=size)
    text = render_ids_file(ids, counts)
    if out:
        atomic_write_text(Path(out), text)
    else:
        click.echo(text, nl=False)


if __name__ == "__main__":
    main()
