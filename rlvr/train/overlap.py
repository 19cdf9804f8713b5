"""Which eligible train problems RL uses (``train.rl_share``) and how many of them SFT and DPO also train on
(``train.sft_rl_overlap``) (issue 42).

``train.rl_share`` (0 < share <= 1) is the share of the RL-eligible prompts that RL trains on: a problem is an RL
prompt when :func:`in_rl_share` holds for its id (:func:`unit_hash` of ``"rl_share:<id>"`` below the share), so the
subset is deterministic, independent of file order, the same for every seed, engine and machine, and nested (a
larger share keeps a superset). Every RL consumer applies it at stage time, by id: the local (TRL) GRPO stage to
the RL-eligible ``train.train_sets`` problems (:func:`rlvr.data.manifests.rl_eligible`), the verl GRPO stage to the
manifests' parquet (:func:`filter_verl_parquet`, into the run's own folder: the manifests' hashed outputs are
unchanged), the repair stage to its training rows, and SFT/DPO leave out
only the RL prompts RL uses (:func:`apply_sft_rl_overlap`). ``1.0`` (params.yaml's default): every eligible prompt,
as before the param existed. The hash is salted (``"rl_share:"``) so that the overlap below, which hashes the bare
id, is independent of it: ``sft_rl_overlap`` x keeps a share x of the RL prompts RL uses, whatever ``rl_share`` is.

``train.sft_rl_overlap``:

SFT fits a judge-verified reference per problem (2 epochs at 7B) and DPO prefers accepted samples per problem; on a
problem they trained on, the policy that starts RL tends to pass every rollout of the group, so the group's rewards
are all equal and its GRPO advantage is 0 (no gradient). ``train.sft_rl_overlap`` is the share of the RL prompts
(the GRPO set the manifests stage writes, ``data/manifests/grpo/train.jsonl``: the governed ``manifests.verl_train``
problems with enough tests, less those outside ``train.rl_share``) that SFT and DPO keep; the rest of the RL prompts
are left out of SFT and DPO, which still train on every other problem of ``train.train_sets``.

* ``1.0`` (params.yaml's default): SFT and DPO train on every RL prompt, as before this param existed; nothing is
  read, so the embedded default's runs are unchanged.
* ``0.0`` (the 7B profiles): disjoint; RL prompts are problems SFT and DPO never saw.
* between: a problem is kept when :func:`unit_hash` of its id is below the share: deterministic, the same problems
  for every seed, engine and machine, and nested (a larger share keeps a superset).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rlvr.data.manifests import read_jsonl
from rlvr.data.schema import Problem

__all__ = ["RL_SET", "apply_rl_share", "apply_sft_rl_overlap", "check_rl_share", "filter_verl_parquet", "in_rl_share",
           "rl_prompt_ids", "rl_share_verl_train", "unit_hash"]

#: The RL prompt set (rows with an ``id``), written by the manifests stage.
RL_SET = "data/manifests/grpo/train.jsonl"


def unit_hash(problem_id: str) -> float:
    """``problem_id`` mapped to [0, 1): the first 8 bytes of its SHA-256 as an integer / 2**64."""
    return int.from_bytes(hashlib.sha256(problem_id.encode("utf-8")).digest()[:8], "big") / 2**64


def check_rl_share(share: float) -> None:
    """Raise ``ValueError`` naming ``train.rl_share`` when ``share`` is not within (0, 1]."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"train.rl_share={share}: must be within (0, 1] (the share of the RL-eligible prompts RL "
                         "trains on)")


def in_rl_share(problem_id: str, share: float) -> bool:
    """Whether ``problem_id`` is one of the ``share`` of the RL-eligible prompts RL trains on: :func:`unit_hash` of
    ``"rl_share:<id>"`` < ``share`` (always true at 1.0). Raises what :func:`check_rl_share` raises."""
    check_rl_share(share)
    return share >= 1.0 or unit_hash(f"rl_share:{problem_id}") < share


def apply_rl_share(problems: Sequence[Problem], share: float) -> tuple[list[Problem], dict[str, float | int]]:
    """The ``problems`` (RL-eligible, in order) that RL trains on at ``train.rl_share`` = ``share``.

    Returns ``(kept, counts)``; counts: ``rl_share``, ``rl_prompts_eligible`` (``len(problems)``), ``rl_prompts``
    (kept). Raises ``ValueError`` naming the key for a share outside (0, 1], and when problems were given and the
    share keeps none of them."""
    kept = [p for p in problems if in_rl_share(p.id, share)]
    if problems and not kept:
        raise ValueError(f"train.rl_share={share}: keeps none of the {len(problems)} RL-eligible prompts; raise it")
    return kept, {"rl_share": share, "rl_prompts_eligible": len(problems), "rl_prompts": len(kept)}


