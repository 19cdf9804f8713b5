"""Where a stdio test's CPU goes inside the sandbox: runner vs test child, CPU ms and page faults per test.

The cost bench (:mod:`bench_judge`) gives one figure per system; this profile splits rlvr's in-sandbox part. It starts
a bubblewrap sandbox with the judge's own command line (:func:`rlvr.judge.sandbox.bwrap.argv`, same flags, uid and
seccomp filter) but runs this file as PID 1 instead of the warden. Inside (standard library only) it sets itself up
as the warden does (imports ``warden``, which preloads and loads the judge's modules; seccomp, non-dumpable,
:func:`proc.prepare`, ``gc.freeze``), then for each program of the workload forks a runner, as the warden does per
submission, that runs :func:`runner.handle_batch` on all its stdio tests, checks the outputs, wipes and exits.
Each runner reports its own CPU and minor page faults and those of its reaped test children (``getrusage``).
Differences to a real judge: no host process, no control socket, no cgroup; the runner is forked from this process
(whose heap also holds the workload), not from the warden's main loop.

Output (one JSON line): ``cpu_ms_per_test`` (this process and everything it reaped, i.e. the whole sandbox),
``runner_ms_per_test`` / ``child_ms_per_test`` (runner self / test children), ``runner_faults_per_test`` /
``child_faults_per_test`` (minor faults: copy-on-write copies after ``fork()`` and first touches of file pages),
``image_anon_kb`` / ``image_mappings`` (what every ``fork()`` copies), ``bad`` (programs with a wrong output),
``forkloop`` (the runners ran the compiled per-test loop).

Run as root (bwrap then runs under its own uid, as the judge does):
``python bench/judge/profile_sandbox.py --programs 100 [--loop python]`` (the figures in docs/judge/suite.md name
their command).
"""

import gc
import json
import os
import resource
import sys

# only what the sandbox side needs is imported here: this process's image is what every runner and test forks
HERE = os.path.dirname(os.path.abspath(__file__))


