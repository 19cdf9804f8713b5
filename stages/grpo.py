"""Stage ``grpo``: online GRPO with the judge reward, one run per seed (DVC ``foreach`` over ``seeds``).

Reads ``params.yaml``: the top-level ``engine`` (``local`` = TRL ``GRPOTrainer``; ``verl`` = ``verl.trainer.main_ppo``
with ``algorithm.adv_estimator=grpo``, section ``verl``), ``reward`` (``sparse | dense | shaped``) and
``reward_shaping`` (``max_timeouts``: the training judge's timeout rule, :mod:`rlvr.reward.timeouts`; the
post-stage eval keeps the judge's default), sections ``train`` (``train.rl_share``: the hashed share of the RL
prompts trained on, the same subset under both engines, :mod:`rlvr.train.overlap`; under verl written to the run
folder's ``data/train.parquet``, the manifests' parquet unchanged; counts in provenance, ``rl_share``) and ``grpo``, and
``baseline`` (the post-stage eval); the input model (default ``models/dpo/``); the governed problems (local) or the
verl parquet ``data/manifests/verl/{train,val}.parquet``.

The RL prompts pass the same floor under both engines: verl's parquet holds the ``manifests.verl_train`` problems
that :func:`rlvr.data.manifests.rl_eligible` kept (``>= manifests.grpo_min_tests`` tests, no contamination flag),
and the local engine applies that same function at stage time to ``train.train_sets`` (flags from
``data/governance/contamination.jsonl``), failing at start with one line naming ``manifests.grpo_min_tests`` when it
keeps none. The filter's counts (``problems``, ``kept``, ``too_few_tests``, ``contaminated``, ``min_tests``,
``by_source``) go to provenance, ``rl_set`` (under verl: the manifests stage's, ``training_sets.json`` → ``grpo``).
Writes ``models/grpo/seed-<n>/`` (atomically; with ``verl_overrides.txt`` under verl), ``metrics/grpo/seed-<n>.json``
(``dev``: the trained policy's accepted@1 and pass_ratio on ``train.eval_sets`` under local, verl's validation of
the val parquet after the last step under verl, none with ``verl.test_freq`` -1),
the per-step curves ``metrics/grpo/seed-<n>.tsv`` and the baseline-keyed eval ``metrics/eval_grpo_seed<n>/``
(samples/QA under ``data/eval/grpo-seed<n>/``). Checkpoints: ``$RLVR_CACHE_DIR/train/grpo/seed-<n>/<key>``
(resumed; the key hashes only what changes the trajectory: :mod:`rlvr.train.verl.resume`).

Run: ``python stages/grpo.py --seed 1`` from the repository root.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlvr.config import ConfigError
from rlvr.config.profiles import require_scale_profile
from rlvr.data.manifests import ManifestsParams, flagged_ids, rl_eligible
from rlvr.data.schema import Problem
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.reward.modes import load_reward_config
from rlvr.reward.timeouts import reward_judge
from rlvr.stage import Params, Result, option, stage
from rlvr.train.engine import check_rl_sets, load_engine, load_reward_mode
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
    from rlvr.reward.timeouts import trajectory_key
    from rlvr.train.verl.resume import trajectory_params

    # train.rl_share: the key hashes the manifests' parquet and the share (only when < 1: the default's key is as
    # before); the subset verl trains on is written into the run's own folder. reward_shaping.max_timeouts reaches
    # the reward workers inside `shaping`; the key hashes it apart, only when not the default 3 (a default run's key
    # is as before)
    share = params.section("train", TrainCommon).rl_share
    extra = {"rl_share": share} if share < 1.0 else {}
    max_timeouts = load_reward_config(params.path).shaping.max_timeouts
    key_shaping = {k: v for k, v in shaping.items() if k != "max_timeouts"} if isinstance(shaping, dict) else shaping
    rdir = run_dir("grpo", trajectory_params(cfg.model_dump(), vcfg.model_dump(), reward=mode,
                                             reward_shaping=key_shaping, **extra, **trajectory_key(max_timeouts)),
                   model_dir, seed=seed, data_files=[verl_train])
    train_file, subset = rl_share_verl_train(verl_train, rdir, share)
    metrics = run_grpo_verl(cfg, vcfg, model_path=resolve_model_ref(model_dir), train_files=train_file,
                            val_files=verl_val, reward_mode=mode, out_model_dir=out_model, curves_path=curves,
                            run_dir=rdir, experiment_name=f"grpo-seed{seed}", reward_shaping=shaping,
                            judge=load_judge_params(params.path))
    return {**metrics, "rl_share": subset}


def _local_rl_set(params: Params, problems_dir: Path, gov_dir: Path) -> tuple[list[Problem], dict[str, Any]]:
    """The local engine's RL prompts: ``train.train_sets`` through :func:`rlvr.data.manifests.rl_eligible` at
    ``manifests.grpo_min_tests`` with ``<gov_dir>/contamination.jsonl``'s flags (the filter the manifests stage applies
    to verl's parquet). Returns ``(eligible, counts)``. Raises :class:`rlvr.config.ConfigError` naming the key when no
    problem is kept."""
    common = params.section("train", TrainCommon)
    floor = params.section("manifests", ManifestsParams).grpo_min_tests
    eligible, counts = rl_eligible(load_problem_sets(problems_dir, common.train_sets), floor, flagged_ids(gov_dir))
    if not eligible:
        most = max((s["tests_per_problem_before"]["max"] or 0 for s in counts["by_source"].values()), default=0)
        raise ConfigError(f"{params.path}: manifests.grpo_min_tests={floor}: none of the {counts['problems']} "
                          f"train.train_sets problems {common.train_sets} is RL-eligible ({counts['too_few_tests']} "
                          f"have fewer tests, at most {most}; {counts['contaminated']} flagged in "
                          f"{gov_dir / 'contamination.jsonl'})")
    return eligible, counts


def _manifests_rl_set(training_sets: Path) -> dict[str, Any] | None:
    """The manifests stage's counts of the RL prompts verl trains on (``training_sets.json`` → ``grpo``); ``None``
    when the file is absent (verl then reports the missing parquet). Raises ``ValueError`` naming the file when it is
    not JSON."""
    if not training_sets.is_file():
        return None
    try:
        return json.loads(training_sets.read_text(encoding="utf-8")).get("grpo")
    except json.JSONDecodeError as exc:
        raise ValueError(f"{training_sets}: not JSON: {exc.msg}") from exc


@stage(option("--seed", type=int, required=True, help="run seed (overrides grpo.seed); one of params 'seeds'"),
       option("--problems-dir", default="data/governance/problems", path=True),
       option("--gov-dir", path=True, help="governance folder, contamination.jsonl (default: problems-dir/..)"),
       option("--model", "model_dir", default="models/dpo", help="input (and reference) model"),
       option("--out-root", default="models/grpo", help="model goes to <out-root>/seed-<n>"),
       option("--metrics-root", default="metrics/grpo", help="seed-<n>.json and seed-<n>.tsv"),
       option("--eval-root", default="metrics", help="eval_grpo_seed<n>/ (a scores file per dataset) goes here"),
       option("--eval-dir", default="data/eval", help="eval samples/QA: <eval-dir>/grpo-seed<n>"),
       option("--verl-train", default="data/manifests/verl/train.parquet", help="verl engine"),
       option("--verl-val", default="data/manifests/verl/val.parquet", help="verl engine"),
       option("--training-sets", default="data/manifests/training_sets.json", path=True,
              help="verl engine: the manifests' counts of its RL prompts (provenance rl_set)"))
def main(params: Params, seed: int, problems_dir: Path, gov_dir: Path | None, model_dir: str, out_root: str,
         metrics_root: str, eval_root: str, eval_dir: str, verl_train: str, verl_val: str, training_sets: Path
         ) -> Result:
    """Train GRPO with the judge reward for one seed, then evaluate it like the baseline."""
    require_scale_profile(params.raw(), params.path)
    engine = load_engine(params.path)
    common = params.section("train", TrainCommon)
    check_rl_sets(engine, common.train_sets, params.section("manifests", ManifestsParams).verl_train, params.path)
    cfg = params.section("grpo", GRPOParams).model_copy(update={"seed": seed})
    mode = load_reward_mode(params.path)
    out_model, curves = f"{out_root}/seed-{seed}", f"{metrics_root}/seed-{seed}.tsv"
    train: list[Problem] = []
    rl: dict[str, Any] = {}
    if engine != "verl":  # before the judge starts: a floor (or share) that keeps nothing fails at once
        eligible, rl["rl_set"] = _local_rl_set(params, problems_dir, gov_dir or problems_dir.parent)
        train, rl["rl_share"] = apply_rl_share(eligible, common.rl_share)
    max_timeouts = load_reward_config(params.path).shaping.max_timeouts
    with open_judge(params.path, get_judge) as judge:
        if engine == "verl":
            # the reward workers' judge is their own (in-process, the node's, or RLVR_SANDBOX_URL's): a judge server
            # that cannot apply reward_shaping.max_timeouts fails here, before verl starts
            reward_judge(judge, max_timeouts)
            metrics = _run_verl(params, cfg, seed, mode, model_dir, verl_train, verl_val, out_model, curves)
            metrics = {**metrics, "rl_set": _manifests_rl_set(training_sets)}
        else:
            dev = load_problem_sets(problems_dir, common.eval_sets) if common.eval_sets else []
            metrics = run_grpo(cfg, common, model_dir, train, dev, judge, out_model, curves, reward_mode=mode,
                               max_timeouts=max_timeouts, shaping=load_reward_config(params.path).shaping)
            metrics = {**metrics, **rl}
        report = stage_eval(out_model, judge, params.path, problems_dir, f"{eval_dir}/grpo-seed{seed}")
    echo = (f"grpo seed {seed} ({engine}): reward {metrics.get('reward_first')} -> {metrics.get('reward_last')}, "
            f"dev {metrics.get('dev', {}).get('accepted@1')}")
    return Result(metrics={f"{metrics_root}/seed-{seed}.json": {"seed": seed, **metrics}},
                  folders={f"{eval_root}/eval_grpo_seed{seed}": report}, resolved={out_model: cfg}, echo=echo)


if __name__ == "__main__":
    main()
