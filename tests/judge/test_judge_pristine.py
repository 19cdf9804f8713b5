"""Pristine per submission: what submission A leaves behind is invisible to submission B on the same worker."""

from __future__ import annotations

import uuid

import pytest

from rlvr.data.schema import Problem
from rlvr.judge import Judge


@pytest.fixture(scope="module", params=[True, False], ids=["forkloop", "python_loop"])
def judge1(request):
    """One worker, so A and B are sure to share a sandbox; once with the compiled library (its wipe in C, wipe.c)
    and once without (the Python wipe)."""
    j = Judge(workers=1, forkloop=request.param)
    yield j
    j.close()


def stdio(expected: str = "CLEAN", time_limit_s: float = 5.0) -> Problem:
    return Problem(id="t/pristine", source="t", split="test", statement="", time_limit_s=time_limit_s,
                   tests=[{"kind": "stdio", "stdin": "", "stdout": expected}])


TAG = uuid.uuid4().hex[:12]
SHM_KEY = 0x5EED0000 + int(TAG[:4], 16)

LEAVE = f"""
import ctypes, os, time
for path in ['/tmp/a_{TAG}', '/dev/shm/a_{TAG}', '/tmp/work/a_{TAG}', '/tmp/build/a_{TAG}', '/tmp/work/evil_{TAG}.py']:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as fh:
        fh.write('print("SHADOWED")\\n')
os.makedirs('/tmp/locked_{TAG}/inner', exist_ok=True)
open('/tmp/locked_{TAG}/inner/f', 'w').write('x')
os.chmod('/tmp/locked_{TAG}/inner', 0)
os.chmod('/tmp/locked_{TAG}', 0)
os.symlink('/dev/shm', '/tmp/link_{TAG}')  # removed, never followed
os.mkfifo('/dev/shm/fifo_{TAG}')
os.link('/tmp/a_{TAG}', '/tmp/work/hard_{TAG}')
os.makedirs('/tmp/tree_{TAG}/' + '/'.join(['d'] * 40))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.shmget({SHM_KEY}, 4096, 0o1666) >= 0, 'shmget'
assert libc.msgget({SHM_KEY}, 0o1666) >= 0, 'msgget'
assert libc.semget({SHM_KEY}, 1, 0o1666) >= 0, 'semget'
assert libc.mq_open(b'/q_{TAG}', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0, 'mq_open'
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/usr/bin/sleep', ['sleep', '1000{int(TAG[:4], 16)}'])
    os._exit(0)
time.sleep(0.2)
print('CLEAN')
"""

CHECK = f"""
import ctypes, os, sys
found = []
for path in ['/tmp/a_{TAG}', '/dev/shm/a_{TAG}', '/tmp/work/a_{TAG}', '/tmp/build/a_{TAG}', '/tmp/locked_{TAG}',
             '/tmp/link_{TAG}', '/dev/shm/fifo_{TAG}', '/tmp/work/hard_{TAG}', '/tmp/tree_{TAG}']:
    if os.path.lexists(path):
        found.append(path)
sys.path.insert(0, os.getcwd())
try:
    import evil_{TAG}
    found.append('module')
except ImportError:
    pass
libc = ctypes.CDLL(None, use_errno=True)
if libc.shmget({SHM_KEY}, 0, 0) >= 0:
    found.append('shm')
if libc.msgget({SHM_KEY}, 0) >= 0:
    found.append('msg')
if libc.semget({SHM_KEY}, 0, 0) >= 0:
    found.append('sem')
if os.path.lexists('/dev/mqueue/q_{TAG}'):
    found.append('mqueue')
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            cmd = open(f'/proc/{{pid}}/cmdline', 'rb').read()
        except OSError:
            continue
        if b'sleep' in cmd:
            found.append('process ' + pid)
print('CLEAN' if not found else 'FOUND ' + ' '.join(found))
"""


