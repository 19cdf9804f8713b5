"""One process of the multi-process DPO training (``dpo.launch.processes > 1``), started by ``accelerate launch``.

    python -m accelerate.commands.launch --num_processes N ... -m rlvr.train.local.dpo_worker <run>/dpo_job.json

The job file (written by :func:`rlvr.train.local.dpo.launch_training`) holds the ``dpo`` and ``train`` sections and the
paths; the preference pairs are the run folder's ``pairs.jsonl``, mined once by the stage's own process. Every process
runs :func:`rlvr.train.local.dpo.train_on_pairs`; the main one also writes ``<run>/dpo_fitted.json`` (the metrics).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the job file named by ``argv[0]``; returns the exit status (2 for a usage error)."""
    from rlvr.data.manifests import read_jsonl
    from rlvr.io import atomic_write_json
    from rlvr.train.local.common import TrainCommon
    from rlvr.train.local.dpo import FITTED_FILE, DPOParams, train_on_pairs

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rlvr.train.local.dpo_worker <dpo_job.json>", file=sys.stderr)
        return 2
    job = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    cfg, common = DPOParams.model_validate(job["dpo"]), TrainCommon.model_validate(job["train"])
    out = Path(job["out"])
    pairs = read_jsonl(out / "pairs.jsonl")
    fitted = train_on_pairs(cfg, common, job["model_dir"], pairs, out, job["out_model_dir"], job["curves_path"])
    from accelerate import PartialState

    state = PartialState()
    if state.is_main_process:
        atomic_write_json(out / FITTED_FILE, fitted)
    # every rank leaves together and tears the process group down: on the 2 x H100 run a rank left without it kept
    # polling the main rank's TCP store for two minutes after the launch had returned
    state.wait_for_everyone()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