def filter_verl_parquet(src: str | Path, dst: str | Path, share: float) -> dict[str, float | int]:
    """Write the rows of the verl RL parquet ``src`` (the manifests' ``verl/train.parquet``, schema
    :data:`rlvr.data.export.VERL_SCHEMA`) whose ``extra_info.id`` is in the ``train.rl_share`` subset to ``dst``
    (atomically; row order kept; the schema and ``extra_info.index`` unchanged), so verl trains on the same prompts
    as the local engine would. Returns :func:`apply_rl_share`'s counts. Raises ``FileNotFoundError`` naming ``src``,
    ``ValueError`` naming ``src`` and the row for a row without ``extra_info.id``, and what :func:`apply_rl_share`
    raises."""
    import pyarrow.parquet as pq

    from rlvr.io import atomic_open

    src = Path(src)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: verl RL parquet not found (run the manifests stage)")
    table = pq.read_table(src)
    ids = _row_ids(src, table.column("extra_info").to_pylist() if "extra_info" in table.column_names else [None])
    keep = [i for i, pid in enumerate(ids) if in_rl_share(pid, share)]
    if ids and not keep:
        raise ValueError(f"train.rl_share={share}: keeps none of the {len(ids)} RL prompts of {src}; raise it")
    with atomic_open(dst, "wb") as fh:
        pq.write_table(table.take(keep), fh)
    return {"rl_share": share, "rl_prompts_eligible": len(ids), "rl_prompts": len(keep)}


def rl_share_verl_train(src: str | Path, run_dir: str | Path, share: float
                        ) -> tuple[Path, dict[str, float | int | None]]:
    """The verl RL parquet a GRPO run trains on at ``train.rl_share`` = ``share``: ``src`` itself at 1.0 (nothing
    written), else the :func:`filter_verl_parquet` subset written to ``<run_dir>/data/train.parquet`` (the run's own
    folder; ``src``, the manifests' hashed output, is left as it is). Returns ``(path, counts)`` (counts as
    :func:`apply_rl_share`'s; at 1.0 the row counts are ``None`` when ``src`` is absent: verl reports it, as before
    the param). Raises what :func:`filter_verl_parquet` raises."""
    import pyarrow.parquet as pq

    check_rl_share(share)
    src = Path(src)
    if share >= 1.0:
        n = pq.ParquetFile(src).metadata.num_rows if src.is_file() else None
        return src, {"rl_share": share, "rl_prompts_eligible": n, "rl_prompts": n}
    dst = Path(run_dir) / "data" / "train.parquet"
    return dst, filter_verl_parquet(src, dst, share)


def _row_ids(src: Path, extra: Iterable[Any]) -> list[str]:
    out = []
    for row, info in enumerate(extra):
        if not isinstance(info, dict) or not isinstance(info.get("id"), str):
            raise ValueError(f"{src}: row {row}: no string extra_info.id (the RL prompt's problem id)")
        out.append(info["id"])
    return out


def rl_prompt_ids(path: str | Path = RL_SET) -> set[str]:
    """Ids of the RL prompts in ``path`` (JSONL rows with ``id``). Raises ``FileNotFoundError`` naming the file
    when it is missing (run the manifests stage), ``ValueError`` naming file and line for a row without ``id``."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: RL prompt set not found (train.sft_rl_overlap < 1 reads it; run the manifests "
                                "stage)")
    ids: set[str] = set()
    for lineno, row in enumerate(read_jsonl(p), 1):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise ValueError(f"{p}:{lineno}: row has no string 'id'")
        ids.add(row["id"])
    return ids


def apply_sft_rl_overlap(problems: Sequence[Problem], overlap: float, rl_set: str | Path = RL_SET,
                         rl_share: float = 1.0) -> tuple[list[Problem], dict[str, float | int | None]]:
    """``problems`` (SFT's or DPO's ``train.train_sets``) without the RL prompts RL uses (those of ``rl_set`` in the
    ``rl_share`` subset, :func:`in_rl_share`) outside the ``overlap`` share; RL-eligible prompts that RL does not use
    (outside ``rl_share``) stay.

    Returns ``(kept, counts)``; counts: ``sft_rl_overlap`` and ``rl_share`` (the params), ``problems`` (before),
    ``rl_prompts_eligible`` (rows of ``rl_set``), ``rl_prompts_used`` (of them, in the ``rl_share`` subset),
    ``rl_prompts`` (of ``problems``, that RL uses), ``rl_prompts_kept``, ``rl_prompts_dropped``, ``kept``. With
    ``overlap`` 1.0 nothing is read and nothing dropped (the RL counts are then ``None``: not looked up). Raises
    ``ValueError`` naming the key for an ``overlap`` outside [0, 1] or an ``rl_share`` outside (0, 1], and when
    nothing is left, and what :func:`rl_prompt_ids` raises."""
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"train.sft_rl_overlap={overlap}: must be within [0, 1]")
    check_rl_share(rl_share)
    counts: dict[str, float | int | None] = {"sft_rl_overlap": overlap, "rl_share": rl_share,
                                             "problems": len(problems)}
    if overlap >= 1.0:
        return list(problems), {**counts, "rl_prompts_eligible": None, "rl_prompts_used": None, "rl_prompts": None,
                                "rl_prompts_kept": None, "rl_prompts_dropped": 0, "kept": len(problems)}
    eligible = rl_prompt_ids(rl_set)
    rl = {i for i in eligible if in_rl_share(i, rl_share)}
    counts.update(rl_prompts_eligible=len(eligible), rl_prompts_used=len(rl))
    kept, n_rl, n_drop = [], 0, 0
    for p in problems:
        if p.id in rl:
            n_rl += 1
            if unit_hash(p.id) >= overlap:
                n_drop += 1
                continue
        kept.append(p)
    if not kept:
        raise ValueError(f"train.sft_rl_overlap={overlap}: every one of the {len(problems)} train.train_sets problems "
                         f"is an RL prompt of {rl_set}; nothing is left to train on")
    return kept, {**counts, "rl_prompts": n_rl, "rl_prompts_kept": n_rl - n_drop, "rl_prompts_dropped": n_drop,
                  "kept": len(kept)}
