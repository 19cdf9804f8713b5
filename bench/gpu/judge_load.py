"""False timeouts under a GRPO step's peak judge load: correct reference programs judged while the judge is saturated.

What it measures: verl's reward workers (``--reward-workers``, the profile's ``reward_num_workers``) each await up to
``--concurrency`` ``compute_score_async`` calls at once (a GRPO step's rollouts arrive together), on one node. Each
call here judges a *reference* solution (``judge_check`` accepted it); each problem judged other than ``accepted``
under load is judged again alone afterwards, and only those whose reference is then accepted count as false
(``false_timeouts``: a correct program killed at its time limit because the node's CPUs were oversubscribed);
``not_accepted_alone`` lists the others (the reward path's own verdict on that reference, whatever the load).
Modes (``--pool``):

* ``node``: the node's shared judge (:class:`rlvr.judge.ray_pool.NodeJudge`: ``--judge-workers`` submissions at
  once per node over ``--shards`` actor processes, the others queue), what the launcher sets (``verl.judge_pool:
  node``);
* ``process``: each reward worker its own embedded judge (``RLVR_SANDBOX_WORKERS`` = ``--judge-workers`` sandboxes
  each; the pre-pool behaviour: reward workers × sandboxes programs at once).

``--burn K`` adds K busy-looping processes for the whole run (the trainer's own CPU load during a step: tokenisation,
Ray, vLLM's scheduler). Run it on the GPU node, with its cores, e.g.::

    python bench/gpu/judge_load.py --problems data/governance/problems/humanevalplus-v0.1.10.jsonl --reward-workers 8 \
        --concurrency 64 --rounds 2 --pool node --out bench/gpu/judge_load.json
    python bench/gpu/judge_load.py ... --pool process --out bench/gpu/judge_load.json    # the baseline

Writes (appends under ``--label``, default ``<pool>-<reward workers>x<concurrency>``) to ``--out`` a JSON object:
``{label: {pool, cpus, judge_workers, reward_workers, concurrency, rounds, burn, submissions, verdicts: {verdict:
count}, shards, false_timeouts, false_other, not_accepted_alone, wall_s, judge_s_p50/p99, pool_peak_per_shard}}``;
prints it too. Needs Ray, the judge (bubblewrap) and the problems' reference solutions.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _burn(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 1103515245 + 12345) % 2**31


def _fenced(code: str) -> str:
    return "```python\n" + code + "\n```"


def main() -> None:
    """CLI (module doc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", required=True, help="problems JSONL with reference solutions")
    ap.add_argument("--reward-workers", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=64, help="compute_score calls in flight per reward worker")
    ap.add_argument("--rounds", type=int, default=1, help="batches of --concurrency calls per reward worker")
    ap.add_argument("--judge-workers", type=int, default=0, help="node pool size / sandboxes (0 = CPU count)")
    ap.add_argument("--pool", choices=["node", "process"], default="node")
    ap.add_argument("--shards", type=int, default=0, help="node pool: actor processes (0 = one per 8 sandboxes)")
    ap.add_argument("--burn", type=int, default=0, help="busy-looping processes alongside")
    ap.add_argument("--limit", type=int, default=0, help="use the first N problems with a solution (0 = all)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--label")
    args = ap.parse_args()

    import ray

    from rlvr.data.schema import ground_truth, read_problems

    problems = [p for f in args.problems for p in read_problems(f) if p.solutions and p.tests]
    if args.limit:
        problems = problems[: args.limit]
    if not problems:
        sys.exit("judge_load: no problems with reference solutions and tests")
    items = [(p.id, p.source, _fenced(p.solutions[0]), ground_truth(p)) for p in problems]
    cpus = os.cpu_count() or 1
    judge_workers = args.judge_workers or cpus
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), *(p for p in sys.path if p)])}
    if args.pool == "process":
        env["RLVR_SANDBOX_WORKERS"] = str(judge_workers)
    ray.init(num_cpus=max(cpus, args.reward_workers), include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env})
    stop = mp.Event()
    burners = [mp.Process(target=_burn, args=(stop,), daemon=True) for _ in range(args.burn)]
    for b in burners:
        b.start()

    @ray.remote(num_cpus=0)
    class RewardWorker:
        """verl's RewardLoopWorker in miniature: awaits compute_score_async for a whole chunk at once."""

        async def run(self, chunk: list[tuple[str, str, str, str]], pool: str, workers: int, shards: int
                      ) -> list[dict[str, Any]]:
            import asyncio

            from rlvr.reward.verl import compute_score_async

            kw = {"reward_mode": "sparse", "judge_pool": pool, "judge_pool_workers": workers,
                  "judge_pool_shards": shards}
            outs = await asyncio.gather(*(compute_score_async(ds, sol, gt, {}, **kw) for _, ds, sol, gt in chunk))
            return [{"id": c[0], "status": o["status"], "judge_s": o["judge_s"]}
                    for c, o in zip(chunk, outs, strict=True)]

    try:
        workers = [RewardWorker.remote() for _ in range(args.reward_workers)]
        per = args.concurrency
        t0 = time.perf_counter()
        results: list[dict[str, Any]] = []
        for r in range(args.rounds):
            refs = []
            for w_i, w in enumerate(workers):
                start = (r * len(workers) + w_i) * per
                chunk = [items[(start + k) % len(items)] for k in range(per)]
                refs.append(w.run.remote(chunk, args.pool, judge_workers, args.shards))
            results += [x for out in ray.get(refs) for x in out]
        wall = time.perf_counter() - t0
        peak = None
        if args.pool == "node":
            from rlvr.judge.ray_pool import NodeJudge

            peak = NodeJudge(workers=judge_workers, shards=args.shards or None).stats()["peak_per_shard"]
    finally:
        stop.set()
        for b in burners:
            b.join(timeout=5)
        ray.shutdown()
    verdicts: dict[str, int] = {}
    for x in results:
        verdicts[x["status"]] = verdicts.get(x["status"], 0) + 1
    # a verdict other than accepted is false (caused by the load) only if the reference is accepted when judged alone:
    # each such problem is judged again here, one call at a time, with this process's own judge
    from rlvr.reward.verl import compute_score

    by_id = {it[0]: it for it in items}
    off_ids = sorted({x["id"] for x in results if x["status"] != "accepted"})
    calm = {i: compute_score(by_id[i][1], by_id[i][2], by_id[i][3], {}, reward_mode="sparse")["status"]
            for i in off_ids}
    under_load = {i: sorted(x["status"] for x in results if x["id"] == i and x["status"] != "accepted")
                  for i in off_ids}
    false = [x for x in results if x["status"] != "accepted" and calm[x["id"]] == "accepted"]
    js = sorted(x["judge_s"] for x in results)
    report = {
        "pool": args.pool, "cpus": cpus, "judge_workers": judge_workers, "reward_workers": args.reward_workers,
        "concurrency": args.concurrency, "rounds": args.rounds, "burn": args.burn, "problems": len(items),
        "submissions": len(results), "verdicts": verdicts, "shards": args.shards if args.pool == "node" else None,
        "false_timeouts": sum(x["status"] == "timeout" for x in false),
        "false_other": sum(x["status"] != "timeout" for x in false),
        "not_accepted_alone": {i: {"alone": calm[i], "under_load": under_load[i]} for i in off_ids},
        "wall_s": round(wall, 2), "judge_s_p50": round(statistics.median(js), 4),
        "judge_s_p99": round(js[min(len(js) - 1, int(0.99 * len(js)))], 4), "pool_peak_per_shard": peak,
    }
    label = args.label or f"{args.pool}-{args.reward_workers}x{args.concurrency}"
    print(json.dumps({label: report}, indent=2))
    if args.out:
        from rlvr.io import atomic_write_json

        old = json.loads(args.out.read_text()) if args.out.is_file() else {}
        atomic_write_json(args.out, {**old, label: report})


if __name__ == "__main__":
    main()
