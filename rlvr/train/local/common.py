"""Shared plumbing of the local (TRL) training engine: datasets, run folders, resume, tracking, curves, quick eval.

* **Datasets** (TRL's conversational formats, TRL docs "Dataset formats and types"): SFT ``prompt``/``completion``
  message lists; DPO ``prompt``/``chosen``/``rejected``; GRPO ``prompt`` plus the reward columns ``ground_truth``
  (:func:`rlvr.data.schema.ground_truth`) and ``data_source``. The prompt is always
  :func:`rlvr.data.prompts.build_messages`, the one prompt every engine shows.
* **Run folders** (:mod:`rlvr.train.local.runs`): intermediate checkpoints live under
  ``$RLVR_CACHE_DIR/train/<stage>[/seed-<n>]/<key>`` (outside DVC outputs); ``key`` hashes the resolved params and the
  input model's content hash, so a changed param or input model never resumes an unrelated run, while a re-run after
  an interruption resumes from the last ``checkpoint-*`` (``transformers.trainer_utils.get_last_checkpoint``). Only
  the final model is published to ``models/<stage>/`` (atomically, :func:`rlvr.io.atomic_dir`).
* **Tracking** (:func:`~rlvr.train.local.runs.setup_tracking`): WandB offline unless ``WANDB_MODE`` says otherwise;
  one group per pipeline run (``WANDB_RUN_GROUP``, default ``rlvr-<git short sha>``), ``job_type`` = stage; never the
  only record (the TSV curves and metrics JSON are).
* **Curves**: :class:`~rlvr.train.local.curves.TsvCurves`, a ``TrainerCallback`` writing selected logged keys per step
  to a TSV (DVC plots).
* **Checks** (:mod:`rlvr.train.local.quick_eval`): the quick greedy accepted@1 and the post-stage baseline protocol.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from rlvr.config import Section
from rlvr.data.prompts import build_messages
from rlvr.data.schema import Problem, ground_truth
from rlvr.io import atomic_dir
from rlvr.progress import progress_enabled
from rlvr.train.local.curves import TsvCurves
from rlvr.train.local.quick_eval import evaluate_accepted, judge_completions, stage_eval
from rlvr.train.local.runs import checkpoint_step, resume_checkpoint, run_dir, setup_tracking

__all__ = [
    "OptimParams",
    "TrainCommon",
    "TsvCurves",
    "checkpoint_step",
    "evaluate_accepted",
    "fit",
    "grpo_rows",
    "judge_completions",
    "load_problem_sets",
    "logged_training_loss",
    "lora_config",
    "publish_model",
    "resume_checkpoint",
    "reward_quarters",
    "run_dir",
    "set_seed",
    "setup_tracking",
    "sft_rows",
    "stage_eval",
    "train_and_publish",
    "trainer_kwargs",
]

log = logging.getLogger(__name__)


class TrainCommon(Section):
    """``params.yaml`` section ``train``: what every local training stage shares.

    Fields:
        train_sets / eval_sets: ``"<dataset>/<split>"`` references into the governed problems (as in ``manifests``).
        max_prompt_length / max_completion_length: token caps (prompt + completion = TRL's ``max_length``).
        eval_max_new_tokens: greedy decoding cap (tokens) of the post-stage dev check (0 = skip the check).
        report_to: ``TrainingArguments.report_to`` (``["wandb"]``, ``["none"]`` …).
        save_steps / save_total_limit: intermediate checkpoint cadence (optimizer steps) and how many to keep.
        logging_steps: optimizer steps between logged (TSV) rows; ``save_steps`` must be a multiple of it, so that
            every checkpoint a run can resume from is a logged step and :func:`logged_training_loss` weights each
            logged loss by exactly the steps it averages (the last step is always logged too).
        cpu_threads: torch intra-op CPU threads while training (fixed so that the weights' last bits do not follow
            the machine's core count; :func:`set_seed`).
        sft_rl_overlap: share (0–1) of the RL prompts that SFT and DPO also train on (:mod:`rlvr.train.overlap`;
            1.0 = all of them, the default; 0.0 = disjoint, the 7B profiles).
        rl_share: share (0 < share <= 1) of the RL-eligible prompts that RL (GRPO on either engine, and repair's
            training rows) trains on, chosen by a hash of the problem id (:func:`rlvr.train.overlap.in_rl_share`);
            SFT and DPO leave out only the prompts RL uses. 1.0 = all of them, the default; 0.5 the 7B profiles.
    """

    train_sets: list[str] = Field(default_factory=lambda: ["synthetic/train"])
    eval_sets: list[str] = Field(default_factory=lambda: ["synthetic/dev"])
    max_prompt_length: int = Field(256, gt=0)
    max_completion_length: int = Field(64, gt=0)
    eval_max_new_tokens: int = Field(64, ge=0)
    report_to: list[str] = Field(default_factory=lambda: ["wandb"])
    save_steps: int = Field(50, gt=0)
    save_total_limit: int = Field(2, gt=0)
    logging_steps: int = Field(5, gt=0)
    cpu_threads: int = Field(2, ge=1)
    sft_rl_overlap: float = Field(1.0, ge=0.0, le=1.0)
    rl_share: float = Field(1.0, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _save_on_log_steps(self) -> TrainCommon:
        if self.save_steps % self.logging_steps:
            raise ValueError(f"train.save_steps={self.save_steps} is not a multiple of train.logging_steps="
                             f"{self.logging_steps}: a run resumed from a checkpoint between two logged steps would "
                             "mis-weight its train_loss")
        return self


def load_problem_sets(problems_dir: str | Path, refs: Sequence[str]) -> list[Problem]:
    """Problems of ``refs`` (``"<dataset>/<split>"``) from the governed files ``<problems_dir>/<dataset>.jsonl``.

    Raises ``FileNotFoundError`` naming the missing file, ``ValueError`` naming an empty split."""
    from rlvr.data.schema import read_problems

    out: list[Problem] = []
    cache: dict[str, list[Problem]] = {}
    for ref in refs:
        dataset, _, split = ref.partition("/")
        f = Path(problems_dir) / f"{dataset}.jsonl"
        if dataset not in cache:
            if not f.is_file():
                raise FileNotFoundError(f"{f}: governed problems of {dataset!r} not found (train/eval set {ref!r})")
            cache[dataset] = read_problems(f)
        ps = [p for p in cache[dataset] if p.split == split]
        if not ps:
            raise ValueError(f"{f}: no problems in split {split!r} (train/eval set {ref!r})")
        out.extend(ps)
    return out


def sft_rows(pairs: Sequence[tuple[Problem, str]]) -> list[dict[str, Any]]:
    """Conversational prompt/completion rows for ``trl.SFTTrainer`` from (problem, assistant answer text) pairs."""
    return [
        {"prompt": build_messages(p), "completion": [{"role": "assistant", "content": text}], "id": p.id}
        for p, text in pairs
    ]


def grpo_rows(problems: Sequence[Problem]) -> list[dict[str, Any]]:
    """Rows for ``trl.GRPOTrainer``: conversational ``prompt`` plus the reward columns ``ground_truth`` and
    ``data_source`` read by :func:`rlvr.reward.trl.make_reward_funcs`."""
    return [
        {"prompt": build_messages(p), "ground_truth": ground_truth(p), "data_source": p.source, "id": p.id}
        for p in problems
    ]


def set_seed(seed: int, cpu_threads: int | None = None) -> None:
    """Make a local training run a function of its inputs: seed Python, NumPy and torch (``transformers.set_seed``),
    fix torch's intra-op CPU threads to ``cpu_threads`` (``torch.set_num_threads``, process-wide; ``None`` leaves
    them) and, on a machine without CUDA, ask torch for deterministic algorithms
    (``torch.use_deterministic_algorithms(True, warn_only=True)``: an op without a deterministic implementation warns
    instead of failing, none does on the CPU paths used here; on GPUs bitwise reproducibility is not promised).

    Why the thread count: a CPU reduction is split into one partial sum per thread, so its last bits follow the
    thread count, and torch's default is the machine's core count (a 2-core and a 4-core machine would train
    different weights); generation elsewhere in the same process sets its own count (``cpu_threads`` of
    ``baseline``/``eval``), so every training run pins it again. With this, two runs from the same inputs publish
    byte-identical ``models/<stage>`` on one machine (``tests/test_reproducible.py``); across CPU families the
    last bits may still differ (torch picks its matmul kernels by instruction set: docs/development.md,
    Reproducibility)."""
    import torch
    from transformers import set_seed as hf_set_seed

    random.seed(seed)
    hf_set_seed(seed)
    if cpu_threads is not None:
        torch.set_num_threads(cpu_threads)
    if not torch.cuda.is_available():  # on GPUs it would pick slower kernels and need CUBLAS_WORKSPACE_CONFIG
        torch.use_deterministic_algorithms(True, warn_only=True)


def fit(trainer_cls: Any, policy: str | Path, args: Any, train_dataset: Any, curves: TsvCurves, run_dir_: str | Path,
        out_model_dir: str | Path, peft_config: Any = None, **trainer_args: Any) -> tuple[Any, dict[str, Any]]:
    """Build a TRL trainer (``trainer_cls``: ``SFTTrainer``, ``DPOTrainer``, ``GRPOTrainer``) on ``policy`` with its
    tokenizer, the curves callback and ``peft_config``, then :func:`train_and_publish` it.

    Returns ``(trainer, metrics)`` with ``metrics = {"train_loss", "steps", "train_runtime_s" (seconds),
    "resumed_from_step"}``, the keys every local training stage reports. ``train_loss`` and ``steps`` come from the
    run's log history (:func:`train_and_publish`), the same whether it trained from step 0 or found its finished
    checkpoint in the cache, so they are provenance; ``train_runtime_s`` and ``resumed_from_step`` follow the
    run's history and the machine's cache, so :func:`rlvr.layout.write_metrics` puts them in the cost file
    (:data:`rlvr.layout.COST_KEY`)."""
    from transformers import AutoTokenizer

    trainer = trainer_cls(model=str(policy), args=args, train_dataset=train_dataset,
                          processing_class=AutoTokenizer.from_pretrained(str(policy)), callbacks=[curves.callback],
                          peft_config=peft_config, **trainer_args)
    result, wall, resumed = train_and_publish(trainer, run_dir_, curves, out_model_dir)
    return trainer, {"train_loss": result.training_loss, "steps": trainer.state.global_step,
                     "train_runtime_s": round(wall, 3), "resumed_from_step": resumed}


def reward_quarters(curves: TsvCurves, column: str = "reward_mean") -> dict[str, float | None]:
    """``{"reward_first", "reward_last", "sandbox_error_share_max"}``: the mean of ``column`` over the first and the
    last quarter of the logged rows (at least one row each; ``None`` when nothing was logged), and the largest logged
    ``sandbox_error_share`` (the share of the samples sent to the judge that came back ``sandbox_error``, per logged
    step: 0 on a healthy judge; ``None`` when never logged). Empty and ``nan`` cells are skipped."""
    def values(col: str) -> list[float]:
        return [float(r[col]) for r in curves.rows if str(r.get(col, "")) not in ("", "nan")]

    rewards, shares = values(column), values("sandbox_error_share")
    q = max(1, len(rewards) // 4)
    return {"reward_first": sum(rewards[:q]) / q if rewards else None,
            "reward_last": sum(rewards[-q:]) / q if rewards else None,
            "sandbox_error_share_max": max(shares) if shares else None}


def train_and_publish(
    trainer: Any, run_dir_: str | Path, curves: TsvCurves, out_model_dir: str | Path
) -> tuple[Any, float, int]:
    """Resume ``trainer`` from the last checkpoint in ``run_dir_`` (if any), train, write the curves and publish the
    final model to ``out_model_dir``. Returns (TRL's train result, training wall seconds, the step resumed from). A
    resume is logged (logger ``rlvr.train.local.common``, INFO: the checkpoint and its step), so the stage's log
    shows it; the step itself is cost, not provenance (:func:`fit`).

    A checkpoint already at ``args.max_steps`` is a finished run: its weights are loaded and published without
    training, because ``Trainer.train`` resumed there re-enters the unfinished last epoch and takes one step past
    ``max_steps`` when ``max_steps`` is not a whole number of epochs (seen with transformers 5.10). The same holds for
    a finished epoch-bounded run (``max_steps`` -1), which ``Trainer.train`` resumes with no step left.

    The result's ``training_loss`` is always :func:`logged_training_loss` of the run's log history (the finished
    checkpoint's ``trainer_state.json``, or the trainer's state, which a resume restores from its checkpoint), never
    transformers' own figure: that one sums only the steps trained in this process and divides by the global step,
    so it read 0.0 for a finished run found in the cache, less than the truth after a resume mid-run, and differed in
    its last bit from the mean of the logged losses otherwise; the provenance file then followed the cache, not the
    inputs."""
    from transformers.trainer_utils import TrainOutput

    ckpt = resume_checkpoint(run_dir_)
    done = checkpoint_step(ckpt)
    curves.load_existing(done)
    t0 = time.perf_counter()
    if ckpt is not None and 0 < trainer.args.max_steps <= done:
        log.info("finished run in the cache: %s (step %d of %d); publishing it without training", ckpt, done,
                 trainer.args.max_steps)
        trainer._load_from_checkpoint(ckpt)  # transformers' own loader (full weights or adapters)
        trainer.state.global_step = done
        history = _checkpoint_history(ckpt)
    else:
        if ckpt is not None:
            log.info("resuming from %s (step %d)", ckpt, done)
        trainer.train(resume_from_checkpoint=ckpt)
        history = trainer.state.log_history
        if ckpt is not None and trainer.state.global_step <= done:  # a finished run, resumed with no step left
            log.info("%s was a finished run: no step trained", ckpt)
            history = _checkpoint_history(ckpt)
    result = TrainOutput(trainer.state.global_step, logged_training_loss(history), {})
    wall = time.perf_counter() - t0
    acc = getattr(trainer, "accelerator", None)
    if acc is None or acc.is_main_process:  # under `accelerate launch` (DPO on several GPUs) one process publishes
        curves.write()
        publish_model(trainer, out_model_dir)
    if acc is not None:
        acc.wait_for_everyone()
    return result, wall, done


def _checkpoint_history(ckpt: str | Path) -> list[Any]:
    """``log_history`` of ``<ckpt>/trainer_state.json`` (``[]`` when the file is missing or not JSON)."""
    try:
        history = json.loads((Path(ckpt) / "trainer_state.json").read_text(encoding="utf-8")).get("log_history", [])
    except (OSError, ValueError, AttributeError):
        return []
    return history if isinstance(history, list) else []


def logged_training_loss(history: str | Path | Sequence[Any]) -> float:
    """The run's training loss from its log history: the mean of the logged ``loss`` values (transformers' mean loss
    per step over each logging interval), each weighted by its interval's steps (``step`` minus the previous logged
    step), i.e. the mean loss per logged step; with equal intervals, the plain mean. ``history`` is a
    ``log_history`` list, or a checkpoint folder whose ``trainer_state.json`` holds one. Steps after the last logged
    one are not counted. 0.0 when the file or the values are missing.

    The same log history gives the same float whether it was held in memory or read back from a checkpoint (JSON
    keeps a float's digits), so a fresh run and a finished run found in the cache report the same loss."""
    if isinstance(history, str | Path):
        history = _checkpoint_history(history)
    total = weight = 0.0
    prev = 0
    for h in history:
        if not isinstance(h, dict) or not isinstance(h.get("loss"), int | float) or isinstance(h["loss"], bool):
            continue
        step = h.get("step")
        n = step - prev if isinstance(step, int) and step > prev else 1
        prev = step if isinstance(step, int) else prev + n
        total += float(h["loss"]) * n
        weight += n
    return total / weight if weight else 0.0


def publish_model(trainer: Any, out_dir: str | Path, extra_files: Mapping[str, str] | None = None) -> Path:
    """Save the trained model (LoRA adapters merged) and its tokenizer into ``out_dir`` atomically, plus
    ``extra_files`` (name → text). Returns ``Path(out_dir)``."""
    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        model = trainer.model
        if hasattr(model, "merge_and_unload"):  # LoRA: publish the merged full model, loadable without peft
            model = model.merge_and_unload()
        model.save_pretrained(str(tmp))
        tok = getattr(trainer, "processing_class", None)
        if tok is not None:
            tok.save_pretrained(str(tmp))
        for name, text in (extra_files or {}).items():
            (tmp / name).write_text(text, encoding="utf-8")
    return out



class OptimParams(Section):
    """Optimiser/batch fields shared by the ``sft``, ``dpo`` and ``grpo`` sections (``transformers.TrainingArguments``
    names). ``max_steps`` > 0 overrides ``epochs``. ``lora_r`` > 0 trains a LoRA adapter (peft) of that rank on all
    linear layers and publishes the merged model; 0 = full fine-tuning."""

    seed: int = 0
    epochs: float = Field(1.0, gt=0)
    max_steps: int = -1
    learning_rate: float = Field(1e-4, gt=0)
    lr_scheduler_type: str = "linear"
    warmup_ratio: float = Field(0.0, ge=0, lt=1)
    weight_decay: float = Field(0.0, ge=0)
    max_grad_norm: float = Field(1.0, gt=0)
    per_device_train_batch_size: int = Field(8, gt=0)
    gradient_accumulation_steps: int = Field(1, gt=0)
    bf16: bool = False
    lora_r: int = Field(0, ge=0)
    lora_alpha: int = Field(16, gt=0)


def trainer_kwargs(opt: OptimParams, common: TrainCommon, output_dir: Path, report_to: list[str]) -> dict[str, Any]:
    """``TrainingArguments`` keyword arguments common to the three TRL configs (``SFTConfig``, ``DPOConfig``,
    ``GRPOConfig``)."""
    return {
        "output_dir": str(output_dir),
        "seed": opt.seed,
        "data_seed": opt.seed,
        "num_train_epochs": opt.epochs,
        "max_steps": opt.max_steps,
        "learning_rate": opt.learning_rate,
        "lr_scheduler_type": opt.lr_scheduler_type,
        "warmup_steps": opt.warmup_ratio,  # a float < 1 is a ratio of the total steps (transformers 5)
        "weight_decay": opt.weight_decay,
        "max_grad_norm": opt.max_grad_norm,
        "per_device_train_batch_size": opt.per_device_train_batch_size,
        "gradient_accumulation_steps": opt.gradient_accumulation_steps,
        "bf16": opt.bf16,
        "logging_steps": common.logging_steps,
        "save_strategy": "steps",
        "save_steps": common.save_steps,
        "save_total_limit": common.save_total_limit,
        "report_to": report_to,
        "dataloader_num_workers": 0,
        "disable_tqdm": not progress_enabled(),  # transformers' own step bar (ETA); quiet in CI
    }


def lora_config(opt: OptimParams) -> Any:
    """A ``peft.LoraConfig`` (rank ``opt.lora_r`` on all linear layers) or ``None`` when ``lora_r == 0``."""
    if opt.lora_r == 0:
        return None
    from peft import LoraConfig

    return LoraConfig(r=opt.lora_r, lora_alpha=opt.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")



