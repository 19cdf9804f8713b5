"""Data-parallel generation: one engine per GPU group, each in its own child process, the prompts sharded over them.

A 7B model fits one GPU, so an evaluation on an 8-GPU node runs eight TP-1 vLLM engines instead of one (issue 44:
the final eval used one of four GPUs). :class:`ShardedGenerator` starts ``replicas`` child processes (``spawn``: no
CUDA state is inherited), each with ``CUDA_VISIBLE_DEVICES`` set to its own ``tensor_parallel_size`` GPUs
(:func:`device_groups`), builds the backend there (``factory(**kwargs)``, e.g. ``functools.partial(
rlvr.generate.make_generator, "vllm")``: picklable, so the spawned child imports it) and serves ``generate`` calls over
a pipe. A call splits the prompts round-robin (prompt ``i`` to replica ``i mod replicas``, so long and short
problems spread evenly), runs the shards at once and puts the completions back in input order.

Outputs: vLLM seeds each request from ``SamplingParams.seed`` (``to_vllm_sampling``), so a prompt's samples do not
depend on which replica or batch served it, up to batch-dependent floating-point differences of the kernels (vLLM
does not promise batch invariance). The replica count is a speed setting, not part of a sample key.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from rlvr.generate.base import Completion, GenerationStats, Prompt, SamplingParams, finish_stats

__all__ = ["ShardedGenerator", "device_groups", "replicas_for", "visible_gpus"]


def visible_gpus(environ: dict[str, str] | None = None) -> list[str]:
    """The GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set (comma-separated; empty = none), else
    ``0 .. torch.cuda.device_count()-1`` (``[]`` without torch or CUDA)."""
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in env:
        return [d.strip() for d in env["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # no torch, or a broken driver: no GPU to shard over
        return []


def replicas_for(data_parallel: int | str, tensor_parallel_size: int, gpus: Sequence[str]) -> int:
    """Engines to run: ``data_parallel`` when a number (>= 1); ``auto`` = ``len(gpus) // tensor_parallel_size``, at
    least 1. Raises ``ValueError`` when a number asks for more GPUs than ``gpus`` holds (with more than one replica),
    or for any other string."""
    if isinstance(data_parallel, str):
        if data_parallel != "auto":
            raise ValueError(f"data_parallel: {data_parallel!r} is neither a number of engines nor 'auto'")
        return max(1, len(gpus) // tensor_parallel_size)
    if data_parallel < 1:
        raise ValueError(f"data_parallel={data_parallel}: at least one engine")
    if data_parallel > 1 and data_parallel * tensor_parallel_size > len(gpus):
        raise ValueError(f"data_parallel={data_parallel} x tensor_parallel_size={tensor_parallel_size} needs "
                         f"{data_parallel * tensor_parallel_size} GPUs; {len(gpus)} visible ({','.join(gpus)})")
    return data_parallel


def device_groups(gpus: Sequence[str], replicas: int, tensor_parallel_size: int) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` of each replica: consecutive groups of ``tensor_parallel_size`` of ``gpus``
    (``["0", "1", "2", "3"]``, 2 replicas, TP 2 → ``["0,1", "2,3"]``). Raises ``ValueError`` when they do not fit."""
    if replicas * tensor_parallel_size > len(gpus):
        raise ValueError(f"{replicas} engines x TP {tensor_parallel_size} need more than the {len(gpus)} GPUs")
    return [",".join(gpus[r * tensor_parallel_size:(r + 1) * tensor_parallel_size]) for r in range(replicas)]


