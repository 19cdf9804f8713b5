"""The one generation interface every backend implements: prompts in, completions + token counts out.

A prompt is either a chat conversation (``list[{"role", "content"}]``, rendered with the model's chat template and an
assistant generation prompt) or a plain string (raw text continued as is, no template). Backends:
``hf`` (transformers), ``openai`` (OpenAI-compatible server, e.g. ``vllm serve``), ``vllm`` (offline ``vllm.LLM``),
``samples`` (replay of an EvalPlus-style samples file); see :func:`rlvr.generate.make_generator`.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from pydantic import Field

from rlvr.config import Section

__all__ = ["Completion", "GenerationStats", "Generator", "Prompt", "SamplingParams", "is_chat", "release_gpu_memory"]

Message = dict[str, str]
Prompt = list[Message] | str
FinishReason = Literal["stop", "length", "replay"]


class SamplingParams(Section):
    """Explicit sampling parameters (never taken from a model's ``generation_config.json``).

    ``temperature``: 0 = greedy decoding (argmax; ``top_p`` ignored); ``top_p``: nucleus mass in (0, 1];
    ``max_new_tokens``: generated-token cap per completion (the OpenAI ``max_tokens``); ``seed``: RNG seed of the
    sampler (``None`` = nondeterministic where the backend allows)."""

    temperature: float = Field(default=0.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_new_tokens: int = Field(default=128, ge=1)
    seed: int | None = 0

    @property
    def greedy(self) -> bool:
        """True when ``temperature == 0`` (greedy decoding)."""
        return self.temperature == 0.0


@dataclass(frozen=True)
class Completion:
    """One generated completion.

    ``text``: decoded generated text (prompt excluded, special tokens stripped); ``n_tokens``: generated tokens
    including a final end-of-turn token when one was produced (0 for replayed samples, whose count is unknown);
    ``finish_reason``: ``stop`` (end-of-sequence/stop token), ``length`` (hit ``max_new_tokens``), ``replay``
    (samples backend)."""

    text: str
    n_tokens: int
    finish_reason: FinishReason


@dataclass
class GenerationStats:
    """Timing of a generator's most recent ``generate`` call: ``wall_s`` seconds, ``n_prompts``, ``n_completions``,
    ``generated_tokens`` (sum of ``Completion.n_tokens``), ``truncated_prompts`` (prompts cut to fit the context)."""

    wall_s: float = 0.0
    n_prompts: int = 0
    n_completions: int = 0
    generated_tokens: int = 0
    truncated_prompts: int = 0


@runtime_checkable
class Generator(Protocol):
    """The generation interface.

    ``generate(prompts, n, sampling, ids=None)`` returns, for each prompt in order, a list of ``n`` completions.
    ``ids`` (one per prompt, e.g. ``Problem.id``) is only used by backends that look answers up (``samples``).
    ``model_id`` names the model (recorded in sample keys); ``stats`` describes the last call.
    """

    model_id: str
    stats: GenerationStats

    def generate(
        self, prompts: Sequence[Prompt], n: int, sampling: SamplingParams, ids: Sequence[str] | None = None
    ) -> list[list[Completion]]:
        """Generate ``n`` completions per prompt (see class doc)."""
        ...


def is_chat(prompt: Prompt) -> bool:
    """True if ``prompt`` is a chat conversation (list of role/content dicts); raises ``TypeError`` on other types."""
    if isinstance(prompt, str):
        return False
    if isinstance(prompt, list) and all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt):
        return True
    raise TypeError(f"prompt must be a str or a list of {{'role', 'content'}} dicts, got {type(prompt).__name__}")


def finish_stats(stats: GenerationStats, out: list[list[Completion]], wall_s: float) -> None:
    """Fill ``stats`` from the completions ``out`` of one call that took ``wall_s`` seconds."""
    stats.wall_s = wall_s
    stats.n_prompts = len(out)
    stats.n_completions = sum(len(c) for c in out)
    stats.generated_tokens = sum(x.n_tokens for c in out for x in c)


def release_gpu_memory() -> None:
    """Give this process's unreferenced GPU memory back to the driver: ``gc.collect()`` (generators and models held in
    reference cycles), then ``torch.cuda.empty_cache()`` (the caching allocator's reserved blocks). A no-op without
    torch imported or without CUDA.

    Why: a vLLM engine sizes itself from the device's *free* memory at start-up (``gpu_memory_utilization`` x total
    must be free), and blocks that an earlier in-process ``transformers`` generator used stay reserved by PyTorch's
    allocator after the generator is gone. On the 2 x H100 7B run the DPO stage's quick greedy check left 64 GB
    reserved on cuda:0 and the stage's vLLM evaluation refused to start (bench/gpu/results_2gpu.json)."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
