"""Generation of DPO's mining samples, in the stage's process or in a child process (``dpo.mining.process``).

    python -m rlvr.train.local.dpo_mine <run>/mine_job.json

Why a child: the DPO stage trains through ``accelerate launch`` on every GPU right after mining, and a vLLM engine
(and PyTorch's caching allocator after HF generation) does not reliably give its GPU memory back inside a process. A
child that exits frees all of it. The job file (written by :func:`run_child`) holds the model folder, the chat
prompts, ``k``, the sampling parameters and the :class:`rlvr.train.local.dpo.DPOMining` section; the child writes
``<run>/mine_texts.json`` (per prompt, ``k`` completion texts) atomically. Judging stays in the stage's process (its
judge is already open).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["JOB_FILE", "TEXTS_FILE", "generate_texts", "main", "run_child"]

JOB_FILE = "mine_job.json"
TEXTS_FILE = "mine_texts.json"


def generate_texts(model_dir: str | Path, prompts: Sequence[Any], k: int, sampling: Any,
                   mining: Any) -> list[list[str]]:
    """``k`` completion texts per prompt (chat messages or strings) from the model at ``model_dir``, with the backend
    of ``mining`` (:class:`rlvr.train.local.dpo.DPOMining`); ``sampling`` is a
    :class:`rlvr.generate.SamplingParams`. Returns one list of ``k`` texts per prompt, in prompt order."""
    from rlvr.generate import make_generator

    if mining.backend == "vllm":
        gen = make_generator("vllm", model=str(model_dir), tensor_parallel_size=mining.tensor_parallel_size,
                             gpu_memory_utilization=mining.gpu_memory_utilization, seed=sampling.seed or 0)
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
    from rlvr.train.local.dpo import DPOMining

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
