"""Content-hashed manifests of the governed problem sets.

Per dataset and split: ``<out>/<dataset>.<split>.manifest.jsonl`` with one ``{"id", "sha256"}`` line per problem
(``sha256`` = :meth:`Problem.content_sha256`, the canonical JSON of the whole problem), in problem order. The index
``<out>/index.json`` maps each manifest file name to ``{"dataset", "split", "count", "sha256"}`` (sha256 of the
manifest file's bytes), so one hash pins a whole split and any change to any test shows up in ``dvc diff``.

Training sets (issue "Training sets from manifests"), built without a judge from the governance outputs:

* **SFT** (:func:`build_sft`): reference solutions the judge accepted (``data/governance/references.jsonl``, verdicts
  computed by the governance stage, which owns the judge); references it rejected, and problems without a verified
  reference, are dropped and counted.
* **DPO seed pairs** (:func:`build_dpo`): an accepted reference vs a known-incorrect solution the judge rejected, of
  the same problem (``Problem.incorrect_solutions``: the Hub CodeContests has them, the bundled subset has none).
* **GRPO prompts** (:func:`build_grpo`): problems with at least ``grpo_min_tests`` tests and no contamination flag
  (flagged items were already removed by governance; ``contamination.jsonl`` is checked again, defensively,
  :func:`flagged_ids`). The filter itself is :func:`rl_eligible`, which the local (TRL) engine's GRPO stage applies to
  ``train.train_sets`` at stage time, so both engines train on problems that passed the same floor.

Only ``meta['role'] == 'train'`` problems may enter a training set (``ValueError`` otherwise): Dev/Test isolation is
enforced here as well as in governance.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from rlvr.config import Section
from rlvr.data.bundled import sha256_file
from rlvr.data.schema import Problem, read_problems
from rlvr.data.synthetic import completion_for
from rlvr.io import atomic_write_json, atomic_write_jsonl

__all__ = [
    "ManifestsParams",
    "build_dpo",
    "build_grpo",
    "build_sft",
    "check_train_role",
    "flagged_ids",
    "load_governed",
    "min_tests_filter",
    "read_jsonl",
    "rl_eligible",
    "select",
    "write_manifests",
]


class ManifestsParams(Section):
    """``params.yaml`` section ``manifests``. ``verl_train``: the ``"<dataset>/<split>"`` sets of the GRPO prompts
    (``data/manifests/grpo/train.jsonl`` for TRL and ``data/manifests/verl/train.parquet`` for verl), filtered to
    problems with ``>= grpo_min_tests`` tests; ``verl_val``: the verl RL validation parquet (unfiltered);
    ``sft_sets`` / ``dpo_sets``: sources of the SFT set and DPO seed pairs; ``sft_max_per_problem``: accepted
    references per problem in SFT; ``dpo_max_pairs_per_problem``: (accepted, rejected) pairs per problem."""

    verl_train: list[str] = Field(default_factory=list)
    verl_val: list[str] = Field(default_factory=list)
    sft_sets: list[str] = Field(default_factory=list)
    dpo_sets: list[str] = Field(default_factory=list)
    grpo_min_tests: int = Field(default=1, ge=1)
    sft_max_per_problem: int = Field(default=1, ge=1)
    dpo_max_pairs_per_problem: int = Field(default=2, ge=1)


def load_governed(in_dir: str | Path) -> dict[str, list[Problem]]:
    """Read every ``<in_dir>/<dataset>.jsonl`` (the governance output) → ``{dataset: problems}``, sorted by name.

    Raises ``FileNotFoundError`` if ``in_dir`` has no ``*.jsonl`` file, ``ValueError`` (file, line, field) on a bad
    line."""
    files = sorted(Path(in_dir).glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{in_dir}: no governed problem files (*.jsonl); run the governance stage first")
    return {f.stem: read_problems(f) for f in files}


def write_manifests(governed: dict[str, list[Problem]], out_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Write one manifest per (dataset, split) and ``index.json`` under ``out_dir`` (atomically); returns the index."""
    out = Path(out_dir)
    index: dict[str, dict[str, Any]] = {}
    for dataset, problems in sorted(governed.items()):
        by_split: dict[str, list[Problem]] = defaultdict(list)
        for p in problems:
            by_split[p.split].append(p)
        for split, ps in sorted(by_split.items()):
            name = f"{dataset}.{split}.manifest.jsonl"
            n = atomic_write_jsonl(out / name, ({"id": p.id, "sha256": p.content_sha256()} for p in ps))
            index[name] = {"dataset": dataset, "split": split, "count": n, "sha256": sha256_file(out / name)}
    atomic_write_json(out / "index.json", index)
    return index


