"""Collect the GPU suite's results into one JSON file (``bench/gpu/results.json``), and a Markdown table from it.

Reads, in the prepared folder ``--repo``: the part rows ``<res>/parts.jsonl`` written by ``run_gpu.sh`` (``part``,
``rc``, ``wall_s``, ``peak_gpu_mib`` = the highest ``nvidia-smi`` ``memory.used`` sample of the part, MiB, all
processes); the stage metrics (``metrics/*.json``: baseline ``avg_generated_tokens`` × ``n_samples`` over
``gen_wall_s``, generation only; training ``steps``); the
verl file-logger lines (``.cache/train/<stage>/…/logs/attempt-*.jsonl``: per step ``timing_s/gen`` (rollout
generation), ``timing_s/reward`` (reward outside the agent loop), ``timing_s/update_actor`` (training),
``timing_s/step`` (the whole step, seconds), ``response_length/mean`` (tokens)), the rollout dumps
(``rollouts/<step>.jsonl``: samples per step) and the judge log (``judge/*.jsonl``, :mod:`rlvr.reward.judge_log`:
per training sample ``judge_s``, the judge's own seconds for that sample, assigned to steps). ``judge_s_per_step_s`` of
a step = (sum of the step's ``judge_s``) / ``timing_s/step``: summed judge seconds per step-second (it can exceed 1 when
samples are judged in parallel); ``judge_wall_share`` = ``judge_wall_s`` (wall seconds during which at least one
sample was being judged, :func:`rlvr.reward.judge_log.judge_seconds_per_step`) / ``timing_s/step``: the judge's
wall-time share of the step. Generated tokens/s of a verl step = samples × ``response_length/mean`` /
``timing_s/gen``.

    python bench/gpu/collect.py --res /root/gpu_results --repo . --out results.json    # on the GPU machine
    python bench/gpu/collect.py --table bench/gpu/results.json                         # Markdown table, anywhere
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from rlvr.io import read_appended_jsonl
from rlvr.layout import read_curves, read_metrics
from rlvr.report.collect import repair_report

LIBS = ("torch", "vllm", "verl", "ray", "transformers", "tokenizers", "tensordict", "flash-attn", "flashinfer-python")
STEP_KEYS = {"generation_s": "timing_s/gen", "reward_s": "timing_s/reward", "training_s": "timing_s/update_actor",
             "old_log_prob_s": "timing_s/old_log_prob", "ref_s": "timing_s/ref", "step_s": "timing_s/step"}


def environment() -> dict[str, Any]:
    """Device name, driver, Python and library versions (``None`` for a library that is not installed)."""
    env: dict[str, Any] = {"python": platform.python_version()}
    try:
        q = "name,driver_version,memory.total"
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                             text=True, check=True).stdout.strip().splitlines()
        env["device"], env["driver"], env["gpu_memory"] = (x.strip() for x in out[0].split(","))
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        env["device"] = None
    versions = {}
    for lib in LIBS:
        try:
            versions[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            versions[lib] = None
    env["versions"] = versions
    return env


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [rec for _, rec in read_appended_jsonl(path)]  # logs of killed writers: a torn last line is skipped


def _curves_judge(curves: Path | None) -> dict[int, dict[str, float]]:
    """``{step: {"judge_s", "judged"}}`` from a stage's curves TSV joined with its cost mirror
    (``metrics/cost/<same path>``, where the stage writes ``judge_s``: :func:`rlvr.layout.read_curves`); empty cells and
    a missing file give ``{}``."""
    if curves is None or not curves.is_file():
        return {}
    _, rows = read_curves(curves)
    out = {}
    for row in rows:
        if row.get("judge_s") and row.get("judged"):
            out[int(row["step"])] = {"judge_s": float(row["judge_s"]), "judged": int(row["judged"])}
    return out


def verl_steps(run_dir: Path, curves: Path | None = None) -> list[dict[str, Any]]:
    """Per-step split of a verl run folder (module doc): one dict per training step, in step order. Judge seconds
    come from the stage's curves TSV ``curves`` when given (computed by the stage from the judge log with the rollout
    dumps' exact mtimes), else from the judge log here (an archive keeps mtimes to the second only)."""
    from rlvr.reward import judge_log  # the suite runs with the repo on PYTHONPATH

    logged = judge_log.judge_seconds_per_step(judge_log.read_judge_log(run_dir / "judge"),
                                              judge_log.dump_times(run_dir / "rollouts"))
    judged = _curves_judge(curves) or logged
    by_step: dict[int, dict[str, Any]] = {}
    for log in sorted((run_dir / "logs").glob("attempt-*.jsonl")):
        for rec in _jsonl(log):
            by_step.setdefault(int(rec["step"]), {}).update(rec.get("data", {}))
    rows = []
    for step, data in sorted(by_step.items()):
        if "timing_s/step" not in data:
            continue  # a validation-only line
        row: dict[str, Any] = {"step": step, **{k: data.get(v) for k, v in STEP_KEYS.items()},
                               "response_length": data.get("response_length/mean")}
        dump = run_dir / "rollouts" / f"{step}.jsonl"
        samples = _jsonl(dump) if dump.is_file() else []
        judge = judged.get(step)
        row["samples"] = len(samples) or None
        row["judged"] = judge["judged"] if judge else None
        row["judge_s"] = round(judge["judge_s"], 3) if judge else None
        row["judge_s_per_step_s"] = round(judge["judge_s"] / row["step_s"], 3) if judge and row["step_s"] else None
        wall = (logged.get(step) or {}).get("judge_wall_s")
        row["judge_wall_s"] = round(wall, 3) if wall is not None else None
        row["judge_wall_share"] = round(wall / row["step_s"], 3) if wall is not None and row["step_s"] else None
        if samples and row["generation_s"] and row["response_length"] is not None:
            row["gen_tokens_per_s"] = round(len(samples) * row["response_length"] / row["generation_s"], 1)
        row["reward_mean"] = data.get("critic/score/mean")
        row["kl"] = data.get("actor/kl_loss")
        row["entropy"] = data.get("actor/entropy")
        row["num_turns"] = data.get("num_turns/mean")
        rows.append(row)
    return rows


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    xs = [r[key] for r in rows if isinstance(r.get(key), int | float)]
    return round(statistics.fmean(xs), 3) if xs else None