def _rusage(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime, r.ru_minflt


def inside(n_programs, loop="c"):
    """PID 1 of the sandbox: warden-like setup, one forked runner per program; prints the JSON report. ``loop``:
    ``c`` loads the compiled per-test loop as a warden started with ``--forkloop`` does, ``python`` does not."""
    import ctypes

    sys.path[:0] = ["/judge/inside", "/judge"]
    warden = __import__("warden")  # first: its import preloads the modules and loads the judge's own, as a sandbox's
    import proc
    import runner
    import seccomp
    import wipe

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0
    filtered = seccomp.install()
    try:  # (absent in trees before the compiled per-test loop)
        import forkloop as compiled_loop

        forkloop = loop == "c" and compiled_loop.load()
    except ImportError:
        forkloop = False
    os.makedirs(proc.WORKDIR, exist_ok=True)
    with open("/out/work.json") as fh:
        items = json.load(fh)[:n_programs]
    getattr(proc, "prepare", lambda: None)()  # (absent in trees before the prepared test-child streams)
    gc.collect()
    gc.freeze()
    with open("/proc/self/statm") as fh:
        base_vm = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + (64 << 20)
    with open("/proc/self/smaps_rollup") as fh:
        anon_kb = next(int(line.split()[1]) for line in fh if line.startswith("Anonymous:"))
    with open("/proc/self/maps") as fh:
        mappings = sum(1 for _ in fh)
    cpu0, _ = _rusage(resource.RUSAGE_SELF)
    kids0, _ = _rusage(resource.RUSAGE_CHILDREN)
    runner_cpu = child_cpu = runner_flt = child_flt = 0.0
    tests = bad = 0
    for item in items:
        req = {"op": "batch", "native": None, "code": item["code"], "entry_point": None, "test_setup": None,
               "tests": [{"kind": "stdio", "stdin": t["stdin"], "tl": 10.0} for t in item["tests"]],
               "memory_limit_mb": 1024, "output_limit_mb": 16, "max_timeouts": 3, "call_cpu_s": 100.0}
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            out = []
            runner.handle_batch(req, out.append, lambda: None, base_vm)
            recs = [x["rec"] for frame in out if frame.get("t") == "recs" for x in frame["recs"]]
            ok = len(recs) == len(item["tests"]) and all(
                rec.get("status") == "ok" and rec["stdout"].split() == t["stdout"].split()
                for rec, t in zip(recs, item["tests"], strict=True))
            me, kids = _rusage(resource.RUSAGE_SELF), _rusage(resource.RUSAGE_CHILDREN)
            os.write(w, json.dumps([ok, *me, *kids]).encode())
            os._exit(wipe.wipe_all())
        os.close(w)
        with os.fdopen(r, "rb") as fh:
            ok, me_cpu, me_flt, kid_cpu, kid_flt = json.loads(fh.read())
        os.waitpid(pid, 0)
        warden.reap_all()
        runner_cpu, runner_flt, child_cpu, child_flt = (runner_cpu + me_cpu, runner_flt + me_flt,
                                                        child_cpu + kid_cpu, child_flt + kid_flt)
        tests += len(item["tests"])
        bad += not ok
    total = _rusage(resource.RUSAGE_SELF)[0] - cpu0 + _rusage(resource.RUSAGE_CHILDREN)[0] - kids0
    print(json.dumps({
        "programs": len(items), "tests": tests, "bad": bad, "seccomp": filtered, "forkloop": forkloop,
        "cpu_ms_per_test": round(total / tests * 1000, 3),
        "runner_ms_per_test": round(runner_cpu / tests * 1000, 3),
        "child_ms_per_test": round(child_cpu / tests * 1000, 3),
        "runner_faults_per_test": round(runner_flt / tests, 1),
        "child_faults_per_test": round(child_flt / tests, 1),
        "image_anon_kb": anon_kb, "image_mappings": mappings,
    }), flush=True)


def host(n_programs, workload, loop="c"):
    """Write the workload where the sandbox can read it and run :func:`inside` under bwrap; returns its exit code."""
    import gzip
    import subprocess
    import tempfile

    from rlvr.judge.sandbox import bwrap

    if loop == "c":
        from rlvr.judge.sandbox.forkloop import ensure_built

        ensure_built()

    with tempfile.TemporaryDirectory() as out:
        with gzip.open(workload, "rt", encoding="utf-8") as fh:
            items = [json.loads(line) for line in fh][:n_programs]
        with open(os.path.join(out, "work.json"), "w", encoding="utf-8") as fh:
            json.dump(items, fh)
        os.chmod(out, 0o755)
        argv = bwrap.argv(3, 256)
        at = argv.index("--remount-ro")
        argv[at:at] = ["--ro-bind", HERE, "/bench", "--ro-bind", out, "/out"]
        argv[argv.index("/judge/inside/warden.py"):] = ["/bench/profile_sandbox.py", "--inside", str(n_programs), loop]
        kwargs = {"user": 61999, "group": 61999, "extra_groups": []} if os.geteuid() == 0 else {}
        return subprocess.run(argv, env={}, check=False, **kwargs).returncode


def main():
    """``--programs N`` (default 100), ``--workload PATH`` (default stdio200), ``--loop c|python`` (default ``c``:
    the compiled per-test loop, built first; ``python``: the Python loop); ``--inside N LOOP`` is the sandbox
    side."""
    args = sys.argv[1:]
    if args[:1] == ["--inside"]:
        inside(int(args[1]), *args[2:3])
        return
    opts = dict(zip(args[::2], args[1::2], strict=False))
    sys.exit(host(int(opts.get("--programs", 100)), opts.get("--workload", os.path.join(HERE, "stdio200.jsonl.gz")),
                  opts.get("--loop", "c")))


if __name__ == "__main__":
    main()
