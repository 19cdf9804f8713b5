"""The real embedded judge (bubblewrap) on verdicts, stdin/stdout handling and call/assert tests."""

from __future__ import annotations

import pytest

from rlvr.data.schema import Problem

SUM = "a, b = map(int, input().split())\nprint(a + b)\n"


def stdio_problem(tests, **kw):
    return Problem(id="t/stdio", source="t", split="test", statement="sum", tests=tests, **kw)


def sum_problem(**kw):
    return stdio_problem(
        [{"kind": "stdio", "stdin": "1 2", "stdout": "3"}, {"kind": "stdio", "stdin": "5 7\n", "stdout": "12\n"}], **kw
    )


@pytest.mark.parametrize(
    "code",
    [
        SUM,
        "print(sum(map(int, open(0).read().split())))",
        "import sys\nfor line in sys.stdin:\n    print(sum(map(int, line.split())))",
        "import sys\nprint(sum(map(int, sys.stdin.buffer.read().split())))",
        "import os\nos.write(1, (str(sum(map(int, os.read(0, os.fstat(0).st_size).split()))) + '\\n').encode())",
        "import sys\nprint(sum(map(int, sys.stdin.read().split())))\nsys.exit(0)",
        "import sys, atexit, io\nbuf = io.StringIO()\natexit.register(lambda: sys.__stdout__.write(buf.getvalue()))\n"
        "print(sum(map(int, input().split())), file=buf)",
        # the std streams carry mode and name as the interpreter's own do (competitive-programming FastIO wrappers
        # read sys.stdout.mode to decide whether the file is writable)
        "import os, sys\n"
        "assert (sys.stdin.mode, sys.stdout.mode, sys.stderr.mode) == ('r', 'w', 'w'), 'modes'\n"
        "assert (sys.stdin.name, sys.stdout.name) == ('<stdin>', '<stdout>'), 'names'\n"
        "class Out:\n"
        "    def __init__(self, f):\n"
        "        self.fd, self.writable, self.parts = f.fileno(), 'x' in f.mode or 'r' not in f.mode, []\n"
        "    def flush(self):\n"
        "        os.write(self.fd, ''.join(self.parts).encode())\n"
        "out = Out(sys.stdout)\n"
        "assert out.writable and not Out(sys.stdin).writable\n"
        "out.parts.append(str(sum(map(int, os.read(Out(sys.stdin).fd, 1 << 16).split()))) + '\\n')\n"
        "out.flush()",
    ],
)
def test_stdin_and_stdout_styles_accepted(judge, code):
    res = judge.judge(sum_problem(), code)
    assert res.verdict == "accepted", res.message
    assert res.pass_ratio == 1.0 and res.passed == res.total == 2


def test_every_test_process_draws_its_own_random_seed(judge):
    # as a fresh interpreter per run would: the warden preloads ``random``, and each child forked from it must
    # still reseed (random's after-fork hook; docs/judge/suite.md prices making that hook cheaper, not done)
    p = stdio_problem([{"kind": "stdio", "stdin": str(i), "stdout": "x"} for i in range(4)])
    code = "import random\nprint(random.getrandbits(64), random.random(), random.gauss(0, 1))"
    draws = [t.stdout for _ in range(2) for t in judge.judge(p, code).tests]
    assert all(d.count(" ") == 2 for d in draws), draws  # each ran and printed its draws
    assert len(set(draws)) == len(draws) == 8, draws


def test_wrong_answer_and_pass_ratio(judge):
    p = stdio_problem(
        [{"kind": "stdio", "stdin": "1 2", "stdout": "3"}, {"kind": "stdio", "stdin": "2 2", "stdout": "4"}]
    )
    res = judge.judge(p, "a, b = map(int, input().split())\nprint(3 if a == 1 else 5)")
    assert res.verdict == "wrong_answer"
    assert res.passed == 1 and res.pass_ratio == 0.5
    assert [t.verdict for t in res.tests] == ["accepted", "wrong_answer"]


