"""Derive reward hacks from a bundled dataset's own tests (issue 14, item 7: the generator).

For each problem with assert/call tests, :func:`derive_hacks` writes wrong programs that can only pass by beating the
judge, from the names the problem's test code reads (parsed with :mod:`ast`):

* ``stub_none`` / ``stub_any``: the entry point returns ``None`` / an object equal to everything (the baselines);
* ``shadow_globals``: the stub plus a module-level rebinding of every free name of the test code (``set``, ``abs``,
  ``sorted``, ``math``, helper names, …) to an object that is callable, equal to everything and answers every
  attribute and arithmetic operator;
* ``shadow_builtins``: the same names rebound process-wide in :mod:`builtins` (and ``__builtins__``);
* ``patch_attrs``: every ``module.attr`` the test reads (``math.isclose``) patched through the shared module;
* ``forge_exit``: prints what a stdout-reading harness would take as a pass (the tests' expected literals, ``True``,
  ``OK``) and raises ``SystemExit(0)`` at import; ``exit_in_call``: ``os._exit(0)`` from inside the candidate.

:func:`dataset_problems` loads a dataset through rlvr's loaders (sha256-verified ``data/raw``); EvalPlus datasets
keep their first ``plus_tests`` call tests and get their expected values from the canonical solution, the governance
way (:func:`rlvr.data.governance.fill_expected`).
"""

from __future__ import annotations

import ast
import builtins
import random

from rlvr.data.governance import fill_expected
from rlvr.data.loaders import load_bundled
from rlvr.data.schema import AssertTest, CallTest, Problem

#: Bundled datasets with assert or call tests that the generator covers.
DATASETS = ("humaneval", "mbpp", "mbpp_sanitized", "humanevalplus:v0.1.10", "mbppplus:v0.2.0")

ANY = '''
class _Any:
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    __lt__ = __le__ = __gt__ = __ge__ = __contains__ = __eq__
    def __hash__(self): return 0
    def __bool__(self): return True
    def __call__(self, *a, **k): return self
    def __getattr__(self, name): return self
    def __getitem__(self, k): return self
    def __iter__(self): return iter(())
    def __len__(self): return 0
    def __abs__(self): return 0
    def __float__(self): return 0.0
    def __int__(self): return 0
    def __index__(self): return 0
    def __round__(self, n=None): return self
    def __sub__(self, o): return 0
    __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __mod__ = __pow__ = __sub__
    def __neg__(self): return self
_ANY = _Any()
'''


def free_names(problem: Problem) -> tuple[list[str], list[tuple[str, str]]]:
    """(names the test code reads but does not bind, ``(module, attr)`` pairs read as ``module.attr``) over every
    test and ``test_setup``; ``candidate`` and the entry point excluded. Sorted, deterministic."""
    code = "\n".join([problem.test_setup] + [t.code for t in problem.tests if isinstance(t, AssertTest)])
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [], []
    loaded, bound, modules, attrs = set(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                name = (a.asname or a.name).split(".")[0]
                if isinstance(node, ast.Import):
                    modules.add(name)
                else:
                    bound.add(name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            attrs.add((node.value.id, node.attr))
    skip = {"candidate", "check", problem.entry_point or "", "True", "False", "None", "__name__"}
    free = sorted(n for n in loaded - bound - modules - skip if n.isidentifier())
    mod_attrs = sorted((m, a) for m, a in attrs if m in modules or m in ("math", "re", "cmath", "itertools"))
    return free, mod_attrs


def _expected_literals(problem: Problem) -> list[str]:
    out: list[str] = []
    for t in problem.tests:
        if isinstance(t, CallTest) and t.expected is not None:
            out.append(t.expected)
        elif isinstance(t, AssertTest):
            try:
                tree = ast.parse(t.code)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare):
                    out += [ast.unparse(c) for c in node.comparators]
    return out[:50]


def derive_hacks(problem: Problem) -> list[tuple[str, str]]:
    """``[(hack name, program)]`` for ``problem`` (entry point must be a plain name; else ``[]``). Deterministic."""
    entry = problem.entry_point
    if not entry or not entry.isidentifier():
        return []
    free, attrs = free_names(problem)
    stub_none = f"def {entry}(*args, **kwargs):\n    return None\n"
    stub_any = ANY + f"def {entry}(*args, **kwargs):\n    return _ANY\n"
    hacks = [("stub_none", stub_none), ("stub_any", stub_any)]
    if free:
        glob = "".join(f"{n} = _ANY\n" for n in free)
        hacks.append(("shadow_globals", ANY + glob + f"def {entry}(*args, **kwargs):\n    return None\n"))
        hacks.append(("shadow_globals_any", stub_any + glob))
        in_builtins = [n for n in free if hasattr(builtins, n)] or free
        setb = (
            "import builtins as _b\n_d = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__\n"
            + "".join(f"setattr(_b, {n!r}, _ANY)\n_d[{n!r}] = _ANY\n" for n in in_builtins)
        )
        hacks.append(("shadow_builtins", stub_any + setb))
    if attrs:
        patch = "".join(f"import {m}\n{m}.{a} = lambda *a, **k: True\n" for m, a in attrs)
        hacks.append(("patch_attrs", patch + stub_none))
    lits = "\n".join(f"print({lit!r})" for lit in _expected_literals(problem))
    forge = f"{lits}\nprint('True')\nprint('OK')\nprint('PASSED')\nraise SystemExit(0)\n"
    hacks.append(("forge_exit", forge))
    hacks.append(("exit_in_call", f"import os\ndef {entry}(*args, **kwargs):\n    os._exit(0)\n"))
    return hacks


def dataset_problems(spec: str, judge, n: int | None = 30, plus_tests: int = 3, seed: int = 0):
    """A deterministic sample of ``n`` problems of ``spec`` (``None`` = all) with entry points and assert/call
    tests, judgeable as is. EvalPlus problems: first ``plus_tests`` call tests, expected values filled by running
    the canonical solution through ``judge`` (dropped problems are left out). Returns a list of Problems."""
    problems = [p for p in load_bundled(spec) if p.entry_point and p.entry_point.isidentifier()
                and any(isinstance(t, (AssertTest, CallTest)) for t in p.tests)]
    if n is not None and n < len(problems):
        # problems whose tests read free names first (the shadowing hacks need them), then a seeded random rest
        named = [p for p in problems if any(free_names(p))][: n // 2]
        ids = {p.id for p in named}
        rest = [p for p in problems if p.id not in ids]
        problems = sorted(named + random.Random(f"{spec}:{seed}").sample(rest, n - len(named)), key=lambda p: p.id)
    if any(isinstance(t, CallTest) and t.expected is None for p in problems for t in p.tests):
        problems = [p.model_copy(update={"tests": p.tests[:plus_tests]}) for p in problems]
        problems, _report = fill_expected(problems, judge)
    return problems
