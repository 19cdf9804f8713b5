"""One judge budget per node: N concurrent reward workers (Ray actors scoring through rlvr's verl reward function,
each with up to 64 calls in flight) share the node's judge actor and never exceed its bound."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")


@pytest.mark.slow
@pytest.mark.parametrize(("workers", "shards"), [(2, 0), (4, 2)])
def test_reward_workers_share_one_bounded_judge_per_node(workers, shards):
    from rlvr.data.schema import Problem, ground_truth

    here = str(Path(__file__).resolve().parent)
    path = os.pathsep.join([here, *(p for p in sys.path if p)])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        gt = ground_truth(Problem(id="t/sum", source="t", split="train", statement="sum",
                                  tests=[{"kind": "stdio", "stdin": "1 2", "stdout": "3"}]))

        @ray.remote(num_cpus=0)
        class RewardWorker:
            """What verl's RewardLoopWorker does per sample: await compute_score_async, all of its chunk at once."""

            async def score(self, n: int) -> list[float]:
                import asyncio

                from rlvr.reward.verl import compute_score_async

                kw = {"reward_mode": "sparse", "judge_pool": "node", "judge_pool_workers": workers,
                      "judge_pool_shards": shards}
                outs = await asyncio.gather(*(compute_score_async("t", "```python\nprint(3)\n```", gt, {}, **kw)
                                              for _ in range(n)))
                return [o["score"] for o in outs]

            def judge_kind(self) -> str:
                from rlvr.reward import scorer

                return type(scorer._default_judge).__name__

        # the first caller creates the node's actor with the fake judge (a real run: the sandbox judge)
        from rlvr.judge.ray_pool import NodeJudge

        first = NodeJudge(workers=workers, factory="node_pool_fake:SlowJudge", shards=shards or None)
        callers = [RewardWorker.remote() for _ in range(4)]
        scores = ray.get([w.score.remote(8) for w in callers], timeout=300)
        assert scores == [[1.0] * 8] * 4
        assert ray.get([w.judge_kind.remote() for w in callers]) == ["NodeJudge"] * 4
        stats = first.stats()
        assert stats["calls"] == 32 and stats["workers"] == workers
        assert stats["shards"] == ([2] if shards == 0 else [2, 2])
        # saturated, never above each actor's share (4 workers × 8 calls wanted 32 at once): the node's bound holds
        assert stats["peak_per_shard"] == stats["shards"]
        assert first.run_code("print(1)", timeout_s=1.0)["stdout"] == "print(1)"  # the repair tools' call
        assert first.stats()["calls"] == 33
    finally:
        ray.shutdown()


def test_node_shards_split_the_budget_eight_sandboxes_per_process():
    from rlvr.judge.ray_pool import node_shards

    assert node_shards(64) == [8] * 8  # the 4 x H100 node: 8 processes judging 8 at once each
    assert node_shards(2) == [2] and node_shards(9) == [5, 4]
    assert node_shards(10, 3) == [4, 3, 3] and node_shards(3, 8) == [1, 1, 1]  # never an actor with no sandbox
    assert sum(node_shards(37, 5)) == 37
    with pytest.raises(ValueError, match="workers must be >= 1"):
        node_shards(0)


def test_node_judge_needs_ray():
    from rlvr.judge.ray_pool import NodeJudge, node_workers

    if not ray.is_initialized():
        with pytest.raises(RuntimeError, match="needs a Ray worker"):
            NodeJudge(workers=1)
    assert node_workers(3) == 3 and node_workers(None) >= 1