def _run_dirs(repo: Path, stage: str) -> list[Path]:
    base = repo / ".cache" / "train" / stage
    return sorted({p.parent.parent for p in base.glob("**/logs/attempt-*.jsonl")}, key=lambda p: p.stat().st_mtime)


def _ckpt_run_dir(repo: Path, checkpoint: Any) -> Path | None:
    """The run folder of a stage's ``checkpoint`` metric (``…/.cache/train/<stage>/…/<hash>/checkpoints/…``), moved
    under ``repo`` (the metrics may name the GPU machine's absolute path)."""
    if not isinstance(checkpoint, str) or "/.cache/train/" not in checkpoint or "/checkpoints/" not in checkpoint:
        return None
    rel = ".cache/train/" + checkpoint.split("/.cache/train/", 1)[1].split("/checkpoints/", 1)[0]
    return repo / rel


def part_result(repo: Path, row: dict[str, Any]) -> dict[str, Any]:
    """One part's entry: the run row plus what its metrics and logs say."""
    name = row["part"]
    name = name[len("dvc_"):] if name.startswith("dvc_") else name  # run_gpu.sh dvc:<stage> parts (dvc repro -s)
    out: dict[str, Any] = {"ran": row["rc"] == 0, "rc": row["rc"], "wall_s": row["wall_s"],
                           "peak_gpu_mib": row.get("peak_gpu_mib")}
    metrics_file = {"baseline_hf": "baseline_hf", "baseline_vllm": "baseline_vllm",
                    "baseline_openai": "baseline_openai", "baseline": "baseline", "dpo": "dpo",
                    "big_baseline": "big_baseline_vllm", "sft": "sft",
                    "grpo": "grpo/seed-1", "big_grpo": "big_grpo/seed-1", "repair": "repair",
                    "repair_tool": "repair_tool", "big_sft": "big_sft", "big_openai": "big_baseline_openai",
                    "big_repair": "big_repair"}.get(name)
    m = repo / "metrics" / f"{metrics_file}.json" if metrics_file else None
    # scores + cost + provenance parts, a file or a folder of one file per dataset (rlvr.layout.read_metrics)
    metrics = repair_report(read_metrics(m)) if m is not None else None
    if metrics:
        if "baseline" in metrics_file:
            ds = {k: v for k, v in metrics.items() if k != "protocol"}
            tok = sum((v.get("avg_generated_tokens") or 0) * (v.get("n_samples") or 0) for v in ds.values())
            wall = sum(v.get("gen_wall_s") or 0 for v in ds.values())
            out.update(keys=sorted(next(iter(ds.values())).keys()) if ds else [], datasets=sorted(ds),
                       accepted_at_1={k: v.get("accepted@1") for k, v in ds.items()}, gen_tokens=tok,
                       gen_wall_s=round(wall, 3), gen_tokens_per_s=round(tok / wall, 1) if wall else None)
        else:
            training = metrics.get("training", metrics)
            out.update(steps=training.get("steps"), metrics={k: v for k, v in training.items()
                                                             if isinstance(v, int | float | str | None)})
    stage = {"grpo": "grpo", "big_grpo": "grpo", "repair": "repair", "repair_tool": "repair", "big_repair": "repair",
             "sft": "sft", "big_sft": "sft"}.get(name)
    if stage in ("grpo", "repair"):
        own = _ckpt_run_dir(repo, (out.get("metrics") or {}).get("checkpoint"))
        dirs = [own] if own is not None and own.is_dir() else _run_dirs(repo, stage)
        curves = repo / "metrics" / (f"{metrics_file}.tsv" if stage == "grpo" else f"{metrics_file}/curves.tsv")
        if dirs:
            steps = verl_steps(dirs[-1], curves)
            out["per_step"] = steps
            out["mean_step"] = {k: _mean(steps, k) for k in (*STEP_KEYS, "judge_s", "judge_s_per_step_s",
                                                               "judge_wall_s", "judge_wall_share",
                                                               "gen_tokens_per_s", "num_turns")}
    return out


