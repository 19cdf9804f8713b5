"""Isolation of the bubblewrap sandbox: network, filesystem, processes, uid, memory, leftovers."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import uuid
from pathlib import Path

from rlvr.data.schema import Problem


def run(judge, code, time_limit_s=5.0, memory_limit_mb=512):
    p = Problem(
        id="t/iso",
        source="t",
        split="test",
        statement="",
        tests=[{"kind": "stdio", "stdin": "", "stdout": "OK"}],
        time_limit_s=time_limit_s,
        memory_limit_mb=memory_limit_mb,
    )
    return judge.judge(p, code)


def test_cannot_connect_to_host_loopback_listener(judge):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    hits: list[int] = []

    def accept():
        srv.settimeout(5)
        try:
            conn, _ = srv.accept()
            hits.append(1)
            conn.close()
        except OSError:
            pass

    th = threading.Thread(target=accept)
    th.start()
    code = (
        "import socket\ns = socket.socket()\ns.settimeout(2)\n"
        f"r = s.connect_ex(('127.0.0.1', {port}))\nprint('OK' if r != 0 else 'CONNECTED')"
    )
    res = run(judge, code)
    srv.close()
    th.join()
    assert res.verdict == "accepted", res.tests[0].stdout
    assert hits == []


def test_cannot_create_files_visible_on_host(judge, tmp_path):
    marker = f"rlvr_escape_{uuid.uuid4().hex}"
    targets = [f"/tmp/{marker}", f"{tmp_path}/{marker}", f"{os.getcwd()}/{marker}", f"/usr/{marker}"]
    code = (
        f"import os\nfor p in {targets!r}:\n"
        "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        pass\nprint('OK')"
    )
    res = run(judge, code)
    assert res.verdict == "accepted"
    for t in targets:
        assert not Path(t).exists(), t


def test_sees_only_its_own_processes(judge):
    code = (
        "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "print('OK' if len(pids) <= 4 else f'SEES {len(pids)}')"
    )
    res = run(judge, code)
    assert res.verdict == "accepted", res.tests[0].stdout


def test_runs_as_non_root(judge):
    res = run(judge, "import os\nprint('OK' if os.getuid() != 0 and os.geteuid() != 0 else 'ROOT')")
    assert res.verdict == "accepted", res.tests[0].stdout


def test_memory_limit_stops_allocation(judge):
    res = run(judge, "x = [0] * (400 * 1024 * 1024)\nprint('OK')", memory_limit_mb=256)
    assert res.verdict == "memory_limit"


def _leftovers(tag: str) -> str:
    out = subprocess.run(["pgrep", "-af", tag], capture_output=True, text=True)
    return out.stdout.strip()


def test_no_process_left_after_timeout_even_double_forked_daemons(judge):
    tag = str(900000 + uuid.uuid4().int % 99999)
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv('/usr/bin/sleep', ['sleep', '{tag}'])\n"
        "    os._exit(0)\n"
        "while True:\n    time.sleep(0.1)\n"
    )
    res = run(judge, code, time_limit_s=1.0)
    assert res.verdict == "timeout"
    assert _leftovers(f"sleep {tag}") == ""


def test_fork_bomb_is_contained(judge):
    # RLIMIT_NPROC on the sandbox's own host uid: forking fails (EAGAIN) long before 1,000 processes
    code = (
        "import os\nn = 0\ntry:\n    for _ in range(1000):\n        if os.fork() == 0:\n"
        "            import time; time.sleep(30); os._exit(0)\n"
        "        n += 1\nexcept OSError:\n    pass\nprint('OK' if n < 200 else f'UNBOUNDED {n}')"
    )
    res = run(judge, code, time_limit_s=5.0)
    assert res.verdict == "accepted", res.tests[0].stdout
    # the judge is still healthy afterwards and the sleepers are gone
    assert run(judge, "print('OK')").verdict == "accepted"


def test_every_test_starts_in_a_fresh_empty_work_dir(judge):
    """A test that leaves files, makes the work dir unreadable, or replaces it by a symlink or another directory does
    not change what the next test of the same submission finds: an empty ``/tmp/work`` (mode 755) as its cwd. (The
    runner re-makes the dir only when needed; before that, a ``chmod`` made every later test fail.)"""
    code = r'''
import os, shutil, sys
mode = sys.stdin.read().strip()
print("seen", sorted(os.listdir(".")), os.getcwd(), oct(os.stat(".").st_mode & 0o777), os.path.islink("/tmp/work"))
open("leftover.txt", "w").write("x")
os.makedirs("sub/deeper", exist_ok=True)
if mode == "chmod":
    os.chmod("sub", 0)
    os.chmod(".", 0o500)
elif mode in ("symlink", "replace"):
    os.chdir("/tmp")
    shutil.rmtree("/tmp/work")
    if mode == "symlink":
        os.makedirs("/tmp/elsewhere/planted", exist_ok=True)
        os.symlink("/tmp/elsewhere", "/tmp/work")
    else:
        os.mkdir("/tmp/work")
        open("/tmp/work/planted", "w").write("y")
'''
    expected = "seen [] /tmp/work 0o755 False\n"
    modes = ("plain", "chmod", "plain", "symlink", "plain", "replace", "plain")
    p = Problem(id="t/workdir", source="t", split="test", statement="",
                tests=[{"kind": "stdio", "stdin": m, "stdout": expected} for m in modes])
    res = judge.judge(p, code)
    assert [t.verdict for t in res.tests] == ["accepted"] * len(modes), res.message
