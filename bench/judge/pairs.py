"""Summarise the runs of ``alternate.sh`` (``OUT/pair_{new,old}_<i>.json``) into one small JSON: per run the tree
(``rlvr_commit``), the best and median CPU ms per stdio test of each system, the ratios over the floor of the same
run, the served system's server-process CPU ms per request, and the load average at the end.

``python bench/judge/pairs.py OUT [--out FILE]`` (prints the summary; writes it to FILE when given).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def summary(run: dict) -> dict:
    """The compact figures of one ``bench_judge.py`` result."""
    served = run["runs"].get("served", [])
    out = {
        "tree": run.get("rlvr_commit") or run.get("rlvr_tree"),
        "imports": run.get("imports"),
        "best_cpu_ms_per_test": run["best_cpu_ms_per_test"],
        "median_cpu_ms_per_test": run["median_cpu_ms_per_test"],
        "ratio_rlvr_over_floor": run["ratio_rlvr_over_floor"],
        "ratio_of_medians": run["ratio_of_medians"],
        "loadavg_at_end": [round(x, 2) for x in run["machine"]["loadavg_at_end"]],
    }
    if served:
        out["ratio_served_over_floor"] = run.get("ratio_served_over_floor")
        out["ratio_of_medians_served"] = run.get("ratio_of_medians_served")
        per_req = [r["server_process_cpu_s"] * 1000 / (r["tests"] / 10) for r in served if "server_process_cpu_s" in r]
        out["server_process_cpu_ms_per_request"] = [round(x, 2) for x in per_req]
        out["server_process_cpu_ms_per_request_median"] = round(statistics.median(per_req), 2) if per_req else None
    return out


def main(argv: list[str]) -> None:
    folder = Path(argv[0])
    pairs = []
    for path in sorted(folder.glob("pair_new_*.json"), key=lambda p: int(p.stem.rsplit("_", 1)[1])):
        i = path.stem.rsplit("_", 1)[1]
        old = folder / f"pair_old_{i}.json"
        pairs.append({"pair": int(i), "new": summary(json.loads(path.read_text())),
                      "old": summary(json.loads(old.read_text())) if old.exists() else None})
    text = json.dumps({"pairs": pairs}, indent=1)
    print(text)
    if "--out" in argv:
        Path(argv[argv.index("--out") + 1]).write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
