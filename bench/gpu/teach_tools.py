"""Teach a small policy verl's tool-call format, so that the GPU suite's repair part exercises the tool turn.

The tiny Qwen2 of the pipeline has never seen a tool call: trained only on answers, it ends every repair episode after
one response, and verl's ``tool_agent`` loop never calls ``run_tests`` (docs/training/gpu.md). This script fine-tunes
it (TRL ``SFTTrainer``, completion-only loss, CPU is enough) on transcripts of the non-dev problems, in the same chat
template and message roles that verl's agent loop renders, up to three rows per problem:

1. prompt = the problem (:func:`rlvr.data.prompts.build_messages`, what the repair parquet holds) → completion =
   a ``run_tests`` call with the reference solution (:func:`rlvr.repair.verl_tool_variant.tool_call_text` in
   ``--format``);
2. prompt = 1. + that call + the tool's answer to an accepted program
   (:func:`rlvr.repair.verl_tool.accepted_feedback`) → completion = the final answer in a ```python block
   (:func:`rlvr.data.synthetic.completion_for`);
3. prompt = 1. with a call of a wrong program (``print(<a seeded random number>)``) + the tool's real answer to it
   (the judge runs it on the visible test; :func:`rlvr.repair.env.format_feedback` with the ``repair`` section of
   ``--params``) → completion = the reference solution's final answer. Without these rows the policy never sees a
   failing test's feedback, and on the repair set (``judge_number``: "print the number the judge expects", solvable
   only by reading the feedback) its reward stayed 0 (H100 runs, docs/training/gpu.md).

It then checks, greedily on the held-out problems, how many first responses verl's own parser of ``--format`` reads
as a ``run_tests`` call, and writes ``teach.json`` (steps, loss, that fraction) into the output model folder.

    python bench/gpu/teach_tools.py --model models/sft --problems data/governance/problems/synthetic.jsonl \
        --out models/tool [--params params.yaml] [--format qwen3_coder] [--steps 1200] [--failures 4]

The rows of kind 3 need the judge (bubblewrap, or ``RLVR_SANDBOX_URL``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
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
from rlvr.repair.env import EnvConfig, format_feedback, split_tests  # noqa: E402
from rlvr.repair.verl_tool import accepted_feedback  # noqa: E402
from rlvr.repair.verl_tool_variant import tool_call_text  # noqa: E402


def transcripts(problems: list[Problem], fmt: str, env: EnvConfig, judge: Any = None, failures_per_problem: int = 1,
                seed: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Conversational prompt/completion rows per problem with a reference solution (module doc: rows 1 and 2, and
    ``failures_per_problem`` rows of kind 3 when ``judge`` is given, one per wrong program it rejects), and the
    number of rows of kind 3; problems without solutions or tests are skipped. ``env``: the repair environment
    (visible-test count, feedback template, caps)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    failures = 0
    for p in problems:
        if not p.solutions or not p.tests:
            continue
        code = p.solutions[0]
        call = tool_call_text("run_tests", {"code": code}, fmt)
        visible, _ = split_tests(p, env.visible_tests)
        first = build_messages(p)
        answer = [{"role": "assistant", "content": completion_for(code)}]
        rows.append({"prompt": first, "completion": [{"role": "assistant", "content": call}]})
        rows.append({"prompt": [*first, {"role": "assistant", "content": call},
                                {"role": "tool", "content": accepted_feedback(len(visible.tests))}],
                     "completion": answer})
        if judge is None or not visible.tests:
            continue
        for _ in range(failures_per_problem):
            wrong = f"print({rng.randrange(1000)})\n"
            res = judge.judge(visible, wrong)
            if res.accepted or res.verdict == "sandbox_error":
                continue
            wrong_call = tool_call_text("run_tests", {"code": wrong}, fmt)
            rows.append({"prompt": [*first, {"role": "assistant", "content": wrong_call},
                                    {"role": "tool", "content": format_feedback(visible, res, env)}],
                         "completion": answer})
            failures += 1
    return rows, failures


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
    from rlvr.repair.verl_tool_variant import repair_tool_config

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
    ap.add_argument("--params", type=Path, default=Path("params.yaml"), help="its repair section: the environment")
    ap.add_argument("--format", default="qwen3_coder", choices=["hermes", "qwen3_coder"])
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--failures", type=int, default=4, help="rows of kind 3 per problem (wrong programs)")
    ap.add_argument("--lr", type=float, default=1e-3)
    a = ap.parse_args()
    problems = read_problems(a.problems)
    train = [p for p in problems if p.split != "dev"]
    held_out = [p for p in problems if p.split == "dev"]
    from rlvr.config import load_section
    from rlvr.judge.client import get_judge
    from rlvr.repair.eval import RepairParams

    env = load_section("repair", RepairParams, a.params).env()
    judge = get_judge()
    try:
        rows, failures = transcripts(train, a.format, env, judge, a.failures)
    finally:
        judge.close()
    if a.failures and not failures:
        raise SystemExit("teach_tools: the judge rejected no wrong program, so there are no failure rows")
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
    report = {"format": a.format, "rows": len(rows), "failure_rows": failures, "steps": a.steps,
              "train_loss": round(result.training_loss, 4),
              "held_out_problems": len(held_out), "held_out_call_rate": rate}
    atomic_write_text(a.out / "teach.json", json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
