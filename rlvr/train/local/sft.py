"""SFT on judge-verified reference solutions with TRL's ``SFTTrainer`` (local engine).

The SFT set is every reference solution (``Problem.solutions``, at most ``solutions_per_problem`` each) of the
training problems that the judge accepts — references are re-verified, never trusted (on the synthetic family they
all pass, but a broken template would show up here as ``sft_set.rejected``). Each becomes one conversational
prompt/completion row: the prompt is :func:`rlvr.data.prompts.build_messages`, the completion the program in one
```python block (:func:`rlvr.data.synthetic.completion_for`); the loss is on completion tokens only
(``SFTConfig.completion_only_loss``, TRL docs "SFT Trainer").

Run through the stage: ``python stages/sft.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from rlvr.data.schema import Problem
from rlvr.data.synthetic import completion_for
from rlvr.train.local.common import (
    OptimParams,
    TrainCommon,
    TsvCurves,
    evaluate_accepted,
    fit,
    lora_config,
    run_dir,
    set_seed,
    setup_tracking,
    sft_rows,
    trainer_kwargs,
)

__all__ = ["SFT_CURVES", "SFTParams", "build_sft_set", "run_sft"]

# TSV column → key TRL's SFTTrainer logs.
SFT_CURVES = {
    "loss": "loss",
    "learning_rate": "learning_rate",
    "grad_norm": "grad_norm",
    "mean_token_accuracy": "mean_token_accuracy",
    "entropy": "entropy",
    "num_tokens": "num_tokens",
}


class SFTParams(OptimParams):
    """``params.yaml`` section ``sft`` (optimiser fields: :class:`rlvr.train.local.common.OptimParams`).

    ``solutions_per_problem``: reference solutions per problem taken into the SFT set (before judging)."""

    solutions_per_problem: int = Field(1, gt=0)
    lr_scheduler_type: str = "cosine"  # verl sft_trainer's default; verl has only constant | cosine


def build_sft_set(
    problems: Sequence[Problem], judge: Any, solutions_per_problem: int = 1
) -> tuple[list[tuple[Problem, str]], dict[str, int]]:
    """Judge the reference solutions of ``problems``; return the accepted ``(problem, completion text)`` pairs and
    counts ``{"problems", "candidates", "accepted", "rejected", "problems_covered"}``.

    ``judge`` needs ``judge_many(list[(Problem, str)]) -> list[JudgeResult]``."""
    cands = [(p, s) for p in problems for s in p.solutions[:solutions_per_problem]]
    results = judge.judge_many(cands) if cands else []
    kept = [(p, completion_for(s)) for (p, s), r in zip(cands, results, strict=True) if r.verdict == "accepted"]
    stats = {
        "problems": len(problems),
        "candidates": len(cands),
        "accepted": len(kept),
        "rejected": len(cands) - len(kept),
        "problems_covered": len({p.id for p, _ in kept}),
    }
    return kept, stats


def run_sft(
    cfg: SFTParams,
    common: TrainCommon,
    model_dir: str | Path,
    train_problems: Sequence[Problem],
    eval_problems: Sequence[Problem],
    judge: Any,
    out_model_dir: str | Path,
    curves_path: str | Path,
    eval_base: bool = True,
) -> dict[str, Any]:
    """Train SFT from ``model_dir`` and publish the final model to ``out_model_dir``; returns the metrics dict.

    Checkpoints go to :func:`rlvr.train.local.common.run_dir` (resumed when present); per-step curves to
    ``curves_path`` (columns :data:`SFT_CURVES`). Metrics: ``sft_set`` counts, ``train_loss``, ``steps``,
    ``train_runtime_s`` (seconds), ``resumed_from_step`` (cost, as the seconds: it follows the local cache;
    :func:`rlvr.train.local.common.fit`), and when ``common.eval_max_new_tokens > 0`` the greedy
    ``dev`` accepted@1 of the trained model (and of the input model, ``dev_base``, when ``eval_base``).
    Raises ``ValueError`` when the judge accepts no reference solution."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    set_seed(cfg.seed, common.cpu_threads)
    pairs, stats = build_sft_set(train_problems, judge, cfg.solutions_per_problem)
    if not pairs:
        raise ValueError(f"sft: the judge accepted none of {stats['candidates']} reference solutions")
    rows = [{k: v for k, v in r.items() if k != "id"} for r in sft_rows(pairs)]
    ds = Dataset.from_list(rows)
    out = run_dir("sft", {"sft": cfg.model_dump(), "train": common.model_dump()}, model_dir,
                  problems=train_problems, rows=rows)
    report_to = setup_tracking("sft", common.report_to)
    args = SFTConfig(
        **trainer_kwargs(cfg, common, out, report_to),
        max_length=common.max_prompt_length + common.max_completion_length,
        completion_only_loss=True,
        packing=False,
    )
    curves = TsvCurves(curves_path, SFT_CURVES, mirror=Path(out) / "curves.tsv")
    _, fitted = fit(SFTTrainer, model_dir, args, ds, curves, out, out_model_dir, lora_config(cfg))
    metrics: dict[str, Any] = {"sft_set": stats, **fitted}
    if common.eval_max_new_tokens > 0 and eval_problems:
        if eval_base:
            metrics["dev_base"] = evaluate_accepted(model_dir, eval_problems, judge, common.eval_max_new_tokens)
        metrics["dev"] = evaluate_accepted(out_model_dir, eval_problems, judge, common.eval_max_new_tokens)
    return metrics
