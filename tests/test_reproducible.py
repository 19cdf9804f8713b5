"""Reproducibility check (issues 29, 45): the same inputs give byte-identical outputs, on an idle or a busy CPU.

On a small slice, the ``governance`` stage (real judge: oracle filling, the committed EvalPlus time limits, test
amplification and its near-miss audit, reference verification near a limit) and a few steps of local SFT and GRPO
training of a tiny model each run twice — the second time while a bounded load generator keeps
:data:`SPINNERS_PER_CORE` spinning processes per core busy (issue 45 asks for at least 2 x the cores) — and every
output file's sha256 must be equal (for training: the models and the curves TSVs, whose judge seconds per step go to
their cost mirror). What this guards: a measured timing leaking into a hashed output or a plot (the time limits
governance used to measure, the judge seconds per GRPO step), a verdict that follows the load (a reference near its
limit: the slice holds HumanEval/83 of HumanEval+ v0.1.10, whose million-digit inputs need 4-8 s of the reference
against a 6 s fill limit, and whose oracle filling lost 7 tests at load 8-10 on 2 cores before the CPU-judged retry
of :mod:`rlvr.judge.settle`), or a training run that follows the thread count or the scheduling. Minutes of CPU: run
it on its own, not in a loop (the governance test, then also holding a CodeContests reference near its limit, took
19 min on the shared 2-core machine at a load average of 7-11 from other work: 7 min idle, 12 min busy; main's code
failed its first run there, on HumanEval/83: "109 tests measured, 102 now").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

SPINNERS_PER_CORE = 2  # the load generator's processes per core (issue 45: at least 2)

#: Problems added to a dataset's first ``max_problems`` (:func:`_governance` picks them; dataset slug -> ids):
#: references near their limit, whose verdicts or kept tests used to follow the load. HumanEval/83: oracle filling
#: (see the module docstring). A CodeContests reference near its limit (1278_f_cards: 5.6-8.4 s of CPU per test
#: against a 10 s limit, 17-38 s of wall time at load 8 on 2 cores, rejected by the old 3 x wall retry) passed this
#: test once with the CPU-judged rule, but costs minutes of CPU per run; tests/data/test_settle_under_load.py keeps
#: that case with a fake judge, and tests/judge/test_judge_settle.py runs the rule in the real sandbox.
#: leetcode/largest-palindrome-product: its amplified input n = 8 needs 2.3-3.2 s of the reference's CPU against the
#: oracle's 2.5 s cap and flipped between two repros; data/recorded_margins.json decides it (kept), idle or busy.
NEAR_LIMIT = {"humanevalplus-v0.1.10": ["humanevalplus/HumanEval/83"],
              "leetcode": ["leetcode/largest-palindrome-product"]}

#: The slice: EvalPlus test sets (oracles + committed limits), training sets with references to verify, and the
#: synthetic family; a few problems each (plus :data:`NEAR_LIMIT`, most of the run's CPU).
SLICE = {
    "governance": {
        "source": "bundled", "compute_expected": True, "expected_workers": 2, "include_synthetic": True,
        "references": {"verify": True, "roles": ["train"], "max_solutions": 2, "max_incorrect": 2},
        # weak training suites amplified (issue 42): mutated inputs filled by the reference, and the near-miss audit
        "amplify": {"enabled": True, "near_miss": {"max_problems": 4, "mutants_per_problem": 2}},
        "datasets": [
            {"name": "codecontests", "role": "train", "max_problems": 4},
            {"name": "leetcode", "role": "train", "splits": ["train"], "max_problems": 4},
            {"name": "mbpp", "role": "train", "splits": ["train"], "max_problems": 4},
            {"name": "humanevalplus:v0.1.10", "role": "test", "max_problems": 16},
            {"name": "mbppplus:v0.2.0", "role": "test", "max_problems": 3},
        ],
    },
    "synthetic": {"seed": 0, "templates": ["add", "mul"], "min_constant": 2, "max_constant": 5, "n_tests": 3,
                  "feedback": {"instances": 8, "min_constant": 10, "max_constant": 40, "dev": 2}},
}


@contextlib.contextmanager
def busy_cpu(seconds: float = 900.0, per_core: int = SPINNERS_PER_CORE) -> Iterator[None]:
    """Keep every core busy: ``per_core`` spinning processes per CPU (a load average of ``per_core`` x the cores on
    top of the work measured), each of which exits by itself after ``seconds`` (so a killed test run leaves no load
    behind); all are stopped when the block ends."""
    spin = f"import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(per_core * (os.cpu_count() or 1))]
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def _hashes(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root``, keyed by its path relative to ``root``."""
    return {str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(root.rglob("*")) if f.is_file()}


