"""The final ``eval`` stage: every phase's model on the Dev and Test sets under ONE protocol (issue 7).

Protocol (recorded in every metrics file under ``"protocol"``):

* **EVAL@1**: greedy decoding (``greedy`` sampling params, fixed ``max_new_tokens``), the fixed prompt template of
  :func:`rlvr.data.prompts.build_messages` for every dataset; metric ``accepted@1``
  (:func:`rlvr.eval.metrics.compute_metrics`, same keys as the baseline's ``metrics/baseline/``).
* **EVAL@k** (datasets with ``k: true``): ``n`` samples per task at the fixed ``sampling`` temperature / top_p;
  ``pass@k`` with the unbiased estimator of Chen et al. 2021 (:func:`rlvr.eval.metrics.pass_at_k`), per-task arrays
  saved.
* **EVAL@budget**: a sample counts as accepted only if it is accepted by the judge **and** its generated tokens
  (``n_tokens``, including a final end-of-turn token) are ``<= budget_tokens``. Reported as ``accepted@1`` of the
  greedy sample and ``pass@k`` of the EVAL@k samples under that rule (``"eval@budget"`` entry).
* **Uncertainty**: percentile-bootstrap 95 % CIs over problems (:mod:`rlvr.eval.stats`) for accepted@1 and pass@k;
  mean ± std over GRPO seeds in the summary (:func:`write_summary`: ``metrics/final/seeds/``).
* **Test-set governance**: a dataset's role (``train``/``dev``/``test``) comes from ``governance.datasets`` in
  ``params.yaml`` (:func:`dataset_roles`); :func:`check_tuning_stages` raises :class:`rlvr.config.ConfigError` when a
  stage listed in ``eval.tuning_stages`` references a test-role dataset (only the ``eval`` stage may score Test).
* **Resumability**: every (problem, sample) row is keyed by :func:`rlvr.eval.protocol.sample_key` over the problem
  content hash, prompt, model id **and model hash** (with the vLLM engine settings that can change a greedy token,
  :func:`rlvr.eval.provenance.engine_tag`), sampling params and sample index. Rows are appended to a journal
  (``<phase_dir>/journal/<dataset>.<mode>.jsonl``, flushed and fsynced per chunk of tasks) as soon as a chunk is
  generated and judged; a re-run loads the journal (last row per key wins, a torn last line is ignored) and
  generates/judges only the missing pairs. Rows judged by another judge version are re-judged (completion kept).
  Final files (``samples/``, ``per_task/``, metrics) are written atomically from the de-duplicated rows.
* **Engine**: the generation backend and vLLM's ``enforce_eager`` (no CUDA graphs: other kernels, which can change a
  greedy token) are part of the protocol, recorded with the rest.
* **Same inputs, same bytes**: journals and ``samples/`` hold no measured time (:func:`rlvr.eval.protocol.stored_row`);
  the judge seconds of the rows judged in this run go to the cost files (``metrics/cost/final/eval_<phase>/``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import platform
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr.data.schema import Problem
from rlvr.eval.baseline import select_problems
from rlvr.eval.final_params import (
    EvalDataset,
    EvalParams,
    PhaseSpec,
    check_tuning_stages,
    dataset_roles,
    load_params,
)
from rlvr.eval.metrics import compute_metrics, pass_at_k, per_task_counts
from rlvr.eval.protocol import stored_row
from rlvr.eval.provenance import engine_tag, model_hash, tag_of
from rlvr.eval.resumable import GenStats, evaluate_resumable
from rlvr.eval.stats import per_task_metric_cis, seed_summary
from rlvr.generate.base import Generator, Prompt, SamplingParams
from rlvr.io import atomic_write_json, atomic_write_jsonl
from rlvr.layout import write_metrics, write_metrics_folder

__all__ = [
    "EvalDataset",
    "EvalParams",
    "PhaseSpec",
    "budget_metrics",
    "check_tuning_stages",
    "dataset_roles",
    "discover_phases",
    "evaluate_resumable",
    "headline_block",
    "library_versions",
    "load_params",
    "manifest_hashes",
    "model_hash",
    "run_eval",
    "summarise_phases",
    "write_summary",
]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------------- provenance
def manifest_hashes(dataset: str, splits: Sequence[str] | None, manifests_dir: str | Path) -> dict[str, str]:
    """``{manifest file: sha256}`` of ``dataset``'s manifests (``splits`` filter) from ``<manifests_dir>/index.json``;
    empty when the index is absent."""
    index = Path(manifests_dir) / "index.json"
    if not index.is_file():
        return {}
    data = json.loads(index.read_text(encoding="utf-8"))
    return {name: e["sha256"] for name, e in sorted(data.items())
            if e.get("dataset") == dataset and (splits is None or e.get("split") in splits)}


def library_versions() -> dict[str, str | None]:
    """Installed versions of python, torch, transformers, trl, vllm and rlvr (``None`` = not installed)."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for pkg in ("torch", "transformers", "trl", "vllm", "rlvr"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _json_sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# ---------------------------------------------------------------------------------------------- per-task arrays, budget
