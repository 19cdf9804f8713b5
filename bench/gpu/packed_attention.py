"""Padding removal without flash-attn, measured on one GPU: packed rows through SDPA vs padded micro batches (#44).

verl 0.9.1's padding removal (``use_remove_padding``) feeds the model one packed row of every sequence of a micro
batch (``input_ids`` (1, total tokens), ``position_ids`` restarting at 0 per sequence, ``attention_mask=None``,
``use_cache=False``) and unpads with ``flash_attn.bert_padding`` or, when flash-attn is not installed, its own
pure-torch equivalents (``verl/utils/attention_utils.py``). transformers >= 4.56 turns restarting ``position_ids``
into a block-diagonal causal mask for SDPA (``masking_utils.find_packed_sequence_indices``), so the sequences do not
attend to each other without flash-attn's varlen kernels. This bench checks that on a GPU and measures it, side by
side in one process on the same rows:

* ``padded_packed_budget``: token-packed micro batches (rows filled up to ``--budget`` real tokens, as verl's
  ``use_dynamic_bsz``), each padded to its longest row (what verl runs without padding removal);
* ``padded_fixed``: ``--fixed-rows`` rows per micro batch, padded to their longest (``use_dynamic_bsz: auto``
  without padding removal, :func:`rlvr.train.verl.mapping.fit_micro_batch`);
* ``packed_sdpa``: the same budget-packed micro batches as one packed row each through SDPA (padding removal).

The model is Qwen2.5-Coder-7B's width (hidden 3,584, 28 heads, 4 KV heads, MLP 18,944, vocabulary 152,064) with
``--layers`` layers (the 7B has 28), random init, bf16, one forward + backward (mean next-token loss) per micro
batch. Row lengths are seeded draws shaped like a code-writing policy's (prompt 200–900 tokens, answer
log-normal around 250, capped at 2,048; ``rows``). Reported per mode: real tokens per second, padded tokens, peak
``torch.cuda.max_memory_allocated`` (this process, MiB), and for ``packed_sdpa`` the largest per-token log-prob
difference from the padded run of the same rows (the check that no sequence sees another).

    python bench/gpu/packed_attention.py --out $OUT/packed_attention.json       # one CUDA GPU, transformers >= 4.56
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def rows(n: int, seed: int, cap: int = 2048) -> list[int]:
    """``n`` sequence lengths (tokens): a prompt of 200–900 tokens plus an answer drawn log-normal around 250 tokens
    (sigma 0.9), at most ``cap``; seeded."""
    rng = random.Random(seed)
    return [rng.randint(200, 900) + min(cap, max(8, int(rng.lognormvariate(math.log(250), 0.9)))) for _ in range(n)]


def pack(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive rows grouped until the next would pass ``budget`` real tokens (a row alone always fits)."""
    out: list[list[int]] = [[]]
    for n in lengths:
        if out[-1] and sum(out[-1]) + n > budget:
            out.append([])
        out[-1].append(n)
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the three modes and write ``--out`` (module doc). Raises ``RuntimeError`` without a CUDA GPU."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rows", type=int, default=96)
    ap.add_argument("--budget", type=int, default=8192)
    ap.add_argument("--fixed-rows", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="timed passes over the rows per mode (after a warm-up)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("packed_attention.json"))
    ap.add_argument("--tiny", action="store_true", help="a 64-wide model, CPU allowed: checks the bench itself")
    args = ap.parse_args(argv)
    import torch
    import transformers
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cuda = torch.cuda.is_available()
    if not cuda and not args.tiny:
        raise RuntimeError("packed_attention.py: needs a CUDA GPU (or --tiny)")
    dev = torch.device("cuda" if cuda else "cpu")
    torch.manual_seed(args.seed)
    width = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2) if args.tiny \
        else dict(hidden_size=3584, intermediate_size=18944, num_attention_heads=28, num_key_value_heads=4)
    cfg = Qwen2Config(vocab_size=152064, num_hidden_layers=args.layers, max_position_embeddings=32768, rope_theta=1e6,
                      attn_implementation="sdpa", **width)
    model = Qwen2ForCausalLM(cfg).to(dev, torch.bfloat16 if cuda else torch.float32)
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    lengths = rows(args.rows, args.seed)
    g = torch.Generator().manual_seed(args.seed + 1)
    seqs = [torch.randint(0, 152064, (n,), generator=g) for n in lengths]

    def run_padded(group: list[int], idx: list[int], keep: bool = False) -> tuple[float, int, Any]:
        width = max(group)
        ids = torch.zeros(len(group), width, dtype=torch.long)
        mask = torch.zeros(len(group), width, dtype=torch.long)
        for r, i in enumerate(idx):
            ids[r, :lengths[i]] = seqs[i]
            mask[r, :lengths[i]] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        labels = ids.masked_fill(mask == 0, -100)
        out = model(input_ids=ids, attention_mask=mask, labels=labels, use_cache=False)
        out.loss.backward()
        lp = None
        if keep:
            with torch.no_grad():
                logp = torch.log_softmax(out.logits[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])[..., 0]
                lp = [logp[r, :lengths[i] - 1].cpu() for r, i in enumerate(idx)]
        return out.loss.item(), len(group) * width, lp

    def run_packed(group: list[int], idx: list[int], keep: bool = False) -> tuple[float, int, Any]:
        ids = torch.cat([seqs[i] for i in idx])[None].to(dev)
        pos = torch.cat([torch.arange(lengths[i]) for i in idx])[None].to(dev)
        labels = ids.clone()
        starts = torch.tensor([0] + [sum(group[:k]) for k in range(1, len(group))])
        labels[0, starts.to(dev)] = -100  # no token predicts the next sequence's first
        out = model(input_ids=ids, position_ids=pos, labels=labels, use_cache=False)
        out.loss.backward()
        lp = None
        if keep:
            with torch.no_grad():
                logp = torch.log_softmax(out.logits[0, :-1].float(), -1).gather(-1, ids[0, 1:, None])[..., 0]
                lp, o = [], 0
                for i in idx:
                    lp.append(logp[o:o + lengths[i] - 1].cpu())
                    o += lengths[i]
        return out.loss.item(), ids.shape[1], lp

    budget_groups = pack(lengths, args.budget)
    fixed_groups = [lengths[i:i + args.fixed_rows] for i in range(0, len(lengths), args.fixed_rows)]

    def indices(groups: list[list[int]]) -> list[list[int]]:
        out, o = [], 0
        for grp in groups:
            out.append(list(range(o, o + len(grp))))
            o += len(grp)
        return out

    modes = {"padded_packed_budget": (run_padded, budget_groups), "padded_fixed": (run_padded, fixed_groups),
             "packed_sdpa": (run_packed, budget_groups)}
    results: dict[str, Any] = {}
    for name, (fn, groups) in modes.items():
        idx = indices(groups)
        for grp, ix in zip(groups[:2], idx[:2], strict=True):  # warm-up
            fn(grp, ix)
            model.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        padded = 0
        for _ in range(args.repeats):
            for grp, ix in zip(groups, idx, strict=True):
                _, p, _ = fn(grp, ix)
                padded += p
                model.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        real = sum(lengths) * args.repeats
        results[name] = {"micro_batches": len(groups), "real_tokens_per_s": round(real / wall, 1),
                         "padded_over_real": round(padded / real, 3), "wall_s": round(wall, 3),
                         "peak_mib": round(torch.cuda.max_memory_allocated() / 2**20) if cuda else None}
    # the check: the same rows' per-token log-probs, packed (one row) vs padded (one row each, no other row beside)
    diffs = []
    for grp, ix in list(zip(budget_groups, indices(budget_groups), strict=True))[:3]:
        _, _, a = run_packed(grp, ix, keep=True)
        model.zero_grad(set_to_none=True)
        for i, la in zip(ix, a, strict=True):
            _, _, b = run_padded([lengths[i]], [i], keep=True)
            model.zero_grad(set_to_none=True)
            diffs.append(float((la - b[0]).abs().max()))
    base = results["padded_packed_budget"]["real_tokens_per_s"]
    doc = {"command": "python bench/gpu/packed_attention.py " + " ".join(argv or []),
           "gpu": torch.cuda.get_device_name(0) if cuda else None, "tiny": args.tiny, "torch": torch.__version__,
           "transformers": transformers.__version__, "python": platform.python_version(), "layers": args.layers,
           "rows": args.rows, "budget": args.budget, "fixed_rows": args.fixed_rows, "repeats": args.repeats,
           "row_tokens_mean": round(sum(lengths) / len(lengths)),
           "row_tokens_max": max(lengths), "results": results,
           "speed_over_padded_packed_budget": {k: round(v["real_tokens_per_s"] / base, 3) for k, v in results.items()},
           "packed_vs_padded_logprob_max_abs_diff": round(max(diffs), 4), "rows_checked": len(diffs)}
    print(json.dumps(doc, indent=1))
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc


if __name__ == "__main__":
    main()
