"""Per-call overhead of the judge's trust boundary (call tests and assert tests), a short microbenchmark.

Three problems, each ``--calls`` calls of a trivial function ``f(x) = x``:

* ``call``: ``--calls`` call tests (arguments sent to the submission's call server, the return value written as a
  literal and compared on the host);
* ``assert_converted``: ``assert f(i) == i`` asserts, turned into host-compared calls (:mod:`rlvr.judge.asserts`);
* ``assert_driver``: one assert test whose code makes ``--calls`` calls (``for i in range(n): assert f(i) + 0 == i``):
  the test code runs in the driver sandbox and each call crosses driver → host → runner → call server and back.

Reports wall and CPU milliseconds per call (CPU = this process + every sandbox process, as ``bench_judge.py``
counts it), after one warm-up submission per problem. Run:
``PYTHONPATH=$PWD .venv/bin/python bench/judge/bench_boundary.py [--calls 1000] [--out FILE]``.
"""

from __future__ import annotations

import json
import platform
import resource
import time
from pathlib import Path

import click

from rlvr.data.schema import Problem
from rlvr.io import atomic_write_json
from rlvr.judge import JUDGE_VERSION, Judge

SOLUTION = "def f(x):\n    return x\n"


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def problems(n: int) -> dict[str, Problem]:
    """The three workloads of the module docstring, ``n`` calls each."""
    def mk(tests: list[dict]) -> Problem:
        return Problem(id="bench/boundary", source="bench", split="bench", statement="", entry_point="f",
                       tests=tests, time_limit_s=60.0)

    return {
        "call": mk([{"kind": "call", "args": f"[{i}]", "expected": str(i)} for i in range(n)]),
        "assert_converted": mk([{"kind": "assert", "code": f"assert f({i}) == {i}"} for i in range(n)]),
        "assert_driver": mk([{"kind": "assert", "code": f"for i in range({n}):\n    assert f(i) + 0 == i\n"}]),
    }


@click.command()
@click.option("--calls", type=int, default=1000, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="write results JSON here")
def main(calls: int, out: Path | None) -> None:
    """Measure and print ms per call for each workload."""
    results = {}
    with Judge(workers=1) as judge:
        for name, p in problems(calls).items():
            assert judge.judge(p, SOLUTION).accepted, name  # warm-up (starts the driver sandbox too)
            cpu0, inside0, t0 = _cpu(), judge.sandbox_cpu_seconds(), time.perf_counter()
            res = judge.judge(p, SOLUTION)
            wall = time.perf_counter() - t0
            cpu = _cpu() - cpu0 + judge.sandbox_cpu_seconds() - inside0
            assert res.accepted, (name, res.message)
            results[name] = {"wall_ms_per_call": round(1000 * wall / calls, 4),
                             "cpu_ms_per_call": round(1000 * cpu / calls, 4)}
            click.echo(f"{name}: {json.dumps(results[name])}")
        info = judge.isolation_info()
    if out is not None:
        atomic_write_json(out, {
            "command": f"python bench/judge/bench_boundary.py --calls {calls}",
            "judge_version": JUDGE_VERSION, "calls": calls, "results": results, "isolation": info,
            "machine": {"cpus": __import__("os").cpu_count(), "platform": platform.platform()},
        })


if __name__ == "__main__":
    main()
