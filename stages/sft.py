"""Stage ``sft``: supervised fine-tuning on judge-verified reference solutions.

Reads ``params.yaml``: the top-level ``engine`` (``local`` = TRL ``SFTTrainer``; ``verl`` = ``verl.trainer.sft_trainer``
via torchrun, section ``verl``), sections ``train`` (data sets, lengths, tracking), ``sft`` and ``baseline`` (the
post-stage eval); the base model ``models/base/``; the governed problems ``data/governance/problems/*.jsonl``. Writes
the final model ``models/sft/`` (atomically; with ``verl_overrides.txt`` under verl), ``metrics/sft.json``, the curves
``metrics/sft/curves.tsv`` and the baseline-keyed eval ``metrics/eval_sft/<dataset>.json`` (samples/QA under
``data/eval/sft/``). Intermediate checkpoints go to ``$RLVR_CACHE_DIR/train/sft/`` and are resumed.

Run: ``python stages/sft.py`` from the repository root.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.config.profiles import require_scale_profile
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.stage import Params, Result, option, stage
from rlvr.train.engine import load_engine
from rlvr.train.local.common import TrainCommon, load_problem_sets, run_dir, stage_eval
from rlvr.train.local.sft import SFTParams, build_sft_set, run_sft
from rlvr.train.overlap import RL_SET, apply_sft_rl_overlap


def _run_verl(params: Params, cfg: SFTParams, model_dir: str, train: list, dev: list, judge: Any, out_model: Path,
              curves: Path) -> dict[str, Any]:
    """SFT on verl: the judge-verified SFT parquet, then ``torchrun -m verl.trainer.sft_trainer``. Raises
    :class:`rlvr.config.ConfigError` first when ``sft``'s batch or precision params disagree with verl's."""
    from transformers import AutoTokenizer

    from rlvr.model import resolve_model_ref
    from rlvr.train.verl.data import filter_by_length, write_sft_parquet
    from rlvr.train.verl.launch import run_sft_verl
    from rlvr.train.verl.mapping import check_sft_batch
    from rlvr.train.verl.overrides import VerlParams, load_profile

    vcfg = params.section("verl", VerlParams)
    check_sft_batch(cfg, vcfg, load_profile(vcfg.profile))  # before judging the references
    model_path = vcfg.model or resolve_model_ref(model_dir)
    from rlvr.train.verl.resume import trajectory_params

    rdir = run_dir("sft", trajectory_params(cfg.model_dump(), vcfg.model_dump()), model_path, problems=train)
    tok = AutoTokenizer.from_pretrained(model_path)
    pairs, stats = build_sft_set(train, judge, cfg.solutions_per_problem)
    pairs, stats["length"] = filter_by_length(pairs, tok, vcfg.sft_max_length)
    write_sft_parquet(pairs, rdir / "sft_train.parquet")
    val_pairs, _ = build_sft_set(dev, judge, cfg.solutions_per_problem)
    val_pairs, stats["val_length"] = filter_by_length(val_pairs, tok, vcfg.sft_max_length)
    val = rdir / "sft_val.parquet" if val_pairs else None
    if val is not None:
        write_sft_parquet(val_pairs, val)
    return {"sft_set": stats, **run_sft_verl(cfg, vcfg, model_path=model_path, train_files=rdir / "sft_train.parquet",
                                             val_files=val, out_model_dir=out_model, curves_path=curves,
                                             run_dir=rdir)}


@stage(option("--problems-dir", default="data/governance/problems", path=True),
       option("--model", "model_dir", default="models/base", help="input model folder"),
       option("--out-model", default="models/sft", path=True),
       option("--metrics", "metrics_path", default="metrics/sft.json", path=True),
       option("--curves", default="metrics/sft/curves.tsv", path=True),
       option("--eval-metrics", default="metrics/eval_sft", path=True, help="folder: a scores file per dataset"),
       option("--rl-set", default=RL_SET, path=True, help="RL prompts (train.sft_rl_overlap < 1 leaves them out)"),
       option("--eval-dir", default="data/eval/sft", path=True))
def main(params: Params, problems_dir: Path, model_dir: str, out_model: Path, metrics_path: Path, curves: Path,
         eval_metrics: Path, rl_set: Path, eval_dir: Path) -> Result:
    """Fine-tune the base model on judge-verified reference solutions, then evaluate it like the baseline."""
    require_scale_profile(params.raw(), params.path)
    engine = load_engine(params.path)
    common = params.section("train", TrainCommon)
    cfg = params.section("sft", SFTParams)
    train, overlap = apply_sft_rl_overlap(load_problem_sets(problems_dir, common.train_sets), common.sft_rl_overlap,
                                          rl_set, common.rl_share)
    dev = load_problem_sets(problems_dir, common.eval_sets) if common.eval_sets else []
    with open_judge(params.path, get_judge) as judge:
        if engine == "verl":
            metrics = _run_verl(params, cfg, model_dir, train, dev, judge, out_model, curves)
        else:
            metrics = run_sft(cfg, common, model_dir, train, dev, judge, out_model, curves)
        report = stage_eval(out_model, judge, params.path, problems_dir, eval_dir)
    echo = f"sft ({engine}): {metrics['steps']} steps, dev {metrics.get('dev', {}).get('accepted@1')}"
    metrics = {**metrics, "sft_rl_overlap": overlap}
    return Result(metrics={metrics_path: metrics}, folders={eval_metrics: report}, resolved={out_model: cfg},
                  echo=echo)


if __name__ == "__main__":
    main()
