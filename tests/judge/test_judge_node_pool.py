"""One judge budget per node: N concurrent reward workers (Ray actors scoring through rlvr's verl reward function,
each with up to 64 calls in flight) share the node's judge actor and never exceed its bound."""

from __future__ import annotations

import os
import sys
import time
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


@pytest.mark.slow
def test_a_lost_node_actor_is_replaced_and_the_call_retried_once():
    """The node actors fate-share with the process that created them (not detached): when that worker dies, another
    worker's next call re-acquires the actor by name and succeeds; a judge that cannot start still fails the call
    (SandboxError, which the rewards count as sandbox_error) after one retry."""
    from rlvr.data.schema import Problem
    from rlvr.judge.ray_pool import NodeJudge
    from rlvr.judge.sandbox import SandboxError

    here = str(Path(__file__).resolve().parent)
    path = os.pathsep.join([here, *(p for p in sys.path if p)])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        p = Problem(id="t/one", source="t", split="train", statement="s",
                    tests=[{"kind": "stdio", "stdin": "", "stdout": "1"}])

        @ray.remote(num_cpus=0)
        class Owner:
            """The first reward worker of the node: it creates (and so owns) the node's actor."""

            def build(self) -> str:
                from rlvr.judge.ray_pool import NodeJudge

                self.judge = NodeJudge(workers=2, factory="node_pool_fake:SlowJudge")
                return self.judge.actor._actor_id.hex()

        def wait_dead(actor) -> None:
            """Until Ray reports ``actor`` dead (killing it, or its owner, is asynchronous)."""
            for _ in range(100):
                try:
                    ray.get(actor.stats.remote(), timeout=30)
                except ray.exceptions.RayActorError:
                    return
                time.sleep(0.1)
            raise AssertionError("the actor did not die")

        owner = Owner.remote()
        first_id = ray.get(owner.build.remote(), timeout=120)
        mine = NodeJudge(workers=2, factory="node_pool_fake:SlowJudge")  # another worker: same named actor
        other = NodeJudge(workers=2, factory="node_pool_fake:SlowJudge")
        assert mine.actor._actor_id.hex() == first_id
        assert mine.judge(p, "print(1)").verdict == "accepted"

        ray.kill(owner)  # the owner dies: its actor dies with it
        wait_dead(mine.actor)
        assert mine.judge(p, "print(1)").verdict == "accepted"  # re-acquired (a fresh actor, owned here), retried
        assert mine.recovered == 1 and mine.actor._actor_id.hex() != first_id
        assert mine.stats()["calls"] == 1  # the replacement's counts start at zero

        ray.kill(mine.actor)  # the actor itself is killed: a handle from before the kill recovers on its next call
        wait_dead(mine.actor)
        assert other.run_code("print(2)", timeout_s=1.0)["stdout"] == "print(2)"
        assert other.recovered == 1
        assert mine.judge(p, "print(1)").verdict == "accepted"  # finds the actor `other` made, by name
        assert mine.recovered == 2 and mine.actor._actor_id == other.actor._actor_id

        broken = NodeJudge(workers=2, shards=2, factory="node_pool_fake:BrokenJudge")  # new names: -0of2, -1of2
        with pytest.raises(SandboxError, match="Ray judge actor failed"):
            broken.judge(p, "print(1)")
        assert broken.recovered == 1  # one replacement, one retry, then the error
    finally:
        ray.shutdown()
