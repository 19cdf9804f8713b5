"""A slow fake judge for the node-pool test, importable by Ray workers (the test puts this folder on their path)."""

from __future__ import annotations

import time

from rlvr.judge.verdict import JudgeResult


class SlowJudge:
    """Accepts everything after ``delay_s`` seconds per call; built like the embedded judge (``workers=``)."""

    delay_s = 0.2

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def judge_many(self, items, language="python"):
        time.sleep(self.delay_s)
        return [JudgeResult(verdict="accepted", passed=len(p.tests), total=len(p.tests), pass_ratio=1.0,
                            judge_s=self.delay_s) for p, _ in items]

    def run_code(self, code, stdin="", timeout_s=10.0, memory_limit_mb=1024, **kwargs):
        time.sleep(self.delay_s)
        return {"verdict": "accepted", "stdout": code}


class BrokenJudge:
    """A judge that cannot be built (as when the sandbox cannot start on the node): every actor made with it dies in
    its constructor, so each call on it fails with a Ray actor error."""

    def __init__(self, workers: int | None = None) -> None:
        raise RuntimeError("node_pool_fake: this judge cannot start")