#: Runs the governance stage's script with each dataset cut to its first ``max_problems`` plus its NEAR_LIMIT ids
#: (the slice's ``max_problems`` is lifted here, so that a near-limit problem further down is loaded).
_STAGE = textwrap.dedent("""
    import json, runpy, sys
    import rlvr.data.governance as gov

    first, extra = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    load = gov.load_configured

    def picked(cfg, raw_dir=None):
        cfg = cfg.model_copy(update={"datasets": [d.model_copy(update={"max_problems": None}) for d in cfg.datasets]})
        by_slug = load(cfg, raw_dir)
        return {slug: [p for i, p in enumerate(ps) if first.get(slug) is None or i < first[slug]
                       or p.id in extra.get(slug, ())] for slug, ps in by_slug.items()}

    gov.load_configured = picked
    sys.argv = ["stages/governance.py", *sys.argv[3:]]
    runpy.run_path("stages/governance.py", run_name="__main__")
""")


def _governance(tmp: Path, name: str) -> dict[str, str]:
    """Run governance on :data:`SLICE` (plus :data:`NEAR_LIMIT`) into ``tmp/name``; the sha256 of its outputs."""
    from rlvr.data.governance import dataset_slug

    params = tmp / "params.yaml"
    params.write_text(yaml.safe_dump(SLICE))
    out = tmp / name
    first = {dataset_slug(d["name"]): d.get("max_problems") for d in SLICE["governance"]["datasets"]}
    proc = subprocess.run([sys.executable, "-c", _STAGE, json.dumps(first), json.dumps(NEAR_LIMIT), "--params",
                           str(params), "--out-dir", str(out), "--metrics", str(tmp / f"{name}.json")], cwd=ROOT,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "RLVR_PROGRESS": "0"})
    assert proc.returncode == 0, f"governance ({name}) failed: {proc.stderr[-3000:]}"
    return _hashes(out)


def test_governance_is_a_function_of_its_inputs(tmp_path):
    idle = _governance(tmp_path, "idle")
    with busy_cpu():
        busy = _governance(tmp_path, "busy")
    assert {"problems/humanevalplus-v0.1.10.jsonl", "problems/codecontests.jsonl", "references.jsonl",
            "audit.md"} <= set(idle)
    for slug, ids in NEAR_LIMIT.items():
        kept = [json.loads(line)["id"] for line in (tmp_path / f"idle/problems/{slug}.jsonl").open()]
        assert set(ids) <= set(kept), slug
    lp = next(json.loads(x) for x in (tmp_path / "idle/problems/leetcode.jsonl").open()
              if json.loads(x)["id"] == "leetcode/largest-palindrome-product")
    assert "[8]" in [t.get("args") for t in lp["tests"]]  # the recorded decision (data/recorded_margins.json)
    assert busy == idle


_TRAIN = textwrap.dedent("""
    import hashlib, json, os, sys
    from pathlib import Path
    sys.path.insert(0, "tests/train")
    import torch
    from train_fixtures import FakeJudge, build_model, small_family
    from rlvr.reward.trl import make_reward_funcs
    from rlvr.train.local.common import TrainCommon
    from rlvr.train.local.grpo import GRPOParams, run_grpo
    from rlvr.train.local.sft import SFTParams, run_sft

    out = Path(sys.argv[1])
    os.environ["RLVR_CACHE_DIR"] = str(out / "cache")  # a fresh run folder: nothing to resume
    torch.set_num_threads(int(sys.argv[2]))  # whatever the process had before, training pins train.cpu_threads
    base = build_model(out / "base")
    common = TrainCommon(report_to=["none"], logging_steps=1, save_steps=100, max_prompt_length=128,
                         max_completion_length=16, eval_max_new_tokens=0, cpu_threads=2)
    train = [p for p in small_family() if p.split == "train"]
    run_sft(SFTParams(max_steps=3, per_device_train_batch_size=4, learning_rate=1e-3), common, base, train, [],
            FakeJudge(), out / "models" / "sft", out / "metrics" / "sft.tsv")
    run_grpo(GRPOParams(max_steps=2, per_device_train_batch_size=4, num_generations=2, learning_rate=1e-3),
             common, out / "models" / "sft", train, [], FakeJudge(), out / "models" / "grpo",
             out / "metrics" / "grpo.tsv",
             reward_mode="dense", reward_funcs=make_reward_funcs("dense", judge=FakeJudge()))
""")


def _train(tmp: Path, name: str, threads: int) -> dict[str, str]:
    """sha256 of the models and of the curves TSVs (DVC plots; their timing columns are in ``metrics/cost/``, which
    is cost and not compared)."""
    out = tmp / name
    subprocess.run([sys.executable, "-c", _TRAIN, str(out), str(threads)], cwd=ROOT, check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled",
                                             "RLVR_PROGRESS": "0"})
    assert (out / "metrics" / "cost" / "grpo.tsv").is_file()  # judge seconds per step: measured, kept apart
    plots = {f"metrics/{k}": v for k, v in _hashes(out / "metrics").items() if not k.startswith("cost/")}
    return {**_hashes(out / "models"), **plots}


def test_local_training_is_byte_identical_idle_or_busy(tmp_path):
    idle = _train(tmp_path, "idle", 1)
    with busy_cpu():
        busy = _train(tmp_path, "busy", 2)
    assert {"sft/model.safetensors", "grpo/model.safetensors", "metrics/sft.tsv", "metrics/grpo.tsv"} <= set(idle)
    assert busy == idle
