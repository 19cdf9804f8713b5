"""DPO on preference pairs mined from judged samples of the SFT model (local engine, TRL ``DPOTrainer``).

Pair mining (on-policy preference data, as in e.g. Pal et al. 2024 / the "self-rewarding" recipes, with the judge as
the preference oracle): for each training problem sample ``k`` completions at ``temperature``, judge each, then pair

* ``pair_rule: accepted`` — an accepted completion (chosen) against a non-accepted one (rejected);
* ``pair_rule: pass_ratio`` — a higher against a lower pass_ratio completion;

keeping only pairs whose pass_ratio margin is at least ``min_margin`` (strictly positive for ``pass_ratio``) and
whose texts differ, largest margins first, each sample at most once per role, at most ``max_pairs_per_problem``
per problem. Dataset pairs are added where the
problem has them: a reference solution (``Problem.solutions``) against a known-wrong one
(``Problem.incorrect_solutions``), both re-judged (a pair is kept only if the judge agrees). The pairs are cached in
the run folder, so a resumed run trains on the same pairs. Loss: ``DPOConfig.loss_type`` (``sigmoid`` = DPO,
Rafailov et al. 2023; ``ipo``, ``hinge``, …, TRL 1.16) with temperature ``beta``.

Run through the stage: ``python stages/dpo.py``.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from rlvr.config import Section
from rlvr.data.manifests import read_jsonl
from rlvr.data.prompts import build_messages
from rlvr.data.schema import Problem
from rlvr.data.synthetic import completion_for
from rlvr.io import atomic_write_jsonl
from rlvr.train.local.common import (
    OptimParams,
    TrainCommon,
    TsvCurves,
    evaluate_accepted,
    fit,
    judge_completions,
    lora_config,
    run_dir,
    set_seed,
    setup_tracking,
    trainer_kwargs,
)
from rlvr.train.local.dpo_mine import DPOMining, generate_texts, run_child

__all__ = ["DPO_CURVES", "DPOMining", "DPOParams", "Judged", "dataset_pairs", "mine_pairs", "model_dtype",
           "run_dpo", "sample_and_judge"]

log = logging.getLogger(__name__)

DPO_CURVES = {
    "loss": "loss",
    "learning_rate": "learning_rate",
    "grad_norm": "grad_norm",
    "reward_accuracy": "rewards/accuracies",
    "reward_margin": "rewards/margins",
    "reward_chosen": "rewards/chosen",
    "reward_rejected": "rewards/rejected",
    "logps_chosen": "logps/chosen",
    "logps_rejected": "logps/rejected",
}


class DPOLaunch(Section):
    """``dpo.launch``: ``processes`` (1 = in the stage's own process; N = one per GPU through ``accelerate launch``)
    and ``mode``: ``ddp`` (data parallel; each GPU holds the whole model: with LoRA a 7B is one 15 GB bf16 copy, the
    reference being the same weights with the adapter off). Full-parameter DPO of a 7B (policy + reference + Adam:
    ~140 GB) needs sharding (FSDP/ZeRO-3), which is not implemented: the 7B profiles use LoRA."""

    processes: int = Field(1, ge=1)
    mode: Literal["ddp"] = "ddp"


class DPOParams(OptimParams):
    """``params.yaml`` section ``dpo`` (optimiser fields: :class:`rlvr.train.local.common.OptimParams`).

    Fields:
        beta: DPO temperature (KL strength to the reference = the input model).
        loss_type: TRL ``DPOConfig.loss_type`` list (``["sigmoid"]`` = DPO; several = weighted sum).
        k: samples per training problem for mining; temperature / top_p: their sampling parameters.
        pair_rule: ``accepted`` or ``pass_ratio`` (see module doc); min_margin: minimum pass_ratio difference.
        max_pairs_per_problem: cap of mined pairs per problem.
        max_problems: mine on at most this many training problems (seeded choice; 0 = all).
        dataset_pairs: add reference-vs-incorrect pairs where the dataset has incorrect solutions.
        launch: how the TRL training runs (:class:`DPOLaunch`): in the stage's process (``processes: 1``), or one
            process per GPU through ``accelerate launch`` (:func:`launch_command`; the 7B profiles).
        mining: how the samples are generated (:class:`DPOMining`).
    """

    learning_rate: float = Field(5e-5, gt=0)
    beta: float = Field(0.1, gt=0)
    loss_type: list[str] = Field(default_factory=lambda: ["sigmoid"])
    k: int = Field(4, ge=2)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    pair_rule: Literal["accepted", "pass_ratio"] = "accepted"
    min_margin: float = Field(0.0, ge=0, le=1)
    max_pairs_per_problem: int = Field(2, gt=0)
    max_problems: int = Field(0, ge=0)
    dataset_pairs: bool = True
    launch: DPOLaunch = Field(default_factory=lambda: DPOLaunch())
    mining: DPOMining = Field(default_factory=lambda: DPOMining())


Judged = tuple[str, bool, float]  # (completion text, accepted, pass_ratio)


def mine_pairs(
    problems: Sequence[Problem],
    judged: Sequence[Sequence[Judged]],
    rule: Literal["accepted", "pass_ratio"] = "accepted",
    min_margin: float = 0.0,
    max_pairs_per_problem: int = 2,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Pair judged samples per problem (see module doc); returns ``(pairs, stats)``.

    ``judged[i]`` are the samples of ``problems[i]``. A pair is
    ``{"id", "prompt" (messages), "chosen", "rejected" (assistant message lists), "margin", "origin": "mined"}``.
    Ties are broken by a ``random.Random(seed)`` shuffle, so the result is deterministic. ``stats``: problems,
    samples, accepted samples, problems with all/none accepted, pairs, mean margin.
    Raises ``ValueError`` when ``judged`` and ``problems`` differ in length or the rule is unknown."""
    if len(judged) != len(problems):
        raise ValueError(f"mine_pairs: {len(judged)} sample lists for {len(problems)} problems")
    if rule not in ("accepted", "pass_ratio"):
        raise ValueError(f"mine_pairs: unknown pair rule {rule!r}")
    rng = random.Random(seed)
    pairs: list[dict[str, Any]] = []
    n_samples = n_acc = all_acc = none_acc = 0
    for p, samples in zip(problems, judged, strict=True):
        n_samples += len(samples)
        acc = sum(a for _, a, _ in samples)
        n_acc += acc
        all_acc += bool(samples) and acc == len(samples)
        none_acc += acc == 0
        uniq: dict[str, tuple[bool, float]] = {}
        for text, a, pr in samples:
            uniq.setdefault(text, (a, pr))
        items = list(uniq.items())
        rng.shuffle(items)
        if rule == "accepted":
            good = [(t, pr) for t, (a, pr) in items if a]
            bad = [(t, pr) for t, (a, pr) in items if not a]
        else:
            good = bad = [(t, pr) for t, (_, pr) in items]
        cands = [
            (gt, bt, gp - bp)
            for gt, gp in good
            for bt, bp in bad
            if gt != bt and gp - bp >= min_margin and (rule == "accepted" or gp > bp)
        ]
        cands.sort(key=lambda c: -c[2])  # stable: ties keep the seeded shuffle order
        used_good: set[str] = set()
        used_bad: set[str] = set()
        n_here = 0
        for gt, bt, margin in cands:
            if n_here >= max_pairs_per_problem:
                break
            if gt in used_good or bt in used_bad:  # each sample in at most one pair per role
                continue
            used_good.add(gt)
            used_bad.add(bt)
            pairs.append(_pair(p, gt, bt, margin, "mined"))
            n_here += 1
    stats = {
        "problems": len(problems),
        "samples": n_samples,
        "accepted_samples": n_acc,
        "sample_accept_rate": n_acc / n_samples if n_samples else 0.0,
        "problems_all_accepted": all_acc,
        "problems_none_accepted": none_acc,
        "pairs": len(pairs),
        "mean_margin": sum(q["margin"] for q in pairs) / len(pairs) if pairs else 0.0,
    }
    return pairs, stats


def _pair(p: Problem, chosen: str, rejected: str, margin: float, origin: str) -> dict[str, Any]:
    return {
        "id": p.id,
        "prompt": build_messages(p),
        "chosen": [{"role": "assistant", "content": chosen}],
        "rejected": [{"role": "assistant", "content": rejected}],
        "margin": margin,
        "origin": origin,
    }


def dataset_pairs(problems: Sequence[Problem], judge: Any, max_per_problem: int = 1) -> list[dict[str, Any]]:
    """Reference-vs-incorrect pairs (``Problem.solutions[j]`` vs ``Problem.incorrect_solutions[j]``, at most
    ``max_per_problem`` per problem), kept only when the judge accepts the chosen and rejects the rejected one."""
    cands = [
        (p, s, w)
        for p in problems
        for s, w in list(zip(p.solutions, p.incorrect_solutions, strict=False))[:max_per_problem]
    ]
    if not cands:
        return []
    res = judge.judge_many([(p, s) for p, s, _ in cands] + [(p, w) for p, _, w in cands])
    n = len(cands)
    return [
        _pair(p, completion_for(s), completion_for(w), res[i].pass_ratio - res[n + i].pass_ratio, "dataset")
        for i, (p, s, w) in enumerate(cands)
        if res[i].verdict == "accepted" and res[n + i].verdict != "accepted"
    ]


def sample_and_judge(
    model_dir: str | Path,
    problems: Sequence[Problem],
    judge: Any,
    k: int,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
    seed: int,
    mining: DPOMining | None = None,
    workdir: str | Path | None = None,
) -> list[list[Judged]]:
    """Sample ``k`` completions per problem from the model at ``model_dir`` (``mining``: backend and process,
    :class:`DPOMining`; default in-process ``hf``) and judge them → per problem a list of ``(text, accepted,
    pass_ratio)``. A ``child`` process writes its job and texts under ``workdir`` (required then). Raises
    ``subprocess.CalledProcessError`` when the child fails, ``ValueError`` without ``workdir``."""
    from rlvr.generate import SamplingParams

    mining = mining or DPOMining()
    sp = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed)
    prompts = [build_messages(p) for p in problems]
    if mining.process == "child":
        if workdir is None:
            raise ValueError("sample_and_judge: dpo.mining.process child needs a work folder")
        texts = run_child(model_dir, prompts, k, sp, mining, workdir)
    else:
        texts = generate_texts(model_dir, prompts, k, sp, mining)
    outs = texts
    flat_p = [p for p, o in zip(problems, outs, strict=True) for _ in o]
    flat_t = [t for o in outs for t in o]
    res = judge_completions(judge, flat_p, flat_t)
    out: list[list[Judged]] = []
    i = 0
    for o in outs:
        out.append([(flat_t[i + j], *res[i + j]) for j in range(len(o))])
        i += len(o)
    return out


