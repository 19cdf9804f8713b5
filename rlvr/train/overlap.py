"""How many RL prompts SFT and DPO also train on: ``train.sft_rl_overlap`` (issue 42).

SFT fits a judge-verified reference per problem (2 epochs at 7B) and DPO prefers accepted samples per problem; on a
problem they trained on, the policy that starts RL tends to pass every rollout of the group, so the group's rewards
are all equal and its GRPO advantage is 0 (no gradient). ``train.sft_rl_overlap`` is the share of the RL prompts
(the GRPO set the manifests stage writes, ``data/manifests/grpo/train.jsonl``: the governed ``manifests.verl_train``
problems with enough tests) that SFT and DPO keep; the rest of the RL prompts are left out of SFT and DPO, which
still train on every other problem of ``train.train_sets``.

* ``1.0`` (params.yaml's default): SFT and DPO train on every RL prompt, as before this param existed; nothing is
  read, so the embedded default's runs are unchanged.
* ``0.0`` (the 7B profiles): disjoint; RL prompts are problems SFT and DPO never saw.
* between: a problem is kept when :func:`unit_hash` of its id is below the share: deterministic, the same problems
  for every seed, engine and machine, and nested (a larger share keeps a superset).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from rlvr.data.manifests import read_jsonl
from rlvr.data.schema import Problem

__all__ = ["RL_SET", "apply_sft_rl_overlap", "rl_prompt_ids", "unit_hash"]

#: The RL prompt set (rows with an ``id``), written by the manifests stage.
RL_SET = "data/manifests/grpo/train.jsonl"


def unit_hash(problem_id: str) -> float:
    """``problem_id`` mapped to [0, 1): the first 8 bytes of its SHA-256 as an integer / 2**64."""
    return int.from_bytes(hashlib.sha256(problem_id.encode("utf-8")).digest()[:8], "big") / 2**64


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


def apply_sft_rl_overlap(problems: Sequence[Problem], overlap: float, rl_set: str | Path = RL_SET
                         ) -> tuple[list[Problem], dict[str, float | int]]:
    """``problems`` (SFT's or DPO's ``train.train_sets``) without the RL prompts outside the ``overlap`` share.

    Returns ``(kept, counts)``; counts: ``sft_rl_overlap`` (the param), ``problems`` (before), ``rl_prompts`` (of
    ``problems``, that are RL prompts), ``rl_prompts_kept``, ``rl_prompts_dropped``, ``kept``. With ``overlap``
    1.0 nothing is read and nothing dropped (``rl_prompts`` is then ``None``: not looked up). Raises
    ``ValueError`` for an ``overlap`` outside [0, 1] and when nothing is left, and what :func:`rl_prompt_ids`
    raises."""
    if not 0.0 <= overlap <= 1.0:
        raise ValueError(f"train.sft_rl_overlap={overlap}: must be within [0, 1]")
    counts: dict[str, float | int] = {"sft_rl_overlap": overlap, "problems": len(problems)}
    if overlap >= 1.0:
        return list(problems), {**counts, "rl_prompts": None, "rl_prompts_kept": None, "rl_prompts_dropped": 0,
                                "kept": len(problems)}
    rl = rl_prompt_ids(rl_set)
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
