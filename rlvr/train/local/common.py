"""Shared plumbing of the local (TRL) training engine: datasets, run folders, resume, tracking, curves, quick eval.

* **Datasets** (TRL's conversational formats, TRL docs "Dataset formats and types"): SFT ``prompt``/``completion``
  message lists; DPO ``prompt``/``chosen``/``rejected``; GRPO ``prompt`` plus the reward columns ``ground_truth``
  (:func:`rlvr.data.schema.ground_truth`) and ``data_source``. The prompt is always
  :func:`rlvr.data.prompts.build_messages`, the one prompt every engine shows.
* **Run folders**: intermediate checkpoints live under ``$RLVR_CACHE_DIR/train/<stage>[/seed-<n>]/<key>`` (outside
  DVC outputs); ``key`` hashes the resolved params and the input model's content hash, so a changed param or input
  model never resumes an unrelated run, while a re-run after an interruption resumes from the last ``checkpoint-*``
  (``transformers.trainer_utils.get_last_checkpoint``). Only the final model is published to ``models/<stage>/``
  (atomically, :func:`rlvr.io.atomic_dir`).
* **Tracking**: WandB offline unless ``WANDB_MODE`` says otherwise; one group per pipeline run (``WANDB_RUN_GROUP``,
  default ``rlvr-<git short sha>``), ``job_type`` = stage; never the only record (the TSV curves and metrics JSON are).
* **Curves**: :class:`TsvCurves`, a ``TrainerCallback`` writing selected logged keys per step to a TSV (DVC plots).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from rlvr.config import RuntimeSettings, Section
from rlvr.data.prompts import build_messages
from rlvr.data.schema import Problem, ground_truth
from rlvr.io import atomic_dir, atomic_write_text

__all__ = [
    "TrainCommon",
    "TsvCurves",
    "evaluate_accepted",
    "grpo_rows",
    "load_problem_sets",
    "publish_model",
    "resume_checkpoint",
    "run_dir",
    "set_seed",
    "setup_tracking",
    "sft_rows",
    "stage_eval",
]


class TrainCommon(Section):
    """``params.yaml`` section ``train``: what every local training stage shares.

    Fields:
        train_sets / eval_sets: ``"<dataset>/<split>"`` references into the governed problems (as in ``manifests``).
        max_prompt_length / max_completion_length: token caps (prompt + completion = TRL's ``max_length``).
        eval_max_new_tokens: greedy decoding cap (tokens) of the post-stage dev check (0 = skip the check).
        report_to: ``TrainingArguments.report_to`` (``["wandb"]``, ``["none"]`` …).
        save_steps / save_total_limit: intermediate checkpoint cadence (optimizer steps) and how many to keep.
        logging_steps: optimizer steps between logged (TSV) rows.
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


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch (``transformers.set_seed``)."""
    from transformers import set_seed as hf_set_seed

    random.seed(seed)
    hf_set_seed(seed)


def _model_identity(model_dir: str | Path) -> str:
    """Identity of the input model: the sha256 of its weights, config and tokenizer files
    (:func:`rlvr.eval.provenance.model_hash`, the hash the evaluations key on), so a retrained input model of the same
    shape never resumes the previous run's checkpoints. A Hub id (no local folder) is its own identity."""
    from rlvr.eval.provenance import model_hash

    p = Path(model_dir)
    return model_hash(p)["sha256"] if p.is_dir() else str(model_dir)


def run_dir(stage: str, params: Mapping[str, Any], model_dir: str | Path, seed: int | None = None,
            problems: Sequence[Problem] = ()) -> Path:
    """Intermediate-checkpoint folder of a run: ``$RLVR_CACHE_DIR/train/<stage>[/seed-<seed>]/<key>``.

    ``key`` = first 16 hex chars of sha256 over the JSON of ``params`` (sorted keys), the input model's content
    hash and the training problems (sorted ``(id, Problem.content_sha256())`` pairs), so an identical re-run finds
    its checkpoints and any changed hyperparameter, input model or training set starts afresh."""
    data = sorted((p.id, p.content_sha256()) for p in problems)
    blob = json.dumps({"params": params, "model": _model_identity(model_dir), "problems": data}, sort_keys=True,
                      default=str)
    key = hashlib.sha256(blob.encode()).hexdigest()[:16]
    base = Path(RuntimeSettings().cache_dir) / "train" / stage
    if seed is not None:
        base = base / f"seed-{seed}"
    return base / key


def resume_checkpoint(out_dir: str | Path) -> str | None:
    """The last ``checkpoint-<step>`` folder under ``out_dir`` to resume from, or ``None`` (fresh start)."""
    from transformers.trainer_utils import get_last_checkpoint

    p = Path(out_dir)
    return get_last_checkpoint(str(p)) if p.is_dir() else None


def _git_short_sha() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip() or "local"
    except (OSError, subprocess.SubprocessError):
        return "local"


def setup_tracking(stage: str, report_to: Sequence[str], seed: int | None = None) -> list[str]:
    """Prepare experiment tracking for one stage and return the ``report_to`` list to pass to TRL.

    WandB: ``WANDB_MODE`` defaults to ``offline`` (never the network unless asked), ``WANDB_PROJECT`` to ``rlvr``,
    ``WANDB_RUN_GROUP`` to ``rlvr-<git short sha>`` (one group per pipeline run), ``WANDB_JOB_TYPE`` = ``stage``,
    ``WANDB_NAME`` = ``stage[-seed<n>]``, ``WANDB_DIR`` = ``$RLVR_CACHE_DIR/wandb`` (outside DVC outputs). With
    ``WANDB_MODE=disabled`` wandb is dropped from the list (no service process is started)."""
    reports = [r for r in report_to if r != "none"]
    if "wandb" in reports:
        os.environ.setdefault("WANDB_MODE", "offline")
        if os.environ["WANDB_MODE"] == "disabled":
            reports.remove("wandb")
        else:
            wandb_dir = Path(RuntimeSettings().cache_dir) / "wandb"
            wandb_dir.mkdir(parents=True, exist_ok=True)
            os.environ.setdefault("WANDB_DIR", str(wandb_dir))
            os.environ.setdefault("WANDB_PROJECT", "rlvr")
            os.environ.setdefault("WANDB_RUN_GROUP", f"rlvr-{_git_short_sha()}")
            os.environ["WANDB_JOB_TYPE"] = stage
            os.environ["WANDB_NAME"] = stage if seed is None else f"{stage}-seed{seed}"
    return reports or ["none"]


class TsvCurves:
    """A ``transformers.TrainerCallback`` that writes one TSV row per logging step (DVC plots format).

    ``columns`` maps TSV column name → logged key (``{"reward_mean": "reward", "kl": "kl"}``); the first column is
    always ``step`` (``state.global_step``). Missing keys are written as empty cells; rows with none of the keys
    (e.g. the final ``train_runtime`` summary) are skipped. The file is rewritten atomically at every row, so it is
    complete after an interruption; on resume, rows already present (``step`` ≤ the resumed step) are kept.
    ``mirror``: a second copy kept beside the checkpoints (outside DVC's outputs, which DVC deletes before re-running
    a stage), from which the rows of an earlier run are restored on resume.
    """

    def __init__(self, path: str | Path, columns: Mapping[str, str], mirror: str | Path | None = None) -> None:
        from transformers import TrainerCallback

        self.path = Path(path)
        self.mirror = Path(mirror) if mirror is not None else None
        self.columns = dict(columns)
        self.rows: list[dict[str, Any]] = []
        self._cb = type("_TsvCallback", (TrainerCallback,), {"on_log": self._on_log})()

    @property
    def callback(self) -> Any:
        """The ``TrainerCallback`` instance to pass to a trainer's ``callbacks``."""
        return self._cb

    def load_existing(self, upto_step: int) -> None:
        """Keep rows of an earlier (interrupted) run with ``step <= upto_step`` (resume)."""
        source = self.path if self.path.is_file() else self.mirror
        if source is None or not source.is_file():
            return
        lines = source.read_text(encoding="utf-8").splitlines()
        if not lines:
            return
        header = lines[0].split("\t")
        for line in lines[1:]:
            row = dict(zip(header, line.split("\t"), strict=False))
            if row.get("step", "").isdigit() and int(row["step"]) <= upto_step:
                self.rows.append(row)

    def _on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # Bound method stored on the callback class: the handler calls it as on_log(args, state, control, logs=…).
        if not logs or not any(k in logs for k in self.columns.values()):
            return
        row: dict[str, Any] = {"step": state.global_step}
        for col, key in self.columns.items():
            v = logs.get(key)
            row[col] = "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v)
        self.rows.append(row)
        self.write()

    def write(self) -> None:
        """Rewrite the TSV (header ``step`` + columns) atomically."""
        header = ["step", *self.columns]
        lines = ["\t".join(header)] + ["\t".join(str(r.get(h, "")) for h in header) for r in self.rows]
        atomic_write_text(self.path, "\n".join(lines) + "\n")
        if self.mirror is not None:
            atomic_write_text(self.mirror, "\n".join(lines) + "\n")


def train_and_publish(
    trainer: Any, run_dir_: str | Path, curves: TsvCurves, out_model_dir: str | Path
) -> tuple[Any, float, int]:
    """Resume ``trainer`` from the last checkpoint in ``run_dir_`` (if any), train, write the curves and publish the
    final model to ``out_model_dir``. Returns (TRL's train result, training wall seconds, the step resumed from).

    A checkpoint already at ``args.max_steps`` is a finished run: its weights are loaded and published without
    training, because ``Trainer.train`` resumed there re-enters the unfinished last epoch and takes one step past
    ``max_steps`` when ``max_steps`` is not a whole number of epochs (seen with transformers 5.10); the result then
    reports ``training_loss`` 0.0 as a resumed run with no step left does."""
    from transformers.trainer_utils import TrainOutput

    ckpt = resume_checkpoint(run_dir_)
    done = checkpoint_step(ckpt)
    curves.load_existing(done)
    t0 = time.perf_counter()
    if ckpt is not None and 0 < trainer.args.max_steps <= done:
        trainer._load_from_checkpoint(ckpt)  # transformers' own loader (full weights or adapters)
        trainer.state.global_step = done
        result = TrainOutput(done, 0.0, {})
    else:
        result = trainer.train(resume_from_checkpoint=ckpt)
    wall = time.perf_counter() - t0
    curves.write()
    publish_model(trainer, out_model_dir)
    return result, wall, checkpoint_step(ckpt)


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
        "disable_tqdm": True,
    }