def _per_task(rows: Sequence[Mapping[str, Any]], ks: Sequence[int], first: Mapping[str, str] | None = None
              ) -> dict[str, dict[str, Any]]:
    tasks = per_task_counts(rows)
    for tid, t in tasks.items():
        if first is not None:
            t["first"] = first.get(tid, t["first"])
        for k in ks:
            t[f"pass@{k}"] = float(pass_at_k(t["n"], t["c"], k)[0])
    return tasks


def budget_metrics(greedy_rows: Sequence[Mapping[str, Any]], k_rows: Sequence[Mapping[str, Any]] | None,
                   budget: int, ks: Sequence[int]) -> dict[str, Any]:
    """EVAL@budget (module doc): a sample counts only if accepted **and** ``n_tokens <= budget``.

    Returns ``{"budget_tokens", "accepted@1", "pass@k"...}`` (pass@k only when ``k_rows`` is given)."""
    def capped(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [{**r, "verdict": r["verdict"] if r["n_tokens"] <= budget else "over_budget"} for r in rows]

    g = per_task_counts([{**r, "verdict": "accepted" if r["verdict"] == "accepted" else "x"} for r in capped(
        greedy_rows)])
    out: dict[str, Any] = {"budget_tokens": budget,
                           "accepted@1": (sum(t["first"] == "accepted" for t in g.values()) / len(g)) if g else None}
    if k_rows:
        tasks = per_task_counts(capped(k_rows))
        for k in ks:
            out[f"pass@{k}"] = float(pass_at_k([t["n"] for t in tasks.values()], [t["c"] for t in tasks.values()],
                                               k).mean())
    return out


# ---------------------------------------------------------------------------------------------------- phases
def discover_phases(specs: Sequence[PhaseSpec], root: str | Path = ".", seeds: Sequence[int] | None = None
                    ) -> tuple[list[tuple[str, Path]], list[str]]:
    """``([(phase name, model folder)], [names not run])``: a phase runs when its folder holds ``config.json`` or
    ``model.json``; seeded specs expand to ``<name>_seed<n>`` over ``<model>/seed-<n>`` folders (numeric order).

    ``seeds`` (the top-level ``seeds`` param): exactly these seeds are scored (a folder left over from another seed
    list is ignored, a missing one is listed as not run, ``<name>_seed<n>``); ``None``: every ``seed-<n>`` on disk."""
    root = Path(root)
    found: list[tuple[str, Path]] = []
    missing: list[str] = []

    def ok(d: Path) -> bool:
        return (d / "config.json").is_file() or (d / "model.json").is_file()

    for spec in specs:
        d = root / spec.model
        if spec.seeded and seeds is not None:
            for s in sorted(set(seeds)):
                c = d / f"seed-{s}"
                (found.append((f"{spec.name}_seed{s}", c)) if ok(c) else missing.append(f"{spec.name}_seed{s}"))
        elif spec.seeded:
            on_disk = sorted((int(c.name[5:]), c) for c in d.glob("seed-*") if c.name[5:].isdigit() and ok(c))
            found.extend((f"{spec.name}_seed{s}", c) for s, c in on_disk)
            if not on_disk:
                missing.append(spec.name)
        elif ok(d):
            found.append((spec.name, d))
        else:
            missing.append(spec.name)
    return found, missing


def run_eval(
    cfg: EvalParams,
    judge: Any,
    make_gen: Callable[[Path], Generator],
    problems_dir: str | Path = "data/governance/problems",
    out_dir: str | Path = "data/eval",
    metrics_dir: str | Path = "metrics",
    params: Mapping[str, Any] | None = None,
    root: str | Path = ".",
    manifests_dir: str | Path = "data/manifests",
) -> dict[str, Any]:
    """Score every existing phase; write ``metrics/eval_<phase>/<dataset>.json`` (one metrics file per dataset, so
    ``dvc metrics show metrics/final/eval_<phase>`` prints a row per dataset; the phase's ``protocol`` in
    ``metrics/provenance/…/eval_<phase>/protocol.json``: :func:`rlvr.layout.write_metrics_folder`, read back whole by
    :func:`rlvr.layout.read_metrics_folder`), ``<out_dir>/<phase>/{per_task,samples,journal}/`` and the summary
    (returned; :func:`write_summary`: ``headline/``, ``seeds/`` and ``eval.json``); each metrics file is split into
    scores, cost and provenance (:func:`rlvr.layout.write_metrics`). ``params``: the whole ``params.yaml`` (roles, the
    tuning-stage check, :func:`check_tuning_stages`, which runs first; ``seeds``: the GRPO seeds scored,
    :func:`discover_phases`). ``make_gen(model_dir)``: the generator of a phase.
    Raises ``ConfigError`` (test set in a tuning stage) or ``FileNotFoundError`` (dataset file missing); with a
    judge from :func:`rlvr.judge.preflight.open_judge`, ``SandboxErrorShareExceeded`` before a phase's files are
    written when too many of a dataset's rows (resumed ones included) are ``sandbox_error``."""
    params = params or {}
    check_tuning_stages(params, cfg.tuning_stages)
    roles = dataset_roles(params)
    from rlvr.data.prompts import build_messages
    from rlvr.judge import JUDGE_VERSION

    template_sha = _json_sha(inspect_source(build_messages))
    datasets: dict[str, tuple[EvalDataset, list[Problem]]] = {}
    for sel in cfg.datasets:
        datasets[sel.name] = (sel, select_problems(problems_dir, sel))
    seeds = params.get("seeds")
    phases, not_run = discover_phases(cfg.phases, root, [int(s) for s in seeds] if seeds is not None else None)
    # not the judge's worker count: it is where/how (RLVR_SANDBOX_WORKERS, the machine's cores), and it must not make
    # the same inputs give another protocol.json on another machine
    log.info("eval: judge %s with %s workers", type(judge).__name__, getattr(judge, "workers", None))
    judge_info = {"version": getattr(judge, "version", None) or JUDGE_VERSION,
                  "output_limit_mb": getattr(judge, "output_limit_mb", None),
                  "max_timeouts": getattr(judge, "max_timeouts", None)}
    libs = library_versions()
    check_verdicts = getattr(judge, "check_verdicts", None)  # rlvr.judge.preflight.GuardedJudge
    summary: dict[str, Any] = {"phases": {}, "not_run": not_run}
    for name, model_dir in phases:
        mh = model_hash(model_dir)
        tag = engine_tag(tag_of(mh), cfg.backend, cfg.enforce_eager)  # the final eval's vLLM engine is TP 1
        gen = _LazyGenerator(make_gen, model_dir)
        report: dict[str, Any] = {}
        pdir = Path(out_dir) / name
        for ds, (sel, ps) in datasets.items():
            log.info("eval %s / %s: %d problems", name, ds, len(ps))
            g_stats, k_stats = GenStats(), GenStats()  # cost only: what this run generated, and how fast
            g_rows = evaluate_resumable(ps, gen, judge, cfg.greedy, 1, tag, pdir / "journal" / f"{ds}.greedy.jsonl",
                                        judge_info["version"], chunk_tasks=cfg.chunk_tasks, stats=g_stats)
            m = compute_metrics(g_rows, ks=[1], greedy=True, **g_stats.metrics_kwargs())
            first = {r["task_id"]: r["verdict"] for r in g_rows}
            k_rows = None
            if sel.k:
                k_rows = evaluate_resumable(ps, gen, judge, cfg.sampling, cfg.n, tag,
                                            pdir / "journal" / f"{ds}.k.jsonl", judge_info["version"],
                                            chunk_tasks=cfg.chunk_tasks, stats=k_stats)
                mk = compute_metrics(k_rows, ks=cfg.ks, greedy=False, **k_stats.metrics_kwargs())
                m["eval@k"] = mk
                m.update({f"pass@{k}": mk[f"pass@{k}"] for k in cfg.ks})
                per_task = _per_task(k_rows, cfg.ks, first)
            else:
                per_task = _per_task(g_rows, [1])
            m["eval@budget"] = budget_metrics(g_rows, k_rows, cfg.budget_tokens, cfg.ks)
            m["ci"] = per_task_metric_cis(per_task, n_boot=cfg.bootstrap, seed=cfg.seed, alpha=cfg.alpha)
            r = sorted(roles(ds, sel.splits)) or sorted({_problem_role(p) for p in ps})
            m["role"] = "test" if "test" in r else (r[0] if len(r) == 1 else ",".join(r))
            m["dataset"] = {"splits": sel.splits, "limit": sel.limit, "n_problems": len(ps),
                            "problems_sha256": _json_sha([p.content_sha256() for p in ps]),
                            "manifests_sha256": manifest_hashes(ds, sel.splits, manifests_dir),
                            "prompts_sha256": _json_sha([build_messages(p) for p in ps])}
            report[ds] = m
            if check_verdicts is not None:  # the judge failed on too many rows: fail before writing anything
                check_verdicts([r["verdict"] for r in [*g_rows, *(k_rows or [])]], f"eval {name}/{ds}")
            atomic_write_json(pdir / "per_task" / f"{ds}.json", per_task)
            atomic_write_jsonl(pdir / "samples" / f"{ds}.greedy.jsonl", map(stored_row, g_rows))  # no seconds
            if k_rows is not None:
                atomic_write_jsonl(pdir / "samples" / f"{ds}.k.jsonl", map(stored_row, k_rows))
        report["protocol"] = {
            "phase": name, "model": mh, "backend": cfg.backend, "enforce_eager": cfg.enforce_eager,
            "prompt_template_sha256": template_sha,
            "greedy": cfg.greedy.model_dump(mode="json"), "sampling": cfg.sampling.model_dump(mode="json"),
            "n": cfg.n, "ks": list(cfg.ks), "budget_tokens": cfg.budget_tokens, "judge": judge_info,
            "libraries": libs, "bootstrap": {"B": cfg.bootstrap, "alpha": cfg.alpha, "seed": cfg.seed},
        }
        write_metrics_folder(Path(metrics_dir) / f"eval_{name}", report)  # one file per dataset: a row each
        summary["phases"][name] = {ds: {k: m.get(k) for k in ("role", "accepted@1", *[f"pass@{k}" for k in cfg.ks])
                                        if k in m} | {"ci": m["ci"]} for ds, m in report.items() if ds != "protocol"}
    summary["seeds"] = summarise_phases(summary["phases"], cfg.ks)
    if cfg.headline is not None:
        summary["headline"] = headline_block(summary, cfg.headline, cfg.ks)
    write_summary(metrics_dir, summary)
    return summary


def write_summary(metrics_dir: str | Path, summary: Mapping[str, Any]) -> list[Path]:
    """Write the eval stage's ``summary`` (:func:`run_eval`) so that every scores file is a narrow table in ``dvc
    metrics show`` (a row per dataset, a few columns) and the headline keeps the names the README's ``dvc exp show``
    recipe keeps. Under ``metrics_dir`` (``metrics/final``), each file split into scores / cost / provenance
    parts (:func:`rlvr.layout.write_metrics`; no empty part, the folder ``metrics/final`` and its mirrors being
    declared whole):

    * ``headline/<dataset>.json``: ``{"headline": {<dataset>: {accepted@1, pass@k..., role}}}``, the headline phase
      (:func:`headline_block`) one dataset per file. The dataset stays in the key (``headline.<dataset>.accepted@1``,
      as in the one-file summary): ``dvc exp show`` names a column by its bare key only when no other metrics file
      has that key, so short keys shared by the dataset files would become ``metrics/final/headline/<dataset>.json:
      accepted@1`` headers, about 50 characters each.
    * ``seeds/<base>/mean/<dataset>.json`` (``{metric: {"mean", "n"}}``) and ``seeds/<base>/std/<dataset>.json``
      (``{metric: {"std"}}``): the mean ± std over the seeds of each seeded phase (:func:`summarise_phases`), two
      files so that each table stays about four columns wide.
    * ``eval.json``: the rest, all provenance (``phases``: a copy of the per-phase files, ``not_run``, the headline's
      ``phase``/``seeds``/``not_run``); no scores file.

    Merged, the files are ``summary`` again (:func:`rlvr.report.summary.read_summary`). Returns the paths written."""
    final = Path(metrics_dir)
    head = dict(summary.get("headline") or {})
    rest = {k: v for k, v in summary.items() if k != "headline" and not (k == "seeds" and v)}  # seeds {}: kept
    if head:
        rest["headline"] = {k: v for k, v in head.items() if not isinstance(v, dict)}
    written = [p for p in write_metrics(final / "eval.json", rest, empty=False) if p.is_file()]
    written += write_metrics_folder(final / "headline", {ds: {"headline": {ds: m}} for ds, m in head.items()
                                                          if isinstance(m, dict)}, empty=False)
    for base, by_ds in (summary.get("seeds") or {}).items():
        for stat, keys in (("mean", ("mean", "n")), ("std", ("std",))):
            written += write_metrics_folder(final / "seeds" / base / stat, {
                ds: {m: {k: s.get(k) for k in keys if k in s} for m, s in by_metric.items()}
                for ds, by_metric in by_ds.items()}, empty=False)
    return written


def headline_block(summary: Mapping[str, Any], phase: str, ks: Sequence[int]) -> dict[str, Any]:
    """The ``headline`` block of ``metrics/final/eval.json``: ``{"phase", "seeds", <dataset>: {"role",
    "accepted@1", "pass@k"...}}`` of one phase of ``summary["phases"]``; for a seeded base (``grpo``) the mean over
    its seeds (:func:`summarise_phases`, ``seeds`` = how many). Same keys whatever the phase, so two runs with
    different ``eval.headline`` values line up in ``dvc exp diff`` / ``dvc metrics diff``. A phase that did not run
    gives ``{"phase", "not_run": true}``."""
    phases = summary.get("phases") or {}
    metrics = ("accepted@1", *[f"pass@{k}" for k in ks])
    if phase in phases:
        return {"phase": phase, "seeds": 1,
                **{ds: {k: v for k, v in m.items() if k == "role" or k in metrics} for ds, m in phases[phase].items()}}
    runs = {n: d for n, d in phases.items() if n.rpartition("_seed")[0] == phase and n.rpartition("_seed")[2].isdigit()}
    if not runs:
        return {"phase": phase, "not_run": True}
    seeds = summarise_phases(runs, ks).get(phase, {})
    out: dict[str, Any] = {"phase": phase, "seeds": len(runs)}
    for ds, by_metric in seeds.items():
        role = next((d[ds]["role"] for d in runs.values() if ds in d and "role" in d[ds]), None)
        out[ds] = {"role": role, **{k: v["mean"] for k, v in by_metric.items() if v["mean"] is not None}}
    return out


class _LazyGenerator:
    """A :class:`rlvr.generate.Generator` built by ``factory(model_dir)`` on the first ``generate`` call only, so a
    re-run whose rows are all journaled loads no model."""

    def __init__(self, factory: Callable[[Path], Generator], model_dir: Path) -> None:
        self._factory, self._model_dir, self._gen = factory, model_dir, None
        self.model_id = str(model_dir)

    @property
    def stats(self) -> Any:
        from rlvr.generate.base import GenerationStats

        return self._gen.stats if self._gen is not None else GenerationStats()

    def prepare(self) -> None:
        """Build the generator now (loads the model); :func:`evaluate_resumable` calls it before it starts timing
        generation, so the engine's start-up is not counted as generation time."""
        if self._gen is None:
            self._gen = self._factory(self._model_dir)

    def generate(self, prompts: Sequence[Prompt], n: int, sampling: SamplingParams,
                 ids: Sequence[str] | None = None) -> list[Any]:
        self.prepare()
        assert self._gen is not None
        return self._gen.generate(prompts, n, sampling, ids=ids)


def summarise_phases(phases: Mapping[str, Mapping[str, Mapping[str, Any]]], ks: Sequence[int]) -> dict[str, Any]:
    """Mean ± std over seeds (:func:`rlvr.eval.stats.seed_summary`) of accepted@1 and pass@k for every seeded phase
    (``<base>_seed<n>``): ``{base: {dataset: {metric: {"mean", "std", "n"}}}}``."""
    groups: dict[str, list[Mapping[str, Mapping[str, Any]]]] = {}
    for name, dsets in phases.items():
        base, sep, seed = name.rpartition("_seed")
        if sep and seed.isdigit():
            groups.setdefault(base, []).append(dsets)
    out: dict[str, Any] = {}
    for base, runs in groups.items():
        names = sorted({d for r in runs for d in r})
        out[base] = {d: {m: seed_summary([r.get(d, {}).get(m) for r in runs])
                         for m in ("accepted@1", *[f"pass@{k}" for k in ks])} for d in names}
    return out


def _problem_role(p: Problem) -> str:
    """Role of a problem of a dataset governance does not list (the synthetic family): ``meta["role"]``, else its split
    when that is ``train``/``dev``/``test``, else ``"unknown"``."""
    role = p.meta.get("role")
    if role:
        return str(role)
    return p.split if p.split in ("train", "dev", "test") else "unknown"


def inspect_source(fn: Callable[..., Any]) -> str:
    """Source text of ``fn``'s module (the prompt template's code; its hash identifies the template)."""
    import inspect

    return inspect.getsource(inspect.getmodule(fn))  # type: ignore[arg-type]


