"""Post-training checks of the local (TRL) engine: a quick greedy accepted@1 (:func:`evaluate_accepted`) and the
baseline's protocol run on a trained model (:func:`stage_eval`, ``metrics/eval_<stage>/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr.data.prompts import build_messages
from rlvr.data.schema import Problem

__all__ = ["evaluate_accepted", "judge_completions", "stage_eval"]


def evaluate_accepted(
    model_dir: str | Path,
    problems: Sequence[Problem],
    judge: Any,
    max_new_tokens: int = 64,
    batch_size: int = 32,
) -> dict[str, Any]:
    """Quick greedy check of a trained model: accepted@1 and mean pass_ratio over ``problems`` (one greedy sample).

    This is the stage's own learning signal (also per ``meta['template']`` when present); the full protocol
    (pass@k, CIs, QA logs) is the ``eval`` stage's job. Programs are extracted with
    :func:`rlvr.reward.extract.program_for` and judged with ``judge.judge_many``. Returns
    ``{"accepted@1", "pass_ratio", "n", "by_template": {...}}``."""
    from rlvr.generate import SamplingParams, make_generator

    if not problems:
        return {"accepted@1": 0.0, "pass_ratio": 0.0, "n": 0}
    gen = make_generator("hf", model=str(model_dir), batch_size=batch_size)
    outs = gen.generate([build_messages(p) for p in problems], 1, SamplingParams(max_new_tokens=max_new_tokens))
    results = judge_completions(judge, problems, [o[0].text for o in outs])
    acc = [r[0] for r in results]
    pr = [r[1] for r in results]
    by: dict[str, list[bool]] = {}
    for p, a in zip(problems, acc, strict=True):
        by.setdefault(str(p.meta.get("template", p.source)), []).append(a)
    return {
        "accepted@1": sum(acc) / len(acc),
        "pass_ratio": sum(pr) / len(pr),
        "n": len(acc),
        "by_template": {k: sum(v) / len(v) for k, v in sorted(by.items())},
    }


def judge_completions(judge: Any, problems: Sequence[Problem], texts: Sequence[str]) -> list[tuple[bool, float]]:
    """Judge completion texts (one per problem, aligned) → ``(accepted, pass_ratio)`` each. A completion without
    extractable code is ``(False, 0.0)`` and never reaches the judge."""
    from rlvr.reward.extract import program_for

    progs = [program_for(p, t) for p, t in zip(problems, texts, strict=True)]
    idx = [i for i, c in enumerate(progs) if c is not None]
    out: list[tuple[bool, float]] = [(False, 0.0)] * len(progs)
    if idx:
        res = judge.judge_many([(problems[i], progs[i]) for i in idx])
        for i, r in zip(idx, res, strict=True):
            out[i] = (r.verdict == "accepted", float(r.pass_ratio))
    return out


def stage_eval(
    model_dir: str | Path,
    judge: Any,
    params_path: str | Path = "params.yaml",
    problems_dir: str | Path = "data/governance/problems",
    out_dir: str | Path = "data/eval",
) -> dict[str, Any]:
    """The baseline's evaluation of a trained model: the ``baseline`` params section (datasets, sampling, n, ks,
    backend) with ``model`` replaced by ``model_dir``, run by :func:`rlvr.eval.baseline.run_baseline`.

    Returns ``{dataset: metrics, "protocol": {...}}`` with exactly the keys of the baseline's report
    (``metrics/baseline/``), so ``dvc metrics diff`` lines up baseline vs sft vs dpo vs grpo. Samples, per-task arrays
    and QA logs go under ``out_dir`` (``data/eval/<stage>``). Stored samples of an earlier run are deleted first, so
    each stage run is evaluated afresh (rows are keyed by the model's content hash in any case,
    :mod:`rlvr.eval.provenance`).
    Raises :class:`rlvr.config.ConfigError` when the section is missing or invalid, ``FileNotFoundError`` naming a
    missing dataset file."""
    import shutil

    from rlvr.config import load_section
    from rlvr.eval.baseline import BaselineParams, run_baseline

    shutil.rmtree(Path(out_dir) / "samples", ignore_errors=True)
    cfg = load_section("baseline", BaselineParams, params_path).model_copy(update={"model": str(model_dir)})
    return run_baseline(cfg, judge, problems_dir, out_dir)
