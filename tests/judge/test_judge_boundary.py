"""The trust boundary, asserted from the host: no host secret inside, no reach into the warden/runner, honest
failure accounting, and no verdict a submission can forge (call tests compared on the host, assert tests run in the
separate driver sandbox)."""

from __future__ import annotations

import os
import uuid

import pytest

from rlvr.data.schema import Problem
from rlvr.judge import Judge


def stdio(expected: str = "OK", time_limit_s: float = 5.0) -> Problem:
    return Problem(id="t/b", source="t", split="test", statement="", time_limit_s=time_limit_s,
                   tests=[{"kind": "stdio", "stdin": "", "stdout": expected}])


@pytest.fixture(scope="module")
def secret_judge():
    """A one-worker judge started while the host environment holds a planted secret."""
    secret = f"sk-{uuid.uuid4().hex}"
    os.environ["RLVR_TEST_PLANTED_API_KEY"] = secret
    try:
        j = Judge(workers=1)
        j.run_code("pass")  # start the sandbox while the secret is planted
        yield j, secret
    finally:
        os.environ.pop("RLVR_TEST_PLANTED_API_KEY", None)
    j.close()


def test_no_host_secret_is_readable_anywhere_inside(secret_judge):
    judge, secret = secret_judge
    code = f"""
import os
needle = {secret[::-1]!r}[::-1].encode()
hits = []
if any(needle in (k + '=' + v).encode() for k, v in os.environ.items()):
    hits.append('os.environ')
for root in ('/proc', '/tmp', '/judge', '/dev/shm'):
    for dirpath, dirs, files in os.walk(root):
        if dirpath.startswith('/proc/') and dirpath.count('/') > 3:
            dirs[:] = []
        dirs[:] = [d for d in dirs if d not in ('task', 'fd', 'map_files', 'sys', 'net', 'fdinfo')]
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                with open(p, 'rb') as fh:
                    if needle in fh.read(1 << 20):
                        hits.append(p)
            except OSError:
                pass
print('OK' if not hits else 'LEAK ' + ' '.join(hits[:5]))
"""
    res = judge.judge(stdio(), code)
    assert res.verdict == "accepted", res.tests[0].stdout


def test_warden_and_runner_cannot_be_traced_or_read(secret_judge):
    judge, _ = secret_judge
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
got = []
for pid in (1, os.getppid()):
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        got.append(f'ptrace {pid}')
    try:
        with open(f'/proc/{pid}/mem', 'rb') as fh:
            fh.seek(0x400000)
            fh.read(16)
        got.append(f'mem {pid}')
    except OSError:
        pass
    class iovec(ctypes.Structure):
        _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
    buf = ctypes.create_string_buffer(16)
    local, remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 16), iovec(0x400000, 16)
    if libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) >= 0:
        got.append(f'vm_readv {pid}')
    try:
        os.environ.clear()
        open(f'/proc/{pid}/environ', 'rb').read()
        got.append(f'environ {pid}')
    except OSError:
        pass
