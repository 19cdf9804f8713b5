"""Forced sandbox restarts leave no zombie or reparented bwrap behind, whatever the host's PID 1 does.

Each scenario runs in a fresh interpreter that makes itself a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): any
sandbox process orphaned by a restart is then reparented to that interpreter instead of to PID 1, so a leak shows up
as a zombie child of it on every host — whether or not this machine's PID 1 reaps. With ``reap=False`` the sandbox's
own reaping of reparented pids is disabled, so the scenario checks that the kill order alone orphans nothing (what an
embedded judge in a process that is not a subreaper relies on). The scenario prints, as JSON, every process of the
sandbox tree (recorded before the restart) that still exists, with its state and parent, and the zombie children of
the interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys, time
    from rlvr.judge.sandbox import Sandbox, SessionTimeout, enable_child_subreaper
    from rlvr.judge.sandbox.procs import children as _children, proc_stat as _proc_stat

    assert enable_child_subreaper()
    if sys.argv[2] == "noreap":
        Sandbox._reap_inner = lambda self, timeout_s=5.0: None

    def tree(root):
        out, todo = set(), [root]
        while todo:
            for k in _children(todo.pop()):
                if k not in out:
                    out.add(k)
                    todo.append(k)
        return out

    def batch(code, tl):
        return {"op": "batch", "native": None, "code": code, "tests": [{"kind": "stdio", "stdin": "", "tl": tl}],
                "entry_point": None, "test_setup": None, "memory_limit_mb": 256, "output_limit_mb": 16,
                "max_timeouts": 1}

    def hang(sb, code, wait_s):
        sess = sb.open()
        sess.send(batch(code, 30.0))
        try:
            while sess.recv(time.monotonic() + wait_s) is not None:
                pass
        except SessionTimeout:
            pass
        else:
            raise SystemExit("expected the hang detector to fire")
        seen = tree(os.getpid())
        sb.finish(sess, restart=True)  # the forced restart
        return seen

    def ping(sb):
        sess = sb.open()
        sess.send({"op": "run", "code": "print(1)", "stdin": "", "timeout_s": 5, "memory_limit_mb": 256})
        while (f := sess.recv(time.monotonic() + 30)) is not None and f.get("t") != "done":
            pass
        sb.finish(sess)

    scenario = sys.argv[1]
    sb = Sandbox()
    ping(sb)
    seen = tree(os.getpid())
    if scenario == "hang":  # the hang detector fires while the test program spins: forced restart
        seen |= hang(sb, "while True:\\n    pass\\n", 1.0)
    elif scenario == "fork_bomb":  # the hang detector fires in the middle of a fork bomb
        bomb = "import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n        pass\\n"
        seen |= hang(sb, bomb, 2.0)
    elif scenario == "restart":  # a planned restart goes through the same close()
        sb.close()
    elif scenario == "outer_killed":  # the outer bwrap dies first (killed from outside): the warden is orphaned
        os.kill(sb._proc.pid, signal.SIGKILL)
        time.sleep(0.5)
    ping(sb)  # the restarted sandbox works
    seen |= tree(os.getpid())
    sb.close()
    time.sleep(0.5)
    left = {p: _proc_stat(p) for p in seen}
    print(json.dumps({
        "seen": len(seen),
        "left": {p: [st[0], st[1]] for p, st in left.items() if st is not None},
        "zombie_children": [p for p in _children(os.getpid()) if (st := _proc_stat(p)) and st[0] == "Z"],
    }))
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("scenario", "reap"),
    [
        ("hang", True),
        ("hang", False),
        ("fork_bomb", True),
        ("fork_bomb", False),
        ("restart", True),
        ("restart", False),
        ("close", False),
        ("outer_killed", True),
    ],
)
def test_forced_restart_leaves_no_zombie(scenario: str, reap: bool) -> None:
    argv = [sys.executable, "-c", SCRIPT, scenario, "reap" if reap else "noreap"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["seen"] >= 2  # outer bwrap and the warden (the namespace's init): the tree was observed
    assert out["zombie_children"] == []
    assert out["left"] == {}, f"sandbox processes survive the restart and close (pid: [state, ppid]): {out['left']}"