def run_dpo(
    cfg: DPOParams,
    common: TrainCommon,
    model_dir: str | Path,
    train_problems: Sequence[Problem],
    eval_problems: Sequence[Problem],
    judge: Any,
    out_model_dir: str | Path,
    curves_path: str | Path,
) -> dict[str, Any]:
    """Mine pairs with the model at ``model_dir`` (the SFT model), train DPO from it (it is also the reference
    model), publish the final model to ``out_model_dir``; returns metrics (``pairs`` statistics, ``train_loss``,
    ``steps``, ``mining_s``/``train_runtime_s`` seconds, ``resumed_from_step``, ``dev`` accepted@1). Pairs mined by
    an earlier run of the same key are read back from the run folder with their statistics (logged), so the report
    is the same; ``resumed_from_step`` and the seconds follow the local cache and the load, so they are cost
    (:func:`rlvr.train.local.common.fit`).

    Raises ``ValueError`` when no pair could be mined or taken from the dataset."""
    set_seed(cfg.seed, common.cpu_threads)
    # the prompts as rendered (the pairs are mined after the key is known, into its folder)
    out = run_dir("dpo", {"dpo": cfg.model_dump(), "train": common.model_dump()}, model_dir,
                  problems=train_problems, rows=[{"prompt": build_messages(p)} for p in train_problems])
    pairs_file = out / "pairs.jsonl"
    stats_file = out / "pairs.stats.json"
    t0 = time.perf_counter()
    if pairs_file.is_file() and stats_file.is_file():  # resumed run: same pairs
        pairs = read_jsonl(pairs_file)  # "\n"-separated: completions may hold U+2028 raw
        stats = json.loads(stats_file.read_text(encoding="utf-8"))
        log.info("dpo: %d pairs mined by an earlier run, read from the cache (%s)", len(pairs), pairs_file)
    else:
        probs = list(train_problems)
        if cfg.max_problems and len(probs) > cfg.max_problems:
            probs = random.Random(cfg.seed).sample(probs, cfg.max_problems)
        judged = sample_and_judge(model_dir, probs, judge, cfg.k, cfg.temperature, cfg.top_p,
                                  common.max_completion_length, cfg.seed, mining=cfg.mining, workdir=out)
        pairs, stats = mine_pairs(probs, judged, cfg.pair_rule, cfg.min_margin, cfg.max_pairs_per_problem, cfg.seed)
        ds_pairs = dataset_pairs(probs, judge) if cfg.dataset_pairs else []
        stats["dataset_pairs"] = len(ds_pairs)
        stats["mined_pairs"] = stats.pop("pairs")
        pairs = pairs + ds_pairs
        stats["pairs"] = len(pairs)
        atomic_write_jsonl(pairs_file, pairs)
        from rlvr.io import atomic_write_json

        atomic_write_json(stats_file, stats)
    mining_s = time.perf_counter() - t0
    if not pairs:
        raise ValueError(f"dpo: no preference pairs (stats: {stats})")
    if cfg.launch.processes > 1:  # one process per GPU: the pairs are in the run folder, the workers train on them
        fitted = launch_training(cfg, common, model_dir, out, out_model_dir, curves_path)
    else:
        fitted = train_on_pairs(cfg, common, model_dir, pairs, out, out_model_dir, curves_path)
    metrics: dict[str, Any] = {
        "pairs": stats,
        **fitted,
        "mining_s": round(mining_s, 3),
    }
    if common.eval_max_new_tokens > 0 and eval_problems:
        metrics["dev"] = evaluate_accepted(out_model_dir, eval_problems, judge, common.eval_max_new_tokens)
    return metrics


