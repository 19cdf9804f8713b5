"""Teach a small policy verl's tool-call format, so that the GPU suite's repair part exercises the tool turn.

The tiny Qwen2 of the pipeline has never seen a tool call: trained only on answers, it ends every repair episode after
one response, and verl's ``tool_agent`` loop never calls ``run_tests`` (docs/training/gpu.md). This script fine-tunes
it (TRL ``SFTTrainer``, completion-only loss, CPU is enough) on two-turn transcripts of the non-dev problems, in the
same chat template and message roles that verl's agent loop renders:

1. prompt = the problem (:func:`rlvr.data.prompts.build_messages`, what the repair parquet holds) → completion =
   a ``run_tests`` call with the reference solution (:func:`rlvr.repair.verl_tool.tool_call_text` in ``--format``);
2. prompt = 1. + that call + the tool's answer to an accepted program
   (:func:`rlvr.repair.verl_tool.accepted_feedback`) → completion = the final answer in a ```python block
   (:func:`rlvr.data.synthetic.completion_for`).

It then checks, greedily on the held-out problems, how many first responses verl's own parser of ``--format`` reads
as a ``run_tests`` call, and writes ``teach.json`` (steps, loss, that fraction) into the output model folder.

    python bench/gpu/teach_tools.py --model models/sft --problems data/governance/problems/synthetic.jsonl \
        --out models/tool [--format qwen3_coder] [--steps 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rlvr.data.prompts import build_messages  # noqa: E402
from rlvr.data.schema import Problem, read_problems  # noqa: E402
from rlvr.data.synthetic import completion_for  # noqa: E402
from rlvr.io import atomic_dir, atomic_write_text  # noqa: E402
from rlvr.repair.env import split_tests  # noqa: E402
from rlvr.repair.verl_tool import accepted_feedback, tool_call_text  # noqa: E402


def transcripts(problems: list[Problem], fmt: str, visible_tests: int = 1) -> list[dict[str, Any]]:
    """Two conversational prompt/completion rows per problem with a reference solution (module doc); problems
    without solutions or tests are skipped."""
    rows = []
    for p in problems:
        if not p.solutions or not p.tests:
            continue
        code = p.solutions[0]
        call = tool_call_text("run_tests", {"code": code}, fmt)
        visible, _ = split_tests(p, visible_tests)
        first = build_messages(p)
        rows.append({"prompt": first, "completion": [{"role": "assistant", "content": call}]})
        rows.append({"prompt": [*first, {"role": "assistant", "content": call},
                                {"role": "tool", "content": accepted_feedback(len(visible.tests))}],
                     "completion": [{"role": "assistant", "content": completion_for(code)}]})
    return rows


def call_rate(model_dir: Path, problems: list[Problem], fmt: str, max_new_tokens: int = 160) -> float:
    """Fraction of ``problems`` whose greedy first response verl's ``fmt`` parser reads as a ``run_tests`` call with a
    ``code`` argument (0.0 for no problems)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.experimental.agent_loop.tool_parser import ToolParser

    if not problems:
        return 0.0
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    from verl.tools.schemas import OpenAIFunctionToolSchema

    from rlvr.repair.env import EnvConfig
    from rlvr.repair.verl_tool import repair_tool_config

    parser = ToolParser.get_tool_parser(fmt, tok)
    schemas = [OpenAIFunctionToolSchema(**t["tool_schema"]) for t in repair_tool_config(EnvConfig())["tools"]]
    hits = 0
    for p in problems:
        ids = tok.apply_chat_template(build_messages(p), add_generation_prompt=True, return_tensors="pt",
                                      return_dict=True)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False)
        resp = out[0, ids["input_ids"].shape[1]:].tolist()
        _, calls = asyncio.run(parser.extract_tool_calls(resp, schemas))
        hits += any(c.name == "run_tests" and "code" in json.loads(c.arguments) for c in calls)
    return hits / len(problems)


def main() -> None:
    """CLI (module doc)."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--problems", type=Path, required=True, help="a governance problems JSONL: dev = held out")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--format", default="qwen3_coder", choices=["hermes", "qwen3_coder"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-3)
    a = ap.parse_args()
    problems = read_problems(a.problems)
    train = [p for p in problems if p.split != "dev"]
    held_out = [p for p in problems if p.split == "dev"]
    rows = transcripts(train, a.format)
    if not rows:
        raise SystemExit(f"{a.problems}: no train problem with a reference solution and tests")
    tok = AutoTokenizer.from_pretrained(a.model)
    with tempfile.TemporaryDirectory() as tmp:
        args = SFTConfig(output_dir=tmp, max_steps=a.steps, learning_rate=a.lr, per_device_train_batch_size=16,
                         lr_scheduler_type="constant", logging_steps=50, save_strategy="no", report_to=[],
                         completion_only_loss=True, max_length=1024, seed=0, use_cpu=not _cuda())
        trainer = SFTTrainer(model=str(a.model), args=args, train_dataset=Dataset.from_list(rows),
                             processing_class=tok)
        result = trainer.train()
        with atomic_dir(a.out) as d:
            trainer.model.save_pretrained(str(d))
            tok.save_pretrained(str(d))
    rate = call_rate(a.out, held_out, a.format)
    report = {"format": a.format, "rows": len(rows), "steps": a.steps, "train_loss": round(result.training_loss, 4),
              "held_out_problems": len(held_out), "held_out_call_rate": rate}
    atomic_write_text(a.out / "teach.json", json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
