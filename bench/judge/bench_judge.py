"""Judge cost bench (issue 14, item 8): rlvr's judge vs a lean fork floor vs verl's ``prime_code``, side by side.

Systems, measured in one run with interleaved repeats (rlvr, served, floor, prime, boundary, rlvr, … so load drifts hit
all of them alike), each in a fresh subprocess:

* ``rlvr``: ``Judge(workers).judge_many`` over the stdio200 workload (200 correct programs x 10 stdin/stdout tests),
  judge start and close included.
* ``served``: the same judge behind its HTTP server (``rlvr sandbox serve``'s app, uvicorn, JSON request logs), one
  ScaleBox ``/common_evaluate_batch`` request per program (all its tests in one ``stdin_stdout`` case), ``--clients``
  concurrent keep-alive connections (default 2 x workers, so requests also wait in the admission queue, as a node's
  reward workers' do): the path a node-wide judge for verl's reward workers takes. Counted: the server's whole tree
  (server process, bwrap, sandboxes) from the first request to the last answer, after a warm-up request per worker;
  the client is outside the cgroup. ``server_process_cpu_s``: the server process alone (HTTP, JSON, the judge's host
  side).
* ``floor``: :mod:`floor` — one warm ``python3 -I`` (the sandbox's interpreter, :func:`floor_python`) that forks
  one child per test (stdin from a pipe, stdout to a pipe, token comparison in the parent), no isolation at all: the
  cost floor of "fork a warm interpreter per test".
* ``prime``: verl 0.9.1 ``verl.utils.reward_score.prime_code.compute_score`` (APPS-style ``testing_util``) on the same
  programs and tests, called the way verl's ``default_compute_score`` does without a sandbox URL (one call per program,
  ``continuous=True``: a first all-tests pass, and on any failure a per-test re-run of the first 10). It runs the
  program in-process with patched ``sys.stdin``/``open`` (no isolation beyond ``reliability_guard``); programs it
  misjudges are counted as its false negatives.
* ``boundary``: per-call overhead of call tests and assert tests: a trivial function judged on 1 and on ``--calls``
  call tests, and on 1 and ``--calls`` assert tests; overhead per call = (cost(N) - cost(1)) / (N - 1).

What is counted (CPU ms per test): every process of the system's tree, whoever reaps it. The subprocess moves itself
into a fresh cgroup-v1 ``cpuacct`` group (``/sys/fs/cgroup/cpuacct/rlvr-bench-…``; needs root) before doing anything,
and reads ``cpuacct.usage`` before and after the measured region, so the bubblewrap processes, the in-sandbox warden
and runners, test drivers, the floor's interpreter and prime_code's multiprocessing Manager are all included (the
judge's own memory/pids cgroups are other v1 hierarchies and do not move processes out of ``cpuacct``). Without
cgroup access the fallback is RUSAGE_SELF + RUSAGE_CHILDREN of the subprocess after the judge is closed and reaped,
plus ``Judge.sandbox_cpu_seconds()`` read before ``close()`` (processes killed rather than reaped are then missed);
both figures are recorded when available. Loading the workload and importing rlvr are outside the measured region.

Output (``results.json``): every repeat's figures; per system the best (minimum) and the median CPU ms per test over
the repeats; ``ratio_rlvr_over_floor`` (best over best: CPU time only grows with the machine's noise, so the minimum
is the least disturbed figure), ``ratio_of_medians`` and ``ratio_per_repeat`` (the two systems of one repeat, run
back to back: how far the machine's drift moves the ratio); the same three for ``served`` (``ratio_served_over_floor``,
``ratio_of_medians_served``, ``ratio_per_repeat_served``).

Run (on an idle machine; the figures in ``results.json`` name the command and machine):
``sudo .venv/bin/python bench/judge/bench_judge.py --workers 2 --repeat 5`` -> ``bench/judge/results.json``. It
measures the rlvr of its own tree (``PYTHONPATH``, when set, picks another: ``rlvr_tree`` in the output says which).
Quick check: ``--repeat 1 --programs 20 --calls 200``. ``--imports typing,datetime,random``: every program starts by
importing those modules (what the judge's runner preloads for a program that names them; the floor's children import
them per test, so only each system's own CPU per test, not its ratio over the floor, says what that costs).
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

HERE = Path(__file__).parent
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
if "PYTHONPATH" not in os.environ:  # the rlvr of this tree, not the one installed in .venv (set PYTHONPATH for another)
    sys.path.insert(1, str(HERE.parents[1]))


def floor_python() -> str:
    """The floor's interpreter: the one the judge's sandbox runs (``RLVR_SANDBOX_PYTHON``, else ``/usr/bin/python3`` as
    root; :func:`rlvr.judge.sandbox.bwrap.sandbox_python`), so that both sides fork the same interpreter."""
    from rlvr.judge.sandbox.bwrap import sandbox_python

    return sandbox_python()


FLOOR_SPLIT = (  # floor.py's field, the per-test figure it becomes, scale
    ("parent_cpu_s", "parent_cpu_ms_per_test", 1000),
    ("child_cpu_s", "child_cpu_ms_per_test", 1000),
    ("parent_faults", "parent_faults_per_test", 1),
    ("child_faults", "child_faults_per_test", 1),
)


# ------------------------------------------------------------------------------------------------ measurement plumbing
def _rusage_s() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class Meter:
    """CPU seconds of this process's tree: its cpuacct cgroup (when ``cgroup`` is given and joinable) and rusage."""

    def __init__(self, cgroup: str | None, join: bool = True) -> None:
        self.usage: Path | None = None
        if cgroup:
            try:
                if join:
                    (Path(cgroup) / "cgroup.procs").write_text(str(os.getpid()))
                self.usage = Path(cgroup) / "cpuacct.usage"
                self.usage.read_text()
            except OSError as exc:
                self.usage = None
                print(f"cgroup {cgroup} not joinable ({exc}): rusage fallback", file=sys.stderr)

    def read(self) -> dict[str, float]:
        """``{"cgroup_s": …?, "rusage_s": …, "wall_s": …}`` now (cumulative)."""
        out = {"rusage_s": _rusage_s(), "wall_s": time.perf_counter()}
        if self.usage is not None:
            out["cgroup_s"] = int(self.usage.read_text()) / 1e9
        return out

    @staticmethod
    def delta(a: dict[str, float], b: dict[str, float], extra_s: float = 0.0) -> dict[str, float]:
        """b - a per key; ``extra_s`` (CPU reported from inside the sandboxes) is added to the rusage figure."""
        d = {k: b[k] - a[k] for k in a if k in b}
        d["rusage_s"] += extra_s
        d["cpu_s"] = d.get("cgroup_s", d["rusage_s"])
        return d


