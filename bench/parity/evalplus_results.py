"""EvalPlus's own ``<samples>_eval_results.json`` for a samples file: ``evalplus.evaluate.evaluate`` of ``evalplus``
0.3.1, offline, on the tasks the samples name.

Run with the interpreter of the EvalPlus venv (``bench/parity/README.md``; plus ``pip install tree-sitter
tree-sitter-python rich``, which ``evalplus.evaluate`` imports), never rlvr's::

    /work/parity-venv/bin/python bench/parity/evalplus_results.py --dataset mbpp \
        --data data/raw/evalplus/MbppPlus-v0.1.0.jsonl.gz \
        --samples tests/eval/data/evalplus_results/mbppplus-v0.1.0.samples.jsonl \
        --out tests/eval/data/evalplus_results/mbppplus-v0.1.0.eval_results.json

EvalPlus requires a sample for every task of its dataset, so the data file given to it (``MBPP_OVERRIDE_PATH`` /
``HUMANEVAL_OVERRIDE_PATH``, read when ``evalplus.data`` is imported) holds only the tasks the samples name; its
ground-truth cache goes to a temporary ``XDG_CACHE_HOME``. ``datasets`` (EvalPerf's loader only) is stubbed. The
results file is copied to ``--out`` unchanged. ``tests/eval/test_evalplus_results.py`` compares ``rlvr judge``'s
results file with the ones committed next to the samples, and with a fresh run of this script when
``RLVR_EVALPLUS_PYTHON`` names such an interpreter.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import types


def main() -> None:
    """Parse the arguments, run ``evalplus.evaluate.evaluate`` on the samples' tasks, copy its results file."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True, choices=("humaneval", "mbpp"))
    ap.add_argument("--data", required=True, help="the release's .jsonl.gz (data/raw/evalplus)")
    ap.add_argument("--samples", required=True, help="JSONL of {task_id, solution | completion}")
    ap.add_argument("--out", required=True, help="where to copy EvalPlus's results file")
    args = ap.parse_args()
    with open(args.samples, encoding="utf-8") as fh:
        tasks = {json.loads(line)["task_id"] for line in fh if line.strip()}
    work = tempfile.mkdtemp(prefix="evalplus-results-")
    try:
        subset = os.path.join(work, "data.jsonl")
        with gzip.open(args.data, "rt", encoding="utf-8") as src, open(subset, "w", encoding="utf-8") as dst:
            for line in src:
                if json.loads(line)["task_id"] in tasks:
                    dst.write(line)
        os.environ["HUMANEVAL_OVERRIDE_PATH" if args.dataset == "humaneval" else "MBPP_OVERRIDE_PATH"] = subset
        os.environ["XDG_CACHE_HOME"] = os.path.join(work, "cache")
        stub = types.ModuleType("datasets")
        stub.load_dataset = None  # type: ignore[attr-defined]
        sys.modules.setdefault("datasets", stub)
        from evalplus.evaluate import evaluate

        samples = os.path.join(work, "samples.jsonl")
        shutil.copyfile(args.samples, samples)
        evaluate(args.dataset, samples=samples, parallel=1, i_just_wanna_run=True)
        shutil.copyfile(os.path.join(work, "samples_eval_results.json"), args.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
