"""verl's own repair agent loop on a CPU: how often a policy's episodes end accepted, without a GPU.

Runs :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop` (verl 0.9.1's ``tool_agent`` loop playing the repair
protocol, :mod:`rlvr.repair.protocol`: feedback from the real judge as user turns, the last program graded) exactly as
verl's rollout workers do — the same token building, feedback turns and response cut — with one change: the "LLM
server" is Hugging Face ``generate`` on the CPU (sampling at ``--temperature``, full vocabulary: ``top_k`` 0,
``top_p`` 1, as verl's vLLM rollout samples), and ``--dtype`` as the rollout's. The per-turn cap
(``repair.turn_tokens``) and the episode budget it implies are the stage's
(:func:`rlvr.repair.verl_tool.episode_budget`). Each episode is scored as verl's reward manager scores it
(:func:`rlvr.reward.verl.compute_score`, sparse, hidden tests, with the episode's ``extra_fields``). Used to explain
the GPU suite's ``repair_tool`` reward (docs/training/gpu.md).

    python bench/gpu/agent_loop_cpu.py --model .gpu/models/tool --params .gpu/params.tool.yaml \
        --problems .gpu/data/governance/problems/synthetic.jsonl --episodes 64 --out bench/gpu/agent_loop_cpu.json

Prints ``{model, episodes, temperature, dtype, turn_tokens, response_length, by_split: {split: {status: count}},
accepted, seconds}`` and, with ``--out``, stores it there under ``--label`` (default: the model path) beside earlier
reports.
Needs verl, torch, transformers and the judge (bubblewrap).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


class HFServer:
    """verl's LLM server client, served by ``model.generate`` (stop at EOS and the tool parser's stop tokens)."""

    def __init__(self, model: Any, tok: Any, temperature: float) -> None:
        self.model, self.tok, self.temperature = model, tok, temperature

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kwargs: Any) -> Any:
        """One assistant turn: ``TokenOutput`` with the generated ids (at most ``max_tokens``, default 320)."""
        import torch
        from verl.workers.rollout.replica import TokenOutput

        stop = sorted(set(sampling_params.get("stop_token_ids") or []) | {self.tok.eos_token_id})
        ids = torch.tensor([prompt_ids])
        with torch.no_grad():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=0, top_p=1.0,
                                      temperature=self.temperature, max_new_tokens=sampling_params.get("max_tokens")
                                      or 320, eos_token_id=stop, pad_token_id=self.tok.pad_token_id or stop[0])
        return TokenOutput(token_ids=out[0, len(prompt_ids):].tolist())


def main() -> None:
    """CLI (module doc)."""
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from rlvr.config import load_section
    from rlvr.data.schema import read_problems
    from rlvr.repair.eval import RepairParams
    from rlvr.repair.verl_tool import FinalAnswerAgentLoop, episode_budget, repair_verl_rows
    from rlvr.reward.verl import compute_score

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--params", type=Path, default=Path("params.yaml"), help="its repair and verl sections")
    ap.add_argument("--problems", type=Path, required=True)
    ap.add_argument("--splits", default="train,repair", help="problem splits to sample episodes from")
    ap.add_argument("--episodes", type=int, default=64)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--response-length", type=int, default=None,
                    help="rollout.response_length in tokens (default: the stage's episode budget from "
                         "repair.turn_tokens, else 320)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--label", help="the report's key in --out (default: the model path)")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    repair = load_section("repair", RepairParams, a.params)
    env = repair.env()
    # as the repair stage under verl (rlvr.repair.verl_run): the per-turn cap and the episode budget it implies
    response_length = a.response_length or (episode_budget(env, repair.turn_tokens) if repair.turn_tokens else 320)
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=getattr(torch, a.dtype)).eval()
    splits = set(a.splits.split(","))
    probs = [p for p in read_problems(a.problems) if p.split in splits and len(p.tests) > 1]
    random.Random(a.seed).shuffle(probs)
    probs = (probs * (a.episodes // max(1, len(probs)) + 1))[: a.episodes]
    turns = env.turns + (env.max_tool_calls if env.mode == "interpreter" else 0)
    conf = OmegaConf.create({"actor_rollout_ref": {"rollout": {
        "prompt_length": 1024, "response_length": response_length, "full_determinism": False,
        "multi_turn": {"max_user_turns": turns, "max_assistant_turns": turns, "max_parallel_calls": 1,
                       "max_tool_response_length": env.feedback_chars, "tool_response_truncate_side": "middle",
                       "format": env.tool_format}}}})
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    t0 = time.perf_counter()

    async def run() -> None:
        loop = FinalAnswerAgentLoop(trainer_config=DictConfigWrap(conf), server_manager=HFServer(model, tok,
                                    a.temperature), tokenizer=tok, processor=None, dataset_cls=RLHFDataset,
                                    data_config=DictConfigWrap(OmegaConf.create({})), tools=ToolListWrap([]),
                                    hf_model_type="qwen2", turn_tokens=repair.turn_tokens,
                                    env=env.model_dump(mode="json"))
        loop.loop = asyncio.get_running_loop()
        for p, row in zip(probs, repair_verl_rows(probs, env), strict=True):
            out = await loop.run({"temperature": a.temperature}, raw_prompt=list(row["prompt"]),
                                 tools_kwargs=row["extra_info"]["tools_kwargs"], extra_info=row["extra_info"])
            text = tok.decode(out.response_ids, skip_special_tokens=True)
            r = await asyncio.to_thread(compute_score, row["data_source"], text, row["reward_model"]["ground_truth"],
                                        {**row["extra_info"], **out.extra_fields}, reward_mode="sparse")
            counts[p.split][r["status"]] += 1

    asyncio.run(run())
    report = {"model": str(a.model), "episodes": len(probs), "temperature": a.temperature, "dtype": a.dtype,
              "turn_tokens": repair.turn_tokens, "response_length": response_length,
              "by_split": {k: dict(v) for k, v in sorted(counts.items())},
              "accepted": sum(v.get("accepted", 0) for v in counts.values()),
              "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(report))
    if a.out:
        from rlvr.io import atomic_write_text

        old = json.loads(a.out.read_text(encoding="utf-8")) if a.out.is_file() else {}
        old[a.label or str(a.model)] = report
        atomic_write_text(a.out, json.dumps(old, indent=1) + "\n")


if __name__ == "__main__":
    main()
