"""Padded tokens per verl micro batch without padding removal: token-packed vs fixed micro batches (issue 42/44).

Without flash-attn, verl 0.9.1 pads every micro batch to its longest row
(``verl/workers/engine/fsdp/transformer_impl.py`` ``prepare_model_inputs``), and its logits are padded tokens x
152,064 (fp32 in the log-softmax). ``use_dynamic_bsz`` packs a micro batch up to ``ppo_max_token_len_per_gpu``
**unpadded** tokens (``verl/utils/seqlen_balancing.py`` ``rearrange_micro_batches``, called here: verl's own
function), so its padded size is about (longest / mean row) x the budget. This bench measures, on rows whose lengths
a code-writing policy would produce, the padded tokens of every micro batch both ways, side by side on the same rows:

* ``packed``: verl's ``rearrange_micro_batches`` at the budget (what ``use_dynamic_bsz: true`` runs);
* ``fixed``: chunks of :func:`rlvr.train.verl.mapping.fit_micro_batch` rows in batch order (``use_dynamic_bsz:
  auto`` without flash-attn).

**Rows.** The 7B profile's GRPO prompts (:func:`bench.repair.turn_tokens.select_rows`, the profile merged over
``params.yaml``; those whose prompt fits ``verl.max_prompt_length``), each as its chat prompt's Qwen2.5 tokens
(:func:`bench.repair.turn_tokens.chat_prompt`, the real vocabulary) plus a response: the problem's judge-verified
reference as the policy is asked to write it (+ ``<|im_end|>``), capped at ``verl.max_response_length``; with
probability ``--capped-share`` a response runs to the cap instead (a truncated or looping answer). A step is
``verl.train_batch_size`` prompts drawn (seeded) x ``grpo.num_generations`` rollouts, split evenly over the
profile's GPUs in drawn order; one GPU's rows are measured per step, ``--steps`` steps. The references stand in for a
real policy's answers (their lengths, not their content, matter here); random weights write every row to the cap.

Reports per setting: padded tokens per micro batch (max and mean over the steps' micro batches) against the budget,
the fp32 logits of the largest micro batch (GB), and the padded tokens of a whole step per GPU (the forward's work:
the fixed setting's / the packed one's, a ratio measured on the same rows). Deterministic for a seed; no timing.

    .venv/bin/python bench/gpu/padding.py --problems-dir /work/repro/data/governance/problems   # -> padding.json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

VOCAB_ROWS = 152_064  # Qwen2.5-7B's lm_head rows
FP32 = 4


def _turn_tokens() -> Any:
    spec = importlib.util.spec_from_file_location("turn_tokens", ROOT / "bench/repair/turn_tokens.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def padded(lengths: Sequence[int]) -> int:
    """Padded tokens of one micro batch whose rows have ``lengths`` tokens: rows x the longest (0 when empty)."""
    return len(lengths) * max(lengths) if lengths else 0


def packed_micro_batches(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """The rows' lengths grouped as verl 0.9.1's ``rearrange_micro_batches`` groups them at ``max_token_len`` =
    ``budget`` (verl's function on a TensorDict of attention masks, one row per length; no process group).
    Raises ``ImportError`` without verl/tensordict."""
    import torch
    from tensordict import TensorDict
    from verl.utils.seqlen_balancing import rearrange_micro_batches

    width = max(lengths)
    mask = torch.zeros(len(lengths), width, dtype=torch.int64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    td = TensorDict({"input_ids": mask.clone(), "attention_mask": mask, "row": torch.arange(len(lengths))},
                    batch_size=[len(lengths)])
    micro, _ = rearrange_micro_batches(td, max_token_len=budget)
    return [[lengths[int(r)] for r in mb["row"]] for mb in micro]


def fixed_micro_batches(lengths: Sequence[int], rows: int) -> list[list[int]]:
    """Consecutive chunks of ``rows`` rows (verl's ``chunk_tensordict`` with ``use_dynamic_bsz`` off)."""
    return [list(lengths[i:i + rows]) for i in range(0, len(lengths), rows)]


def summary(micro: Sequence[Sequence[int]], budget: int) -> dict[str, Any]:
    """Padded tokens per micro batch (max, mean), rows per micro batch (max), the largest one's fp32 logits (GB)
    and the step's padded tokens, for micro batches of one GPU's rows."""
    pads = [padded(m) for m in micro]
    return {"micro_batches": len(micro), "rows_max": max(len(m) for m in micro),
            "padded_max": max(pads), "padded_mean": round(sum(pads) / len(pads), 1),
            "padded_max_over_budget": round(max(pads) / budget, 3),
            "logits_fp32_gb_max": round(max(pads) * VOCAB_ROWS * FP32 / 1e9, 2),
            "padded_total": sum(pads), "real_total": sum(sum(m) for m in micro)}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure both settings over ``--steps`` steps per ``--capped-share`` and write ``--out`` (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--problems-dir", type=Path, default=ROOT / "data/governance/problems")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    ap.add_argument("--profile", type=Path, default=ROOT / "profiles/qwen7b_4xh100.yaml")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/rlvr-turn-tokens"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--capped-share", type=float, action="append", default=None,
                    help="share of responses that run to the cap (repeatable; default 0, 0.1, 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/gpu/padding.json")
    args = ap.parse_args(argv)
    tt = _turn_tokens()
    from rlvr.repair.env import EnvConfig
    from rlvr.train.verl.mapping import fit_micro_batch

    params, hardware = tt._effective_params(args.params, args.profile)
    verl, grpo = params["verl"], params["grpo"]
    p_cap, r_cap = int(verl["max_prompt_length"]), int(verl["max_response_length"])
    budget = int(hardware["ppo_max_token_len_per_gpu"])
    gpus = int(hardware["n_gpus_per_node"]) * int(hardware.get("nnodes", 1))
    n, batch = int(grpo["num_generations"]), int(verl["train_batch_size"])
    rows_per_gpu = batch * n // gpus
    mini_rows = int(verl["ppo_mini_batch_size"]) * n // gpus
    fixed_rows = fit_micro_batch(int(hardware["ppo_micro_batch_size_per_gpu"]), budget, p_cap + r_cap, mini_rows,
                                 "ppo_max_token_len_per_gpu")
    cfg = EnvConfig(**{k: v for k, v in params["repair"].items() if k in EnvConfig.model_fields})
    rows, _ = tt.select_rows(args.problems_dir, params)
    enc = tt.qwen_encoding(args.cache)
    items = []
    for p in tt.prompt_fits(enc, rows["grpo"], cfg, p_cap):
        t = tt.texts(p, cfg)
        if t["answer"] is not None:
            items.append((tt.count(enc, t["prompt"]), min(r_cap, tt.count(enc, t["answer"]) + 1)))
    results: dict[str, Any] = {}
    for share in args.capped_share or [0.0, 0.1, 1.0]:
        rng = random.Random(args.seed)
        packed: list[list[int]] = []
        fixed: list[list[int]] = []
        for _ in range(args.steps):
            prompts = rng.sample(items, batch)
            lengths = [pt + (r_cap if rng.random() < share else rt) for pt, rt in prompts for _ in range(n)]
            gpu0 = lengths[:rows_per_gpu]
            for lo in range(0, rows_per_gpu, mini_rows):  # the update runs per mini batch
                packed += packed_micro_batches(gpu0[lo:lo + mini_rows], budget)
                fixed += fixed_micro_batches(gpu0[lo:lo + mini_rows], fixed_rows)
        a, b = summary(packed, budget), summary(fixed, budget)
        results[f"capped_{share:g}"] = {"packed": a, "fixed": b,
                                        "fixed_over_packed_padded_total": round(b["padded_total"] / a["padded_total"],
                                                                                3)}
    doc = {"command": " ".join([".venv/bin/python", "bench/gpu/padding.py", *(argv or sys.argv[1:])]),
           "profile": str(args.profile), "budget_tokens": budget, "caps": {"prompt": p_cap, "response": r_cap},
           "gpus": gpus, "rows_per_gpu": rows_per_gpu, "mini_rows_per_gpu": mini_rows, "fixed_rows": fixed_rows,
           "steps": args.steps, "seed": args.seed, "grpo_prompts": len(items),
           "git_commit": tt._git("rev-parse", "HEAD"), "results": results}
    for k, r in results.items():
        print(f"{k}: packed max {r['packed']['padded_max']:,} padded tokens "
              f"({r['packed']['padded_max_over_budget']}x the budget, {r['packed']['logits_fp32_gb_max']} GB logits), "
              f"fixed max {r['fixed']['padded_max']:,} ({r['fixed']['padded_max_over_budget']}x); "
              f"step padded tokens fixed/packed {r['fixed_over_packed_padded_total']}")
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return doc


if __name__ == "__main__":
    main()
