"""One memory limit over a whole sandbox (cgroup v2/v1): several processes plus tmpfs/shm cannot exceed it, and the
host gets its memory back afterwards."""

from __future__ import annotations

import time

import pytest

from rlvr.data.schema import Problem
from rlvr.judge import Judge
from rlvr.judge.core import host_memory_available_mb
from rlvr.judge.sandbox.cgroups import detect

pytestmark = pytest.mark.skipif(
    detect().name == "none", reason=f"no cgroup mode available here: {detect().reason}"
)

FILL = """
import os, time
def hog(mb):
    chunks = []
    for _ in range(mb // 16):
        chunks.append(bytearray(16 << 20))
    time.sleep(3)
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            hog(240)
        finally:
            os._exit(0)
    kids.append(pid)
with open('/dev/shm/fill', 'wb') as fh:
    for _ in range(25):
        fh.write(b'x' * (16 << 20))
for pid in kids:
    os.waitpid(pid, 0)
print('SURVIVED')
"""


def test_memory_fill_across_processes_and_shm_is_stopped_and_returned():
    baseline = host_memory_available_mb()
    with Judge(workers=1, sandbox_memory_mb=600) as judge:
        assert judge.isolation_info()["cgroup"] in ("v1", "v2")
        p = Problem(id="t/m", source="t", split="test", statement="", time_limit_s=10.0, memory_limit_mb=512,
                    tests=[{"kind": "stdio", "stdin": "", "stdout": "SURVIVED"}])
        peak = [baseline]
        res = judge.judge(p, FILL)  # 4 x 240 MB + 400 MB of /dev/shm = 1.36 GB against a 600 MB sandbox
        peak.append(host_memory_available_mb())
        assert res.verdict in ("memory_limit", "runtime_error"), res.tests[0].stdout
        assert judge.judge(p, "print('SURVIVED')").verdict == "accepted"
    time.sleep(0.5)
    after = host_memory_available_mb()
    assert after > baseline - 300, f"MemAvailable {baseline} MB before, {after} MB after"


def test_isolation_info_names_the_mode():
    with Judge(workers=1) as judge:
        judge.run_code("pass")
        info = judge.isolation_info()
    assert info["cgroup"] == detect().name and info["seccomp"] is True and info["warden_dumpable"] == 0
