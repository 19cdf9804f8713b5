"""bench/gpu/padding.py: verl's own token packing pads a micro batch to its longest row, so rows of mixed lengths
hold more than the budget in padded tokens; fixed micro batches do not."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("padding", ROOT / "bench/gpu/padding.py")
padding = importlib.util.module_from_spec(spec)
spec.loader.exec_module(padding)


def test_packed_micro_batches_hold_the_budget_in_real_tokens_but_not_padded():
    pytest.importorskip("verl")
    lengths = [3000] + [300] * 40  # one long row and many short ones: what a code-writing policy produces
    micro = padding.packed_micro_batches(lengths, 8192)
    assert sorted(x for m in micro for x in m) == sorted(lengths)  # every row once
    assert all(sum(m) <= 8192 for m in micro)  # verl's own budget holds in real tokens...
    assert max(padding.padded(m) for m in micro) > 8192  # ...and the one with the long row pads past it
    fixed = padding.fixed_micro_batches(lengths, 2)
    assert [len(m) for m in fixed] == [2] * 20 + [1] and max(padding.padded(m) for m in fixed) == 6000


def test_summary_counts_padded_tokens_and_logits():
    s = padding.summary([[100, 300], [200]], budget=400)
    assert s["padded_max"] == 600 and s["padded_mean"] == 400.0 and s["padded_total"] == 800
    assert s["real_total"] == 600 and s["rows_max"] == 2 and s["padded_max_over_budget"] == 1.5
    assert s["logits_fp32_gb_max"] == round(600 * 152_064 * 4 / 1e9, 2)


def test_committed_results_show_packing_past_the_budget_and_fixed_within_it():
    doc = json.loads((ROOT / "bench/gpu/padding.json").read_text())
    real = doc["results"]["capped_0"]  # references as the answers
    assert real["packed"]["padded_max_over_budget"] > 1 >= real["fixed"]["padded_max_over_budget"]
    assert doc["fixed_rows"] * (doc["caps"]["prompt"] + doc["caps"]["response"]) <= doc["budget_tokens"]


spec2 = importlib.util.spec_from_file_location("packed_attention", ROOT / "bench/gpu/packed_attention.py")
packed_attention = importlib.util.module_from_spec(spec2)
spec2.loader.exec_module(packed_attention)


def test_packed_attention_rows_are_seeded_and_packs_hold_the_budget():
    a, b = packed_attention.rows(50, 3), packed_attention.rows(50, 3)
    assert a == b and all(208 <= n <= 900 + 2048 for n in a)
    groups = packed_attention.pack(a, 2048)
    assert [n for g in groups for n in g] == a  # every row once, in order
    assert all(sum(g) <= 2048 or len(g) == 1 for g in groups)


def test_committed_packed_attention_figures_agree_with_the_docs():
    doc = json.loads((ROOT / "bench/gpu/packed_attention.json").read_text())
    speed = doc["speed_over_padded_packed_budget"]
    assert speed["packed_sdpa"] > 1 > speed["padded_fixed"]  # what docs/training/verl.md reads from it
    assert doc["packed_vs_padded_logprob_max_abs_diff"] < 0.1 and doc["gpu"]
    page = (ROOT / "docs/training/verl.md").read_text()
    assert f"{doc['results']['packed_sdpa']['real_tokens_per_s']:,.0f}" in page
