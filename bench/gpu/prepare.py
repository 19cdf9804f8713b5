"""Prepare the GPU suite's folder on a CPU machine: the repository's tracked files, the merged params and the inputs.

Writes ``<dest>/`` = the tracked files of this repository (``git ls-files``), ``params.yaml`` = the repository's
``params.yaml`` with ``bench/gpu/overlay.yaml`` merged in (mappings merged key by key, everything else replaced),
``params.vllm.yaml`` / ``params.openai.yaml`` (the same with ``baseline.backend`` = ``vllm`` / ``openai``, the
latter pointing at ``http://127.0.0.1:8000/v1`` and the served name ``base``), ``params.big.yaml`` (``vllm`` on
``models/big``), ``params.tool.yaml`` (the ``repair_tool`` part: ``repair.tool_format: qwen3_coder`` on
``models/tool``, the policy of ``bench/gpu/teach_tools.py``; 320 response tokens, 8 steps), ``params.7b.yaml`` (the
``s7_*`` parts: scale profile ``profiles/lent/qwen7b_random_2xh100.yaml``), and runs the CPU-only
stages there in order, as plain scripts (no DVC): ``governance`` → ``model`` (the tiny Qwen2), and writes the verl RL
parquet of the synthetic family (:func:`write_verl_parquet`). With
``--big`` it also writes ``models/big``, a random-init Qwen2 of about 0.5B parameters (Qwen2.5-0.5B's width: hidden
896, 14 heads, 2 KV heads, intermediate 4864; 32 layers instead of 24 to make up for the small vocabulary) on the
tiny model's tokenizer.

    python bench/gpu/prepare.py --dest .gpu/suite [--big]

Then carry ``.gpu`` to the GPU machine and run ``bash bench/gpu/run_gpu.sh`` inside a copy of ``<dest>``
(docs/training/gpu.md, the one-GPU suite).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]


def merge(base: Any, over: Any) -> Any:
    """``over`` laid onto ``base``: dicts merged recursively, anything else replaced by ``over``."""
    if isinstance(base, dict) and isinstance(over, dict):
        return {**base, **{k: merge(base.get(k), v) for k, v in over.items()}}
    return over


def write_params(dest: Path) -> None:
    """Write ``params.yaml`` (+ the ``vllm``/``openai`` baseline variants) into ``dest``."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params = merge(params, yaml.safe_load((ROOT / "bench/gpu/overlay.yaml").read_text(encoding="utf-8")))
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    variants = {"vllm": {"backend": "vllm"},
                "openai": {"backend": "openai", "base_url": "http://127.0.0.1:8000/v1", "served_model_name": "base"},
                "big": {"backend": "vllm", "model": "models/big"}}
    for name, b in variants.items():
        p = merge(params, {"baseline": b})
        (dest / f"params.{name}.yaml").write_text(yaml.safe_dump(p, sort_keys=False), encoding="utf-8")
    # repair_tool part: the policy taught the qwen3_coder tool-call format (teach_tools.py), room for two turns
    tool = merge(params, {"repair": {"tool_format": "qwen3_coder", "model": "models/tool"},
                          "verl": {"max_response_length": 320, "total_training_steps": 8}})
    (dest / "params.tool.yaml").write_text(yaml.safe_dump(tool, sort_keys=False), encoding="utf-8")
    # the s7_* parts: the 7B recipe at the lent 2-GPU scale (random-init Qwen2.5-Coder-7B shapes, a few steps)
    (dest / "params.7b.yaml").write_text(yaml.safe_dump(with_profile(params, BIG7_PROFILE), sort_keys=False),
                                         encoding="utf-8")


#: the scale profile of the ``s7_*`` parts (``params.7b.yaml``)
BIG7_PROFILE = "profiles/lent/qwen7b_random_2xh100.yaml"


def with_profile(params: dict[str, Any], profile: str) -> dict[str, Any]:
    """``params`` (the overlay merged in) selecting ``profile``, with every key the profile sets put back to the
    repository ``params.yaml``'s value (removed where it has none): the overlay's values of those keys would be
    ignored by the run, so rlvr refuses them (:func:`rlvr.config.profiles.profile_conflicts`)."""
    sys.path.insert(0, str(ROOT))
    from rlvr.config.profiles import profile_keys

    base = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    out = merge(params, {"profile": profile})
    for key in profile_keys(ROOT / profile):
        *parents, leaf = key.split(".")
        src: Any = base
        dst: Any = out
        for part in parents:
            src = src.get(part) if isinstance(src, dict) else None
            dst = dst.setdefault(part, {}) if isinstance(dst, dict) else None
        if not isinstance(dst, dict):
            continue
        if isinstance(src, dict) and leaf in src:
            dst[leaf] = src[leaf]
        else:
            dst.pop(leaf, None)
    return out


def copy_tree(dest: Path) -> None:
    """Copy the tracked files (and this folder's untracked ones) of the repository into ``dest``."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files += [str(p.relative_to(ROOT)) for p in (ROOT / "bench/gpu").iterdir() if p.is_file()]
    for f in sorted(set(files)):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


def write_verl_parquet(dest: Path) -> None:
    """``data/manifests/verl/{train,val}.parquet`` from the synthetic family's train/dev splits (the manifests stage
    admits only train-role benchmark problems to training sets, and the synthetic family has no role)."""
    sys.path.insert(0, str(dest))
    from rlvr.data.export import write_verl_parquet as write
    from rlvr.data.schema import read_problems

    problems = read_problems(dest / "data/governance/problems/synthetic.jsonl")
    for split, name in (("train", "train"), ("dev", "val")):
        write([p for p in problems if p.split == split], dest / f"data/manifests/verl/{name}.parquet")


def build_big(dest: Path) -> None:
    """``models/big``: random-init Qwen2 of Qwen2.5-0.5B's width, 32 layers (~0.48B parameters with the tiny
    vocabulary), bf16, tied embeddings, the tiny model's tokenizer and chat template."""
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tok = AutoTokenizer.from_pretrained(dest / "models/base")
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=896, num_hidden_layers=32, num_attention_heads=14,
                      num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=4096,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, torch_dtype="bfloat16")
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)
    out = dest / "models/big"
    model.save_pretrained(out)
    tok.save_pretrained(out)
    gen = dest / "models/base/generation_config.json"
    if gen.is_file():
        shutil.copy2(gen, out / "generation_config.json")
    print(f"models/big: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")


def main() -> None:
    """CLI: copy, merge params, run governance/manifests/model in ``--dest``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, required=True)
    ap.add_argument("--big", action="store_true", help="also build the ~0.5B random-init Qwen2 (models/big)")
    ap.add_argument("--big-only", action="store_true", help="only build models/big in an already prepared --dest")
    a = ap.parse_args()
    dest = a.dest.resolve()
    if a.big_only:
        build_big(dest)
        return
    dest.mkdir(parents=True, exist_ok=True)
    copy_tree(dest)
    write_params(dest)
    for stage in ("governance", "model"):
        subprocess.run([sys.executable, f"stages/{stage}.py"], cwd=dest, check=True)
    write_verl_parquet(dest)
    if a.big:
        build_big(dest)


if __name__ == "__main__":
    main()
