"""Generation backends behind one interface (:class:`Generator`): prompts in, completions + token counts out.

Backends: ``hf`` (:mod:`.hf`), ``openai`` (:mod:`.openai_compat`), ``vllm`` (:mod:`.vllm_offline`, lazily imported),
``samples`` (:mod:`.samples`). :func:`extract_code` turns a completion into the program the judge runs.
Importing this package loads neither torch nor vLLM.
"""

from __future__ import annotations

import functools
from typing import Any

from rlvr.generate.base import Completion, GenerationStats, Generator, Prompt, SamplingParams, is_chat
from rlvr.generate.extract import extract_code

__all__ = [
    "BACKENDS",
    "Completion",
    "GenerationStats",
    "Generator",
    "Prompt",
    "SamplingParams",
    "extract_code",
    "is_chat",
    "make_generator",
]

BACKENDS: tuple[str, ...] = ("hf", "openai", "vllm", "samples")


def make_generator(backend: str, **kwargs: Any) -> Generator:
    """Create a generator: ``hf`` → :class:`~rlvr.generate.hf.HFGenerator` (``model``, ``device``, ``batch_size`` …),
    ``openai`` → :class:`~rlvr.generate.openai_compat.OpenAIGenerator` (``base_url``, ``model`` …), ``vllm`` →
    :class:`~rlvr.generate.vllm_offline.VLLMGenerator` (``model`` …; with ``data_parallel`` ``auto`` or > 1 and
    more than one engine's GPUs visible, :class:`~rlvr.generate.sharded.ShardedGenerator`: one engine per
    ``tensor_parallel_size`` GPUs, each in a child process), ``samples`` →
    :class:`~rlvr.generate.samples.SamplesGenerator` (``path``). Raises ``ValueError`` for an unknown backend."""
    if backend == "hf":
        from rlvr.generate.hf import HFGenerator

        return HFGenerator(**kwargs)
    if backend == "openai":
        from rlvr.generate.openai_compat import OpenAIGenerator

        return OpenAIGenerator(**kwargs)
    if backend == "vllm":
        from rlvr.generate.vllm_offline import VLLMGenerator

        dp = kwargs.pop("data_parallel", 1)
        if dp != 1:
            from rlvr.generate.sharded import ShardedGenerator, replicas_for, visible_gpus

            tp = kwargs.pop("tensor_parallel_size", 1)
            gpus = visible_gpus()
            replicas = replicas_for(dp, tp, gpus)
            if replicas > 1:
                return ShardedGenerator(functools.partial(make_generator, "vllm"), replicas, tp, gpus, pass_tp=True,
                                        **kwargs)
            kwargs["tensor_parallel_size"] = tp
        return VLLMGenerator(**kwargs)
    if backend == "samples":
        from rlvr.generate.samples import SamplesGenerator

        return SamplesGenerator(**kwargs)
    raise ValueError(f"unknown generation backend {backend!r}; expected one of {', '.join(BACKENDS)}")
