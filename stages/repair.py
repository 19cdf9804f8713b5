"""Stage ``repair``: Phase 4, multi-turn repair with judge feedback: train the loop, evaluate it before and after.

Reads ``params.yaml``: section ``repair`` (:class:`rlvr.repair.eval.RepairParams`: environment, evaluation protocol
and ``repair.train``), ``train`` (train/eval sets, token caps, logging), the top-level ``engine`` (and ``verl``
under the verl engine), ``reward_shaping.max_timeouts`` (the timeout rule of the judge that plays and scores the
training episodes, :mod:`rlvr.reward.timeouts`; the evaluations keep the judge's default), ``synthetic`` when a
dataset is ``synthetic``; the governed problems; the input model
``--model`` (default ``repair.model``, else the last trained one, :func:`rlvr.repair.eval.default_model`).

1. **Train** (engine ``local``): unrolled multi-turn GRPO on the input policy's own repair episodes on the TRAIN
   problems (:mod:`rlvr.train.local.repair`, which says why not TRL's tool-call ``environment_factory``); reward =
   hidden-test verdict of the next attempt minus ``turn_penalty`` per feedback turn. The training rows: the
   ``repair.train.train_sets`` problems with ``>= repair.train.min_hidden_tests`` hidden tests, in GRPO's
   ``train.rl_share`` subset (:func:`rlvr.train.overlap.apply_rl_share`: the problems SFT/DPO left out).
   Checkpoints under ``$RLVR_CACHE_DIR/train/repair/<key>`` (resumed). Publishes ``models/repair/``; curves
   ``metrics/repair/curves.tsv``. Engine ``verl``: writes the agent-loop config (the repair protocol in verl's
   ``tool_agent`` loop, :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`), repair parquet, overrides and command
   and launches ``verl.trainer.main_ppo`` (:func:`rlvr.repair.verl_run.run_repair_verl`).
   The ``samples`` backend (a scripted policy) has nothing to train: evaluation only, no ``before``.
2. **Evaluate** the repair protocol (:mod:`rlvr.repair.protocol`, the one training runs;
   :func:`rlvr.repair.eval.run_repair_stage`) on the input model (*before*) and
   on ``models/repair`` (*after*).

Writes ``metrics/repair/eval/after/<dataset>.json`` (after-training metrics: recovery_rate, final_accepted,
accepted@1 scores; accepted_at_turn, mean_turns, ... in provenance; ``training`` and ``protocol`` (with
``input_model``) in provenance beside them) and ``metrics/repair/eval/before/<dataset>.json`` (the input model's),
one scores file per dataset, so ``dvc metrics show metrics/repair/eval`` prints a row per dataset before and after;
``rlvr.report.collect.repair_report(rlvr.layout.read_metrics("metrics/repair.json"))`` reads them back as
``{dataset: after, "before": {dataset: ...}, "training": {...}, "protocol": {...}}``; traces
``data/repair/traces/<dataset>.jsonl`` (after) and ``data/repair/before/traces/<dataset>.jsonl``;
``data/repair/params.resolved.json``.

    python stages/repair.py [--params params.yaml]
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rlvr.config.profiles import require_scale_profile
from rlvr.data.manifests import min_tests_filter
from rlvr.data.synthetic import SyntheticParams
from rlvr.eval.tracking import log_metrics
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.repair.env import split_tests
from rlvr.repair.eval import RepairParams, default_model, run_repair_stage, select_repair_problems
from rlvr.reward.timeouts import load_max_timeouts, reward_judge
from rlvr.stage import Params, Result, option, stage
from rlvr.train.engine import load_engine
from rlvr.train.local.common import TrainCommon, load_problem_sets
from rlvr.train.overlap import apply_rl_share


def _shaping(params: Params) -> Any:
    """``reward_shaping`` (defaults where params.yaml has none): the sparse reward's ``sandbox_error`` policy."""
    from rlvr.reward.modes import RewardShaping

    return RewardShaping.model_validate(params.raw().get("reward_shaping") or {})