def _version(python: str) -> str | None:
    """``python``'s version (``platform.python_version()``), None when it cannot run."""
    try:
        out = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def _commit(tree: Path) -> str | None:
    """The commit checked out in ``tree``, with ``+dirty`` when code under ``rlvr/`` or ``bench/`` differs from it
    (results files aside; None: not a git checkout)."""
    try:
        head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--", "rlvr", ":(glob)bench/**/*.py",
                                ":(glob)bench/**/*.sh", ":(glob)bench/**/*.c"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def load(path: Path, programs: int | None, imports: str | None = None) -> list[dict[str, Any]]:
    """The workload ``[{"task_id", "code", "tests": [{"stdin", "stdout"}]}]``: its first ``programs`` records;
    ``imports`` (comma-separated module names): each program starts with ``import <imports>`` (a workload whose
    programs import what the judge preloads for programs that name it, inside/runner.py's ``PRELOAD``)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        items = [json.loads(line) for line in fh]
    items = items[:programs] if programs else items
    if imports:
        head = f"import {', '.join(m.strip() for m in imports.split(','))}\n"
        items = [{**r, "code": head + r["code"]} for r in items]
    return items


# ------------------------------------------------------------------------------------------- systems (in the child)
def run_rlvr(items: list[dict[str, Any]], workers: int, cgroup: str | None) -> dict[str, Any]:
    from rlvr.data.schema import Problem
    from rlvr.judge import Judge

    pairs = [(Problem(id=r["task_id"], source="stdio200", split="bench", statement="",
                      tests=[{"kind": "stdio", **t} for t in r["tests"]]), r["code"]) for r in items]
    meter = Meter(cgroup)
    a = meter.read()
    judge = Judge(workers=workers)
    results = judge.judge_many(pairs)
    inside = judge.sandbox_cpu_seconds()
    info = judge.isolation_info()
    judge.close()
    d = Meter.delta(a, meter.read(), inside)
    d["sandbox_cpu_seconds"] = inside
    d["false_negatives"] = sum(r.verdict != "accepted" for r in results)
    d["isolation"] = {k: info.get(k) for k in ("cgroup", "seccomp", "forkloop")}
    return d


def serve_for_bench(workers: int, cgroup: str | None) -> None:
    """The ``served`` system's server process: joins ``cgroup`` first (so it and every sandbox process it starts are
    counted), then serves the judge as ``rlvr sandbox serve`` does (:func:`rlvr.judge.api.app.serve`: the app
    factory, JSON request logs, uvicorn without its access log) on a free loopback port, printed as the first line of
    stdout. Runs until SIGTERM."""
    import socket

    if cgroup:
        (Path(cgroup) / "cgroup.procs").write_text(str(os.getpid()))
    os.environ["RLVR_SANDBOX_WORKERS"] = str(workers)
    import uvicorn

    from rlvr.judge.api.app import configure_logging

    configure_logging("info")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    config = uvicorn.Config("rlvr.judge.api.app:create_app", factory=True, log_level="info", access_log=False,
                            **server_stack())
    uvicorn.Server(config).run(sockets=[sock])


def server_stack() -> dict[str, Any]:
    """The ``served`` system's uvicorn options (``uvicorn.Config`` keyword arguments), as ``rlvr sandbox serve`` sets
    them: the tree's front door (:func:`rlvr.judge.api.frontdoor.uvicorn_options`: event loop, guarded HTTP
    protocol, limits; the open-file limit raised first); for an older tree, its
    :func:`rlvr.judge.api.app.uvicorn_stack`; for a tree without either (run by ``alternate.sh`` with ``BENCH=new``),
    what uvicorn's default ``auto`` picks, spelt out."""
    try:
        from rlvr.judge.api.frontdoor import raise_nofile_limit, uvicorn_options
    except ImportError:
        pass
    else:
        raise_nofile_limit()
        return uvicorn_options()
    try:
        from rlvr.judge.api.app import uvicorn_stack
    except ImportError:
        out = {}
        for key, fast, plain in (("loop", "uvloop", "asyncio"), ("http", "httptools", "h11")):
            try:
                __import__(fast)
                out[key] = fast
            except ImportError:
                out[key] = plain
        return out
    return uvicorn_stack()