def select(governed: dict[str, list[Problem]], refs: list[str]) -> list[Problem]:
    """Problems of ``refs`` (``"<dataset>/<split>"``, dataset as in the governed file names, e.g.
    ``"humanevalplus-v0.1.10/test"``), concatenated in ``refs`` order.

    Raises ``ValueError`` naming the reference when the dataset is not governed or the split is empty."""
    out: list[Problem] = []
    for ref in refs:
        dataset, _, split = ref.partition("/")
        if dataset not in governed:
            raise ValueError(f"manifests: {ref!r}: dataset {dataset!r} not governed; have {sorted(governed)}")
        ps = [p for p in governed[dataset] if p.split == split]
        if not ps:
            raise ValueError(f"manifests: {ref!r}: no problems in split {split!r} of {dataset!r}")
        out.extend(ps)
    return out


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file; ``[]`` when the file does not exist. Raises ``ValueError`` naming file and line on bad
    JSON."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{lineno}: malformed JSON line: {exc.msg}") from exc
    return out


def check_train_role(problems: Iterable[Problem], what: str) -> None:
    """Raise ``ValueError`` naming the first problem whose ``meta['role']`` is not ``train`` (Dev/Test isolation)."""
    for p in problems:
        role = p.meta.get("role")
        if role != "train":
            raise ValueError(f"manifests: {what}: problem {p.id!r} has role {role!r}; only train-role problems may "
                             "enter a training set (governance.datasets role)")


def _verdicts(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], list[tuple[int, bool]]]:
    out: dict[tuple[str, str], list[tuple[int, bool]]] = defaultdict(list)
    for r in rows:
        out[(r["id"], r["kind"])].append((int(r["index"]), bool(r["accepted"])))
    return out


def build_sft(problems: Sequence[Problem], reference_rows: Iterable[Mapping[str, Any]], max_per_problem: int = 1
              ) -> tuple[list[tuple[Problem, str]], dict[str, int]]:
    """SFT pairs ``(problem, assistant answer)`` from judge-accepted references (first ``max_per_problem`` accepted,
    solution order). ``reference_rows``: ``references.jsonl`` rows (:func:`rlvr.data.governance.verify_references`).

    Returns ``(pairs, counts)``; counts: ``problems``, ``pairs``, ``references_rejected`` (judged, not accepted:
    dropped),
    ``problems_unverified`` (no verdict row: not judged, e.g. no solution), ``problems_without_accepted``."""
    check_train_role(problems, "sft")
    v = _verdicts(reference_rows)
    pairs: list[tuple[Problem, str]] = []
    counts = {"problems": len(problems), "pairs": 0, "references_rejected": 0, "problems_unverified": 0,
              "problems_without_accepted": 0}
    for p in problems:
        rows = v.get((p.id, "solution"))
        if not rows:
            counts["problems_unverified"] += 1
            continue
        ok = [i for i, acc in sorted(rows) if acc and i < len(p.solutions)]
        counts["references_rejected"] += sum(not acc for _, acc in rows)
        if not ok:
            counts["problems_without_accepted"] += 1
        pairs += [(p, completion_for(p.solutions[i])) for i in ok[:max_per_problem]]
    counts["pairs"] = len(pairs)
    return pairs, counts


def build_dpo(problems: Sequence[Problem], reference_rows: Iterable[Mapping[str, Any]], max_pairs_per_problem: int = 2
              ) -> tuple[list[tuple[Problem, str, str]], dict[str, int]]:
    """DPO seed pairs ``(problem, chosen, rejected)``: the k-th judge-accepted reference with the k-th known-incorrect
    solution the judge rejected, same problem, up to ``max_pairs_per_problem``.

    Returns ``(pairs, counts)``; counts: ``problems_with_incorrect``, ``pairs``, ``incorrect_accepted`` (a "wrong"
    solution the tests accept: unusable as rejected, dropped), ``problems_without_pair``."""
    check_train_role(problems, "dpo")
    v = _verdicts(reference_rows)
    out: list[tuple[Problem, str, str]] = []
    counts = {"problems_with_incorrect": 0, "pairs": 0, "incorrect_accepted": 0, "problems_without_pair": 0}
    for p in problems:
        if not p.incorrect_solutions:
            continue
        counts["problems_with_incorrect"] += 1
        good = [i for i, acc in sorted(v.get((p.id, "solution"), [])) if acc and i < len(p.solutions)]
        bad_rows = sorted(v.get((p.id, "incorrect"), []))
        counts["incorrect_accepted"] += sum(acc for _, acc in bad_rows)
        bad = [i for i, acc in bad_rows if not acc and i < len(p.incorrect_solutions)]
        n = min(len(good), len(bad), max_pairs_per_problem)
        if n == 0:
            counts["problems_without_pair"] += 1
        out += [(p, completion_for(p.solutions[good[k]]), completion_for(p.incorrect_solutions[bad[k]]))
                for k in range(n)]
    counts["pairs"] = len(out)
    return out, counts


