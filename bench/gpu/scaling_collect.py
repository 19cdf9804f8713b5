"""GRPO step scaling over GPU counts from the runs of ``bench/gpu/grpo_scaling.sh`` (issue: real scale, item 8).

Reads each run's per-step cost curves (``metrics/cost/scale<N>/seed-1.tsv``: verl's ``timing_s/*``, throughput and MFU
per step, :mod:`rlvr.train.verl.logs`) and writes one JSON object::

    {"runs": {"<N>": {"gpus": N, "steps": [{step, step_s, gen_s, update_actor_s, ...}], "step_s": <the last step's
     seconds>}}, "speedup": {"<N>": T1 / TN}, "efficiency": {"<N>": T1 / (N x TN)}, "reference_gpus": 1}

``step_s`` of a run is its last step's ``step_s`` less its ``save_checkpoint_s`` (verl saves inside the step's timer,
and the last step always saves; a sharded save does not scale like the step's compute), the first step carrying the
warm-up (at 7B 156 s, then 94 and 111 s); speedup and efficiency are against the smallest GPU count present (the
1-GPU run when it finished). Strong scaling: the global
batch is the same in every run (the profiles differ only in ``n_gpus_per_node``; tests/config/test_profiles.py).

    python bench/gpu/scaling_collect.py --root . --gpus 1 2 4 --out scaling.json

Raises ``SystemExit`` naming the file when no run has a step.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any


def read_steps(path: Path) -> list[dict[str, Any]]:
    """Rows of a cost-mirror TSV as ``{column: float | None}`` (``step`` as int); ``[]`` when the file is absent."""
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as fh:
        return [{k: (int(v) if k == "step" else (float(v) if v else None)) for k, v in row.items()}
                for row in csv.DictReader(fh, delimiter="\t")]


def collect(root: Path, gpus: list[int]) -> dict[str, Any]:
    """The scaling object (module doc) for the runs under ``root`` with the given GPU counts."""
    runs: dict[str, Any] = {}
    for n in gpus:
        steps = [r for r in read_steps(root / "metrics" / "cost" / f"scale{n}" / "seed-1.tsv") if r.get("step_s")]
        if steps:
            last = steps[-1]
            runs[str(n)] = {"gpus": n, "steps": steps,
                            "step_s": round(last["step_s"] - (last.get("save_checkpoint_s") or 0.0), 3)}
    if not runs:
        raise SystemExit(f"no run has a step: {root / 'metrics' / 'cost'}/scale<N>/seed-1.tsv")
    ref = min(runs.values(), key=lambda r: r["gpus"])
    t1, n1 = ref["step_s"], ref["gpus"]
    return {"runs": runs, "reference_gpus": n1,
            "speedup": {k: round(t1 / r["step_s"], 3) for k, r in runs.items()},
            "efficiency": {k: round(t1 * n1 / (r["gpus"] * r["step_s"]), 3) for k, r in runs.items()}}


def main() -> None:
    """CLI (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path("."))
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    out = collect(a.root, a.gpus)
    a.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({"speedup": out["speedup"], "efficiency": out["efficiency"]}))


if __name__ == "__main__":
    main()