print('OK' if not got else 'REACHED ' + ' '.join(got))
"""
    res = judge.judge(stdio(), code)
    assert res.verdict == "accepted", res.tests[0].stdout


def test_killing_the_runner_is_the_programs_failure_and_the_next_submission_is_fine(secret_judge):
    judge, _ = secret_judge
    p = Problem(id="t/k", source="t", split="test", statement="",
                tests=[{"kind": "stdio", "stdin": "", "stdout": "OK"}] * 3)
    for code in ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('OK')",
                 "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('OK')"):
        res = judge.judge(p, code)
        assert res.verdict == "runtime_error", res.message
        assert all(t.verdict != "sandbox_error" for t in res.tests)
        assert judge.judge(p, "print('OK')").verdict == "accepted"


def test_the_warden_cannot_be_killed(secret_judge):
    # SIGINT: python3 installs a handler for it at start, and PID 1 is signalled for the signals it handles; the
    # warden drops it (warden.reset_signals), the runner has it (the KeyboardInterrupt of test_judge_submit.py).
    # The sleep: a warden that dies takes the program with it, but only once its handler has run
    judge, _ = secret_judge
    code = ("import os, signal, time\nfor s in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, signal.SIGINT,"
            " signal.SIGHUP, signal.SIGQUIT):\n    os.kill(1, s)\ntime.sleep(0.5)\nprint('OK')")
    assert judge.judge(stdio(), code).verdict == "accepted"
    assert judge.judge(stdio(), "print('OK')").verdict == "accepted"


# ------------------------------------------------------------------------------------------------ forged verdicts
def fn_problem(tests, entry="f", setup=""):
    return Problem(id="t/f", source="t", split="test", statement="", entry_point=entry, test_setup=setup, tests=tests)


ASSERTS = [
    {"kind": "assert", "code": "assert set(f(3)) == set([1, 2, 3])"},
    {"kind": "assert", "code": "assert sorted(f(3)) == [1, 2, 3] and len(f(3)) == 3"},
    {"kind": "assert", "code": "assert math.isclose(sum(f(3)), 6.0)"},
    {"kind": "assert", "code": "def check(candidate):\n    assert tuple(candidate(2)) == (1, 2)\ncheck(f)\n"},
]

FORGERIES = {
    "shadow_builtins_in_globals": "set = lambda *a: 1\nsorted = lambda *a: [1, 2, 3]\nlen = lambda *a: 3\n"
    "tuple = lambda *a: (1, 2)\nsum = lambda *a: 6.0\ndef f(n):\n    return [0]\n",
    "mutate_builtins_module": "import builtins\nbuiltins.set = lambda *a: 1\nbuiltins.sorted = lambda *a: [1, 2, 3]\n"
    "builtins.len = lambda *a: 3\nbuiltins.tuple = lambda *a: (1, 2)\nbuiltins.sum = lambda *a: 6.0\n"
    "def f(n):\n    return [0]\n",
    "sys_modules_tampering": "import sys, math\nmath.isclose = lambda *a, **k: True\n"
    "sys.modules['math'] = type(sys)('math')\n"
    "sys.modules['math'].isclose = lambda *a, **k: True\n"
    "def f(n):\n    return [0]\n",
    "eq_always_true": "class L(list):\n    def __eq__(self, o):\n        return True\n    __hash__ = None\n"
    "class S(set):\n    def __eq__(self, o):\n        return True\n"
    "def f(n):\n    return L([0])\n",
    "userlist_data_trick": "from collections import UserList\nclass U(UserList):\n    def __eq__(self, o):\n"
    "        return True\n    def __iter__(self):\n        return iter([1, 2, 3])\n    def __len__(self):\n"
    "        return 3\ndef f(n):\n    return U([0])\n",
    "frame_peek": "import sys\ndef f(n):\n    try:\n        fr = sys._getframe(1)\n"
    "        return list(fr.f_code.co_consts[-1])\n"
    "    except Exception:\n        return [0]\n",
    "callable_stands_for_entry": "import functools\nf = functools.partial(lambda n: [0])\n",
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgeries_do_not_pass_assert_tests(judge, name):
    p = fn_problem(ASSERTS, setup="import math")
    honest = judge.judge(p, "def f(n):\n    return list(range(1, n + 1))\n")
    assert honest.verdict == "accepted", honest.message
    res = judge.judge(p, FORGERIES[name])
    assert res.passed == 0, [(t.verdict, t.message) for t in res.tests]


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgeries_do_not_pass_call_tests_or_converted_asserts(judge, name):
    p = fn_problem([{"kind": "call", "args": "[3]", "expected": "[1, 2, 3]"},
                    {"kind": "assert", "code": "assert f(3) == [1, 2, 3]"}])
    res = judge.judge(p, FORGERIES[name])
    assert res.passed == 0, [(t.verdict, t.message) for t in res.tests]


def test_prompt_helpers_come_from_the_trusted_prompt(judge):
    # HumanEval/38-like: the check uses a helper of the prompt; a submission redefining it cannot change the test
    prompt = "def encode(s):\n    return s[::-1]\n\ndef decode(s):\n    \"\"\"inverse of encode\"\"\"\n"
    p = Problem(id="t/he", source="t", split="test", statement="", starter_code=prompt, entry_point="decode",
                tests=[{"kind": "assert", "code": "def check(candidate):\n"
                        "    assert candidate(encode('abc')) == 'abc'\ncheck(candidate)\n"}])
    assert judge.judge(p, prompt + "    return s[::-1]\n").verdict == "accepted"
    cheat = "def encode(s):\n    return s\n\ndef decode(s):\n    return s\n"
    assert judge.judge(p, cheat).verdict == "wrong_answer"


def test_unplain_and_oversized_returns_are_wrong_answers_not_errors(judge):
    p = fn_problem([{"kind": "call", "args": "[1]", "expected": "1.5"},
                    {"kind": "call", "args": "[2]", "expected": "1.5"},
                    {"kind": "call", "args": "[3]", "expected": "1.5"}])
    code = "import types\ndef f(n):\n    return [None, 10 ** 300000, types.SimpleNamespace(a=1), 0][n]\n"
    res = judge.judge(p, code)
    assert [t.verdict for t in res.tests] == ["wrong_answer"] * 3
