"""Load and soak benchmark of the judge server: N hostile and ordinary submissions over HTTP, then leak checks.

What it does (all traffic to 127.0.0.1 only; bounded in count (``--n``) and time (``--max-seconds``), stops by itself):

1. Starts ``rlvr sandbox serve`` (real uvicorn, one process, ``RLVR_SANDBOX_WORKERS=--workers`` sandboxes) on a free
   local port, with ``TMPDIR`` pointing at a fresh directory so every temp file the server makes is attributable.
2. Warms up (``--warmup`` submissions) so the sandbox pool exists, then snapshots the server: open file descriptors
   (``/proc/<pid>/fd``), mount table size (``/proc/<pid>/mountinfo``), descendant processes (bwrap + harness per
   worker), sandbox-uid processes (``61000+``, see :mod:`rlvr.judge.sandbox`) and host ``/tmp`` entries.
3. Sends N submissions through :class:`rlvr.judge.client.RemoteJudge` at ``--oversub`` × workers concurrency (2×
   oversubscription by default), mixing: accepted, wrong answer, runtime error, timeouts (CPU spin, 0.5 s limit),
   memory bombs, fork bombs and output floods (expected verdicts below). Latency = client-side wall seconds per
   submission, 503 + Retry-After waits included.
4. Snapshots again (after the client has closed its connections), shuts the server down with SIGINT, and checks that
   nothing survives: no descendant or sandbox-uid process of this run, not even as a zombie (the sandbox reaps what it
   starts, see :mod:`rlvr.judge.sandbox`; this does not rely on the host's PID 1 reaping), the server's ``TMPDIR``
   empty, the fd and mount counts back to the warm baseline, and no more zombie ``bwrap`` processes on the host than
   before the load (sandboxes restarted in the middle of the run included). cgroups: not applicable — the judge uses
   rlimits and namespaces (bubblewrap), it creates no cgroups.

Run: ``.venv/bin/python bench/soak/bench_soak.py --n 10000`` → ``bench/soak/results.json`` (+ a Markdown table on
stdout for ``bench/README.md``). The CPU is shared with whatever else runs on the machine: throughput is a lower bound.
"""

from __future__ import annotations

import json
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import click
import httpx

from rlvr.data.schema import Problem, StdioTest
from rlvr.io import atomic_write_json
from rlvr.judge.client import RemoteJudge

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SANDBOX_UIDS = range(61000, 65000)

PROBLEM = Problem(
    id="soak/sum", source="soak", split="test", statement="print a+b", time_limit_s=0.5, memory_limit_mb=256,
    tests=[StdioTest(stdin="1 2\n", stdout="3\n"), StdioTest(stdin="20 22\n", stdout="42\n")],
)

#: kind → (program, expected verdicts, weight in the mix)
KINDS: dict[str, tuple[str, set[str], int]] = {
    "accepted": ("a, b = map(int, input().split())\nprint(a + b)\n", {"accepted"}, 45),
    "wrong_answer": ("a, b = map(int, input().split())\nprint(a - b)\n", {"wrong_answer"}, 15),
    "runtime_error": ("raise ValueError('boom')\n", {"runtime_error"}, 8),
    "timeout": ("while True:\n    pass\n", {"timeout"}, 4),
    "memory_bomb": ("x = bytearray(1 << 31)\n", {"memory_limit"}, 10),
    "fork_bomb": ("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
                  {"timeout", "runtime_error", "memory_limit"}, 6),
    "output_flood": ("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
                     {"runtime_error", "wrong_answer"}, 12),
}


# ------------------------------------------------------------------------------------------------------ inspection
def _stat(pid: int) -> tuple[int, int] | None:
    """(ppid, uid) of ``pid`` or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        uid = Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1]), uid


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def zombie_bwraps() -> list[int]:
    """pids of every zombie ``bwrap`` process visible on the host (whoever its parent is)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                head, tail = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)
            except OSError:
                continue
            if head.endswith("(bwrap") and tail.split()[0] == "Z":
                out.append(int(d))
    return sorted(out)


