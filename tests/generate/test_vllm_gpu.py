"""GPU tests of the ``vllm`` generation backend on the tiny Qwen2 (skipped without CUDA; tests/conftest.py).

Run on a GPU machine with ``pytest -m gpu tests/generate/test_vllm_gpu.py`` (needs the wheels of bench/gpu/wheels.txt
and ``VLLM_USE_FLASHINFER_SAMPLER=0`` where flashinfer is not installed; docs/training/gpu.md). The whole GPU suite,
stage by stage, is ``bench/gpu/run_gpu.sh``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))

pytestmark = pytest.mark.gpu


def test_vllm_generates_n_completions_with_exact_token_counts(tmp_path, monkeypatch):
    from train_fixtures import build_model

    from rlvr.generate.base import SamplingParams
    from rlvr.generate.vllm_offline import VLLMGenerator

    monkeypatch.setenv("VLLM_USE_FLASHINFER_SAMPLER", "0")
    # pytest's process may have touched CUDA (tests/conftest.py asks torch for a device), and a forked engine core
    # then fails with "Cannot re-initialize CUDA in forked subprocess" (seen on the lent H100)
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    model = build_model(tmp_path / "base")
    gen = VLLMGenerator(str(model), gpu_memory_utilization=0.2, max_model_len=512)
    prompts = [[{"role": "user", "content": "print 1"}], "def f():"]
    out = gen.generate(prompts, n=3, sampling=SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=8, seed=0))
    assert [len(o) for o in out] == [3, 3]
    for comps in out:
        for c in comps:
            assert 0 < c.n_tokens <= 8
            assert c.finish_reason in ("length", "stop")
    assert gen.stats.n_completions == 6 and gen.stats.generated_tokens == sum(c.n_tokens for o in out for c in o)
