"""``vllm`` backend: offline batched generation with ``vllm.LLM`` (GPU machines only; imported lazily).

vLLM applies a model's ``generation_config.json`` (temperature, top_p, top_k, repetition_penalty …) as the default
sampling parameters unless the engine is created with ``generation_config="vllm"`` (vLLM engine arg
``--generation-config``: ``"auto"`` loads the model's file, ``"vllm"`` uses vLLM's own defaults). This backend
creates the engine with ``generation_config="vllm"`` *and* passes every sampling field explicitly
(:func:`to_vllm_sampling`), so the numbers in ``params.yaml`` are the numbers used.

Chat prompts go through ``LLM.chat`` (the tokenizer's chat template, generation prompt added); string prompts through
``LLM.generate``. ``Completion.n_tokens`` is ``len(CompletionOutput.token_ids)`` (exact).

The engine's processes are started with ``spawn`` (``VLLM_WORKER_MULTIPROC_METHOD=spawn`` unless already set): a stage
that trained first has touched CUDA in-process (verl's checkpoint merge, an HF check), and a ``fork``ed engine core
then dies with "Cannot re-initialize CUDA in forked subprocess" — vLLM's own switch to spawn
(``_maybe_force_spawn``) did not catch it on the 4 x H100 repair stage (TP 1, engine core forked after the merge).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from rlvr.generate.base import (
    Completion,
    GenerationStats,
    Prompt,
    SamplingParams,
    finish_stats,
    is_chat,
    release_gpu_memory,
)

__all__ = ["VLLMGenerator", "to_vllm_sampling"]


def to_vllm_sampling(vllm: Any, sampling: SamplingParams, n: int) -> Any:
    """Build ``vllm.SamplingParams`` from ours, every field that a generation_config could set given explicitly.

    ``temperature=0`` is vLLM's greedy mode; ``top_k=-1`` and ``min_p=0`` disable those filters;
    ``repetition_penalty=1``, ``presence_penalty=0``, ``frequency_penalty=0`` disable penalties."""
    return vllm.SamplingParams(
        n=n,
        temperature=sampling.temperature,
        top_p=sampling.top_p if not sampling.greedy else 1.0,
        top_k=-1,
        min_p=0.0,
        repetition_penalty=1.0,
        presence_penalty=0.0,
        frequency_penalty=0.0,
        max_tokens=sampling.max_new_tokens,
        seed=sampling.seed,
    )


class VLLMGenerator:
    """Generate with an offline ``vllm.LLM`` engine.

    Args:
        model: folder or Hub id (resolved with :func:`rlvr.model.resolve_model_ref`).
        tensor_parallel_size: GPUs per engine. gpu_memory_utilization: fraction of GPU memory vLLM may take.
        max_model_len: context length cap (tokens; ``None`` = the model's). dtype: ``"auto"``, ``"bfloat16"`` …
        seed: engine seed. enforce_eager: ``vllm.LLM(enforce_eager=True)`` (no CUDA-graph capture or torch.compile at
            start-up; :class:`rlvr.eval.backend.BackendParams`). llm_kwargs: further ``vllm.LLM`` keyword arguments
            (cannot override ``generation_config``).
    Raises ``ImportError`` (with install hint) when vLLM is not installed.
    """

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
        enforce_eager: bool = False,
        llm_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import vllm
        except ImportError as exc:  # pragma: no cover - exercised only on machines without vLLM
            raise ImportError("backend 'vllm' needs vLLM (pip install 'rlvr[vllm]', GPU machines only)") from exc
        from rlvr.model import resolve_model_ref

        self._vllm = vllm
        self.model_id = resolve_model_ref(model)
        self.stats = GenerationStats()
        kwargs: dict[str, Any] = {
            "model": self.model_id,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "dtype": dtype,
            "seed": seed,
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if enforce_eager:
            kwargs["enforce_eager"] = True
        kwargs.update(llm_kwargs or {})
        kwargs["generation_config"] = "vllm"  # never the model's generation_config.json defaults
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")  # module doc: never fork after CUDA use
        release_gpu_memory()  # the engine needs gpu_memory_utilization x total free: drop earlier in-process caches
        self.llm = vllm.LLM(**kwargs)

    def generate(
        self, prompts: Sequence[Prompt], n: int, sampling: SamplingParams, ids: Sequence[str] | None = None
    ) -> list[list[Completion]]:
        """``n`` completions per prompt, in input order. Chat and string prompts may be mixed (two engine calls)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        t0 = time.perf_counter()
        sp = to_vllm_sampling(self._vllm, sampling, n)
        chat_idx = [i for i, p in enumerate(prompts) if is_chat(p)]
        text_idx = [i for i, p in enumerate(prompts) if not is_chat(p)]
        out: list[list[Completion]] = [[] for _ in prompts]
        if chat_idx:
            res = self.llm.chat([prompts[i] for i in chat_idx], sp, use_tqdm=False, add_generation_prompt=True)
            for i, r in zip(chat_idx, res, strict=True):
                out[i] = self._convert(r)
        if text_idx:
            res = self.llm.generate([prompts[i] for i in text_idx], sp, use_tqdm=False)
            for i, r in zip(text_idx, res, strict=True):
                out[i] = self._convert(r)
        finish_stats(self.stats, out, time.perf_counter() - t0)
        return out

    @staticmethod
    def _convert(request_output: Any) -> list[Completion]:
        return [
            Completion(
                text=o.text,
                n_tokens=len(o.token_ids),
                finish_reason="length" if o.finish_reason == "length" else "stop",
            )
            for o in request_output.outputs
        ]
