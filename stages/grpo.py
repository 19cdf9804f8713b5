"""Stage ``grpo``: online GRPO with the judge reward, one run per seed (DVC ``foreach`` over ``seeds``).

Reads ``params.yaml``: the top-level ``engine`` (``local`` = TRL ``GRPOTrainer``; ``verl`` = ``verl.trainer.main_ppo``
with ``algorithm.adv_estimator=grpo``, section ``verl``), ``reward`` (``sparse | dense | shaped``) and
``reward_shaping``, sections ``train`` (``train.rl_share``: the hashed share of the RL prompts trained on, the
same subset under both engines, :mod:`rlvr.train.overlap`; under verl written to the run folder's
``data/train.parquet``, the manifests' parquet unchanged; counts in provenance, ``rl_share``) and ``grpo``, and
``baseline`` (the post-stage eval); the input model (default ``models/dpo/``); the governed problems (local) or the
verl parquet ``data/manifests/verl/{train,val}.parquet``.
Writes ``models/grpo/seed-<n>/`` (atomically; with ``verl_overrides.txt`` under verl), ``metrics/grpo/seed-<n>.json``
(``dev``: the trained policy's accepted@1 and pass_ratio on ``train.eval_sets`` under local, verl's validation of
the val parquet after the last step under verl, none with ``verl.test_freq`` -1),
the per-step curves ``metrics/grpo/seed-<n>.tsv`` and the baseline-keyed eval ``metrics/eval_grpo_seed<n>/``
(samples/QA under ``data/eval/grpo-seed<n>/``). Checkpoints: ``$RLVR_CACHE_DIR/train/grpo/seed-<n>/<key>``
(resumed; the key hashes only what changes the trajectory: :mod:`rlvr.train.verl.resume`).

Run: ``python stages/grpo.py --seed 1`` from the repository root.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlvr.config.profiles import require_scale_profile
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.stage import Params, Result, option, stage
from rlvr.train.engine import load_engine, load_reward_mode
from rlvr.train.local.common import TrainCommon, load_problem_sets, run_dir, stage_eval
from rlvr.train.local.grpo import GRPOParams, run_grpo
from rlvr.train.overlap import apply_rl_share, rl_share_verl_train


def _run_verl(params: Params, cfg: GRPOParams, seed: int, mode: str, model_dir: str, verl_train: str, verl_val: str,
              out_model: str, curves: str) -> dict[str, Any]:
    """GRPO on verl: ``python -m verl.trainer.main_ppo`` with ``algorithm.adv_estimator=grpo``."""
    from rlvr.judge.preflight import load_judge_params
    from rlvr.model import resolve_model_ref
    from rlvr.train.verl.launch import run_grpo_verl
    from rlvr.train.verl.overrides import VerlParams

    vcfg = params.section("verl", VerlParams)
    shaping = params.raw().get("reward_shaping")
    from rlvr.train.verl.resume import trajectory_params

    # train.rl_share: the key hashes the manifests' parquet and the share (only when < 1: the default's key is as
    # before); the subset verl trains on is written into the run's own folder
    share = params.section("train", TrainCommon).rl_share
    extra = {"rl_share": share} if share < 1.0 else {}
    rdir = run_dir("grpo", trajectory_params(cfg.model_dump(), vcfg.model_dump(), reward=mode, reward_shaping=shaping,
                                             **extra),
                   model_dir, seed=seed, data_files=[verl_train])
    train_file, subset = rl_share_verl_train(verl_train, rdir, share)
    metrics = run_grpo_verl(cfg, vcfg, model_path=resolve_model_ref(model_dir), train_files=train_file,
                            val_files=verl_val, reward_mode=mode, out_model_dir=out_model, curves_path=curves,
                            run_dir=rdir, experiment_name=f"grpo-seed{seed}", reward_shaping=shaping,
                            judge=load_judge_params(params.path))
    return {**metrics, "rl_share": subset}


@stage(option("--seed", type=int, required=True, help="run seed (overrides grpo.seed); one of params 'seeds'"),
       option("--problems-dir", default="data/governance/problems", path=True),
       option("--model", "model_dir", default="models/dpo", help="input (and reference) model"),
       option("--out-root", default="models/grpo", help="model goes to <out-root>/seed-<n>"),
       option("--metrics-root", default="metrics/grpo", help="seed-<n>.json and seed-<n>.tsv"),
       option("--eval-root", default="metrics", help="eval_grpo_seed<n>/ (a scores file per dataset) goes here"),
       option("--eval-dir", default="data/eval", help="eval samples/QA: <eval-dir>/grpo-seed<n>"),
       option("--verl-train", default="data/manifests/verl/train.parquet", help="verl engine"),
       option("--verl-val", default="data/manifests/verl/val.parquet", help="verl engine"))
def main(params: Params, seed: int, problems_dir: Path, model_dir: str, out_root: str, metrics_root: str,
         eval_root: str, eval_dir: str, verl_train: str, verl_val: str) -> Result:
    """Train GRPO with the judge reward for one seed, then evaluate it like the baseline."""
    require_scale_profile(params.raw(), params.path)
    engine = load_engine(params.path)
    common = params.section("train", TrainCommon)
    cfg = params.section("grpo", GRPOParams).model_copy(update={"seed": seed})
    mode = load_reward_mode(params.path)
    out_model, curves = f"{out_root}/seed-{seed}", f"{metrics_root}/seed-{seed}.tsv"
    with open_judge(params.path, get_judge) as judge:
        if engine == "verl":
            metrics = _run_verl(params, cfg, seed, mode, model_dir, verl_train, verl_val, out_model, curves)
        else:
            train, subset = apply_rl_share(load_problem_sets(problems_dir, common.train_sets), common.rl_share)
            dev = load_problem_sets(problems_dir, common.eval_sets) if common.eval_sets else []
            metrics = run_grpo(cfg, common, model_dir, train, dev, judge, out_model, curves, reward_mode=mode)
            metrics = {**metrics, "rl_share": subset}
        report = stage_eval(out_model, judge, params.path, problems_dir, f"{eval_dir}/grpo-seed{seed}")
    echo = (f"grpo seed {seed} ({engine}): reward {metrics.get('reward_first')} -> {metrics.get('reward_last')}, "
            f"dev {metrics.get('dev', {}).get('accepted@1')}")
    return Result(metrics={f"{metrics_root}/seed-{seed}.json": {"seed": seed, **metrics}},
                  folders={f"{eval_root}/eval_grpo_seed{seed}": report}, resolved={out_model: cfg}, echo=echo)


if __name__ == "__main__":
    main()