def _serve(conn: Any, devices: str, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """Child process body: pin the GPUs, build the generator, answer ``(prompts, n, sampling, ids)`` requests with
    ``("ok", completions, stats)`` or ``("error", message)`` until ``None`` arrives."""
    os.environ["CUDA_VISIBLE_DEVICES"] = devices
    try:
        gen = factory(**kwargs)
        conn.send(("ready", gen.model_id, os.environ["CUDA_VISIBLE_DEVICES"]))
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    while (req := conn.recv()) is not None:
        prompts, n, sampling, ids = req
        try:
            out = gen.generate(prompts, n, SamplingParams.model_validate(sampling), ids)
            conn.send(("ok", out, gen.stats.truncated_prompts))
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class ShardedGenerator:
    """``replicas`` generators (``factory(**kwargs)``, a picklable callable) in child processes, one per
    :func:`device_groups` entry; the :class:`rlvr.generate.Generator` interface over them (module doc).

    ``model_id`` is the replicas' own; ``stats`` covers the whole sharded call (``wall_s`` its wall time);
    ``devices`` lists each replica's ``CUDA_VISIBLE_DEVICES``; ``pass_tp`` also hands the factory
    ``tensor_parallel_size`` (a vLLM engine's own). Raises ``RuntimeError`` naming the replica and its
    GPUs when a child fails to start or to generate. :meth:`close` (also on garbage collection and as a context
    manager) stops the children."""

    def __init__(self, factory: Callable[..., Any], replicas: int, tensor_parallel_size: int = 1,
                 gpus: Sequence[str] | None = None, pass_tp: bool = False, **kwargs: Any) -> None:
        from rlvr.generate.base import release_gpu_memory

        gpus = list(visible_gpus() if gpus is None else gpus)
        self.devices = device_groups(gpus, replicas, tensor_parallel_size)
        self.stats = GenerationStats()
        release_gpu_memory()  # each engine sizes itself from its GPUs' free memory
        ctx = mp.get_context("spawn")
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        if pass_tp:  # the engine's own tensor_parallel_size (vLLM)
            kwargs = {**kwargs, "tensor_parallel_size": tensor_parallel_size}
        try:
            for dev in self.devices:
                parent, child = ctx.Pipe()
                p = ctx.Process(target=_serve, args=(child, dev, factory, kwargs), daemon=True)
                p.start()
                self._procs.append(p)
                self._conns.append(parent)
            ids = [self._recv(i, "start") for i in range(len(self.devices))]
        except BaseException:
            self.close()
            raise
        self.model_id = ids[0][1]
        self.seen_devices = [r[2] for r in ids]

    def _recv(self, i: int, what: str) -> tuple[Any, ...]:
        try:
            msg = self._conns[i].recv()
        except EOFError:
            msg = ("error", f"the process exited (status {self._procs[i].exitcode})")
        if msg[0] == "error":
            raise RuntimeError(f"generation replica {i} (CUDA_VISIBLE_DEVICES={self.devices[i]}) failed to {what}: "
                               f"{msg[1]}")
        return msg

    def generate(self, prompts: Sequence[Prompt], n: int, sampling: SamplingParams,
                 ids: Sequence[str] | None = None) -> list[list[Completion]]:
        """``n`` completions per prompt, in input order; prompt ``i`` goes to replica ``i mod replicas``."""
        t0 = time.perf_counter()
        k = len(self._conns)
        shards = [list(range(r, len(prompts), k)) for r in range(k)]
        busy = [r for r in range(k) if shards[r]]
        for r in busy:
            self._conns[r].send(([prompts[i] for i in shards[r]], n, sampling.model_dump(),
                                 None if ids is None else [ids[i] for i in shards[r]]))
        out: list[list[Completion]] = [[] for _ in prompts]
        truncated = 0
        errors = []
        for r in busy:  # every answer is read, also after a failure, so the pipes stay in step
            try:
                _, res, trunc = self._recv(r, "generate")
            except RuntimeError as exc:
                errors.append(exc)
                continue
            truncated += trunc
            for i, comps in zip(shards[r], res, strict=True):
                out[i] = comps
        if errors:
            raise errors[0]
        finish_stats(self.stats, out, time.perf_counter() - t0)
        self.stats.truncated_prompts = truncated
        return out

    def close(self) -> None:
        """Stop the children (a ``None`` request, then ``join``; killed after 60 s)."""
        for c in self._conns:
            try:
                c.send(None)
            except (OSError, ValueError):
                pass
        for p in self._procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
        self._procs, self._conns = [], []

    def __enter__(self) -> ShardedGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_procs", None):
            self.close()
