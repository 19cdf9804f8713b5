"""Phase-0 baseline: evaluate the base model on the governed datasets under one protocol (:func:`evaluate`).

``params.yaml`` section ``baseline`` (:class:`BaselineParams`). Output layout under ``out_dir`` (``data/baseline``):
``samples/<dataset>.jsonl`` (one row per (task, sample)), ``per_task/<dataset>.json`` (pass@k arrays),
``qa/<dataset>/<verdict>.jsonl`` (QA logs). The metrics file maps each dataset to its metrics dict, plus
``"protocol"``: backend, model, model tag (content hash, :func:`baseline_model_tag`), sampling parameters, n, ks,
judge version.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from rlvr.config import Section
from rlvr.data.bundled import canonical_name, sha256_file
from rlvr.data.schema import Problem, read_problems
from rlvr.eval.backend import BackendParams, check_vllm_only
from rlvr.eval.protocol import evaluate
from rlvr.eval.provenance import engine_tag, model_tag
from rlvr.generate import Generator, SamplingParams, make_generator

__all__ = ["BaselineParams", "DatasetSelection", "baseline_model_tag", "make_baseline_generator", "run_baseline",
           "select_problems"]

log = logging.getLogger(__name__)


class DatasetSelection(Section):
    """One dataset to evaluate: ``name`` of ``data/governance/problems/<name>.jsonl``; ``splits``: keep only these
    native splits (``None`` = all); ``limit``: first N problems after the split filter (``None`` = all). Both
    spellings of a version are read and stored as one (:func:`rlvr.data.bundled.canonical_name`)."""

    name: str
    splits: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)

    @field_validator("name")
    @classmethod
    def _one_spelling(cls, v: str) -> str:  # "humanevalplus:v0.1.10" and "humanevalplus-v0.1.10" are one dataset
        return canonical_name(v)


class BaselineParams(BackendParams):
    """``baseline`` section.

    ``backend``: hf | openai | vllm | samples. ``model``: folder (``models/base``, resolving its ``model.json``) or
    Hub id. ``sampling``: explicit sampling params; ``n`` samples per task; ``ks``: pass@k values (each <= n).
    hf: ``batch_size``; vllm: ``data_parallel``, engines of ``tensor_parallel_size`` GPUs each, in child processes
    (``auto`` = as many as the visible GPUs hold: :class:`rlvr.generate.sharded.ShardedGenerator`); the other backend
    settings: :class:`rlvr.eval.backend.BackendParams`. ``qa_per_verdict``: QA log cap per verdict."""

    backend: Literal["hf", "openai", "vllm", "samples"] = "hf"
    model: str = "models/base"
    datasets: list[DatasetSelection]
    sampling: SamplingParams = SamplingParams()
    n: int = Field(default=1, ge=1)
    ks: list[int] = Field(default_factory=lambda: [1])
    batch_size: int = Field(default=32, ge=1)
    qa_per_verdict: int = Field(default=20, ge=0)
    data_parallel: int | Literal["auto"] = "auto"

    @model_validator(mode="after")
    def _check(self) -> BaselineParams:
        if any(k < 1 or k > self.n for k in self.ks):
            raise ValueError(f"ks={self.ks}: every k must be in [1, n={self.n}]")
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend 'openai' needs base_url")
        if self.backend == "samples":
            missing = [d.name for d in self.datasets if d.name not in self.samples]
            if missing:
                raise ValueError(f"backend 'samples' needs a samples file for datasets {missing}")
        check_vllm_only("enforce_eager", self.backend, self.enforce_eager)
        return self


def select_problems(problems_dir: str | Path, sel: DatasetSelection | Any) -> list[Problem]:
    """Problems of ``<problems_dir>/<sel.name>.jsonl`` after the split filter and limit (file order). ``sel``: any
    selection with ``name``, ``splits`` (None = all) and ``limit`` (0/None = all): a baseline ``DatasetSelection`` or
    a final-eval ``EvalDataset``.
    Raises ``FileNotFoundError`` naming the file when the dataset is absent."""
    path = Path(problems_dir) / f"{sel.name}.jsonl"
    if not path.is_file():
        from rlvr.config import did_you_mean

        known = sorted(f.stem for f in Path(problems_dir).glob("*.jsonl"))
        raise FileNotFoundError(f"{path}: dataset {sel.name!r} not found (is it in governance.datasets?)"
                                f"{did_you_mean(sel.name, known)}")
    problems = read_problems(path)
    if sel.splits is not None:
        problems = [p for p in problems if p.split in sel.splits]
    return problems[: sel.limit] if sel.limit else problems


def make_baseline_generator(cfg: BaselineParams, dataset: str | None = None) -> Generator:
    """The generator ``cfg`` asks for (``dataset`` picks the samples file of the ``samples`` backend)."""
    from rlvr.model import resolve_model_ref

    if cfg.backend == "hf":
        return make_generator("hf", model=cfg.model, device=cfg.device, batch_size=cfg.batch_size,
                              num_threads=cfg.cpu_threads)
    if cfg.backend == "openai":
        return make_generator("openai", base_url=cfg.base_url, concurrency=cfg.concurrency,
                              model=cfg.served_model_name or resolve_model_ref(cfg.model))
    if cfg.backend == "vllm":
        return make_generator("vllm", model=cfg.model, tensor_parallel_size=cfg.tensor_parallel_size,
                              gpu_memory_utilization=cfg.gpu_memory_utilization, max_model_len=cfg.max_model_len,
                              seed=cfg.sampling.seed or 0,
                              enforce_eager=cfg.enforce_eager, data_parallel=cfg.data_parallel)
    if dataset is None:
        raise ValueError("samples backend: a dataset name is needed to pick the samples file")
    return make_generator("samples", path=cfg.samples[dataset])


def baseline_model_tag(cfg: BaselineParams, gen: Generator, dataset: str | None = None) -> str:
    """The model identity in the sample keys of a baseline run (:mod:`rlvr.eval.protocol`).

    hf / vllm: :func:`rlvr.eval.provenance.model_tag` of ``cfg.model`` (folder path + content sha256, so weights
    re-published at the same path are regenerated; a Hub id is used as is) with the vLLM engine settings that can
    change a greedy token (:func:`rlvr.eval.provenance.engine_tag`). samples: ``samples:<file>@<sha256[:16]>``
    of ``dataset``'s samples file. openai: the generator's ``model_id`` (the served name; a server's weights cannot
    be hashed from here). Raises ``FileNotFoundError`` for a model folder without model files."""
    if cfg.backend in ("hf", "vllm"):
        return engine_tag(model_tag(cfg.model), cfg.backend, cfg.enforce_eager, cfg.tensor_parallel_size)
    if cfg.backend == "samples" and dataset is not None and dataset in cfg.samples:
        path = Path(cfg.samples[dataset])
        return f"samples:{path.name}@{sha256_file(path)[:16]}"
    return gen.model_id


def run_baseline(cfg: BaselineParams, judge: Any, problems_dir: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Evaluate every ``cfg.datasets`` entry; returns ``{dataset: metrics, "protocol": {...}}`` (module doc).
    Stored samples under ``out_dir`` are reused only for the same model content (:func:`baseline_model_tag`, computed
    once per call for the hf/vllm/openai backends: one model, hashed once, whatever the number of datasets)."""
    from rlvr.model import resolve_model_ref

    out_dir = Path(out_dir)
    report: dict[str, Any] = {}
    # every dataset first: a misspelt name fails before any model is loaded or any dataset generated and judged
    selected = {sel.name: select_problems(problems_dir, sel) for sel in cfg.datasets}
    shared = None if cfg.backend == "samples" else make_baseline_generator(cfg)
    # one model for every dataset, so one tag: hf/vllm hash the whole model folder (a 7B model's 15-30 GB of weights
    # cost ~30 s of sha256), which must not be paid again per dataset; samples: one file, and one tag, per dataset
    shared_tag = None if shared is None else baseline_model_tag(cfg, shared)
    tags: dict[str, str] = {}
    for sel in cfg.datasets:
        problems = selected[sel.name]
        gen = shared or make_baseline_generator(cfg, sel.name)
        tags[sel.name] = shared_tag or baseline_model_tag(cfg, gen, sel.name)
        log.info("baseline %s: %d problems (model %s)", sel.name, len(problems), tags[sel.name])
        report[sel.name] = evaluate(
            problems, gen, judge, cfg.sampling, out_dir, n=cfg.n, ks=cfg.ks, qa_per_verdict=cfg.qa_per_verdict,
            samples_path=out_dir / "samples" / f"{sel.name}.jsonl", qa_dir=out_dir / "qa" / sel.name,
            per_task_path=out_dir / "per_task" / f"{sel.name}.json", model_tag=tags[sel.name],
        )
    report["protocol"] = {
        "backend": cfg.backend,
        "enforce_eager": cfg.enforce_eager,  # vLLM without CUDA graphs: other kernels, possibly other greedy tokens
        "model": resolve_model_ref(cfg.model) if cfg.backend != "samples" else None,
        "model_tag": next(iter(tags.values())) if len(set(tags.values())) == 1 else tags,
        "sampling": cfg.sampling.model_dump(mode="json"),
        "n": cfg.n,
        "ks": list(cfg.ks),
        "judge_version": getattr(judge, "version", None) or _judge_version(),
    }
    return report


def _judge_version() -> str | None:
    try:
        from rlvr.judge import JUDGE_VERSION
    except ImportError:  # pragma: no cover
        return None
    return JUDGE_VERSION
