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
    from rlvr.judge.sandbox import Sandbox, SandboxError, _children, _proc_stat, enable_child_subreaper

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
        return {"op": "batch", "native": None, "code": code, "tests": [{"kind": "stdio", "stdin": ""}],
                "entry_point": None, "test_setup": None, "time_limit_s": tl, "memory_limit_mb": 256,
                "output_limit_mb": 16, "max_timeouts": 1}

    scenario = sys.argv[1]
    sb = Sandbox()
    sb.request({"op": "ping"}, 30)
    seen = tree(os.getpid())
    if scenario == "hang":  # the hang detector fires while the test program spins: forced restart
        try:
            sb.request(batch("while True:\\n    pass\\n", 30.0), timeout_s=1.0)
        except SandboxError:
            pass
        else:
            raise SystemExit("expected a SandboxError")
    elif scenario == "fork_bomb":  # the hang detector fires in the middle of a fork bomb
        bomb = "import os\\nwhile True:\\n    try:\\n        os.fork()\\n    except OSError:\\n        pass\\n"
        try:
            sb.request(batch(bomb, 30.0), timeout_s=2.0)
        except SandboxError:
            pass
        else:
            raise SystemExit("expected a SandboxError")
        seen |= tree(os.getpid())
    elif scenario == "outer_killed":  # the outer bwrap dies first (killed from outside): the inner one is orphaned
        os.kill(sb._proc.pid, signal.SIGKILL)
        time.sleep(0.5)
    sb.request({"op": "ping"}, 30)  # the restarted sandbox works
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
        ("max_uses", True),
        ("max_uses", False),
        ("close", False),
        ("outer_killed", True),
    ],
)
def test_forced_restart_leaves_no_zombie(scenario: str, reap: bool) -> None:
    if scenario == "max_uses":  # a planned restart (max_uses reached) goes through the same close()
        script = SCRIPT.replace("sb = Sandbox()", "sb = Sandbox(max_uses=1)")
    else:
        script = SCRIPT
    argv = [sys.executable, "-c", script, scenario, "reap" if reap else "noreap"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["seen"] >= 3  # outer bwrap, inner bwrap (the namespace's init), harness: the tree was observed
    assert out["zombie_children"] == []
    assert out["left"] == {}, f"sandbox processes survive the restart and close (pid: [state, ppid]): {out['left']}"
