"""A tiny, randomly initialised Qwen2 chat model built locally (no Hub access needed).

It stands in for ``Qwen/Qwen2.5-Coder-*-Instruct`` on CPU machines and in tests: same architecture class
(``Qwen2ForCausalLM``), same ChatML special tokens and chat template, saved with ``save_pretrained`` so that every
consumer loads it through the ordinary ``AutoTokenizer`` / ``AutoModelForCausalLM.from_pretrained`` code path, exactly
as it would load a Hub id.

Tokenizer: byte-level BPE trained with the ``tokenizers`` library on a text corpus (the bundled problem statements and
reference solutions), wrapped as a ``PreTrainedTokenizerFast`` (GPT-2/Qwen2 byte-level scheme, so any UTF-8 text
round-trips). Special tokens: ``<|endoftext|>`` (pad), ``<|im_start|>``, ``<|im_end|>`` (eos, end of a chat turn),
as in Qwen2.

Determinism: the BPE trainer is deterministic for a fixed corpus and settings, and the weights are drawn after
``torch.manual_seed(seed)``, so the same (corpus, seed, sizes) give byte-identical files (checked by a test).

Run it through the ``model`` stage: ``python stages/model.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["CHATML_TEMPLATE", "SPECIAL_TOKENS", "build_tiny_model", "build_tokenizer", "resolve_model_ref"]

# Qwen2's ChatML template (tokenizer_config.json of Qwen/Qwen2-*-Instruct), minus the default system prompt: a system
# message is rendered only when the conversation has one, so prompts stay short for the tiny model.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
MODEL_REF_FILE = "model.json"


def build_tokenizer(corpus_texts: Iterable[str], vocab_size: int = 4096, min_frequency: int = 2) -> Any:
    """Train a byte-level BPE tokenizer on ``corpus_texts`` and wrap it as a ``PreTrainedTokenizerFast``.

    Args:
        corpus_texts: training texts (any iterable of str; consumed once).
        vocab_size: target vocabulary size (tokens, special tokens and the 256 byte symbols included).
        min_frequency: minimum pair count for a merge.

    Returns a ``transformers.PreTrainedTokenizerFast`` with ``eos_token="<|im_end|>"``, ``pad_token="<|endoftext|>"``,
    left padding (decoder-only batched generation) and the ChatML ``chat_template``.
    Raises ``ValueError`` if ``vocab_size`` is smaller than the byte alphabet plus the special tokens.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size={vocab_size} < byte alphabet ({len(alphabet)}) + special tokens")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus_texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=32768,
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def build_tiny_model(
    out_dir: str | Path,
    corpus_texts: Iterable[str],
    seed: int = 0,
    vocab_size: int = 4096,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate_size: int = 256,
    max_position_embeddings: int = 4096,
    vocab_rows: int | None = None,
    tie_word_embeddings: bool = True,
    rope_theta: float | None = None,
    dtype: str = "float32",
    init_device: str = "cpu",
) -> Path:
    """Build and save a random-init tiny ``Qwen2ForCausalLM`` plus its trained tokenizer into ``out_dir``.

    Shapes: embedding ``[vocab, hidden_size]`` (tied with the LM head), ``layers`` decoder blocks with ``heads``
    query heads and ``kv_heads`` key/value heads (GQA; ``hidden_size % heads == 0`` and ``heads % kv_heads == 0``
    required), MLP width ``intermediate_size``. The vocabulary is the trained tokenizer's actual size (may be below
    ``vocab_size`` on a small corpus). ``generation_config.json`` is written explicitly (eos = ``<|im_end|>``, pad =
    ``<|endoftext|>``, greedy by default) so no library default leaks into generation.

    Real-architecture stand-ins (e.g. Qwen2.5-Coder-7B's shapes with random weights, ``profiles/qwen7b_*.yaml``):
    ``vocab_rows`` pads the embedding/LM-head rows past the tokenizer's size (Qwen2.5-7B: 152,064 rows for ~151.6 k
    tokens; ``None`` = the tokenizer's size), ``tie_word_embeddings`` false unties the LM head (7B), ``rope_theta``
    the RoPE base (``None``: the library's default), ``dtype`` the stored weights' dtype (``float32`` |
    ``bfloat16``), ``init_device`` where the weights are drawn (``cpu`` | ``cuda`` | ``auto`` = cuda when available:
    a 7.6 B-parameter draw takes minutes on CPU).
    Byte-identical files for the same inputs hold per device kind (the CUDA generator differs from the CPU one).

    The directory is published atomically (:func:`rlvr.io.atomic_dir`). Returns ``Path(out_dir)``.
    Raises ``ValueError`` on inconsistent head counts, ``vocab_rows`` below the tokenizer's size, or an unknown
    ``dtype``/``init_device``.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    from rlvr.io import atomic_dir

    if hidden_size % heads or heads % kv_heads:
        raise ValueError(f"hidden_size={hidden_size}, heads={heads}, kv_heads={kv_heads}: need divisibility")
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"dtype={dtype!r}: expected float32 or bfloat16")
    if init_device not in ("cpu", "cuda", "auto"):
        raise ValueError(f"init_device={init_device!r}: expected cpu, cuda or auto")
    tokenizer = build_tokenizer(corpus_texts, vocab_size=vocab_size)
    if vocab_rows is not None and vocab_rows < len(tokenizer):
        raise ValueError(f"vocab_rows={vocab_rows} < the tokenizer's {len(tokenizer)} tokens")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = Qwen2Config(
        vocab_size=vocab_rows or len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        **({} if rope_theta is None else {"rope_parameters": {"rope_type": "default", "rope_theta": rope_theta}}),
        bos_token_id=None,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        use_cache=True,
    )
    device = ("cuda" if torch.cuda.is_available() else "cpu") if init_device == "auto" else init_device
    torch.manual_seed(seed)
    torch_dtype = getattr(torch, dtype)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype)  # draw in the stored dtype: a 7B in float32 is 30 GB of host memory
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(default)
    model.generation_config = GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=None,
        do_sample=False,
        max_new_tokens=128,
    )
    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return out


def resolve_model_ref(path: str | Path) -> str:
    """What to pass to ``from_pretrained`` / vLLM / an OpenAI server for the model at ``path``.

    ``path`` may be (a) a folder holding ``model.json`` (``{"name": "<hub id or path>"}``, written by the ``model``
    stage for non-local models): the recorded name is returned; (b) a model folder: returned as a string; (c) a Hub id
    such as ``Qwen/Qwen2.5-Coder-7B-Instruct``: returned unchanged. Raises ``ValueError`` if ``model.json`` lacks a
    ``name``.
    """
    p = Path(path)
    ref = p / MODEL_REF_FILE
    if ref.is_file():
        data = json.loads(ref.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not data.get("name"):
            raise ValueError(f"{ref}: expected a JSON object with a non-empty 'name'")
        return str(data["name"])
    return str(path)
