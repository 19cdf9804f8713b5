"""Tiny Qwen2 model: deterministic build, save/load round trip through the Auto* classes, ChatML template,
model references."""

from __future__ import annotations

import hashlib
import json

import pytest

from rlvr.model import SPECIAL_TOKENS, build_tiny_model, build_tokenizer, resolve_model_ref

CORPUS = ["def add(a, b):\n    return a + b\n", "Given an integer n, print n squared.\n",
          "for i in range(10):\n    print(i)\n"] * 20
SMALL = dict(vocab_size=320, hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64)


def _hashes(d):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


@pytest.mark.slow
def test_build_is_deterministic_and_loads_through_auto_classes(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2ForCausalLM

    a = build_tiny_model(tmp_path / "a", CORPUS, seed=1, **SMALL)
    b = build_tiny_model(tmp_path / "b", CORPUS, seed=1, **SMALL)
    c = build_tiny_model(tmp_path / "c", CORPUS, seed=2, **SMALL)
    ha, hb, hc = _hashes(a), _hashes(b), _hashes(c)
    assert ha == hb
    assert ha["model.safetensors"] != hc["model.safetensors"] and ha["tokenizer.json"] == hc["tokenizer.json"]

    tok = AutoTokenizer.from_pretrained(a)
    model = AutoModelForCausalLM.from_pretrained(a)
    assert isinstance(model, Qwen2ForCausalLM)
    cfg = model.config
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (32, 1, 2, 1)
    assert cfg.tie_word_embeddings and cfg.vocab_size == len(tok)
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    gc = json.loads((a / "generation_config.json").read_text())
    assert gc["pad_token_id"] == tok.pad_token_id and tok.eos_token_id in gc["eos_token_id"]
    assert gc.get("do_sample") in (False, None) and "temperature" not in gc

    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "héllo ✓"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhéllo ✓<|im_end|>\n"
                    "<|im_start|>assistant\n")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.convert_tokens_to_ids("<|im_start|>") in ids  # special tokens are single ids
    assert tok.decode(ids) == text  # byte-level: any UTF-8 round-trips


def test_tokenizer_special_tokens_and_merges():
    tok = build_tokenizer(CORPUS, vocab_size=300)
    for t in SPECIAL_TOKENS:
        assert len(tok(t, add_special_tokens=False)["input_ids"]) == 1
    assert len(tok("return a + b")["input_ids"]) < len("return a + b")  # merges learnt from the corpus
    assert tok.padding_side == "left"
    with pytest.raises(ValueError, match="vocab_size"):
        build_tokenizer(CORPUS, vocab_size=100)


def test_bad_head_counts(tmp_path):
    with pytest.raises(ValueError, match="divisibility"):
        build_tiny_model(tmp_path / "x", CORPUS, hidden_size=30, heads=4, kv_heads=2)
    assert not (tmp_path / "x").exists()


def test_resolve_model_ref(tmp_path):
    assert resolve_model_ref("Qwen/Qwen2.5-Coder-7B-Instruct") == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert resolve_model_ref(tmp_path) == str(tmp_path)
    (tmp_path / "model.json").write_text(json.dumps({"name": "Qwen/Qwen2.5-Coder-1.5B-Instruct"}))
    assert resolve_model_ref(tmp_path) == "Qwen/Qwen2.5-Coder-1.5B-Instruct"
    (tmp_path / "model.json").write_text("{}")
    with pytest.raises(ValueError, match="name"):
        resolve_model_ref(tmp_path)


def test_real_architecture_stand_in_pads_rows_unties_head_and_stores_bf16(tmp_path):
    """The 7B profiles' random-init stand-in: embedding rows past the tokenizer (Qwen2.5-7B: 152,064), untied head,
    RoPE base, bf16 weights; a row count below the tokenizer's is an error."""
    import json

    import pytest
    import torch
    from transformers import AutoModelForCausalLM

    from rlvr.model.tiny import build_tiny_model

    corpus = ["def f(x):\n    return x + 1\n", "Read a number and print it."] * 30
    out = build_tiny_model(tmp_path / "m", corpus, vocab_size=400, hidden_size=32, layers=1, heads=2, kv_heads=1,
                           intermediate_size=64, vocab_rows=512, tie_word_embeddings=False, rope_theta=1e6,
                           dtype="bfloat16")
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["vocab_size"] == 512 and cfg["tie_word_embeddings"] is False
    assert cfg["rope_parameters"]["rope_theta"] == 1e6
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.dtype == torch.bfloat16 and model.lm_head.weight.shape == (512, 32)
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    with pytest.raises(ValueError, match="vocab_rows=257 < the tokenizer"):
        build_tiny_model(tmp_path / "n", corpus, vocab_size=400, hidden_size=32, layers=1, heads=2, kv_heads=1,
                         intermediate_size=64, vocab_rows=257)