def _spread(xs: list[int]) -> dict[str, float | int | None]:
    if not xs:
        return {"min": None, "median": None, "mean": None, "max": None}
    ys = sorted(xs)
    return {"min": ys[0], "median": ys[len(ys) // 2], "mean": round(sum(ys) / len(ys), 2), "max": ys[-1]}


def min_tests_filter(problems: Sequence[Problem], min_tests: int,
                     count_tests: Callable[[Problem], int] | None = None) -> tuple[list[Problem], dict[str, Any]]:
    """The ``problems`` that have ``>= min_tests`` tests (``count_tests(p)``; default ``len(p.tests)``; the repair
    stage counts the hidden tests left after its visible/hidden split), in order.

    An RL reward rests on these tests: a program that passes 3 asserts is often wrong (EvalPlus, Liu et al. 2023), so
    the 7B RL rows need 5 (issue 42). Returns ``(kept, counts)``; counts: ``min_tests``, ``problems``, ``kept``,
    ``too_few_tests``, and ``by_source``: per ``Problem.source`` the ``problems``, ``kept`` and the tests per problem
    (``min``/``median``/``mean``/``max``) before and after. Raises ``ValueError`` for ``min_tests < 1``."""
    if min_tests < 1:
        raise ValueError(f"min_tests={min_tests}: must be >= 1")
    count = count_tests or (lambda p: len(p.tests))
    kept: list[Problem] = []
    before: dict[str, list[int]] = defaultdict(list)
    after: dict[str, list[int]] = defaultdict(list)
    for p in problems:
        n = count(p)
        before[p.source].append(n)
        if n >= min_tests:
            kept.append(p)
            after[p.source].append(n)
    by_source = {src: {"problems": len(ns), "kept": len(after[src]), "tests_per_problem_before": _spread(ns),
                       "tests_per_problem_after": _spread(after[src])} for src, ns in sorted(before.items())}
    return kept, {"min_tests": min_tests, "problems": len(problems), "kept": len(kept),
                  "too_few_tests": len(problems) - len(kept), "by_source": by_source}


def flagged_ids(gov_dir: str | Path) -> set[str]:
    """Ids of the problems ``<gov_dir>/contamination.jsonl`` flags (rows with ``"flagged": true``, written by the
    governance stage's contamination check); empty when the file does not exist. Raises ``ValueError`` naming file
    and line on bad JSON or a flagged row without a string ``id``."""
    path = Path(gov_dir) / "contamination.jsonl"
    out: set[str] = set()
    for lineno, row in enumerate(read_jsonl(path), 1):
        if row.get("flagged"):
            if not isinstance(row.get("id"), str):
                raise ValueError(f"{path}: row {lineno}: flagged row has no string 'id'")
            out.add(row["id"])
    return out


def rl_eligible(problems: Sequence[Problem], min_tests: int, flagged: Iterable[str] = ()
                ) -> tuple[list[Problem], dict[str, Any]]:
    """The RL-eligible ``problems`` (in order): not in ``flagged`` (contamination flags, :func:`flagged_ids`) and with
    ``>= min_tests`` tests (``manifests.grpo_min_tests``). The one filter of the RL prompts: :func:`build_grpo` (the
    manifests' GRPO set and verl parquet) and the local engine's GRPO stage (on ``train.train_sets``) both call it.

    Returns ``(kept, counts)``; counts: ``problems``, ``kept``, ``too_few_tests``, ``contaminated``, ``min_tests``
    and ``by_source`` (:func:`min_tests_filter`, over the problems not flagged). Raises ``ValueError`` for
    ``min_tests < 1``."""
    flagged = set(flagged)
    clean = [p for p in problems if p.id not in flagged]
    kept, n = min_tests_filter(clean, min_tests)
    counts = {"problems": len(problems), "kept": len(kept), "too_few_tests": n["too_few_tests"],
              "contaminated": len(problems) - len(clean), "min_tests": min_tests, "by_source": n["by_source"]}
    return kept, counts


def build_grpo(problems: Sequence[Problem], min_tests: int, flagged_ids: Iterable[str] = ()
               ) -> tuple[list[Problem], dict[str, Any]]:
    """GRPO prompts: the train-role ``problems`` that :func:`rl_eligible` keeps (``>= min_tests`` tests, not in
    ``flagged_ids``). Returns its ``(kept, counts)``. Raises ``ValueError`` naming a problem whose role is not
    ``train`` (:func:`check_train_role`) and for ``min_tests < 1``."""
    check_train_role(problems, "grpo")
    return rl_eligible(problems, min_tests, flagged_ids)