def _train(params: Params, cfg: RepairParams, problems_dir: Path, model_in: str, judge: Any, out_model: Path,
           curves: Path) -> dict[str, Any]:
    """Repair training on the configured engine (local: unrolled multi-turn GRPO; verl: the tool_agent loop)."""
    require_scale_profile(params.raw(), params.path)
    common = params.section("train", TrainCommon)
    engine = load_engine(params.path)
    max_timeouts = load_max_timeouts(params.path)  # the training judge's timeout rule (reward_shaping)
    train, train_set = min_tests_filter(load_problem_sets(problems_dir, cfg.train.train_sets or common.train_sets),
                                        cfg.train.min_hidden_tests,
                                        lambda p: len(split_tests(p, cfg.visible_tests)[1].tests))
    if not train:
        from rlvr.config import ConfigError

        raise ConfigError(f"repair.train.min_hidden_tests={cfg.train.min_hidden_tests}: no training problem has that "
                          f"many hidden tests (of {train_set['problems']})")
    # GRPO's subset (train.rl_share, by problem id): SFT fitted the reference of every problem outside it, so a
    # repair episode there would mostly pass on the first turn (no feedback turn, nothing to learn)
    train, train_set["rl_share"] = apply_rl_share(train, common.rl_share)
    if engine == "verl":
        from rlvr.config import ConfigError
        from rlvr.repair.verl_run import run_repair_verl

        if cfg.train.warmup_epochs > 0:  # the local engine's supervised warm start has no verl counterpart
            raise ConfigError(f"repair.train.warmup_epochs={cfg.train.warmup_epochs}: the warm start exists only in "
                              "the local engine; set it to 0 under engine verl")
        if cfg.train.max_steps == 0:  # no training, as in the local engine: the input model is published unchanged
            from rlvr.train.local.repair import publish_unchanged
            from rlvr.train.verl.logs import GRPO_COLUMNS, write_tsv

            write_tsv(curves, [], GRPO_COLUMNS)  # no step: the declared curves (and their cost mirror), header only
            return {"engine": engine, "train_set": train_set, **publish_unchanged(model_in, out_model)}
        # the workers judge with their own judge (in-process, the node's, or RLVR_SANDBOX_URL's): one that cannot
        # apply reward_shaping.max_timeouts (a judge server) fails here, before verl starts
        reward_judge(judge, max_timeouts)
        training = run_repair_verl(cfg, params.path, model_in, train,
                                   load_problem_sets(problems_dir, common.eval_sets), out_model, curves,
                                   reward_shaping=params.raw().get("reward_shaping"))
    else:
        from rlvr.train.local.repair import run_repair_training

        training = run_repair_training(cfg.train, cfg.env(), common, model_in, train, judge, out_model, curves,
                                       max_timeouts=max_timeouts, shaping=_shaping(params))
    return {"engine": engine, "train_set": train_set, **training}


def _echo(report: dict[str, Any]) -> str:
    lines = []
    for name, m in report.items():
        if name not in ("protocol", "before", "training"):
            b = report.get("before", {}).get(name, m)
            lines.append(f"{name}: recovery_rate {b['recovery_rate']} -> {m['recovery_rate']} "
                         f"(recovered {b['recovered']}/{b['first_turn_failures']} -> "
                         f"{m['recovered']}/{m['first_turn_failures']}), accepted_at_turn {b['accepted_at_turn']} -> "
                         f"{m['accepted_at_turn']}")
    return "\n".join(lines)


@stage(option("--problems-dir", default="data/governance/problems", path=True),
       option("--model", "model_dir", help="input model (default: repair.model, else the last trained)"),
       option("--out-model", default="models/repair", path=True),
       option("--out-dir", default="data/repair", path=True),
       option("--metrics", "metrics_path", default="metrics/repair/eval", path=True,
              help="folder: after/ and before/, a scores file per dataset each"),
       option("--curves", default="metrics/repair/curves.tsv", path=True))
def main(params: Params, problems_dir: Path, model_dir: str | None, out_model: Path, out_dir: Path,
         metrics_path: Path, curves: Path) -> Result:
    """Train the repair loop from the input model, then evaluate recovery before and after; write metrics."""
    t0 = time.perf_counter()
    cfg = params.section("repair", RepairParams)
    synthetic = params.section("synthetic", SyntheticParams) if "synthetic" in params.raw() else None
    model_in = model_dir or cfg.model or default_model()
    for sel in cfg.datasets:  # a misspelt dataset fails now, not after training
        select_repair_problems(problems_dir, sel, synthetic)
    with open_judge(params.path, get_judge) as judge:
        if cfg.backend == "samples":  # a scripted policy has no weights to train: evaluate only
            report = run_repair_stage(cfg, judge, problems_dir, out_dir, synthetic)
            before, training = None, {"skipped": True, "reason": "samples backend: no model to train"}
        else:
            training = _train(params, cfg, problems_dir, model_in, judge, out_model, curves)
            before = run_repair_stage(cfg.model_copy(update={"model": model_in}), judge, problems_dir,
                                      out_dir / "before", synthetic)
            report = run_repair_stage(cfg.model_copy(update={"model": str(out_model)}), judge, problems_dir,
                                      out_dir, synthetic)
            report["protocol"]["input_model"] = model_in
    if before is not None:
        report["before"] = {k: v for k, v in before.items() if k != "protocol"}
    report["training"] = {**training, "stage_wall_s": round(time.perf_counter() - t0, 1)}
    log_metrics(report, project=cfg.wandb_project, run_name="repair", job_type="repair",
                config=cfg.model_dump(mode="json"))
    folders = {metrics_path / "after": {k: v for k, v in report.items() if k != "before"}}
    if before is not None:
        folders[metrics_path / "before"] = report["before"]
    return Result(folders=folders, resolved={out_dir: cfg}, echo=_echo(report))


if __name__ == "__main__":
    main()
