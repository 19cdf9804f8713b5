"""Stage ``dpo``: DPO on pairs mined from judged samples of the SFT model (always TRL ``DPOTrainer``: verl has no DPO).

Reads ``params.yaml`` sections ``train`` and ``dpo``; the SFT model ``models/sft/``; the governed problems. Writes
``models/dpo/`` (atomically), ``metrics/dpo.json`` (pair statistics, loss, dev accepted@1) and
``metrics/dpo/curves.tsv``, and the baseline-keyed eval ``metrics/eval_dpo/<dataset>.json`` (section ``baseline``;
samples/QA under ``data/eval/dpo/``). Mined pairs and checkpoints are cached under ``$RLVR_CACHE_DIR/train/dpo/``.

Run: ``python stages/dpo.py`` from the repository root.
"""

from __future__ import annotations

from pathlib import Path

from rlvr.config.profiles import require_scale_profile
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.stage import Params, Result, option, stage
from rlvr.train.local.common import TrainCommon, load_problem_sets, stage_eval
from rlvr.train.local.dpo import DPOParams, run_dpo
from rlvr.train.overlap import RL_SET, apply_sft_rl_overlap


@stage(option("--problems-dir", default="data/governance/problems", path=True),
       option("--model", "model_dir", default="models/sft", help="input (and reference) model"),
       option("--out-model", default="models/dpo", path=True),
       option("--metrics", "metrics_path", default="metrics/dpo.json", path=True),
       option("--curves", default="metrics/dpo/curves.tsv", path=True),
       option("--eval-metrics", default="metrics/eval_dpo", path=True, help="folder: a scores file per dataset"),
       option("--rl-set", default=RL_SET, path=True, help="RL prompts (train.sft_rl_overlap < 1 leaves them out)"),
       option("--eval-dir", default="data/eval/dpo", path=True))
def main(params: Params, problems_dir: Path, model_dir: str, out_model: Path, metrics_path: Path, curves: Path,
         eval_metrics: Path, rl_set: Path, eval_dir: Path) -> Result:
    """Mine preference pairs with the judge and train DPO from the SFT model, then evaluate it like the baseline."""
    require_scale_profile(params.raw(), params.path)
    common = params.section("train", TrainCommon)
    cfg = params.section("dpo", DPOParams)
    train, overlap = apply_sft_rl_overlap(load_problem_sets(problems_dir, common.train_sets), common.sft_rl_overlap,
                                          rl_set, common.rl_share)
    dev = load_problem_sets(problems_dir, common.eval_sets) if common.eval_sets else []
    with open_judge(params.path, get_judge) as judge:
        metrics = run_dpo(cfg, common, model_dir, train, dev, judge, out_model, curves)
        report = stage_eval(out_model, judge, params.path, problems_dir, eval_dir)
    echo = f"dpo: {metrics['pairs']['pairs']} pairs, {metrics['steps']} steps, dev {metrics.get('dev', {})}"
    metrics = {**metrics, "sft_rl_overlap": overlap}
    return Result(metrics={metrics_path: metrics}, folders={eval_metrics: report}, resolved={out_model: cfg},
                  echo=echo)


if __name__ == "__main__":
    main()
