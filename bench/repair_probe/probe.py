"""Learnability probe: can the smoke policy learn to copy the judge's expected output from repair feedback?

Workload: the synthetic feedback template ``judge_number`` (rlvr/data/synthetic.py: "Print the number the judge
expects.", the same statement for every constant) with constants ``[min, max]``, 25 % held out as dev. Every train
instance gets the repair contexts of two wrong first answers (``print(5)`` and ``print(3)``; dev instances
one, ``print(5)``), built by the real repair environment and judge (feedback template and field caps from
``params.yaml``'s ``repair`` section; the template is recorded with the result). The policy (default: the pipeline's
GRPO seed-1 model) is fine-tuned with TRL's SFTTrainer on context -> reference answer (completion-only loss, cosine
schedule) and scored greedily: the share of contexts whose answer starts with the reference answer, on train and on
dev (unseen target numbers).

This isolates the one skill multi-turn repair needs on this family from the RL loop: if supervised training cannot
teach it, GRPO on the policy's own episodes will not find it either. README, Smoke profile results.

Command (writes ``bench/repair_probe/results.json``, one entry per run, replacing an entry with the same args)::

    .venv/bin/python bench/repair_probe/probe.py --max-constant 299 --epochs 5
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _contexts(problems, judge, env_cfg, first_answers):  # -> list[RepairContext]
    from rlvr.data.synthetic import completion_for
    from rlvr.repair.env import RepairEnv
    from rlvr.train.local.repair import RepairContext

    out = []
    for p in problems:
        for first in first_answers:
            env = RepairEnv(p, judge, env_cfg)
            env.step(completion_for(f"print({first})"))
            if not env.done:
                msgs = tuple((m["role"], m["content"]) for m in env.messages)
                out.append(RepairContext(p, env.hidden, msgs, 2))
    return out


@click.command()
@click.option("--min-constant", default=10, show_default=True)
@click.option("--max-constant", default=299, show_default=True)
@click.option("--dev-fraction", default=0.25, show_default=True)
@click.option("--epochs", default=5.0, show_default=True)
@click.option("--learning-rate", default=1e-3, show_default=True)
@click.option("--batch-size", default=16, show_default=True)
@click.option("--model", default="models/grpo/seed-1", show_default=True)
@click.option("--out", default="bench/repair_probe/results.json", show_default=True)
def main(min_constant: int, max_constant: int, dev_fraction: float, epochs: float, learning_rate: float,
         batch_size: int, model: str, out: str) -> None:
    """Train the probe and append its result to ``--out``."""
    import tempfile

    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from rlvr.config import load_section
    from rlvr.data.synthetic import completion_for, generate
    from rlvr.judge import Judge
    from rlvr.repair.eval import RepairParams
    from rlvr.train.local.repair import warmup_rows

    torch.set_num_threads(1)
    os.chdir(ROOT)
    env_cfg = load_section("repair", RepairParams, "params.yaml").env()
    problems = generate(templates=["judge_number"], min_constant=min_constant, max_constant=max_constant,
                        dev_fraction=dev_fraction)
    judge = Judge(workers=2)
    try:
        train = _contexts([p for p in problems if p.split != "dev"], judge, env_cfg, (5, 3))
        dev = _contexts([p for p in problems if p.split == "dev"], judge, env_cfg, (5,))
    finally:
        judge.close()
    tok = AutoTokenizer.from_pretrained(model)
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        args = SFTConfig(output_dir=tmp, num_train_epochs=epochs, learning_rate=learning_rate,
                         lr_scheduler_type="cosine", per_device_train_batch_size=batch_size, save_strategy="no",
                         report_to=[], logging_steps=50, max_length=None, completion_only_loss=True, packing=False,
                         use_cpu=not torch.cuda.is_available(), gradient_checkpointing=False, disable_tqdm=True,
                         seed=0, data_seed=0)
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(warmup_rows(train)),
                             processing_class=tok)
        result = trainer.train()
    train_s = time.time() - t0
    policy = trainer.model.eval()

    def copied(contexts) -> float:
        ok = 0
        for c in contexts:
            ids = tok.apply_chat_template(c.chat(), add_generation_prompt=True, return_tensors="pt",
                                          return_dict=True).to(policy.device)
            with torch.no_grad():
                gen = policy.generate(**ids, max_new_tokens=32, do_sample=False)
            text = tok.decode(gen[0][ids["input_ids"].shape[1]:], skip_special_tokens=True)
            ok += text.strip().startswith(completion_for(c.problem.solutions[0]).strip())
        return round(ok / max(1, len(contexts)), 4)

    entry = {
        "args": {"min_constant": min_constant, "max_constant": max_constant, "dev_fraction": dev_fraction,
                 "epochs": epochs, "learning_rate": learning_rate, "batch_size": batch_size, "model": model,
                 "feedback_template": env_cfg.feedback_template},
        "train_contexts": len(train), "dev_contexts": len(dev), "steps": trainer.state.global_step,
        "train_loss": round(result.training_loss, 4), "train_s": round(train_s, 1),
        "train_copy_accuracy": copied(train), "dev_copy_accuracy": copied(dev),
    }
    path = Path(out)
    runs = json.loads(path.read_text()) if path.is_file() else []
    runs = [r for r in runs if r.get("args") != entry["args"]] + [entry]
    tmp_path = path.with_suffix(".tmp")
    tmp_path.write_text(json.dumps(runs, indent=2) + "\n")
    tmp_path.replace(path)
    click.echo(json.dumps(entry))


if __name__ == "__main__":
    main()
