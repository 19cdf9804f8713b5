"""Stage ``eval``: every phase's model (baseline, sft, dpo, grpo per seed, repair) on the Dev and Test sets under one
protocol (EVAL@1 greedy, EVAL@k pass@k, EVAL@budget; :mod:`rlvr.eval.final`). The only stage allowed to score Test.

Reads ``params.yaml`` sections ``eval`` (:class:`rlvr.eval.final.EvalParams`) and ``governance`` (dataset roles), the
governed problems and ``models/*``. Writes ``metrics/final/eval_<phase>/<dataset>.json`` (one scores file per dataset,
so ``dvc metrics show metrics/final/eval_<phase>`` prints a row per dataset; GRPO seeds: ``eval_grpo_seed<n>/``), the
summary (:func:`rlvr.eval.final.write_summary`: ``metrics/final/headline/<dataset>.json``, the phase named by
``eval.headline``; ``metrics/final/seeds/<phase>/{mean,std}/<dataset>.json``, mean ± std over seeds; phases not run
in the provenance-only ``metrics/final/eval.json``) and ``data/eval/final/<phase>/`` (per-task arrays,
samples, resumable journals). Re-running resumes from the journals; a re-run with nothing missing loads no model, so
``dvc exp run -S eval.headline=dpo`` only re-summarises.

    python stages/eval.py [--params params.yaml]
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from rlvr.eval.final import EvalParams, run_eval
from rlvr.eval.final_params import make_phase_generator
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.stage import Params, Result, option, stage


@stage(option("--problems-dir", default="data/governance/problems", path=True),
       option("--out-dir", default="data/eval/final", path=True),
       option("--metrics-dir", default="metrics/final", path=True))
def main(params: Params, problems_dir: Path, out_dir: Path, metrics_dir: Path) -> Result:
    """Score every phase's model that exists on disk; list the others as not run."""
    cfg = params.section("eval", EvalParams)

    with open_judge(params.path, get_judge) as judge:
        summary = run_eval(cfg, judge, partial(make_phase_generator, cfg), problems_dir, out_dir, metrics_dir,
                           params=params.raw())
    lines = [f"{phase}: " + ", ".join(f"{d}={m.get('accepted@1')}" for d, m in dsets.items())
             for phase, dsets in summary["phases"].items()]
    if summary["not_run"]:
        lines.append(f"not run: {', '.join(summary['not_run'])}")
    if summary.get("headline"):
        lines.append(f"headline ({summary['headline']['phase']}): " + ", ".join(
            f"{d}={m.get('accepted@1')}" for d, m in summary["headline"].items() if isinstance(m, dict)))
    return Result(resolved={out_dir: cfg}, echo="\n".join(lines))


if __name__ == "__main__":
    main()
