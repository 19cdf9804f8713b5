"""Generation of DPO's mining samples, in the stage's process or in a child process (``dpo.mining.process``).

    python -m rlvr.train.local.dpo_mine <run>/mine_job.json

Why a child: the DPO stage trains through ``accelerate launch`` on every GPU right after mining, and a vLLM engine
(and PyTorch's caching allocator after HF generation) does not reliably give its GPU memory back inside a process. A
child that exits frees all of it. The job file (written by :func:`run_child`) holds the model folder, the chat
prompts, ``k``, the sampling parameters and the :class:`DPOMining` section (``dpo.mining``); the child writes
``<run>/mine_texts.json`` (per prompt, ``k`` completion texts) atomically. Judging stays in the stage's process (its
judge is already open).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from rlvr.config import Section
from rlvr.eval.backend import check_vllm_only

__all__ = ["JOB_FILE", "TEXTS_FILE", "DPOMining", "generate_texts", "main", "run_child"]

JOB_FILE = "mine_job.json"
TEXTS_FILE = "mine_texts.json"


class DPOMining(Section):
    """``dpo.mining``: how the ``k`` samples per problem are generated.

    Fields:
        backend: ``hf`` (transformers; the CPU default) or ``vllm`` (the 7B profiles: HF decoding of 7B samples of
            2,048 tokens is minutes per batch; measured on 2 x H100, ``bench/gpu/results_2gpu.json``).
        process: ``stage`` (in the stage's own process) or ``child`` (``python -m rlvr.train.local.dpo_mine`` in a
            child process that exits before training, so every GPU it used is free for the ``accelerate launch``;
            required for ``vllm``, whose engine does not reliably release its memory in-process).
        tensor_parallel_size: GPUs of the vLLM engine. gpu_memory_utilization: its share of each (0-1).
        batch_size: prompts per HF forward batch.
        enforce_eager: the vLLM engine without CUDA-graph capture / torch.compile (start-up minutes saved at 7B;
            :class:`rlvr.eval.backend.BackendParams`).
    Raises ``ValueError`` (pydantic) for ``backend: vllm`` with ``process: stage``, and for ``enforce_eager`` with
    ``backend: hf`` (which would ignore it)."""

    backend: Literal["hf", "vllm"] = "hf"
    process: Literal["stage", "child"] = "stage"
    tensor_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float = Field(0.85, gt=0, le=1)
    batch_size: int = Field(16, ge=1)
    enforce_eager: bool = False

    @model_validator(mode="after")
    def _vllm_in_a_child(self) -> DPOMining:
        if self.backend == "vllm" and self.process != "child":
            raise ValueError("backend vllm needs process: child (the training launch needs the GPUs the engine holds)")
        check_vllm_only("dpo.mining.enforce_eager", self.backend, self.enforce_eager)
        return self


def generate_texts(model_dir: str | Path, prompts: Sequence[Any], k: int, sampling: Any,
                   mining: Any) -> list[list[str]]:
    """``k`` completion texts per prompt (chat messages or strings) from the model at ``model_dir``, with the backend
    of ``mining`` (:class:`DPOMining`); ``sampling`` is a
    :class:`rlvr.generate.SamplingParams`. Returns one list of ``k`` texts per prompt, in prompt order."""
    from rlvr.generate import make_generator

    if mining.backend == "vllm":
        gen = make_generator("vllm", model=str(model_dir), tensor_parallel_size=mining.tensor_parallel_size,
                             gpu_memory_utilization=mining.gpu_memory_utilization, seed=sampling.seed or 0,
                             enforce_eager=mining.enforce_eager)
    else:
        gen = make_generator("hf", model=str(model_dir), batch_size=mining.batch_size)
    return [[c.text for c in o] for o in gen.generate(list(prompts), k, sampling)]


def run_child(model_dir: str | Path, prompts: Sequence[Any], k: int, sampling: Any, mining: Any,
              workdir: str | Path, runner: Any = None) -> list[list[str]]:
    """Run :func:`generate_texts` in ``python -m rlvr.train.local.dpo_mine`` (module doc) and return its texts.
    ``runner`` replaces ``subprocess.run`` (tests). Raises ``subprocess.CalledProcessError`` when the child fails,
    ``ValueError`` when its output does not match the prompts."""
    from rlvr.io import atomic_write_json

    work = Path(workdir)
    job, texts_file = work / JOB_FILE, work / TEXTS_FILE
    texts_file.unlink(missing_ok=True)
    atomic_write_json(job, {"model_dir": str(model_dir), "prompts": list(prompts), "k": k,
                            "sampling": sampling.model_dump(mode="json"), "mining": mining.model_dump(mode="json"),
                            "out": str(texts_file)})
    (runner or subprocess.run)([sys.executable, "-m", "rlvr.train.local.dpo_mine", str(job)], check=True)
    texts = json.loads(texts_file.read_text(encoding="utf-8"))
    if len(texts) != len(prompts) or any(len(t) != k for t in texts):
        raise ValueError(f"{texts_file}: expected {len(prompts)} prompts x {k} texts from the mining process")
    return texts


def main(argv: list[str] | None = None) -> int:
    """Run the job file named by ``argv[0]`` (module doc); returns the exit status (2 for a usage error)."""
    from rlvr.generate import SamplingParams
    from rlvr.io import atomic_write_json

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rlvr.train.local.dpo_mine <mine_job.json>", file=sys.stderr)
        return 2
    job = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    texts = generate_texts(job["model_dir"], job["prompts"], int(job["k"]),
                           SamplingParams.model_validate(job["sampling"]), DPOMining.model_validate(job["mining"]))
    atomic_write_json(Path(job["out"]), texts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
