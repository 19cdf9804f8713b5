"""GPU tests of the ``vllm`` generation backend on the tiny Qwen2 (skipped without CUDA; tests/conftest.py).

Run on a GPU machine with ``pytest -m gpu tests/generate/test_vllm_gpu.py`` (needs the wheels of bench/gpu/wheels.txt
and ``VLLM_USE_FLASHINFER_SAMPLER=0`` where flashinfer is not installed; docs/training/gpu.md). The whole GPU suite,
stage by stage, is ``bench/gpu/run_gpu.sh``. Passed on the lent H100 (vLLM 0.26.0) under pytest with vLLM's then
default (fork) engine-core start, once ``tests/conftest.py`` stopped initialising CUDA in the pytest process and the
model was the pipeline's tiny size (the backend now spawns the engine's processes, rlvr.generate.vllm_offline):
with ``train_fixtures.build_model``'s 1-layer hidden-32 Qwen2 the engine core compiled,
captured CUDA graphs and then never reported ready (outside pytest too; cause inside vLLM not established).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))

pytestmark = pytest.mark.gpu


def test_vllm_generates_n_completions_with_exact_token_counts(tmp_path, monkeypatch):
    from train_fixtures import small_family

    from rlvr.data.synthetic import corpus_texts
    from rlvr.generate.base import SamplingParams
    from rlvr.generate.vllm_offline import VLLMGenerator
    from rlvr.model import build_tiny_model

    monkeypatch.setenv("VLLM_USE_FLASHINFER_SAMPLER", "0")
    # the pipeline's tiny sizes (hidden 64, 2 layers, 4 heads, 2 KV heads), not train_fixtures.build_model's 1-layer
    # hidden-32 one: with that one vLLM 0.26's engine core never reported ready on the lent H100 (module doc)
    model = build_tiny_model(tmp_path / "base", corpus_texts(small_family()), seed=0, vocab_size=400)
    # a fixed 64 MiB KV cache (1M tokens here) instead of 20 % of the GPU: all the test needs, and less to set up
    gen = VLLMGenerator(str(model), gpu_memory_utilization=0.2, max_model_len=512,
                        llm_kwargs={"kv_cache_memory_bytes": 64 << 20})
    prompts = [[{"role": "user", "content": "print 1"}], "def f():"]
    out = gen.generate(prompts, n=3, sampling=SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=8, seed=0))
    assert [len(o) for o in out] == [3, 3]
    for comps in out:
        for c in comps:
            assert 0 < c.n_tokens <= 8
            assert c.finish_reason in ("length", "stop")
    assert gen.stats.n_completions == 6 and gen.stats.generated_tokens == sum(c.n_tokens for o in out for c in o)


def test_vllm_engine_starts_after_cuda_was_used_in_the_process(tmp_path):
    """The 7B repair stage's eval died at engine start ("Cannot re-initialize CUDA in forked subprocess") because
    the stage had used CUDA in-process (verl's checkpoint merge) before a TP 1 engine core was forked. The backend
    now spawns the engine's processes; this runs the failing order in a fresh interpreter: CUDA first, then the
    engine, then a generation."""
    import os
    import subprocess
    import textwrap

    from train_fixtures import small_family

    from rlvr.data.synthetic import corpus_texts
    from rlvr.model import build_tiny_model

    model = build_tiny_model(tmp_path / "base", corpus_texts(small_family()), seed=0, vocab_size=400)
    script = textwrap.dedent(f"""
        import torch
        torch.zeros(1, device="cuda")  # CUDA initialised in this process, as after an in-process merge
        assert torch.cuda.is_initialized()
        from rlvr.generate.base import SamplingParams
        from rlvr.generate.vllm_offline import VLLMGenerator
        if __name__ == "__main__":
            gen = VLLMGenerator({str(model)!r}, gpu_memory_utilization=0.2, max_model_len=512,
                                llm_kwargs={{"kv_cache_memory_bytes": 64 << 20, "enforce_eager": True}})
            out = gen.generate(["def f():"], n=1, sampling=SamplingParams(temperature=0.0, max_new_tokens=4))
            print("OK", out[0][0].n_tokens)
    """)
    (tmp_path / "after_cuda.py").write_text(script)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "VLLM_USE_FLASHINFER_SAMPLER": "0",
           "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("VLLM_WORKER_MULTIPROC_METHOD", None)
    proc = subprocess.run([sys.executable, str(tmp_path / "after_cuda.py")], capture_output=True, text=True,
                          env=env, timeout=600, cwd=root)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
    # spawn was chosen by the backend before vLLM's own check (which logs this line when it has to step in; on the
    # 4 x H100 it did not, and the forked engine core died)
    assert "Overriding VLLM_WORKER_MULTIPROC_METHOD" not in proc.stderr + proc.stdout
