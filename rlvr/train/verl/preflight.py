"""Judge preflight: fail a verl stage at its start, not after training, when the reward cannot be computed.

verl's reward workers score every rollout with :func:`rlvr.reward.verl.compute_score`, which turns any
infrastructure failure (no bubblewrap, an unreachable ``RLVR_SANDBOX_URL``) into ``sandbox_error``; a run whose judge
never works therefore trains to its end on no reward (the launcher then refuses to publish it,
:func:`rlvr.reward.judge_log.require_judged`, hours later). :func:`preflight` judges one known-correct program the
way the reward workers will, and has the sandbox import the libraries the governed problems' programs import
(:func:`rlvr.judge.preflight.check_sandbox_modules`: a node whose sandbox interpreter lacks ``sortedcontainers``
would score every correct LeetCode program that imports it ``runtime_error``), before verl starts:

* always in the launching process, with the judge :func:`rlvr.judge.client.get_judge` resolves from the environment
  the workers get (:func:`rlvr.train.verl.environ.propagated_env`: a local Ray cluster's workers run on this node with
  those variables);
* on an existing Ray cluster (``RAY_ADDRESS`` / ``ray_address``) also as one Ray task on every alive node with CPUs
  (the nodes verl places its reward workers on: ``RewardLoopManager._init_reward_loop_workers``), under the same
  ``runtime_env`` the job will have, so a node without bubblewrap or without a route to the judge server fails the
  stage by name.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

from rlvr.data.schema import Problem, StdioTest
from rlvr.judge.preflight import JudgeUnavailable, check_sandbox_modules

__all__ = ["PREFLIGHT_PROBLEM", "PREFLIGHT_SOLUTION", "cluster_preflight", "judge_preflight", "preflight"]

PREFLIGHT_PROBLEM = Problem(
    id="rlvr/preflight/0", source="rlvr", split="preflight", statement="Print the sum of two integers.",
    tests=[StdioTest(stdin="2 3\n", stdout="5\n")],
)
PREFLIGHT_SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"


def judge_preflight(judge: Any = None) -> dict[str, Any]:
    """Judge :data:`PREFLIGHT_SOLUTION` on :data:`PREFLIGHT_PROBLEM` with ``judge`` (default: the judge the reward
    resolves from the environment, :func:`rlvr.judge.client.get_judge`'s choice — a :class:`RemoteJudge` for
    ``RLVR_SANDBOX_URL``, else the embedded judge with one sandbox, not the node's CPU count — closed afterwards, so
    no sandboxes stay alive in the launcher).

    Then :func:`rlvr.judge.preflight.check_sandbox_modules` with the same judge (one ``run_code``).

    Returns ``{"host", "judge" (class name), "sandbox_url", "verdict", "judge_s"}``. Raises ``RuntimeError`` naming the
    host, the judge and the verdict (or the exception) when the correct program is not accepted, or the host and the
    module when the sandbox cannot import one of :data:`rlvr.judge.preflight.SANDBOX_MODULES`."""
    from rlvr.config import RuntimeSettings

    url = RuntimeSettings().sandbox_url.strip()
    where = f"{socket.gethostname()} ({'RLVR_SANDBOX_URL=' + url if url else 'embedded sandbox judge'})"
    own = judge is None
    try:
        if own:
            if url:
                from rlvr.judge.client import RemoteJudge

                judge = RemoteJudge(url)
            else:
                from rlvr.judge.core import Judge

                judge = Judge(workers=1)
        res = judge.judge(PREFLIGHT_PROBLEM, PREFLIGHT_SOLUTION)
        if res.verdict == "accepted":
            check_sandbox_modules(judge, where)
    except JudgeUnavailable as exc:  # a module the sandbox lacks: its one line, with the host
        raise RuntimeError(f"judge preflight on {socket.gethostname()}: {exc}") from exc
    except Exception as exc:
        raise RuntimeError(f"judge preflight on {where}: the judge failed ({type(exc).__name__}: {exc})"[:2000]) \
            from exc
    finally:
        if own and judge is not None and hasattr(judge, "close"):
            judge.close()
    if res.verdict != "accepted":
        detail = next((t.message or t.stderr for t in res.tests if t.verdict != "accepted"), "")
        raise RuntimeError(f"judge preflight on {where}: a correct program was judged {res.verdict} "
                           f"({str(detail)[:300]!r}); the reward would be sandbox_error for every sample")
    return {"host": socket.gethostname(), "judge": type(judge).__name__, "sandbox_url": url or None,
            "verdict": res.verdict, "judge_s": float(res.judge_s)}


def _node_check() -> dict[str, Any]:
    return {"pid": os.getpid(), **judge_preflight()}


def cluster_preflight(address: str, env: Mapping[str, str], timeout_s: float = 300.0) -> list[dict[str, Any]]:
    """:func:`judge_preflight` as one Ray task (``num_cpus=0``, hard node affinity) on every alive node with CPUs of
    the cluster at ``address``, under ``runtime_env={"env_vars": env}``; connects with ``ray.init`` and disconnects
    before returning. Returns each node's report (plus ``node_id``). Raises ``RuntimeError`` naming the node when a
    check fails or does not answer within ``timeout_s`` seconds."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=address, runtime_env={"env_vars": dict(env)}, include_dashboard=False, log_to_driver=False,
             namespace="rlvr-preflight")
    try:
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
        task = ray.remote(num_cpus=0, max_retries=0)(_node_check)
        refs = {nid: task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False)).remote()
                for nid in nodes}
        out = []
        for nid, ref in refs.items():
            try:
                out.append({"node_id": nid, **ray.get(ref, timeout=timeout_s)})
            except ray.exceptions.GetTimeoutError as exc:
                raise RuntimeError(f"judge preflight on Ray node {nid}: no answer in {timeout_s:.0f} s") from exc
            except ray.exceptions.RayError as exc:
                cause = getattr(exc, "cause", None) or exc
                raise RuntimeError(f"judge preflight on Ray node {nid}: {cause}"[:2000]) from exc
        return out
    finally:
        ray.shutdown()


def preflight(env: Mapping[str, str], ray_address: str | None = None, judge: Any = None) -> list[dict[str, Any]]:
    """Check the judge before a verl launch (module doc): :func:`judge_preflight` here, then, when ``ray_address``
    or ``RAY_ADDRESS`` (in ``env`` or the environment) names an existing cluster, :func:`cluster_preflight` on each of
    its nodes with ``env``. Returns the reports; raises ``RuntimeError`` (see both)."""
    reports = [judge_preflight(judge)]
    address = ray_address or env.get("RAY_ADDRESS") or os.environ.get("RAY_ADDRESS")
    if address and address != "local":
        reports += cluster_preflight(address, {k: v for k, v in env.items() if k != "RAY_ADDRESS"})
    return reports