@pytest.mark.parametrize("kill_runner", [False, True], ids=["runner_wipes", "runner_killed"])
def test_nothing_of_submission_a_reaches_submission_b(judge1, kill_runner):
    # runner_killed: A kills its runner after leaving everything, so the warden's wiper child has to clean up
    a = judge1.judge(stdio(), LEAVE + ("import signal\nos.kill(os.getppid(), signal.SIGKILL)\n" if kill_runner else ""))
    assert a.verdict == ("runtime_error" if kill_runner else "accepted"), (a.message, a.tests[0].stderr)
    b = judge1.judge(stdio(), CHECK)
    assert b.verdict == "accepted", b.tests[0].stdout


def test_a_tree_too_deep_to_wipe_ends_the_sandbox_and_the_next_submission_starts_clean(judge1):
    # deeper than the wipe goes (wipe.c: 5,000 levels or the runner's fds; wipe.py: the recursion limit): the wipe
    # fails, so the warden ends the sandbox instead of handing the tree on, and the worker's next sandbox is fresh
    deep = f"import os\nos.chdir('/tmp')\nfor _ in range(5100):\n    os.mkdir('d_{TAG}')\n    os.chdir('d_{TAG}')\n" \
           "print('CLEAN')\n"
    assert judge1.judge(stdio(), "print('CLEAN')").accepted
    sandbox = judge1._all[0].runner
    before = sandbox._proc.pid
    a = judge1.judge(stdio(), deep)
    assert a.verdict == "accepted", (a.message, a.tests[0].stderr)  # the wipe's failure is not the program's
    assert sandbox._proc is None or sandbox._proc.poll() is not None  # the warden ended the sandbox
    b = judge1.judge(stdio(), f"import os\nprint('FOUND' if os.path.lexists('/tmp/d_{TAG}') else 'CLEAN')\n")
    assert b.verdict == "accepted", b.tests[0].stdout
    assert sandbox._proc.pid != before


def test_a_timed_out_submission_leaks_no_output_into_the_next(judge1):
    spin = "import sys\nwhile True:\n    sys.stdout.write('A-OUT\\n')\n    sys.stdout.flush()\n"
    a = judge1.judge(stdio(time_limit_s=1.0), spin)
    assert a.verdict in ("timeout", "runtime_error")
    b = judge1.judge(stdio("B"), "print('B')")
    assert b.verdict == "accepted" and "A-OUT" not in b.tests[0].stdout


def test_run_code_is_a_submission_too(judge1):
    r = judge1.run_code(f"open('/tmp/r_{TAG}', 'w').write('x')\nprint('wrote')")
    assert r.stdout == "wrote\n"
    r = judge1.run_code(f"import os\nprint(os.path.exists('/tmp/r_{TAG}'))")
    assert r.stdout == "False\n"


@pytest.mark.skipif("cpp" not in __import__("rlvr.judge.languages", fromlist=["x"]).available_languages(),
                    reason="g++ not installed")
def test_build_dir_is_wiped_between_native_submissions(judge1):
    leave = '#include <cstdio>\nint main(){ FILE*f=fopen("/tmp/build/left.txt","w"); fputs("x",f); puts("CLEAN"); }\n'
    assert judge1.judge(stdio(), leave, "cpp").verdict == "accepted"
    check = ('#include <cstdio>\nint main(){ FILE*f=fopen("/tmp/build/left.txt","r"); puts(f ? "FOUND" : "CLEAN");'
             ' FILE*g=fopen("/tmp/build/main.cpp","r"); }\n')
    assert judge1.judge(stdio(), check, "cpp").verdict == "accepted"


def test_only_the_wiped_places_are_writable(judge1):
    code = """
import os
ok = []
for d in ('/', '/etc', '/dev', '/judge', '/judge/inside', '/usr', '/proc', '/tmp', '/dev/shm', '/dev/mqueue'):
    try:
        with open(os.path.join(d, 'probe'), 'w') as fh:
            fh.write('x')
        ok.append(d)
    except OSError:
        pass
print(' '.join(ok))
"""
    res = judge1.judge(stdio("/tmp /dev/shm"), code)
    assert res.verdict == "accepted", res.tests[0].stdout
