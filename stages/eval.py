"""Stage ``eval``: every phase's model (baseline, sft, dpo, grpo per seed, repair) on the Dev and Test sets under one
protocol (EVAL@1 greedy, EVAL@k pass@k, EVAL@budget; :mod:`rlvr.eval.final`). The only stage allowed to score Test.

Reads ``params.yaml`` sections ``eval`` (:class:`rlvr.eval.final.EvalParams`) and ``governance`` (dataset roles), the
governed problems and ``models/*``. Writes ``metrics/final/eval_<phase>.json`` (GRPO seeds:
``eval_grpo_seed<n>.json``), the summary ``metrics/final/eval.json`` (phases not run, CIs, mean ± std over seeds, the
``headline`` block of the phase named by ``eval.headline``) and ``data/eval/final/<phase>/`` (per-task arrays,
samples, resumable journals). Re-running resumes from the journals; a re-run with nothing missing loads no model, so
``dvc exp run -S eval.headline=dpo`` only re-summarises.

    python stages/eval.py [--params params.yaml]
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import click

from rlvr.config import dump_resolved, load_section
from rlvr.eval.final import EvalParams, load_params, run_eval
from rlvr.generate import make_generator
from rlvr.judge.client import get_judge


@click.command()
@click.option("--params", "params_path", default="params.yaml", show_default=True, type=click.Path(exists=True))
@click.option("--problems-dir", default="data/governance/problems", show_default=True, type=click.Path(path_type=Path))
@click.option("--out-dir", default="data/eval/final", show_default=True, type=click.Path(path_type=Path))
@click.option("--metrics-dir", default="metrics/final", show_default=True, type=click.Path(path_type=Path))
def main(params_path: str, problems_dir: Path, out_dir: Path, metrics_dir: Path) -> None:
    """Score every phase's model that exists on disk; list the others as not run."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    cfg = load_section("eval", EvalParams, params_path)

    def make_gen(model_dir: Path):
        if cfg.backend == "vllm":
            return make_generator("vllm", model=str(model_dir), seed=cfg.sampling.seed or 0)
        return make_generator("hf", model=str(model_dir), device=cfg.device, batch_size=cfg.batch_size,
                              num_threads=cfg.cpu_threads)

    judge = get_judge()
    try:
        summary = run_eval(cfg, judge, make_gen, problems_dir, out_dir, metrics_dir, params=load_params(params_path))
    finally:
        with contextlib.suppress(Exception):
            judge.close()
    dump_resolved(cfg, out_dir)
    for phase, dsets in summary["phases"].items():
        click.echo(f"{phase}: " + ", ".join(f"{d}={m.get('accepted@1')}" for d, m in dsets.items()))
    if summary["not_run"]:
        click.echo(f"not run: {', '.join(summary['not_run'])}")
    if summary.get("headline"):
        click.echo(f"headline ({summary['headline']['phase']}): " + ", ".join(
            f"{d}={m.get('accepted@1')}" for d, m in summary["headline"].items() if isinstance(m, dict)))


if __name__ == "__main__":
    main()
