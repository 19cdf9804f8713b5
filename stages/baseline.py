"""Stage ``baseline``: Phase 0, the base model on the governed datasets (generate → extract → judge → metrics).

Reads ``params.yaml`` section ``baseline`` (:class:`rlvr.eval.baseline.BaselineParams`) and
``data/governance/problems/<dataset>.jsonl``; the model from ``models/base`` (or the configured Hub id/server).
Writes ``metrics/baseline/<dataset>.json`` (one scores file per dataset; the protocol, backend/model/sampling, in
``metrics/provenance/baseline/protocol.json``; ``rlvr.layout.read_metrics("metrics/baseline.json")`` reads it all
back as ``{dataset: metrics, "protocol": ...}``), and under
``data/baseline/``: ``samples/<dataset>.jsonl``, ``per_task/<dataset>.json``, ``qa/<dataset>/<verdict>.jsonl``,
``params.resolved.json``. Logs the metrics to wandb (offline unless ``WANDB_MODE`` says otherwise).

    python stages/baseline.py [--params params.yaml]
"""

from __future__ import annotations

from pathlib import Path

from rlvr.eval.baseline import BaselineParams, run_baseline
from rlvr.eval.tracking import log_metrics
from rlvr.judge.client import get_judge
from rlvr.judge.preflight import open_judge
from rlvr.stage import Params, Result, option, stage


@stage(option("--problems-dir", default="data/governance/problems", path=True),
       option("--out-dir", default="data/baseline", path=True),
       option("--metrics", "metrics_path", default="metrics/baseline", path=True,
              help="folder: a scores file per dataset"))
def main(params: Params, problems_dir: Path, out_dir: Path, metrics_path: Path) -> Result:
    """Evaluate the base model on the configured datasets and write metrics, samples and QA logs."""
    cfg = params.section("baseline", BaselineParams)
    with open_judge(params.path, get_judge) as judge:
        report = run_baseline(cfg, judge, problems_dir, out_dir)
    log_metrics(report, project=cfg.wandb_project, run_name="baseline", job_type="baseline",
                config=cfg.model_dump(mode="json"))
    echo = "\n".join(f"{name}: accepted@1={m['accepted@1']} verdicts="
                     f"{ {v: c['count'] for v, c in m['verdicts'].items() if c['count']} }"
                     for name, m in report.items() if name != "protocol")
    return Result(folders={metrics_path: report}, resolved={out_dir: cfg}, echo=echo)


if __name__ == "__main__":
    main()
