"""The final ``eval`` stage: every phase's model on the Dev and Test sets under ONE protocol (issue 7).

Protocol (recorded in every metrics file under ``"protocol"``):

* **EVAL@1**: greedy decoding (``greedy`` sampling params, fixed ``max_new_tokens``), the fixed prompt template of
  :func:`rlvr.data.prompts.build_messages` for every dataset; metric ``accepted@1``
  (:func:`rlvr.eval.metrics.compute_metrics`, same keys as ``metrics/baseline.json``).
* **EVAL@k** (datasets with ``k: true``): ``n`` samples per task at the fixed ``sampling`` temperature / top_p;
  ``pass@k`` with the unbiased estimator of Chen et al. 2021 (:func:`rlvr.eval.metrics.pass_at_k`), per-task arrays
  saved.
* **EVAL@budget**: a sample counts as accepted only if it is accepted by the judge **and** its generated tokens
  (``n_tokens``, including a final end-of-turn token) are ``<= budget_tokens``. Reported as ``accepted@1`` of the
  greedy sample and ``pass@k`` of the EVAL@k samples under that rule (``"eval@budget"`` entry).
* **Uncertainty**: percentile-bootstrap 95 % CIs over problems (:mod:`rlvr.eval.stats`) for accepted@1 and pass@k;
  mean ± std over GRPO seeds in the summary ``metrics/eval.json``.
* **Test-set governance**: a dataset's role (``train``/``dev``/``test``) comes from ``governance.datasets`` in
  ``params.yaml`` (:func:`dataset_roles`); :func:`check_tuning_stages` raises :class:`rlvr.config.ConfigError` when a
  stage listed in ``eval.tuning_stages`` references a test-role dataset (only the ``eval`` stage may score Test).
* **Resumability**: every (problem, sample) row is keyed by :func:`rlvr.eval.protocol.sample_key` over the problem
  content hash, prompt, model id **and model hash**, sampling params and sample index. Rows are appended to a journal
  (``<phase_dir>/journal/<dataset>.<mode>.jsonl``, flushed and fsynced per chunk of tasks) as soon as a chunk is
  generated and judged; a re-run loads the journal (last row per key wins, a torn last line is ignored) and
  generates/judges only the missing pairs. Rows judged by another judge version are re-judged (completion kept).
  Final files (``samples/``, ``per_task/``, metrics) are written atomically from the de-duplicated rows.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from rlvr.config import ConfigError, Section
from rlvr.data.schema import Problem, read_problems
from rlvr.eval.evalplus_columns import group_statuses
from rlvr.eval.metrics import compute_metrics, pass_at_k, per_task_counts
from rlvr.eval.protocol import NO_CODE_MESSAGE, first_failure_message, sample_key
from rlvr.eval.provenance import model_hash, tag_of
from rlvr.eval.stats import per_task_metric_cis, seed_summary
from rlvr.generate.base import Generator, Prompt, SamplingParams
from rlvr.generate.extract import extract_code
from rlvr.io import atomic_write_json, atomic_write_jsonl

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
    "manifest_hashes",
    "model_hash",
    "run_eval",
    "summarise_phases",
]

log = logging.getLogger(__name__)


class EvalDataset(Section):
    """One dataset of the eval stage: ``name`` of ``data/governance/problems/<name>.jsonl``; ``splits`` (``None`` =
    all); ``limit``: first N problems (cheap default runs); ``k``: also run EVAL@k on it."""

    name: str
    splits: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)
    k: bool = False


class PhaseSpec(Section):
    """A phase to score: ``name`` and ``model`` folder. ``seeded``: ``model`` is a parent folder whose
    ``seed-<n>`` children are one phase each (``grpo`` → ``grpo_seed<n>``)."""

    name: str
    model: str
    seeded: bool = False


def _default_phases() -> list[PhaseSpec]:
    return [PhaseSpec(name="baseline", model="models/base"), PhaseSpec(name="sft", model="models/sft"),
            PhaseSpec(name="dpo", model="models/dpo"), PhaseSpec(name="grpo", model="models/grpo", seeded=True),
            PhaseSpec(name="repair", model="models/repair")]


class EvalParams(Section):
    """``params.yaml`` section ``eval`` (module doc for the protocol).

    ``phases``: what to score; ``datasets``: Dev and Test sets (role from ``governance.datasets``); ``greedy``:
    EVAL@1 sampling (temperature must be 0); ``sampling`` + ``n`` + ``ks``: EVAL@k; ``budget_tokens``: EVAL@budget
    cap (tokens); ``tuning_stages``: params sections that must never reference a test-role dataset.
    ``chunk_tasks``: tasks per generate→judge→journal step (resume granularity). hf: ``batch_size``, ``device``,
    ``cpu_threads``; ``bootstrap``/``alpha``/``seed``: CI settings. ``headline``: the phase the summary's
    ``headline`` block reports (:func:`headline_block`; a phase name such as ``sft`` or ``grpo_seed1``, or a seeded
    base such as ``grpo`` = mean over its seeds; ``null`` = no block), so ``dvc exp run -S eval.headline=dpo`` then
    ``dvc exp diff`` shows what one phase changed. Changing it re-runs the stage, which resumes every row from the
    journals (no generation, no judging, no model loaded)."""

    phases: list[PhaseSpec] = Field(default_factory=_default_phases)
    datasets: list[EvalDataset]
    greedy: SamplingParams = SamplingParams(temperature=0.0, max_new_tokens=128, seed=0)
    sampling: SamplingParams = SamplingParams(temperature=0.8, top_p=0.95, max_new_tokens=128, seed=0)
    n: int = Field(default=4, ge=1)
    ks: list[int] = Field(default_factory=lambda: [1, 2, 4])
    budget_tokens: int = Field(default=64, ge=1)
    tuning_stages: list[str] = Field(default_factory=lambda: ["baseline", "train", "sft", "dpo", "grpo", "repair"])
    backend: Literal["hf", "vllm"] = "hf"
    batch_size: int = Field(default=64, ge=1)
    device: str = "auto"
    cpu_threads: int | None = Field(default=1, ge=1)
    chunk_tasks: int = Field(default=32, ge=1)
    bootstrap: int = Field(default=1000, ge=1)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    seed: int = 0
    headline: str | None = "grpo"

    @model_validator(mode="after")
    def _check(self) -> EvalParams:
        if not self.greedy.greedy:
            raise ValueError("eval.greedy: EVAL@1 is greedy, temperature must be 0")
        if any(k < 1 or k > self.n for k in self.ks):
            raise ValueError(f"eval.ks={self.ks}: every k must be in [1, n={self.n}]")
        if self.headline is not None:
            base, sep, seed = self.headline.rpartition("_seed")
            names = {p.name for p in self.phases}
            seeded = {p.name for p in self.phases if p.seeded}
            if self.headline not in names and not (sep and seed.isdigit() and base in seeded):
                raise ValueError(f"eval.headline={self.headline!r}: not a phase of eval.phases ({sorted(names)}, "
                                 "or <seeded phase>_seed<n>)")
        return self


# ---------------------------------------------------------------------------------------------------- governance
def dataset_roles(params: Mapping[str, Any]) -> Callable[[str, Sequence[str] | None], set[str]]:
    """Role lookup from ``params['governance']['datasets']`` (the governance params are the role source).

    Returns ``roles(dataset, splits) -> set of roles``: every governance entry whose slug
    (:func:`rlvr.data.governance.dataset_slug`) is ``dataset`` and whose ``splits`` (``None`` = all) meet ``splits``
    (``None`` = any). Empty set for a dataset governance does not list."""
    from rlvr.data.governance import dataset_slug

    entries = (params.get("governance") or {}).get("datasets") or []

    def roles(dataset: str, splits: Sequence[str] | None = None) -> set[str]:
        out: set[str] = set()
        for e in entries:
            if dataset_slug(e["name"]) != dataset:
                continue
            es = e.get("splits")
            if splits is None or es is None or set(es) & set(splits):
                out.add(e.get("role", "test"))
        return out

    return roles


def _dataset_refs(section: Any, where: str) -> list[tuple[str, str, list[str] | None]]:
    """(location, dataset, splits) references found in one params section: ``datasets`` lists of ``{name, splits}``
    and ``"<dataset>/<split>"`` strings under keys ending in ``_sets`` or ``verl_*``."""
    out: list[tuple[str, str, list[str] | None]] = []
    if isinstance(section, Mapping):
        for key, val in section.items():
            loc = f"{where}.{key}"
            if key == "datasets" and isinstance(val, list):
                for i, d in enumerate(val):
                    if isinstance(d, Mapping) and "name" in d:
                        out.append((f"{loc}[{i}]", str(d["name"]), d.get("splits")))
            elif (key.endswith("_sets") or key.startswith("verl_")) and isinstance(val, list):
                for i, ref in enumerate(val):
                    if isinstance(ref, str):
                        ds, _, split = ref.partition("/")
                        out.append((f"{loc}[{i}]", ds, [split] if split else None))
            else:
                out.extend(_dataset_refs(val, loc))
    return out


def check_tuning_stages(params: Mapping[str, Any], tuning_stages: Sequence[str]) -> None:
    """Raise :class:`ConfigError` if a tuning stage's params section references a test-role dataset.

    ``params``: the whole parsed ``params.yaml``. Only the final ``eval`` stage may score Test sets (issue 7); a
    tuning stage (used for selection: baseline/train/sft/dpo/grpo/repair) seeing them would leak the test set."""
    roles = dataset_roles(params)
    bad = [f"{loc} -> {ds}{'' if splits is None else '/' + ','.join(splits)}"
           for stage in tuning_stages for loc, ds, splits in _dataset_refs(params.get(stage) or {}, stage)
           if "test" in roles(ds, splits)]
    if bad:
        raise ConfigError("test-role datasets (governance.datasets role: test) configured in tuning stages "
                          f"(eval.tuning_stages); only the eval stage may score them: {'; '.join(bad)}")


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


# ---------------------------------------------------------------------------------------------------- resumable eval
def _load_journal(path: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if path.is_file():
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                try:
                    r = json.loads(line)
                    rows[r["key"]] = r
                except (json.JSONDecodeError, KeyError, TypeError):
                    log.warning("%s:%d: torn/unreadable journal row ignored", path, lineno)
    return rows


def evaluate_resumable(
    problems: Sequence[Problem],
    generator: Generator,
    judge: Any,
    sampling: SamplingParams,
    n: int,
    model_tag: str,
    journal: str | Path,
    judge_version: str,
    prompt_fn: Callable[[Problem], Prompt] | None = None,
    chunk_tasks: int = 32,
) -> list[dict[str, Any]]:
    """Judged rows (one per (task, sample), task order then sample index) for ``problems``, resumable (module doc).

    ``model_tag``: model id + hash (part of every key). ``journal``: append-only JSONL cache. ``judge`` has
    ``judge_many``. Raises ``ValueError`` on duplicate problem ids or a generator returning the wrong count."""
    from rlvr.data.prompts import build_messages

    prompt_fn = prompt_fn or build_messages
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError("evaluate_resumable: duplicate problem ids")
    journal = Path(journal)
    journal.parent.mkdir(parents=True, exist_ok=True)
    done = _load_journal(journal)
    prompts = [prompt_fn(p) for p in problems]
    keys = [[sample_key(p, pr, model_tag, sampling, i) for i in range(n)] for p, pr in zip(problems, prompts,
                                                                                          strict=True)]
    todo = [t for t in range(len(problems))
            if not all(k in done and done[k].get("judge_version") == judge_version for k in keys[t])]
    log.info("%d/%d tasks to do (%d resumed)", len(todo), len(problems), len(problems) - len(todo))
    with journal.open("a", encoding="utf-8") as fh:
        for s in range(0, len(todo), chunk_tasks):
            chunk = todo[s : s + chunk_tasks]
            need_gen = [t for t in chunk if not all(k in done for k in keys[t])]
            comps = {}
            if need_gen:
                out = generator.generate([prompts[t] for t in need_gen], n, sampling, ids=[ids[t] for t in need_gen])
                for t, cs in zip(need_gen, out, strict=True):
                    if len(cs) != n:
                        raise ValueError(f"generator returned {len(cs)} completions for {ids[t]}, expected {n}")
                    comps[t] = [(c.text, c.n_tokens, c.finish_reason) for c in cs]
            new: list[dict[str, Any]] = []
            for t in chunk:
                p = problems[t]
                for i, key in enumerate(keys[t]):
                    if t in comps:
                        text, n_tok, reason = comps[t][i]
                    else:
                        o = done[key]
                        text, n_tok, reason = o["completion"], o["n_tokens"], o["finish_reason"]
                    new.append({"key": key, "task_id": p.id, "source": p.source, "sample_index": i,
                                "model": model_tag, "completion": text, "finish_reason": reason, "n_tokens": n_tok,
                                "code": extract_code(text, p), "judge_version": judge_version})
            by_id = {problems[t].id: problems[t] for t in chunk}
            to_judge = [r for r in new if r["code"] is not None]
            results = judge.judge_many([(by_id[r["task_id"]], r["code"]) for r in to_judge]) if to_judge else []
            for r, res in zip(to_judge, results, strict=True):
                r.update(verdict=res.verdict, passed=res.passed, total=res.total, pass_ratio=res.pass_ratio,
                         judge_s=res.judge_s, message=first_failure_message(res))
                r.update(group_statuses(by_id[r["task_id"]], res))  # EvalPlus base/plus columns
            for r in new:
                if r["code"] is None:
                    r.update(verdict="syntax_error", passed=0, total=len(by_id[r["task_id"]].tests), pass_ratio=0.0,
                             judge_s=0.0, message=NO_CODE_MESSAGE)
                    r.update(group_statuses(by_id[r["task_id"]], None))
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
                done[r["key"]] = r
            fh.flush()
            os.fsync(fh.fileno())
    return [done[k] for ks_ in keys for k in ks_]


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
def discover_phases(specs: Sequence[PhaseSpec], root: str | Path = ".") -> tuple[list[tuple[str, Path]], list[str]]:
    """``([(phase name, model folder)], [names not run])``: a phase runs when its folder holds ``config.json`` or
    ``model.json``; seeded specs expand to ``<name>_seed<n>`` over ``<model>/seed-<n>`` folders (numeric order)."""
    root = Path(root)
    found: list[tuple[str, Path]] = []
    missing: list[str] = []

    def ok(d: Path) -> bool:
        return (d / "config.json").is_file() or (d / "model.json").is_file()

    for spec in specs:
        d = root / spec.model
        if spec.seeded:
            seeds = sorted((int(c.name[5:]), c) for c in d.glob("seed-*") if c.name[5:].isdigit() and ok(c))
            found.extend((f"{spec.name}_seed{s}", c) for s, c in seeds)
            if not seeds:
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
    """Score every existing phase; write ``metrics/eval_<phase>.json``, ``<out_dir>/<phase>/{per_task,samples,
    journal}/`` and the summary ``metrics/eval.json`` (returned). ``params``: the whole ``params.yaml`` (roles and the
    tuning-stage check; :func:`check_tuning_stages` runs first). ``make_gen(model_dir)``: the generator of a phase.
    Raises ``ConfigError`` (test set in a tuning stage) or ``FileNotFoundError`` (dataset file missing)."""
    params = params or {}
    check_tuning_stages(params, cfg.tuning_stages)
    roles = dataset_roles(params)
    from rlvr.data.prompts import build_messages
    from rlvr.judge import JUDGE_VERSION

    template_sha = _json_sha(inspect_source(build_messages))
    datasets: dict[str, tuple[EvalDataset, list[Problem]]] = {}
    for sel in cfg.datasets:
        path = Path(problems_dir) / f"{sel.name}.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: eval dataset {sel.name!r} not found (add it to governance.datasets)")
        ps = read_problems(path)
        if sel.splits is not None:
            ps = [p for p in ps if p.split in sel.splits]
        datasets[sel.name] = (sel, ps[: sel.limit] if sel.limit else ps)
    phases, not_run = discover_phases(cfg.phases, root)
    judge_info = {"version": getattr(judge, "version", None) or JUDGE_VERSION,
                  "workers": getattr(judge, "workers", None),
                  "output_limit_mb": getattr(judge, "output_limit_mb", None),
                  "max_timeouts": getattr(judge, "max_timeouts", None)}
    libs = library_versions()
    summary: dict[str, Any] = {"phases": {}, "not_run": not_run}
    for name, model_dir in phases:
        mh = model_hash(model_dir)
        tag = tag_of(mh)
        gen = _LazyGenerator(make_gen, model_dir)
        report: dict[str, Any] = {}
        pdir = Path(out_dir) / name
        for ds, (sel, ps) in datasets.items():
            log.info("eval %s / %s: %d problems", name, ds, len(ps))
            g_rows = evaluate_resumable(ps, gen, judge, cfg.greedy, 1, tag, pdir / "journal" / f"{ds}.greedy.jsonl",
                                        judge_info["version"], chunk_tasks=cfg.chunk_tasks)
            m = compute_metrics(g_rows, ks=[1], greedy=True)
            first = {r["task_id"]: r["verdict"] for r in g_rows}
            k_rows = None
            if sel.k:
                k_rows = evaluate_resumable(ps, gen, judge, cfg.sampling, cfg.n, tag,
                                            pdir / "journal" / f"{ds}.k.jsonl", judge_info["version"],
                                            chunk_tasks=cfg.chunk_tasks)
                mk = compute_metrics(k_rows, ks=cfg.ks, greedy=False)
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
            atomic_write_json(pdir / "per_task" / f"{ds}.json", per_task)
            atomic_write_jsonl(pdir / "samples" / f"{ds}.greedy.jsonl", g_rows)
            if k_rows is not None:
                atomic_write_jsonl(pdir / "samples" / f"{ds}.k.jsonl", k_rows)
        report["protocol"] = {
            "phase": name, "model": mh, "backend": cfg.backend, "prompt_template_sha256": template_sha,
            "greedy": cfg.greedy.model_dump(mode="json"), "sampling": cfg.sampling.model_dump(mode="json"),
            "n": cfg.n, "ks": list(cfg.ks), "budget_tokens": cfg.budget_tokens, "judge": judge_info,
            "libraries": libs, "bootstrap": {"B": cfg.bootstrap, "alpha": cfg.alpha, "seed": cfg.seed},
        }
        atomic_write_json(Path(metrics_dir) / f"eval_{name}.json", report)
        summary["phases"][name] = {ds: {k: m.get(k) for k in ("role", "accepted@1", *[f"pass@{k}" for k in cfg.ks])
                                        if k in m} | {"ci": m["ci"]} for ds, m in report.items() if ds != "protocol"}
    summary["seeds"] = summarise_phases(summary["phases"], cfg.ks)
    if cfg.headline is not None:
        summary["headline"] = headline_block(summary, cfg.headline, cfg.ks)
    atomic_write_json(Path(metrics_dir) / "eval.json", summary)
    return summary


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

    def generate(self, prompts: Sequence[Prompt], n: int, sampling: SamplingParams,
                 ids: Sequence[str] | None = None) -> list[Any]:
        if self._gen is None:
            self._gen = self._factory(self._model_dir)
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


def load_params(path: str | Path) -> dict[str, Any]:
    """The whole ``params.yaml`` as a dict (for roles and the tuning-stage check)."""
    return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