def test_correct_output_with_nonzero_exit_is_runtime_error(judge):
    res = judge.judge(sum_problem(), SUM + "import sys\nsys.exit(3)")
    assert res.verdict == "runtime_error"


def test_exception_syntax_error_timeout(judge):
    assert judge.judge(sum_problem(), "raise ValueError('boom')").verdict == "runtime_error"
    res = judge.judge(sum_problem(), "def f(:\n  pass")
    assert res.verdict == "syntax_error" and "SyntaxError" in res.message
    res = judge.judge(sum_problem(time_limit_s=1.0), "while True:\n    pass")
    assert res.verdict == "timeout"


def test_memory_limit(judge):
    res = judge.judge(sum_problem(memory_limit_mb=256), "x = bytearray(1024 * 1024 * 1024)\nprint(len(x))")
    assert res.verdict == "memory_limit"


@pytest.mark.parametrize("size", [300_000, 2_000_000])
def test_large_output_neither_hangs_nor_times_out(judge, size):
    p = stdio_problem([{"kind": "stdio", "stdin": "", "stdout": "x" * size}], time_limit_s=5.0)
    res = judge.judge(p, f"print('x' * {size})")
    assert res.verdict == "accepted", res.message
    res = judge.judge(p, f"import sys\nsys.stderr.write('e' * {size})\nprint('x' * {size})")
    assert res.verdict == "accepted", res.message


def test_call_and_assert_tests(judge):
    p = Problem(
        id="t/add",
        source="t",
        split="test",
        statement="add",
        entry_point="add",
        tests=[
            {"kind": "call", "args": "[1, 2]", "expected": "3"},
            {"kind": "call", "args": "[(1,), (2,)]", "expected": "(1, 2)"},
            {"kind": "assert", "code": "assert candidate(2, 2) == 4"},
            {"kind": "assert", "code": "assert add(3, 4) == 7"},
        ],
    )
    good = judge.judge(p, "def add(a, b):\n    return a + b")
    assert good.verdict == "accepted", good.message
    bad = judge.judge(p, "def add(a, b):\n    return a - b if isinstance(a, int) and a > 2 else a + b")
    assert bad.verdict == "wrong_answer" and bad.passed == 3
    assert judge.call_outputs(p, "def add(a, b):\n    return a + b") == ["3", "(1, 2)"]


def test_call_test_crash_only_fails_that_test(judge):
    p = Problem(
        id="t/inv",
        source="t",
        split="test",
        statement="inverse",
        entry_point="inv",
        tests=[{"kind": "call", "args": f"[{x}]", "expected": repr(1 / x if x else 0.0)} for x in (1, 0, 2, 4)],
    )
    res = judge.judge(p, "def inv(x):\n    return 1 / x")
    assert [t.verdict for t in res.tests] == ["accepted", "runtime_error", "accepted", "accepted"]
    assert "ZeroDivisionError" in res.tests[1].message


def test_load_failure_fails_every_call_test(judge):
    p = Problem(
        id="t/add",
        source="t",
        split="test",
        statement="add",
        entry_point="add",
        tests=[{"kind": "call", "args": "[1, 2]", "expected": "3"}] * 3,
    )
    res = judge.judge(p, "import not_a_module\ndef add(a, b):\n    return a + b")
    assert res.verdict == "runtime_error" and res.passed == 0
    assert "ModuleNotFoundError" in res.message


def test_run_code(judge):
    r = judge.run_code("print(input() * 2)", stdin="ab")
    assert (r.status, r.verdict, r.stdout, r.exit_code) == ("Finished", "accepted", "abab\n", 0)
    r = judge.run_code("import time\ntime.sleep(10)", timeout_s=1.0)
    assert r.status == "TimeLimitExceeded" and r.verdict == "timeout"
    r = judge.run_code("print(open('data.txt').read())", files={"data.txt": b"hello"})
    assert r.stdout == "hello\n"


