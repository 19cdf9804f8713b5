"""Fixture metrics trees for the report tests, written with the real metric code (rlvr.eval.metrics) so key names
match what the pipeline writes."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from rlvr.eval.metrics import compute_metrics, pass_at_k, per_task_counts

N_TASKS = 30
N_SAMPLES = 4
KS = (1, 2)


def _rows(dataset: str, p_accept: float, rng: random.Random) -> list[dict]:
    rows = []
    for t in range(N_TASKS):
        for i in range(N_SAMPLES):
            ok = rng.random() < p_accept
            verdict = "accepted" if ok else rng.choice(["wrong_answer", "runtime_error", "timeout", "syntax_error"])
            rows.append({"task_id": f"{dataset}/{t}", "sample_index": i, "verdict": verdict,
                         "pass_ratio": 1.0 if ok else rng.choice([0.0, 0.5]), "judge_s": 0.01 + 0.02 * rng.random(),
                         "n_tokens": rng.randint(20, 60)})
    return rows


def _per_task(rows: list[dict]) -> dict:
    tasks = per_task_counts(rows)
    for t in tasks.values():
        for k in KS:
            t[f"pass@{k}"] = float(pass_at_k(t["n"], t["c"], k)[0])
    return tasks


def write_phase(root: Path, stem: str, p_by_ds: dict[str, float], seed: int) -> dict:
    """metrics/<stem>.json + data/<stem>/per_task/<ds>.json like rlvr.eval.baseline.run_baseline writes them."""
    rng = random.Random(seed)
    report: dict = {}
    for ds, p in p_by_ds.items():
        rows = _rows(ds, p, rng)
        m = compute_metrics(rows, ks=KS, greedy=False, gen_wall_s=2.0 + rng.random(), gen_samples=len(rows),
                            gen_tokens=sum(r["n_tokens"] for r in rows))
        m["judge_wall_s"] = 0.5 + rng.random()
        m["resumed_tasks"] = 0
        report[ds] = m
        pt = root / "data" / stem / "per_task" / f"{ds}.json"
        pt.parent.mkdir(parents=True, exist_ok=True)
        pt.write_text(json.dumps(_per_task(rows)))
    report["protocol"] = {"backend": "hf", "model": f"models/{stem}", "sampling": {"temperature": 0.8, "top_p": 0.95},
                          "n": N_SAMPLES, "ks": list(KS), "judge_version": "test-1"}
    (root / "metrics").mkdir(parents=True, exist_ok=True)
    (root / "metrics" / f"{stem}.json").write_text(json.dumps(report, indent=2))
    return report


def write_tsv(path: Path, columns: dict[str, list[float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(columns)
    lines = ["\t".join(names)]
    for i in range(len(columns["step"])):
        lines.append("\t".join("" if columns[c][i] is None else repr(columns[c][i]) for c in names))
    path.write_text("\n".join(lines) + "\n")


def write_full_tree(root: Path) -> Path:
    """A pipeline that ran everything: governance, judge_check, baseline, sft (+eval), grpo seeds 1-2 (+eval)."""
    m = root / "metrics"
    m.mkdir(parents=True, exist_ok=True)
    write_phase(root, "baseline", {"synthetic": 0.1, "mbpp": 0.05}, seed=1)
    write_phase(root, "eval_sft", {"synthetic": 0.5, "mbpp": 0.06}, seed=2)
    write_phase(root, "eval_grpo_seed1", {"synthetic": 0.7, "mbpp": 0.07}, seed=3)
    write_phase(root, "eval_grpo_seed2", {"synthetic": 0.65, "mbpp": 0.05}, seed=4)
    (m / "sft.json").write_text(json.dumps({
        "sft_set": {"problems": 40, "candidates": 40, "accepted": 40, "rejected": 0, "problems_covered": 40},
        "train_loss": 0.83, "steps": 30, "train_runtime_s": 61.2, "resumed_from_step": 0,
        "dev": {"accepted@1": 0.5, "pass_ratio": 0.6, "n": 20, "by_template": {"add": 0.7}}}))
    steps = list(range(5, 35, 5))
    write_tsv(m / "sft" / "train.tsv", {"step": steps, "loss": [2.0 / s for s in steps],
                                        "learning_rate": [1e-4] * len(steps), "grad_norm": [1.0] * len(steps),
                                        "mean_token_accuracy": [0.5 + s / 100 for s in steps],
                                        "entropy": [1.0] * len(steps), "num_tokens": [100 * s for s in steps]})
    for seed in (1, 2):
        (m / f"grpo_seed{seed}.json").write_text(json.dumps({
            "steps": 20, "train_runtime_s": 100.0 + seed, "reward_first": 0.2, "reward_last": 0.5 + 0.05 * seed,
            "dev": {"accepted@1": 0.6 + 0.05 * seed}}))
        gsteps = list(range(1, 21))
        write_tsv(m / "grpo" / f"seed-{seed}" / "train.tsv", {
            "step": gsteps,
            "reward_mean": [0.2 + 0.02 * s + 0.01 * seed for s in gsteps],
            "reward_std": [0.3] * 20, "accepted_rate": [0.1 + 0.02 * s for s in gsteps],
            "pass_ratio": [0.3 + 0.01 * s for s in gsteps], "zero_std_frac": [0.5 - 0.01 * s for s in gsteps],
            "kl": [0.001 * s for s in gsteps], "entropy": [1.0 - 0.01 * s for s in gsteps],
            "response_length": [40 + math.sin(s) for s in gsteps], "clip_ratio": [0.0] * 19 + [None],
            "judge_s": [0.5] * 20})
    (m / "governance.json").write_text(json.dumps({
        "problems_before": 3000, "problems_after": 2900,
        "problems_per_dataset": {"mbpp": 464, "synthetic": 600, "humaneval": 164},
        "tests_per_dataset": {"mbpp": 1400, "synthetic": 3000, "humaneval": 1200},
        "exact_dedup": {"dropped": 24, "dup_groups": 186},
        "contamination": {"contamination_train": 2500, "contamination_flagged": 7, "contamination_with_overlap": 31,
                          "contamination_humaneval_ngram_10": 3},
        "expected": {"problems_computed": 500, "tests_computed": 9000, "tests_failed": 2, "problems_dropped": 1}}))
    (m / "judge_check.json").write_text(json.dumps({
        "judge_version": "test-1",
        "mbpp": {"problems": 464, "with_reference": 464, "accepted": 463, "rejected": 1, "accepted_fraction": 0.997845,
                 "verdicts": {"accepted": 463, "timeout": 1}, "judge_s": 30.2,
                 "rejections": [{"id": "mbpp/12", "verdict": "timeout", "passed": 2, "total": 3,
                                 "message": "<time limit>"}]},
        "humaneval": {"problems": 164, "with_reference": 164, "accepted": 164, "rejected": 0,
                      "accepted_fraction": 1.0, "verdicts": {"accepted": 164}, "judge_s": 10.0, "rejections": []}}))
    audit = root / "data" / "governance" / "audit.md"
    audit.parent.mkdir(parents=True, exist_ok=True)
    audit.write_text("# Data governance audit\n\n| source/split | before | after |\n|---|---:|---:|\n"
                     "| mbpp/train | 374 | 374 |\n")
    return root


@pytest.fixture
def full_tree(tmp_path: Path) -> Path:
    """tmp_path with metrics/ and data/ of a pipeline that ran every stage (see :func:`write_full_tree`)."""
    return write_full_tree(tmp_path)


# ------------------------------------------------------------------------------------- final eval + repair fixtures
class _PhaseGen:
    """Fake generator of one phase: task ``<ds>/<i>`` is answered correctly when ``(i + sample) % mod == 0``."""

    def __init__(self, mod: int):
        from rlvr.generate import GenerationStats

        self.mod, self.model_id, self.stats = mod, "fake", GenerationStats()

    def generate(self, prompts, n, sampling, ids=None):
        from rlvr.generate import Completion

        out = []
        for tid in ids:
            i = int(tid.rsplit("/", 1)[1])
            out.append([Completion(f"```python\nprint({i if (i + j) % self.mod == 0 else -1})\n```", 20 + i, "stop")
                        for j in range(n)])
        return out


class _StdoutJudge:
    version = "fake-judge/1"

    def judge_many(self, items):
        from rlvr.judge.verdict import JudgeResult

        return [JudgeResult(verdict="accepted" if code.strip() == f"print({p.tests[0].stdout})" else "wrong_answer",
                            passed=int(code.strip() == f"print({p.tests[0].stdout})"), total=1,
                            pass_ratio=float(code.strip() == f"print({p.tests[0].stdout})"), judge_s=0.01)
                for p, code in items]


#: phase model folder → answer period of its fake generator (1 = solves everything, larger = worse)
FINAL_MODS = {"base": 5, "sft": 3, "dpo": 3, "grpo/seed-1": 2, "grpo/seed-2": 1}


def write_final_tree(root: Path) -> dict:
    """``metrics/final/eval*.json`` and ``data/eval/final/<phase>/per_task`` written by the real
    :func:`rlvr.eval.final.run_eval` (fake generator and judge): datasets ``syn`` (dev, EVAL@k) and ``heval`` (test),
    phases baseline, sft, dpo, grpo seeds 1-2; repair not run. Returns the summary."""
    from rlvr.data.schema import Problem, StdioTest, write_problems
    from rlvr.eval.final import EvalParams, run_eval

    for ds, n in (("syn", 12), ("heval", 10)):
        write_problems(root / "problems" / f"{ds}.jsonl",
                       [Problem(id=f"{ds}/{i}", source=ds, split="test", statement=f"Print {i}.",
                                tests=[StdioTest(stdin="", stdout=str(i))]) for i in range(n)])
    for d in FINAL_MODS:
        md = root / "models" / d
        md.mkdir(parents=True, exist_ok=True)
        (md / "config.json").write_text("{}")
        (md / "model.safetensors").write_bytes(d.encode())
    cfg = EvalParams(datasets=[{"name": "syn", "k": True}, {"name": "heval"}], n=2, ks=[1, 2], budget_tokens=25,
                     bootstrap=100, tuning_stages=["baseline"])
    params = {"governance": {"datasets": [{"name": "syn", "role": "dev"}, {"name": "heval", "role": "test"}]}}
    mods = {str(root / "models" / d): m for d, m in FINAL_MODS.items()}
    return run_eval(cfg, _StdoutJudge(), lambda d: _PhaseGen(mods[str(d)]), root / "problems",
                    root / "data" / "eval" / "final", root / "metrics" / "final", params=params, root=root)


def write_repair(root: Path) -> dict:
    """``metrics/repair.json`` in the repair stage's before/after layout and ``metrics/repair/curves.tsv``."""
    def m(rec: int, fails: int, turns: list[float]) -> dict:
        return {"accepted@1": turns[0], "final_accepted": turns[-1], "first_turn_failures": fails, "recovered": rec,
                "recovery_rate": rec / fails, "accepted_at_turn": turns, "mean_turns": 1.5, "n": 14, "turns": 3,
                "judge_s": 0.5, "sandbox_errors": 0, "tokens_per_solved": 30.0}

    rep = {"synthetic": m(3, 4, [0.71, 0.86, 0.93]),
           "before": {"synthetic": m(1, 4, [0.71, 0.79, 0.79])},
           "training": {"engine": "local", "steps": 10, "train_runtime_s": 12.5, "stage_wall_s": 40.1},
           "protocol": {"backend": "hf", "mode": "repair", "model": "models/repair", "turns": 3,
                        "input_model": "models/grpo/seed-1"}}
    (root / "metrics").mkdir(parents=True, exist_ok=True)
    (root / "metrics" / "repair.json").write_text(json.dumps(rep, indent=2))
    write_tsv(root / "metrics" / "repair" / "curves.tsv",
              {"step": [1, 2, 3], "reward_mean": [0.2, 0.4, 0.5], "recovery_rate": [0.25, 0.5, 0.75]})
    return rep


def write_complete_tree(root: Path) -> Path:
    """:func:`write_full_tree` plus the final eval (:func:`write_final_tree`) and repair (:func:`write_repair`)."""
    write_full_tree(root)
    write_final_tree(root)
    write_repair(root)
    return root
