"""Padding removal without flash-attn rests on one property of transformers' SDPA path: a packed row of several
sequences, with ``position_ids`` restarting at 0 per sequence, ``attention_mask=None`` and ``use_cache=False`` (how
verl 0.9.1's padding removal calls the model), gives every sequence the logits it has alone."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      attn_implementation="sdpa")
    return Qwen2ForCausalLM(cfg).eval()


def test_a_packed_row_gives_each_sequence_its_own_logits():
    from rlvr.train.verl.mapping import packed_sdpa_supported

    assert packed_sdpa_supported()  # the pinned transformers (>= 4.56) has the masks
    m = _model()
    seqs = [torch.randint(0, 256, (n,)) for n in (7, 5, 9)]
    with torch.no_grad():
        alone = [m(input_ids=s[None], use_cache=False).logits[0] for s in seqs]
        ids = torch.cat(seqs)[None]
        pos = torch.cat([torch.arange(len(s)) for s in seqs])[None]
        packed = m(input_ids=ids, position_ids=pos, attention_mask=None, use_cache=False).logits[0]
        leaky = m(input_ids=ids, use_cache=False).logits[0]  # one long sequence: later ones see earlier ones
    o = 0
    for s, want in zip(seqs, alone, strict=True):
        assert torch.allclose(packed[o:o + len(s)], want, atol=1e-5)
        o += len(s)
    assert not torch.allclose(leaky[7:12], alone[1], atol=1e-3)  # the check can fail: without the masks it would