def processes() -> dict[int, tuple[int, int]]:
    """pid → (ppid, uid) of every visible process."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and (s := _stat(int(d))) is not None:
            out[int(d)] = s
    return out


def descendants(root: int, procs: dict[int, tuple[int, int]]) -> set[int]:
    """pids below ``root`` in the process tree."""
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            if k not in out:
                out.add(k)
                todo.append(k)
    return out


def snapshot(pid: int, tmpdir: Path) -> dict[str, Any]:
    """Resource counts of the server process ``pid`` and the host."""
    procs = processes()
    desc = descendants(pid, procs)
    return {
        "server_fds": len(os.listdir(f"/proc/{pid}/fd")),
        "server_mounts": len(Path(f"/proc/{pid}/mountinfo").read_text().splitlines()),
        "descendants": len(desc),
        "descendant_pids": sorted(desc),
        "sandbox_uid_processes_host": sum(1 for _, uid in procs.values() if uid in SANDBOX_UIDS),
        "server_tmpdir_entries": sorted(os.listdir(tmpdir)),
        "host_zombie_bwraps": zombie_bwraps(),
        "host_tmp_entries": sorted(os.listdir("/tmp")),
    }


# ------------------------------------------------------------------------------------------------------ the server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(workers: int, max_queue: int | None, tmpdir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "RLVR_SANDBOX_WORKERS": str(workers), "TMPDIR": str(tmpdir)}
    env.pop("RLVR_SANDBOX_URL", None)
    if max_queue is not None:
        env["RLVR_SANDBOX_MAX_QUEUE"] = str(max_queue)
    fh = log.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvr.cli", "sandbox", "serve", "--host", "127.0.0.1", "--port", str(port),
         "--log-level", "warning"], env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise click.ClickException(f"server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/v1/ping", timeout=2).json() == "pong":
                return proc, url
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise click.ClickException("server did not come up in 120 s")
        time.sleep(0.2)


def stop_server(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(timeout=10)


# ------------------------------------------------------------------------------------------------------ the load
def mix(n: int, seed: int) -> list[str]:
    """``n`` submission kinds drawn with the KINDS weights (seeded)."""
    rng = random.Random(seed)
    names = list(KINDS)
    return rng.choices(names, weights=[KINDS[k][2] for k in names], k=n)


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else 0.0


def run_load(url: str, kinds: list[str], concurrency: int, max_seconds: float) -> dict[str, Any]:
    """Judge every submission (at most ``concurrency`` in flight); stop submitting after ``max_seconds``."""
    lat: list[float] = []
    got: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    wrong: list[dict[str, str]] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + max_seconds
    done = 0

    with RemoteJudge(url, concurrency=concurrency, retries=6, max_backoff_s=5.0) as rj:

        def one(kind: str) -> None:
            nonlocal done
            if time.monotonic() > stop_at:
                return
            t0 = time.monotonic()
            jr = rj.judge(PROBLEM, KINDS[kind][0])
            dt = time.monotonic() - t0
            with lock:
                done += 1
                lat.append(dt)
                got[kind][jr.verdict] += 1
                if jr.verdict not in KINDS[kind][1] and len(wrong) < 20:
                    wrong.append({"kind": kind, "verdict": jr.verdict, "message": jr.message[:200]})

        t0 = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(one, kinds))
        wall = time.monotonic() - t0
        waits = rj.backpressure_waits
    unexpected = sum(c for k, cnt in got.items() for v, c in cnt.items() if v not in KINDS[k][1])
    return {
        "submitted": len(kinds), "judged": done, "wall_s": round(wall, 2),
        "throughput_per_s": round(done / wall, 2) if wall else 0.0,
        "latency_s": {"p50": round(_pct(lat, 0.5), 4), "p95": round(_pct(lat, 0.95), 4),
                      "p99": round(_pct(lat, 0.99), 4), "max": round(max(lat, default=0.0), 4)},
        "verdicts_by_kind": {k: dict(v) for k, v in got.items()},
        "expected_verdicts": {k: sorted(v[1]) for k, v in KINDS.items()},
        "unexpected": unexpected, "unexpected_examples": wrong, "backpressure_503_waits": waits,
    }


def markdown(res: dict[str, Any]) -> str:
    load, leaks = res["load"], res["leaks"]
    lat = load["latency_s"]
    rows = [
        "| submissions | workers | client concurrency | throughput (subm/s) | p50 s | p95 s | p99 s | unexpected "
        "verdicts | 503 waits | leaks |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {load['judged']} | {res['workers']} | {res['concurrency']} | {load['throughput_per_s']} | {lat['p50']} | "
        f"{lat['p95']} | {lat['p99']} | {load['unexpected']} | {load['backpressure_503_waits']} | "
        f"{'none' if leaks['ok'] else 'FOUND'} |",
    ]
    return "\n".join(rows)


@click.command()
@click.option("--n", "n", default=10_000, show_default=True, type=click.IntRange(1, 1_000_000), help="submissions")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 256), help="server sandboxes")
@click.option("--oversub", default=2.0, show_default=True, help="client concurrency = oversub × workers")
@click.option("--max-queue", default=None, type=int, help="RLVR_SANDBOX_MAX_QUEUE of the server (default: 2×workers)")
@click.option("--warmup", default=20, show_default=True, help="accepted submissions before the baseline snapshot")
@click.option("--max-seconds", default=3600.0, show_default=True, help="stop submitting after this many seconds")
@click.option("--seed", default=0, show_default=True)
@click.option("--fork-bombs/--no-fork-bombs", default=True, show_default=True,
              help="include fork bombs (each can briefly fill the host's pid table while RLIMIT_NPROC is unset)")
@click.option("--out", default=str(HERE / "results.json"), show_default=True, type=click.Path(dir_okay=False))
def main(n: int, workers: int, oversub: float, max_queue: int | None, warmup: int, max_seconds: float, seed: int,
         fork_bombs: bool, out: str) -> None:
    """Soak the judge server with N mixed submissions at oversubscription, then prove nothing leaked."""
    if not fork_bombs:
        KINDS.pop("fork_bomb")
    concurrency = max(1, round(oversub * workers))
    tmpdir = Path(tempfile.mkdtemp(prefix="rlvr-soak-"))
    host_tmp_before = set(os.listdir("/tmp"))
    log = tmpdir.parent / f"{tmpdir.name}.log"
    proc, url = start_server(workers, max_queue, tmpdir, log)
    try:
        with RemoteJudge(url, concurrency=concurrency) as rj:
            warm = rj.judge_many([(PROBLEM, KINDS["accepted"][0])] * max(warmup, workers))
        assert all(r.verdict == "accepted" for r in warm), [r.message for r in warm if r.verdict != "accepted"]
        time.sleep(1.0)
        before = snapshot(proc.pid, tmpdir)
        load = run_load(url, mix(n, seed), concurrency, max_seconds)
        time.sleep(1.0)  # let the server close the client's keep-alive sockets
        after = snapshot(proc.pid, tmpdir)
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
    finally:
        rc = stop_server(proc)
    time.sleep(1.0)
    seen = set(before["descendant_pids"]) | set(after["descendant_pids"]) | {proc.pid}
    survivors = sorted(p for p in seen if _stat(p) is not None and not _zombie(p))
    zombies = sorted(p for p in seen if _zombie(p))
    zombie_bwraps_end = zombie_bwraps()
    host_tmp_new = sorted((set(os.listdir("/tmp")) - host_tmp_before) - {tmpdir.name, log.name})
    tmp_left = sorted(os.listdir(tmpdir))
    leaks = {
        "server_fds_before_after": [before["server_fds"], after["server_fds"]],
        "server_mounts_before_after": [before["server_mounts"], after["server_mounts"]],
        "descendants_before_after": [before["descendants"], after["descendants"]],
        "surviving_processes_after_shutdown": survivors,
        "zombies_after_shutdown": zombies,
        "host_zombie_bwraps_before_after_shutdown": [len(before["host_zombie_bwraps"]), len(zombie_bwraps_end)],
        "sandbox_uid_processes_host_before_after": [before["sandbox_uid_processes_host"],
                                                    after["sandbox_uid_processes_host"]],
        "server_tmpdir_entries_left": tmp_left,
        "host_tmp_new_entries": host_tmp_new,
        "cgroups": "not applicable: the judge creates no cgroups (rlimits + bubblewrap namespaces)",
        "server_exit_code": rc,
    }
    leaks["ok"] = (
        after["server_fds"] <= before["server_fds"] and after["server_mounts"] == before["server_mounts"]
        and after["descendants"] <= before["descendants"] and not survivors and not zombies and not tmp_left
        and len(zombie_bwraps_end) <= len(before["host_zombie_bwraps"])
    )
    os.rmdir(tmpdir)
    res = {
        "benchmark": "judge soak over HTTP (rlvr sandbox serve + RemoteJudge)",
        "command": " ".join(["bench/soak/bench_soak.py", *sys.argv[1:]]),
        "n": n, "fork_bombs": fork_bombs, "workers": workers, "concurrency": concurrency, "max_queue": max_queue,
        "seed": seed,
        "problem": {"tests": len(PROBLEM.tests), "time_limit_s": PROBLEM.time_limit_s,
                    "memory_limit_mb": PROBLEM.memory_limit_mb},
        "mix_weights": {k: v[2] for k, v in KINDS.items()},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "note": "CPU shared with other jobs on this machine: throughput is a lower bound"},
        "load": load, "leaks": leaks,
        "server_metrics_excerpt": [ln for ln in metrics.splitlines()
                                   if ln.startswith(("rlvr_judge_requests_total", "rlvr_judge_rejected_total"))],
    }
    atomic_write_json(Path(out), res)
    log.unlink(missing_ok=True)
    click.echo(json.dumps({"load": load, "leaks": leaks}, indent=2))
    click.echo(markdown(res))
    if not leaks["ok"] or load["unexpected"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