def lora_config(opt: OptimParams) -> Any:
    """A ``peft.LoraConfig`` (rank ``opt.lora_r`` on all linear layers) or ``None`` when ``lora_r == 0``."""
    if opt.lora_r == 0:
        return None
    from peft import LoraConfig

    return LoraConfig(r=opt.lora_r, lora_alpha=opt.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")


def checkpoint_step(ckpt: str | None) -> int:
    """The global step of a ``checkpoint-<step>`` folder path (0 for ``None``)."""
    if not ckpt:
        return 0
    tail = Path(ckpt).name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def stage_eval(
    model_dir: str | Path,
    judge: Any,
    params_path: str | Path = "params.yaml",
    problems_dir: str | Path = "data/governance/problems",
    out_dir: str | Path = "data/eval",
) -> dict[str, Any]:
    """The baseline's evaluation of a trained model: the ``baseline`` params section (datasets, sampling, n, ks,
    backend) with ``model`` replaced by ``model_dir``, run by :func:`rlvr.eval.baseline.run_baseline`.

    Returns ``{dataset: metrics, "protocol": {...}}`` with exactly the keys of ``metrics/baseline.json``, so
    ``dvc metrics diff`` lines up baseline vs sft vs dpo vs grpo. Samples, per-task arrays and QA logs go under
    ``out_dir`` (``data/eval/<stage>``). Stored samples of an earlier run are deleted first: the protocol's sample
    cache is keyed by the model *path*, which stays the same when a re-run stage publishes new weights there.
    Raises :class:`rlvr.config.ConfigError` when the section is missing or invalid, ``FileNotFoundError`` naming a
    missing dataset file."""
    import shutil

    from rlvr.config import load_section
    from rlvr.eval.baseline import BaselineParams, run_baseline

    shutil.rmtree(Path(out_dir) / "samples", ignore_errors=True)
    cfg = load_section("baseline", BaselineParams, params_path).model_copy(update={"model": str(model_dir)})
    return run_baseline(cfg, judge, problems_dir, out_dir)