def collect(res: Path, repo: Path) -> dict[str, Any]:
    """The results dict: ``environment`` and ``parts`` (the last row of each part wins)."""
    rows = {r["part"]: r for r in _jsonl(res / "parts.jsonl")} if (res / "parts.jsonl").is_file() else {}
    parts = {}
    for name, row in rows.items():
        try:
            parts[name] = part_result(repo, row)
        except (OSError, ValueError, KeyError, TypeError) as exc:  # a broken part must not hide the others
            parts[name] = {"ran": row["rc"] == 0, "rc": row["rc"], "wall_s": row["wall_s"],
                           "collect_error": repr(exc)}
    return {"environment": environment(), "parts": parts}


def table(results: dict[str, Any]) -> str:
    """Markdown table of ``results`` (one row per part)."""
    head = ("| part | ran | steps | wall s | gen s/step | reward s/step | train s/step | judge s / step s | "
            "judge wall share | gen tok/s | peak GPU MiB |\n|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for name, p in results["parts"].items():
        ms = p.get("mean_step") or {}
        tok = ms.get("gen_tokens_per_s") or p.get("gen_tokens_per_s")
        lines.append(f"| {name} | {'yes' if p.get('ran') else 'no (rc ' + str(p.get('rc')) + ')'} | "
                     f"{p.get('steps', '')} | {p.get('wall_s')} | {ms.get('generation_s', '')} | "
                     f"{ms.get('reward_s', '')} | {ms.get('training_s', '')} | {ms.get('judge_s_per_step_s', '')} | "
                     f"{ms.get('judge_wall_share', '')} | "
                     f"{tok or ''} | {p.get('peak_gpu_mib', '')} |")
    return "\n".join(lines)


def main() -> None:
    """CLI (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--res", type=Path, default=Path("/root/gpu_results"))
    ap.add_argument("--repo", type=Path, default=Path("."))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--env-only", action="store_true", help="print the environment and import the GPU libraries")
    ap.add_argument("--table", type=Path, help="print the Markdown table of this results.json")
    a = ap.parse_args()
    if a.table:
        print(table(json.loads(a.table.read_text(encoding="utf-8"))))
        return
    if a.env_only:
        print(json.dumps(environment(), indent=1))
        import ray  # noqa: F401
        import verl  # noqa: F401
        import vllm  # noqa: F401
        from vllm import LLM  # noqa: F401

        from rlvr.judge.client import get_judge
        from rlvr.judge.core import Judge  # noqa: F401

        j = get_judge()
        from rlvr.data.schema import read_problems
        p = next(iter(read_problems(Path("data/governance/problems/synthetic.jsonl"))))
        print("judge:", j.judge(p, p.solutions[0]))
        j.close()
        return
    results = collect(a.res, a.repo)
    text = json.dumps(results, indent=1)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n", encoding="utf-8")
    print(table(results))


if __name__ == "__main__":
    main()