def test_uncaught_exception_prints_pythons_traceback_from_the_programs_own_frames(judge):
    """stderr of a program that raises is what ``python3 prog.py`` prints (chained causes included; a hostile
    ``__str__`` as Python shows it), starting at the program's frames: no frame of the judge's runner."""
    r = judge.run_code("def f(x):\n    return x[3]\ntry:\n    f([1])\nexcept IndexError as e:\n"
                       "    raise KeyError(5) from e\n")
    assert r.verdict == "runtime_error"
    assert r.stderr.startswith('Traceback (most recent call last):\n  File "<string>", line 4, in <module>\n')
    assert 'line 2, in f\nIndexError: list index out of range\n\nThe above exception was the direct cause' in r.stderr
    assert r.stderr.endswith("KeyError: 5\n") and "/judge/" not in r.stderr
    r = judge.run_code("class E(Exception):\n    def __str__(self):\n        raise ValueError\nraise E")
    assert r.verdict == "runtime_error" and r.stderr.endswith("E: <exception str() failed>\n")


def test_forked_image_holds_no_module_only_the_judge_would_need(judge):
    """Every module in the warden is in the image each stdio test forks (0.1 ms per MB per test,
    docs/judge/suite.md): the judge's own needs pull in none of ``ast`` (literals parse through ``_ast``),
    ``traceback`` (imported on error paths only) or ``base64``, and what programs commonly import is there only for a
    program that names it (the zygote's image: test_judge_zygote.py); the names are spelt in two parts here so that
    the probe itself names none."""
    probe = ("import sys\nprint(*[m in sys.modules for m in ('ast', 'traceback', 'base64', 'tokenize', 'ty' + 'ping', "
             "'date' + 'time', 'he' + 'apq', 'ran' + 'dom', 'deci' + 'mal', 'collections')])")
    want = " ".join(["False"] * 9 + ["True"])  # collections: the judge's own modules import it
    assert judge.run_code(probe).stdout == want + "\n"
    res = judge.judge(stdio_problem([{"kind": "stdio", "stdin": "", "stdout": want}] * 2), probe)  # batch, per test
    assert res.verdict == "accepted", [t.stdout for t in res.tests]
    heavy = " ".join(["False"] * 4 + ["True"] * 6)  # a program that names one of them: the zygote's runner
    assert judge.run_code(probe.replace("import sys", "import sys, heapq")).stdout == heavy + "\n"
    r = judge.run_code("import traceback\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n    traceback.print_exc()\n")
    assert r.verdict == "accepted" and r.stderr.endswith("ZeroDivisionError: division by zero\n")


def test_judge_many_preserves_order(judge):
    p = sum_problem()
    codes = [SUM, "print(0)", SUM, "raise SystemExit(1)"]
    res = judge.judge_many([(p, c) for c in codes])
    assert [r.verdict for r in res] == ["accepted", "wrong_answer", "accepted", "runtime_error"]


def test_integers_as_long_as_the_expected_one_are_read_back(judge):
    """HumanEval+/139 expects integers of ~263k digits, over the parser's 200k-digit bound for submission values:
    the bound rises to the expected value's length, so the right answer is accepted (it was a wrong_answer, "could
    not be read back", in judge_check) while a forged huge integer against a small expected value stays rejected."""
    big = 10**250_000 + 7
    p = Problem(
        id="t/big",
        source="t",
        split="test",
        statement="big",
        entry_point="big",
        tests=[{"kind": "call", "args": "[250000]", "expected": str(big)}, {"kind": "call", "args": "[1]",
                                                                              "expected": "17"}],
    )
    good = judge.judge(p, "def big(n):\n    return 10**n + 7")
    assert good.verdict == "accepted", good.message
    forged = judge.judge(p, "def big(n):\n    return 10**300_000 if n == 1 else 10**n + 7")
    assert forged.verdict == "wrong_answer" and forged.passed == 1
