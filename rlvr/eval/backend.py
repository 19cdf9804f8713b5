"""Generation-backend settings shared by the params sections that generate (``baseline``, ``repair``).

Each section adds its own ``backend``, ``model``, ``sampling`` and ``batch_size`` (their defaults differ).
"""

from __future__ import annotations

from pydantic import Field

from rlvr.config import Section

__all__ = ["BackendParams", "check_vllm_only"]


def check_vllm_only(name: str, backend: str, enforce_eager: bool) -> None:
    """Raise ``ValueError`` naming ``name`` when ``enforce_eager`` is set with a ``backend`` other than ``vllm``
    (which would ignore it: a param an engine ignores is an error, not a no-op)."""
    if enforce_eager and backend != "vllm":
        raise ValueError(f"{name} is a vllm setting; backend {backend!r} would ignore it")


class BackendParams(Section):
    """hf: ``device`` (``auto`` | ``cpu`` | ``cuda`` …), ``cpu_threads`` (torch CPU threads, a speed knob; ``None`` =
    torch default). openai: ``base_url`` (with ``/v1``), ``served_model_name`` (default: the resolved model),
    ``concurrency`` (requests in flight). vllm: ``tensor_parallel_size``, ``gpu_memory_utilization`` (fraction, 0–1],
    ``max_model_len`` (tokens), ``enforce_eager`` (``vllm.LLM(enforce_eager=True)``: no CUDA-graph capture or
    torch.compile at engine start, minutes saved per engine on a 7B, slower decoding; vllm only: set with another
    backend it is rejected where the section is checked). samples: ``samples`` maps dataset name → EvalPlus-style
    samples JSONL.
    ``wandb_project``: project name of the (offline by default) wandb run."""

    device: str = "auto"
    cpu_threads: int | None = Field(default=1, ge=1)
    base_url: str | None = None
    served_model_name: str | None = None
    concurrency: int = Field(default=16, ge=1)
    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.85, gt=0, le=1)
    max_model_len: int | None = None
    enforce_eager: bool = False
    samples: dict[str, str] = Field(default_factory=dict)
    wandb_project: str = "rlvr"