def train_on_pairs(cfg: DPOParams, common: TrainCommon, model_dir: str | Path, pairs: Sequence[dict[str, Any]],
                   out: str | Path, out_model_dir: str | Path, curves_path: str | Path) -> dict[str, Any]:
    """TRL ``DPOTrainer`` on ``pairs`` from ``model_dir`` (also the reference: TRL copies it, or, with LoRA, runs it
    with the adapter off), checkpoints in ``out``, the merged model published to ``out_model_dir``. Runs the same in
    the stage's process and in each ``accelerate launch`` worker (the trainer spreads the batches; only the main
    process writes curves and the model). Returns :func:`rlvr.train.local.common.fit`'s metrics."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    set_seed(cfg.seed, common.cpu_threads)
    ds = Dataset.from_list([{k: q[k] for k in ("prompt", "chosen", "rejected")} for q in pairs])
    report_to = setup_tracking("dpo", common.report_to)
    dtype = model_dtype(cfg)
    args = DPOConfig(
        **trainer_kwargs(cfg, common, Path(out), report_to),
        beta=cfg.beta,
        loss_type=cfg.loss_type,
        max_length=common.max_prompt_length + common.max_completion_length,
        model_init_kwargs={"dtype": dtype} if dtype else None,
    )
    curves = TsvCurves(curves_path, DPO_CURVES, mirror=Path(out) / "curves.tsv")
    _, fitted = fit(DPOTrainer, model_dir, args, ds, curves, out, out_model_dir, lora_config(cfg))
    return fitted


def model_dtype(cfg: DPOParams) -> str | None:
    """The dtype DPO loads its policy (and, with LoRA, its reference: the same weights) in: ``"bfloat16"`` when the
    section trains in bf16 with LoRA (``bf16: true``, ``lora_r > 0``: the 7B profiles), else ``None`` (TRL's default,
    float32: a full fine-tune keeps fp32 master weights under bf16 autocast).

    TRL 1.x ``DPOTrainer`` loads a model given by path with ``args.model_init_kwargs`` and, without a ``dtype`` there,
    in float32 (``DPOTrainer.__init__``'s docstring: "it defaults to float32", unlike transformers' ``auto``): a 7B
    then held 30 GB per GPU and the stage published a 30.5 GB float32 ``models/dpo``. With the frozen base in bf16 the
    LoRA adapters train in fp32 (PEFT's default autocast of adapter weights) and the merged model is published in
    bf16, 2 bytes per parameter (15 GB at 7B)."""
    return "bfloat16" if cfg.bf16 and cfg.lora_r > 0 else None


JOB_FILE = "dpo_job.json"
FITTED_FILE = "dpo_fitted.json"


def launch_command(launch: DPOLaunch, job: str | Path, python: str = sys.executable,
                   mixed_precision: str = "no") -> list[str]:
    """argv of the multi-process DPO training: ``python -m accelerate.commands.launch --num_processes N
    --num_machines 1 --mixed_precision <mp> [--multi_gpu | FSDP flags] -m rlvr.train.local.dpo_worker <job>``.

    ``mode: ddp``: data parallel (``--multi_gpu``), each process holds the whole model (with LoRA a 7B is one 15 GB
    bf16 copy per GPU, its reference the same weights with the adapter off). Flags as in accelerate 1.x
    ``accelerate launch --help``. Raises ``ValueError`` for ``processes < 2``."""
    if launch.processes < 2:
        raise ValueError(f"dpo.launch.processes={launch.processes}: a multi-process launch needs at least 2")
    cmd = [python, "-m", "accelerate.commands.launch", "--num_processes", str(launch.processes), "--num_machines", "1",
           "--mixed_precision", mixed_precision, "--multi_gpu"]
    return [*cmd, "-m", "rlvr.train.local.dpo_worker", str(job)]


def launch_training(cfg: DPOParams, common: TrainCommon, model_dir: str | Path, out: str | Path,
                    out_model_dir: str | Path, curves_path: str | Path, runner: Any = None) -> dict[str, Any]:
    """Train on the pairs already in ``<out>/pairs.jsonl`` with ``cfg.launch.processes`` processes: write
    ``<out>/dpo_job.json`` (the sections and paths), run :func:`launch_command` through ``runner``
    (``subprocess.run``), read the main worker's ``<out>/dpo_fitted.json``. Raises
    ``subprocess.CalledProcessError`` when a worker fails, ``FileNotFoundError`` when no result was written."""
    import subprocess

    from rlvr.io import atomic_write_json

    job = Path(out) / JOB_FILE
    fitted = Path(out) / FITTED_FILE
    fitted.unlink(missing_ok=True)
    atomic_write_json(job, {"dpo": cfg.model_dump(mode="json"), "train": common.model_dump(mode="json"),
                            "model_dir": str(model_dir), "out": str(out), "out_model_dir": str(out_model_dir),
                            "curves_path": str(curves_path)})
    cmd = launch_command(cfg.launch, job, mixed_precision="bf16" if cfg.bf16 else "no")
    from rlvr.generate.base import release_gpu_memory

    release_gpu_memory()  # the mining generator's weights and KV blocks: give cuda:0 back to rank 0 of the launch
    (runner or subprocess.run)(cmd, check=True)
    if not fitted.is_file():
        raise FileNotFoundError(f"{fitted}: the DPO workers wrote no result")
    return json.loads(fitted.read_text(encoding="utf-8"))