def scalebox_body(i: int, r: dict[str, Any]) -> bytes:
    """One ``/common_evaluate_batch`` request for workload item ``r``: all its stdio tests in one ScaleBox
    ``stdin_stdout`` case, the per-test limit of the in-process system's problems (``Problem.time_limit_s``)."""
    tc = {"type": "stdin_stdout", "input": [t["stdin"] for t in r["tests"]],
          "output": [t["stdout"] for t in r["tests"]]}
    return json.dumps({"id": i, "dataset": "stdio200", "completion": r["code"],
                       "config": {"language": "python", "run_timeout": 10.0,
                                  "provided_data": {"test_cases": tc}}}).encode()


def run_served(items: list[dict[str, Any]], workers: int, clients: int, cgroup: str | None) -> dict[str, Any]:
    """The judge behind its HTTP server, one ``/common_evaluate_batch`` request per program (the path a node-wide
    judge for verl's reward workers takes). The server (:func:`serve_for_bench`) runs in ``cgroup``; this process,
    the client, does not: ``clients`` threads, one keep-alive connection each, take the next program in turn and
    post it (more clients than workers: requests wait in the server's admission queue, as a node's reward workers'
    do). Counted:
    the server's whole tree from the first measured request to the last answer, after a warm-up of ``workers``
    concurrent requests (a long-lived server: its start and every sandbox's start are outside, unlike ``rlvr``,
    whose judge start and close are inside, ~0.02 ms per test)."""
    import http.client
    import threading

    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "served-server",
            "--opts", json.dumps({"workers": workers})]
    if cgroup:
        argv += ["--cgroup", cgroup]
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        deadline = time.monotonic() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/v1/ping")
                if c.getresponse().status == 200:
                    c.close()
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.1)
        bodies = [scalebox_body(i, r) for i, r in enumerate(items)]
        verdicts: list[str | None] = [None] * len(bodies)

        def post(conn: http.client.HTTPConnection, body: bytes) -> dict[str, Any]:
            conn.request("POST", "/common_evaluate_batch", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {data[:500]!r}")
            return json.loads(data)

        todo = iter(range(len(bodies)))  # next() on it is atomic under the GIL

        def client(conn: http.client.HTTPConnection) -> None:
            for i in todo:
                verdicts[i] = post(conn, bodies[i])["verdict"]

        conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=600) for _ in range(max(clients, workers))]
        warm = [threading.Thread(target=post, args=(c, bodies[0])) for c in conns[:workers]]  # every sandbox up
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        meter = Meter(cgroup, join=False)
        own0 = _proc_cpu_s(server.pid)
        a = meter.read()
        threads = [threading.Thread(target=client, args=(c,)) for c in conns[:clients]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        b = meter.read()
        own = _proc_cpu_s(server.pid) - own0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    d = Meter.delta(a, b)
    if meter.usage is None:
        d["cpu_s"] = float("nan")  # the server's CPU cannot be read without its cgroup
    d["false_negatives"] = sum(v != "accepted" for v in verdicts)
    d["server_process_cpu_s"] = round(own, 4)  # the server's own process (HTTP, JSON, plan, scoring), no sandbox
    # the server's event loop and HTTP implementation (same interpreter and path); the front door passes its guarded
    # protocol as a class, recorded by name
    d["uvicorn"] = {k: f"{v.__module__}.{v.__qualname__}" if isinstance(v, type) else v
                    for k, v in server_stack().items()}
    return d


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` itself, all its threads (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_floor(items: list[dict[str, Any]], cgroup: str | None) -> dict[str, Any]:
    meter = Meter(cgroup)
    req = json.dumps({"items": [{"code": r["code"], "tests": r["tests"]} for r in items]})
    a = meter.read()
    out = subprocess.run([floor_python(), "-I", str(HERE / "floor.py")], input=req, capture_output=True, text=True,
                         check=True)
    d = Meter.delta(a, meter.read())
    got = json.loads(out.stdout)
    d["false_negatives"] = got["tests"] - got["accepted"]
    d["inner_cpu_s"] = got["cpu_s"]
    # the floor's own split (parent vs forked children), to compare with profile_sandbox.py's runner vs test child
    for key, name, scale in FLOOR_SPLIT:
        if key in got:
            d[name] = round(got[key] * scale / max(got["tests"], 1), 3)
    return d


def run_prime(items: list[dict[str, Any]], cgroup: str | None) -> dict[str, Any]:
    from verl.utils.reward_score import prime_code

    cases = [{"inputs": [t["stdin"] for t in r["tests"]], "outputs": [t["stdout"] for t in r["tests"]]}
             for r in items]
    meter = Meter(cgroup)
    a = meter.read()
    ok = []
    for r, tc in zip(items, cases, strict=True):
        success, _meta = prime_code.compute_score(r["code"], json.dumps(tc), continuous=True)
        ok.append(success is True or success == 1)
    d = Meter.delta(a, meter.read())
    d["false_negative_programs"] = sum(not x for x in ok)  # compute_score answers per program
    return d


def _own_boundary_problems(n: int) -> dict[str, Any]:
    """Fallback workloads when ``bench_boundary.py`` (judge-core's) is absent: n call tests / n assert lines."""
    from rlvr.data.schema import Problem

    def mk(tests: list[dict[str, Any]]) -> Problem:
        return Problem(id="bench/boundary", source="bench", split="bench", statement="", entry_point="f",
                       tests=tests, time_limit_s=60.0)

    return {"call": mk([{"kind": "call", "args": f"[{i}]", "expected": str(i)} for i in range(n)]),
            "assert": mk([{"kind": "assert", "code": f"assert f({i}) == {i}"} for i in range(n)])}


def run_boundary(calls: int, workers: int, cgroup: str | None) -> dict[str, Any]:
    """Per-call cost of call/assert tests: each workload at 1 and ``calls`` calls (min of 3 runs each, after a
    warm-up that also starts the driver sandbox); per call = (cost(calls) - cost(1)) / (calls - 1), so the fixed
    per-submission cost (reported as ``fixed_*``) is not smeared over the calls. Workloads: ``problems(n)`` of
    ``bench_boundary.py`` next to this file when present (call tests, asserts converted to calls, one assert test
    making n calls through the driver), else two own ones."""
    from rlvr.judge import Judge

    try:
        from bench_boundary import problems as make  # judge-core's workloads
        source = "bench_boundary.problems"
    except ImportError:
        make, source = _own_boundary_problems, "bench_judge fallback"
    sol = "def f(x):\n    return x\n"
    meter = Meter(cgroup)
    out: dict[str, Any] = {"workloads_from": source}
    with Judge(workers=workers) as judge:
        small, big = make(1), make(calls)
        for name in big:
            assert judge.judge(small[name], sol).accepted, name  # warm-up
            cost: dict[int, dict[str, float]] = {}
            for n, p in ((1, small[name]), (calls, big[name])):
                for _ in range(3):  # min of 3: the machine is shared
                    a = meter.read()
                    res = judge.judge(p, sol)
                    d = Meter.delta(a, meter.read())
                    assert res.accepted, (name, n, res.verdict, res.message)
                    cost[n] = d if n not in cost else {k: min(v, cost[n][k]) for k, v in d.items()}
            per = {k: (cost[calls][k] - cost[1][k]) / (calls - 1) * 1000 for k in ("cpu_s", "wall_s")}
            out[name] = {"fixed_cpu_ms": round(cost[1]["cpu_s"] * 1000, 3), "fixed_wall_ms": round(
                cost[1]["wall_s"] * 1000, 3), "per_call_cpu_ms": round(per["cpu_s"], 4),
                "per_call_wall_ms": round(per["wall_s"], 4), "calls": calls}
    out["cpu_measured_by"] = "cgroup" if meter.usage is not None else "rusage (in-sandbox CPU not included)"
    return out


# ------------------------------------------------------------------------------------------------ driver
def _child(system: str, opts: dict[str, Any]) -> dict[str, Any]:
    cg = None
    if CPUACCT.is_dir() and os.access(CPUACCT, os.W_OK):
        cg = CPUACCT / f"rlvr-bench-{os.getpid()}-{system}-{time.monotonic_ns()}"
        try:
            cg.mkdir()
        except OSError:
            cg = None
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", system, "--opts", json.dumps(opts)]
    if cg is not None:
        argv += ["--cgroup", str(cg)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=3600)
    finally:
        if cg is not None:
            for _ in range(50):
                try:
                    cg.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)
    if proc.returncode != 0:
        return {"error": proc.stderr[-3000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


@click.command()
@click.option("--workload", type=click.Path(exists=True, path_type=Path), default=HERE / "stdio200.jsonl.gz")
@click.option("--workers", type=int, default=2, show_default=True)
@click.option("--repeat", type=int, default=3, show_default=True)
@click.option("--programs", type=int, default=None, help="first N programs of the workload (default: all)")
@click.option("--calls", type=int, default=1000, show_default=True, help="tests of the boundary problems")
@click.option("--clients", type=int, default=None, help="concurrent requests of the served system [2 x workers]")
@click.option("--imports", default=None,
              help="comma-separated modules every program imports first (e.g. typing,datetime,random)")
@click.option("--systems", default="rlvr,served,floor,prime,boundary", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=HERE / "results.json")
@click.option("--child", default=None, hidden=True)
@click.option("--opts", default=None, hidden=True)
@click.option("--cgroup", default=None, hidden=True)
def main(workload: Path, workers: int, repeat: int, programs: int | None, calls: int, clients: int | None,
         imports: str | None, systems: str, out: Path, child: str | None, opts: str | None,
         cgroup: str | None) -> None:
    """Measure the systems ``repeat`` times, interleaved, and write ``out`` (see the module docstring)."""
    if child is not None:
        o = json.loads(opts or "{}")
        if child == "served-server":
            serve_for_bench(o["workers"], cgroup)
            return
        items = load(Path(o["workload"]), o["programs"], o.get("imports"))
        if child == "rlvr":
            res = run_rlvr(items, o["workers"], cgroup)
        elif child == "served":
            res = run_served(items, o["workers"], o["clients"], cgroup)
        elif child == "floor":
            res = run_floor(items, cgroup)
        elif child == "prime":
            res = run_prime(items, cgroup)
        else:
            res = run_boundary(o["calls"], o["workers"], cgroup)
        if child != "boundary":
            n_tests = sum(len(r["tests"]) for r in items)
            res["tests"] = n_tests
            res["cpu_ms_per_test"] = round(1000 * res["cpu_s"] / n_tests, 3)
            res["wall_s"] = round(res["wall_s"], 3)
        sys.stdout.write(json.dumps(res) + "\n")
        return
    import rlvr
    from rlvr.io import atomic_write_json
    from rlvr.judge import JUDGE_VERSION

    click.echo(f"rlvr from {Path(rlvr.__file__).parent}")

    names = [s for s in systems.split(",") if s]
    load_at_start = os.getloadavg()
    clients = clients or 2 * workers
    o = {"workload": str(workload), "programs": programs, "workers": workers, "calls": calls, "clients": clients,
         "imports": imports}
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in names}
    for r in range(repeat):
        for s in names:
            res = _child(s, o)
            runs[s].append(res)
            click.echo(f"repeat {r} {s}: {json.dumps(res)[:400]}")
    per = {s: sorted(x["cpu_ms_per_test"] for x in runs[s] if "cpu_ms_per_test" in x) for s in names if s != "boundary"}
    best = {s: v[0] if v else None for s, v in per.items()}
    median = {s: round(statistics.median(v), 3) if v else None for s, v in per.items()}
    def ratios(system: str) -> tuple[float | None, float | None, list[float]]:
        """``system`` over the floor: best over best, median over median, and within each repeat (the same
        repeat's two systems, minutes apart at most: how much of the ratio is the machine's drift)."""
        b = round(best[system] / best["floor"], 3) if best.get(system) and best.get("floor") else None
        m = round(median[system] / median["floor"], 3) if median.get(system) and median.get("floor") else None
        p = [round(x["cpu_ms_per_test"] / y["cpu_ms_per_test"], 3) for x, y in zip(runs.get(system, []),
             runs.get("floor", []), strict=False) if "cpu_ms_per_test" in x and "cpu_ms_per_test" in y]
        return b, m, p

    ratio, ratio_median, paired = ratios("rlvr")
    s_ratio, s_median, s_paired = ratios("served")
    cmd = " ".join(["python", "bench/judge/bench_judge.py", f"--workers {workers}", f"--repeat {repeat}"]
                   + ([f"--programs {programs}"] if programs else [])
                   + ([f"--imports {imports}"] if imports else [])
                   + [f"--calls {calls}", f"--clients {clients}", f"--systems {systems}"])
    atomic_write_json(out, {
        "command": cmd,
        "workload": workload.name,
        "imports": imports,  # every program starts with ``import <imports>`` (None: the workload as it is)
        "judge_version": JUDGE_VERSION,
        "rlvr_tree": str(Path(rlvr.__file__).parent.parent),
        "rlvr_commit": _commit(Path(rlvr.__file__).parent.parent),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "loadavg_at_start": load_at_start, "loadavg_at_end": os.getloadavg(),
                    "python": _version(floor_python())},  # the floor's and the sandbox's: the same one
        "cpu_counted": "cgroup-v1 cpuacct of each system's process tree (fallback: rusage + sandbox_cpu_seconds)",
        "cpu_counted_by": sorted({"cgroup" if "cgroup_s" in r else "rusage" for v in runs.values() for r in v
                                  if "cpu_s" in r}),
        "runs": runs,
        "best_cpu_ms_per_test": best,
        "ratio_rlvr_over_floor": ratio,
        "median_cpu_ms_per_test": median,
        "ratio_of_medians": ratio_median,
        "ratio_per_repeat": paired,
        "ratio_served_over_floor": s_ratio,
        "ratio_of_medians_served": s_median,
        "ratio_per_repeat_served": s_paired,
        "target_ratio": 1.5,
    })
    click.echo(json.dumps({"best_cpu_ms_per_test": best, "ratio_rlvr_over_floor": ratio,
                           "ratio_of_medians": ratio_median, "ratio_per_repeat": paired,
                           "ratio_served_over_floor": s_ratio, "ratio_of_medians_served": s_median,
                           "ratio_per_repeat_served": s_paired}))


if __name__ == "__main__":
    main()
