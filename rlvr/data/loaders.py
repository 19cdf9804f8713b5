"""Normalise every bundled benchmark into :class:`~rlvr.data.schema.Problem` (one schema for all).

Ids are ``"<source>/<native id>"``, ``source`` is the dataset name (verl's ``data_source``), ``split`` the dataset's
own split. Per-dataset decisions (each mirrors how the benchmark's own harness judges it):

* ``humaneval`` – OpenAI HumanEval (Chen et al. 2021). ``starter_code`` = ``prompt`` (the answer is ``prompt`` +
  completion); ``statement`` = the entry function's docstring; one :class:`AssertTest` ``test + check(candidate)``.
  The check code may use helpers the prompt defines (``poly`` in HumanEval/32), so the judge must run assert tests
  where the solution's globals are visible (HumanEval's own program is ``prompt+completion+test+check(entry_point)``).
* ``mbpp`` (full, 974) – splits by ``task_id``: prompt 1–10, test 11–510, validation 511–600, train 601–974
  (Austin et al. 2021). ``statement`` = ``text`` + ``"Your code should pass these tests:"`` + the first assert (that
  assert is marked ``public``), the standard MBPP prompt with one example as in EvalPlus' MBPP+ prompts. Each
  ``test_list`` line is one :class:`AssertTest`; ``test_setup_code`` → ``test_setup``. ``challenge_test_list`` is not
  part of the standard protocol: kept in ``meta['challenge_tests']`` and appended as tests only with
  ``include_challenge_tests=True``.
* ``mbpp_reg`` (100) – the MBPP regression subset (role Dev): MBPP records whose ``task_id`` is in the committed list
  ``data/raw/mbpp/mbpp_reg_ids.txt`` (rule and rationale: :mod:`rlvr.data.mbpp_reg`; no id of sanitized-MBPP or
  MBPP+). Normalised as ``mbpp``, then ``id = "mbpp_reg/<task_id>"``, ``source = "mbpp_reg"``, ``split = "dev"``
  (one split, whatever the native one, kept in ``meta['mbpp_split']``). Every listed id must be found.
* ``mbpp_sanitized`` (427) – same splits; ``test_imports`` → ``test_setup`` (the imports the asserts need run after
  the solution and before the tests).
* ``humanevalplus:v0.1.9|v0.1.10``, ``mbppplus:v0.1.0|v0.2.0`` – EvalPlus (Liu et al. 2023): call tests only,
  ``base_input`` (the original tests' inputs, ``public=False``) then ``plus_input``; ``expected=None`` until the
  governance stage runs ``canonical_solution`` (EvalPlus computes its oracle the same way); ``atol`` from the
  record. The original HumanEval ``test`` is not kept: its inputs are exactly ``base_input``. MBPP+ inputs are
  restored to their Python types as EvalPlus' ``mbpp_deserialize_inputs`` does (tuples, sets, complex numbers),
  then written as ``repr`` literals; ``Mbpp/793`` stores ``plus_input`` as ``{}`` → no plus tests. EvalPlus'
  special oracles: the 8 set-compared tasks (``meta['evalplus_oracle'] = 'set_eq'``) become assert tests
  ``set(candidate(*args)) == set(expected)`` once the governance stage has computed ``expected``; the 3 "not None"
  tasks become assert tests comparing ``is not None`` with the reference (defined in the test code).
* ``leetcode`` – LeetCodeDataset (train = v0.2.0, test = v0.3.1). ``prompt`` (import preamble and ``ListNode`` /
  ``TreeNode`` helpers) → ``solution_prefix``; ``entry_point`` like ``"Solution().twoSum"``; the dataset's ``check``
  function is split into one :class:`AssertTest` per ``assert`` line when every statement of ``check`` is a one-line
  assert (pass_ratio granularity), else kept whole. This reproduces the reference acceptance (the README's
  ``prompt + completion + test + check(entry_point)``); the ``input_output`` pairs duplicate those asserts as text.
* ``leetcode_contest`` – DeepSeek-Coder contest set: no solutions; ``statement`` = ``prompt_sft``, ``starter_code`` =
  the ``class Solution`` stub; the ``test`` script is split into one assert test per ``test_input`` block (its
  header, ``my_solution = Solution()`` and helper lambdas, is repeated in each); ``solution_prefix`` = DeepSeek's
  import helper (without numpy) plus LeetCode's ``ListNode``/``TreeNode`` classes.
* ``codecontests`` – 300 train problems: stdio tests, a missing trailing newline of ``input`` is added (as the
  reference check did), ``float_tolerance`` as the statement declares it (:mod:`rlvr.data.tolerance`: "absolute or
  relative error … 10^{-6}" → 1e-6; else ``None``, exact tokens; the ``float_tolerance`` option overrides; the
  reference check's 1e-6 is kept in ``meta['reference_float_tolerance']``), per-test reference results in
  ``meta['reference_check']``.
* ``apps`` – MapCoder's APPS-150 selection (taken from APPS *train*, see its convert script): judged as MapCoder
  does, every problem as stdin/stdout: call-based problems get their arguments one per line on stdin and must print
  the return value (``str`` of ``output[0]``); the instruction is appended to the statement, ``starter_code`` kept;
  ``float_tolerance`` as the statement declares it (as for ``codecontests``).

Time limits (``time_limit_s``, per test) default per dataset in :data:`DEFAULT_TIME_LIMITS`; callers may override.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlvr.data.bundled import (
    BundledDataset,
    default_raw_dir,
    iter_records,
    read_id_list,
    read_text_utf8,
    resolve,
    verify_sha256,
)
from rlvr.data.errors import DataError
from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest
from rlvr.data.tolerance import statement_float_tolerance

__all__ = [
    "DEFAULT_TIME_LIMITS",
    "MBPP_REG_SPLIT",
    "NORMALISERS",
    "check_subset_complete",
    "load",
    "load_bundled",
    "mbpp_reg_ids",
    "mbpp_split",
    "mbppplus_restore_inputs",
]

#: Per-test wall-clock limit (seconds) by dataset name. LeetCode asserts can be heavy (3 of 228 reference
#: solutions need >10 s for the whole check); CodeContests/APPS are full programs.
DEFAULT_TIME_LIMITS: dict[str, float] = {
    "humaneval": 10.0,
    "mbpp": 6.0,
    "mbpp_reg": 6.0,
    "mbpp_sanitized": 6.0,
    "humanevalplus": 6.0,
    "mbppplus": 6.0,
    "leetcode": 15.0,
    "leetcode_contest": 10.0,
    "codecontests": 10.0,
    "apps": 6.0,
}

# ---------------------------------------------------------------------------------------------------------- helpers


def _get(rec: dict[str, Any], key: str, where: str, typ: type | tuple[type, ...] = str) -> Any:
    """``rec[key]`` checked for presence and type; :class:`DataError` names ``where`` and the field otherwise."""
    if key not in rec or rec[key] is None:
        raise DataError(f"{where}: field '{key}': missing")
    val = rec[key]
    if not isinstance(val, typ):
        want = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise DataError(f"{where}: field '{key}': expected {want}, got {type(val).__name__}")
    return val


def _str_list(rec: dict[str, Any], key: str, where: str) -> list[str]:
    val = _get(rec, key, where, list)
    if not all(isinstance(x, str) for x in val):
        raise DataError(f"{where}: field '{key}': expected a list of strings")
    return val


def _problem(where: str, **kw: Any) -> Problem:
    try:
        return Problem(**kw)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise DataError(f"{where}: field '{'.'.join(map(str, e['loc']))}': {e['msg']}") from exc


def _time_limit(name: str, override: float | None) -> float:
    return float(override) if override is not None else DEFAULT_TIME_LIMITS.get(name, 6.0)


def _func_docstring(code: str, func: str) -> str | None:
    """Docstring of top-level function ``func`` in ``code`` (``None`` if absent or unparsable)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == func:
            return ast.get_docstring(node)
    return None


def _mbpp_entry_point(code: str, first_test: str) -> str | None:
    """The function of ``code`` the first assert calls (top-level ``def`` names, the one named in the test)."""
    names: list[str] = []
    try:
        names = [n.name for n in ast.parse(code).body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    except SyntaxError:
        names = re.findall(r"^def\s+(\w+)", code, flags=re.M)
    for n in names:
        if re.search(rf"\b{re.escape(n)}\s*\(", first_test):
            return n
    m = re.search(r"assert\s+(?:\w+\()*?(\w+)\s*\(", first_test)
    return m.group(1) if m else (names[-1] if names else None)


def mbpp_split(task_id: int) -> str:
    """MBPP split of ``task_id`` (Austin et al. 2021, the released split): prompt 1–10, test 11–510,
    validation 511–600, train 601–974. Raises ``ValueError`` outside 1–974."""
    if 1 <= task_id <= 10:
        return "prompt"
    if 11 <= task_id <= 510:
        return "test"
    if 511 <= task_id <= 600:
        return "validation"
    if 601 <= task_id <= 974:
        return "train"
    raise ValueError(f"MBPP task_id {task_id} outside 1..974")


def _mbpp_statement(text: str, first_test: str) -> str:
    return f"{text.strip()}\nYour code should pass these tests:\n{first_test.strip()}"


def _int_id(rec: dict[str, Any], where: str) -> int:
    tid = _get(rec, "task_id", where, (int, str))
    try:
        return int(tid)
    except ValueError as exc:
        raise DataError(f"{where}: field 'task_id': not an integer: {tid!r}") from exc


# ---------------------------------------------------------------------------------------------------- normalisers
# Every normaliser: (record, where, split, options) -> Problem.  `split` is the file's split (None = derive).


def norm_humaneval(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """HumanEval record (``task_id, prompt, entry_point, canonical_solution, test``) → Problem (see module doc)."""
    tid = _get(rec, "task_id", where)
    prompt = _get(rec, "prompt", where)
    entry = _get(rec, "entry_point", where)
    test = _get(rec, "test", where)
    sol = _get(rec, "canonical_solution", where)
    doc = _func_docstring(prompt, entry)
    return _problem(
        where,
        id=f"humaneval/{tid}", source="humaneval", split=split or "test",
        statement=doc or prompt, starter_code=prompt, entry_point=entry,
        tests=[AssertTest(code=f"{test}\ncheck(candidate)\n")],
        time_limit_s=_time_limit("humaneval", opts.get("time_limit_s")),
        solutions=[prompt + sol], meta={"task_id": tid, "statement_in_starter": doc is not None},
    )


def norm_mbpp(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """Full-MBPP record (``task_id, text, code, test_list, test_setup_code, challenge_test_list``) → Problem."""
    tid = _int_id(rec, where)
    text = _get(rec, "text", where)
    code = _get(rec, "code", where).replace("\r\n", "\n")
    tests = _str_list(rec, "test_list", where)
    if not tests:
        raise DataError(f"{where}: field 'test_list': empty")
    setup = rec.get("test_setup_code") or ""
    challenge = list(rec.get("challenge_test_list") or [])
    asserts = [AssertTest(code=t, public=(i == 0)) for i, t in enumerate(tests)]
    if opts.get("include_challenge_tests"):
        asserts += [AssertTest(code=t) for t in challenge]
    try:
        native_split = mbpp_split(tid)
    except ValueError as exc:
        raise DataError(f"{where}: field 'task_id': {exc}") from exc
    return _problem(
        where,
        id=f"mbpp/{tid}", source="mbpp", split=split or native_split,
        statement=_mbpp_statement(text, tests[0]), test_setup=setup.replace("\r\n", "\n"),
        entry_point=_mbpp_entry_point(code, tests[0]), tests=asserts,
        time_limit_s=_time_limit("mbpp", opts.get("time_limit_s")), solutions=[code],
        meta={"task_id": tid, "challenge_tests": challenge},
    )


#: Split of every ``mbpp_reg`` problem.
MBPP_REG_SPLIT = "dev"


def norm_mbpp_reg(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem | None:
    """Full-MBPP record → ``mbpp_reg`` Problem when its ``task_id`` is in ``opts['mbpp_reg_ids']`` (the committed id
    list, required), else ``None`` (not part of the subset). Raises :class:`DataError` without the id list."""
    ids = opts.get("mbpp_reg_ids")
    if ids is None:
        raise DataError(f"{where}: mbpp_reg: no id list given (options['mbpp_reg_ids'])")
    tid = _int_id(rec, where)
    if tid not in ids:
        return None
    p = norm_mbpp(rec, where, None, opts)
    p.id = f"mbpp_reg/{tid}"
    p.source = "mbpp_reg"
    p.meta["mbpp_split"] = p.split
    p.split = MBPP_REG_SPLIT
    p.time_limit_s = _time_limit("mbpp_reg", opts.get("time_limit_s"))
    return p


def mbpp_reg_ids(raw_dir: str | Path | None = None, *, verify: bool = True) -> frozenset[int]:
    """The committed ``mbpp_reg`` id list (``data/raw/mbpp/mbpp_reg_ids.txt``, sha256-verified with ``verify``).
    Raises :class:`DataError` (missing file, sha256 mismatch, bad line: file and line)."""
    aux = resolve("mbpp_reg").aux["ids"]
    path = (Path(raw_dir) if raw_dir is not None else default_raw_dir()) / aux.path
    if verify:
        verify_sha256(path, aux.sha256)
    ids = read_id_list(path)
    if len(ids) != aux.records:
        raise DataError(f"{path}: {len(ids)} ids listed, the registry expects {aux.records}")
    return frozenset(ids)


def check_subset_complete(problems: list[Problem], ids: frozenset[int], where: str) -> None:
    """Raise :class:`DataError` naming ``where`` (the id file) and the missing ids unless every id of ``ids`` gave a
    problem (``meta['task_id']``)."""
    missing = sorted(ids - {int(p.meta["task_id"]) for p in problems})
    if missing:
        raise DataError(f"{where}: {len(missing)} listed ids not found in the data: {missing[:20]}")


def norm_mbpp_sanitized(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """Sanitized-MBPP record (``task_id, prompt, code, test_imports, test_list, source_file``) → Problem."""
    tid = _int_id(rec, where)
    text = _get(rec, "prompt", where)
    code = _get(rec, "code", where).replace("\r\n", "\n")
    tests = _str_list(rec, "test_list", where)
    if not tests:
        raise DataError(f"{where}: field 'test_list': empty")
    imports = _str_list(rec, "test_imports", where) if "test_imports" in rec else []
    try:
        native_split = mbpp_split(tid)
    except ValueError as exc:
        raise DataError(f"{where}: field 'task_id': {exc}") from exc
    return _problem(
        where,
        id=f"mbpp_sanitized/{tid}", source="mbpp_sanitized", split=split or native_split,
        statement=_mbpp_statement(text, tests[0]), test_setup="\n".join(imports),
        entry_point=_mbpp_entry_point(code, tests[0]),
        tests=[AssertTest(code=t, public=(i == 0)) for i, t in enumerate(tests)],
        time_limit_s=_time_limit("mbpp_sanitized", opts.get("time_limit_s")), solutions=[code],
        meta={"task_id": tid, "source_file": rec.get("source_file", "")},
    )


def _call_tests(base: list[Any], plus: list[Any], atol: float) -> list[CallTest]:
    return [CallTest(args=repr(list(a)), atol=atol) for a in [*base, *plus]]


def _inputs(rec: dict[str, Any], key: str, where: str) -> list[Any]:
    val = rec.get(key)
    if val is None:
        raise DataError(f"{where}: field '{key}': missing")
    if val == {}:  # Mbpp/793 stores an empty plus_input as {}
        return []
    if not isinstance(val, list) or not all(isinstance(a, list | tuple) for a in val):
        raise DataError(f"{where}: field '{key}': expected a list of argument lists")
    return val


def _atol(rec: dict[str, Any], where: str) -> float:
    a = rec.get("atol", 0)
    try:
        return float(a or 0)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{where}: field 'atol': not a number: {a!r}") from exc


def norm_humanevalplus(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """HumanEval+ record (``task_id, prompt, entry_point, canonical_solution, base_input, plus_input, atol``) →
    Problem with call tests (``expected=None``)."""
    tid = _get(rec, "task_id", where)
    prompt = _get(rec, "prompt", where)
    entry = _get(rec, "entry_point", where)
    sol = _get(rec, "canonical_solution", where)
    base, plus = _inputs(rec, "base_input", where), _inputs(rec, "plus_input", where)
    doc = _func_docstring(prompt, entry)
    return _problem(
        where,
        id=f"humanevalplus/{tid}", source="humanevalplus", split=split or "test",
        statement=doc or prompt, starter_code=prompt, entry_point=entry,
        tests=_call_tests(base, plus, _atol(rec, where)),
        time_limit_s=_time_limit("humanevalplus", opts.get("time_limit_s")),
        solutions=[prompt + sol],
        meta={"task_id": tid, "version": opts.get("version"), "n_base": len(base), "n_plus": len(plus),
              "statement_in_starter": doc is not None},
    )


# --- MBPP+ input type restoration (EvalPlus evalplus/data/mbpp.py::mbpp_deserialize_inputs): JSON cannot hold
# tuples, sets or complex numbers, so EvalPlus rebuilds them per task id after loading. Same task lists, same
# transformations (including its quirk of an empty dict for an empty set in Mbpp/115).


def _tuples(xs: Iterable[Any]) -> list[Any]:
    return [tuple(x) for x in xs]


def _deep_tuple(x: Any) -> Any:
    return tuple(_deep_tuple(i) for i in x) if isinstance(x, list) else x


_MBPP_RESTORE: dict[int, Callable[[list[Any]], Any]] = {}
for _t in (2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630, 726, 740, 744,
           809):
    _MBPP_RESTORE[_t] = lambda inp: _tuples(inp)
for _t in (63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780):
    _MBPP_RESTORE[_t] = lambda inp: [_tuples(x) for x in inp]
for _t in (75, 413, 444, 753):
    _MBPP_RESTORE[_t] = lambda inp: [_tuples(inp[0]), inp[1]]
for _t in (106, 750):
    _MBPP_RESTORE[_t] = lambda inp: [inp[0], tuple(inp[1])]
_MBPP_RESTORE[115] = lambda inp: [[set(x) if isinstance(x, list) and x else {} for x in inp[0]]]
_MBPP_RESTORE[124] = lambda inp: [float(inp[0]), complex(inp[1])]
for _t in (250, 405, 446, 617, 720, 763, 808):
    _MBPP_RESTORE[_t] = lambda inp: [tuple(inp[0]), *inp[1:2]]
for _t in (259, 401, 445):
    _MBPP_RESTORE[_t] = lambda inp: [tuple(_tuples(x)) for x in inp]
_MBPP_RESTORE[278] = lambda inp: [tuple(tuple(x) if isinstance(x, list) else x for x in inp[0])]
_MBPP_RESTORE[307] = lambda inp: [tuple(inp[0]), inp[1], inp[2]]
_MBPP_RESTORE[722] = lambda inp: [{k: tuple(v) for k, v in inp[0].items()}, *inp[1:]]
_MBPP_RESTORE[252] = lambda inp: [complex(inp[0])]
for _t in (580, 615, 791):
    _MBPP_RESTORE[_t] = lambda inp: list(_deep_tuple(inp))


def mbppplus_restore_inputs(task_id: str, inputs: list[list[Any]]) -> list[list[Any]]:
    """Restore Python types of MBPP+ argument lists for ``task_id`` (``"Mbpp/<n>"``), as EvalPlus'
    ``mbpp_deserialize_inputs`` does; other tasks are returned unchanged. Each result is a list of positional
    arguments. Raises ``ValueError``/``TypeError``/``IndexError`` when an input does not have the expected shape."""
    n = int(str(task_id).rsplit("/", 1)[-1])
    fn = _MBPP_RESTORE.get(n)
    if fn is None:
        return [list(a) for a in inputs]
    return [list(fn(a)) for a in inputs]


# EvalPlus special oracles for MBPP+ (evalplus/eval/_special_oracle.py): outputs compared as sets (order is
# hash-seed dependent), or only on "is not None" (the reference returns re.Match objects).
MBPP_SET_EQ = frozenset({"similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly",
                         "larg_nnum", "intersection_array", "find_dissimilar", "Diff"})
MBPP_NOT_NONE = frozenset({"check_str", "text_match_three", "text_starta_endb"})


def _not_none_tests(tests: list[CallTest], solution: str, entry: str) -> list[AssertTest]:
    """EvalPlus' not-None oracle as assert tests: the reference (defined inside the test code) decides whether the
    result must be ``None``."""
    return [AssertTest(code=f"{solution}\n_a = {t.args}\nassert (candidate(*_a) is not None) == "
                            f"({entry}(*_a) is not None)\n") for t in tests]


def norm_mbppplus(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """MBPP+ record (``task_id, prompt, entry_point, canonical_solution, base_input, plus_input, atol, assertion``)
    → Problem with call tests (``expected=None``), inputs type-restored (see :func:`mbppplus_restore_inputs`)."""
    tid = _get(rec, "task_id", where)
    prompt = _get(rec, "prompt", where)
    entry = _get(rec, "entry_point", where)
    sol = _get(rec, "canonical_solution", where)
    base, plus = _inputs(rec, "base_input", where), _inputs(rec, "plus_input", where)
    try:
        base, plus = mbppplus_restore_inputs(tid, base), mbppplus_restore_inputs(tid, plus)
    except (ValueError, TypeError, IndexError, AttributeError) as exc:
        raise DataError(f"{where}: field 'base_input/plus_input': type restoration failed: {exc}") from exc
    statement = prompt.strip().strip('"').strip()
    tests: list[Any] = _call_tests(base, plus, _atol(rec, where))
    oracle = "set_eq" if entry in MBPP_SET_EQ else ("not_none" if entry in MBPP_NOT_NONE else None)
    if oracle == "not_none":
        tests = _not_none_tests(tests, sol, entry)
    return _problem(
        where,
        id=f"mbppplus/{tid}", source="mbppplus", split=split or "test",
        statement=statement, entry_point=entry, tests=tests,
        time_limit_s=_time_limit("mbppplus", opts.get("time_limit_s")), solutions=[sol.lstrip("\n")],
        meta={"task_id": tid, "version": opts.get("version"), "n_base": len(base), "n_plus": len(plus),
              "assertion": rec.get("assertion", ""), "evalplus_oracle": oracle},
    )


# LeetCode helpers (the standard definitions LeetCode shows in its comments) and DeepSeek's Python import helper
# (Evaluation/LeetCode/human_eval/evaluation.py IMPORT_HELPER, without numpy, which the sandbox need not have).
LEETCODE_HELPERS = '''
class ListNode:
    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next


class TreeNode:
    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right
'''
DEEPSEEK_IMPORT_HELPER = "\n".join([
    "import math", "import re", "import sys", "import copy", "import datetime", "import itertools",
    "import collections", "import heapq", "import functools", "import hashlib", "import string",
    "from typing import *", "from collections import *", "from functools import *",
]) + "\n"


def _split_check(test: str) -> list[str] | None:
    """Split ``def check(candidate):`` made only of one-line asserts into the dedented assert lines, else ``None``."""
    try:
        tree = ast.parse(test)
    except SyntaxError:
        return None
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if len(tree.body) != 1 or len(funcs) != 1:
        return None
    lines = test.splitlines()
    out: list[str] = []
    for stmt in funcs[0].body:
        if not isinstance(stmt, ast.Assert) or stmt.lineno != stmt.end_lineno:
            return None
        out.append(lines[stmt.lineno - 1].strip())
    return out or None


def norm_leetcode(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """LeetCodeDataset record (v0.3.1: ``problem_description, starter_code``…; v0.2.0: ``meta.question_title``,
    ``meta.lang_code``…; both ``task_id, prompt, completion, entry_point, test``) → Problem (see module doc)."""
    slug = _get(rec, "task_id", where)
    preamble = _get(rec, "prompt", where)
    entry = _get(rec, "entry_point", where)
    test = _get(rec, "test", where)
    completion = _get(rec, "completion", where)
    meta_in = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    if "problem_description" in rec:
        statement = _get(rec, "problem_description", where)
        starter = _get(rec, "starter_code", where)
        meta = {"question_id": rec.get("question_id"), "difficulty": rec.get("difficulty"),
                "tags": rec.get("tags", []), "estimated_date": rec.get("estimated_date")}
    else:
        if "question_title" not in meta_in:
            raise DataError(f"{where}: field 'meta.question_title': missing")
        statement = meta_in["question_title"]
        starter = meta_in.get("lang_code", "")
        meta = {"question_id": meta_in.get("question_id"), "difficulty": meta_in.get("difficulty")}
    asserts = _split_check(test)
    tests = ([AssertTest(code=a) for a in asserts] if asserts
             else [AssertTest(code=f"{test}\ncheck(candidate)\n")])
    meta.update(slug=slug, check_split=asserts is not None)
    return _problem(
        where,
        id=f"leetcode/{slug}", source="leetcode", split=split or "test",
        statement=statement, starter_code=starter, solution_prefix=preamble, entry_point=entry, tests=tests,
        time_limit_s=_time_limit("leetcode", opts.get("time_limit_s")), solutions=[completion], meta=meta,
    )


def _split_contest_test(test: str) -> list[str]:
    """Split a DeepSeek contest ``test`` script into self-contained scripts: header + one ``test_input`` block."""
    parts = re.split(r"\n(?=test_input = )", test.strip("\n"))
    if len(parts) < 2:
        return [test]
    header = parts[0].rstrip() + "\n\n"
    return [header + p.strip() + "\n" for p in parts[1:]]


def norm_leetcode_contest(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """DeepSeek-Coder LeetCode contest record (``task_id, prompt, prompt_sft, test, meta, start_time``) → Problem
    without solutions (see module doc)."""
    tid = _get(rec, "task_id", where)
    prompt = _get(rec, "prompt", where)
    test = _get(rec, "test", where)
    statement = _get(rec, "prompt_sft", where)
    meta_in = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    starter = prompt.rsplit('"""\n', 1)[-1] if '"""\n' in prompt else ""
    methods = sorted(set(re.findall(r"my_solution\.(\w+)\(", test)))
    if not methods:
        raise DataError(f"{where}: field 'test': no 'my_solution.<method>(' call found")
    return _problem(
        where,
        id=f"leetcode_contest/{tid}", source="leetcode_contest", split=split or "test",
        statement=statement, starter_code=starter,
        solution_prefix=DEEPSEEK_IMPORT_HELPER + LEETCODE_HELPERS, entry_point=f"Solution().{methods[0]}",
        tests=[AssertTest(code=c) for c in _split_contest_test(test)],
        time_limit_s=_time_limit("leetcode_contest", opts.get("time_limit_s")),
        meta={"task_id": tid, "url": rec.get("url"), "difficulty": meta_in.get("difficulty"),
              "question_id": meta_in.get("questionFrontendId"), "start_time": rec.get("start_time")},
    )


def _stdin(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


def norm_codecontests(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """CodeContests-subset record (``id, name, description, tests[{input, output}], solution_python3, difficulty,
    cf_tags, cluster``) → stdio Problem."""
    pid = _get(rec, "id", where)
    desc = _get(rec, "description", where)
    raw_tests = _get(rec, "tests", where, list)
    tests = []
    for i, t in enumerate(raw_tests):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str) or not isinstance(t.get("output"), str):
            raise DataError(f"{where}: field 'tests[{i}]': expected {{input: str, output: str}}")
        tests.append(StdioTest(stdin=_stdin(t["input"]), stdout=t["output"]))
    sol = rec.get("solution_python3")
    ref = (opts.get("reference_check") or {}).get(pid)
    meta = {"name": rec.get("name"), "difficulty": rec.get("difficulty"), "cf_tags": rec.get("cf_tags", []),
            "cluster": rec.get("cluster"), "reference_float_tolerance": 1e-6}
    if ref is not None:
        meta["reference_check"] = ref
        meta["reference_passes"] = all(r == "ok" for r in ref)
    return _problem(
        where,
        id=f"codecontests/{pid}", source="codecontests", split=split or "train", statement=desc, tests=tests,
        time_limit_s=_time_limit("codecontests", opts.get("time_limit_s")),
        float_tolerance=opts.get("float_tolerance", statement_float_tolerance(desc)), solutions=[sol] if sol else [],
        meta=meta,
    )


APPS_CALL_NOTE = (
    "\n\nImportant: read the input from standard input and print the answer to standard output. If you write a "
    "function, then after its definition read its arguments with `input()` (one per line), call it and print its "
    "return value."
)


def _apps_out(v: Any) -> str:
    return v if isinstance(v, str) else str(v)


def norm_apps(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """MapCoder APPS record (``id, description, difficulty, starter_code, sample_io, test_list``) → stdio Problem
    (MapCoder's protocol, see module doc). ``output`` must be a one-element list."""
    pid = _get(rec, "id", where, (int, str))
    desc = _get(rec, "description", where)
    starter = rec.get("starter_code") or ""
    raw = _get(rec, "test_list", where, list)
    samples = rec.get("sample_io") or []
    tests = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict) or not isinstance(t.get("input"), str):
            raise DataError(f"{where}: field 'test_list[{i}].input': expected a string")
        out = t.get("output")
        if not isinstance(out, list) or len(out) != 1:
            raise DataError(f"{where}: field 'test_list[{i}].output': expected a one-element list")
        tests.append(StdioTest(stdin=_stdin(t["input"]), stdout=_apps_out(out[0]), public=t in samples))
    call_based = bool(starter.strip())
    fn = re.search(r"def\s+(\w+)\s*\(", starter)
    return _problem(
        where,
        id=f"apps/{pid}", source="apps", split=split or "train",
        statement=desc.strip() + (APPS_CALL_NOTE if call_based else ""), starter_code=starter.lstrip("\n"),
        tests=tests, time_limit_s=_time_limit("apps", opts.get("time_limit_s")),
        float_tolerance=opts.get("float_tolerance", statement_float_tolerance(desc)),
        meta={"apps_id": pid, "difficulty": rec.get("difficulty"), "call_based": call_based,
              "fn_name": fn.group(1) if fn else None},
    )


#: normaliser key (``BundledDataset.loader``) → function(record, where, split, options) -> Problem, or ``None`` for a
#: record outside a fixed subset (``mbpp_reg``).
NORMALISERS: dict[str, Callable[[dict[str, Any], str, str | None, dict[str, Any]], Problem | None]] = {
    "humaneval": norm_humaneval,
    "mbpp": norm_mbpp,
    "mbpp_reg": norm_mbpp_reg,
    "mbpp_sanitized": norm_mbpp_sanitized,
    "humanevalplus": norm_humanevalplus,
    "mbppplus": norm_mbppplus,
    "leetcode": norm_leetcode,
    "leetcode_contest": norm_leetcode_contest,
    "codecontests": norm_codecontests,
    "apps": norm_apps,
}


def load_bundled(
    spec: str,
    raw_dir: str | Path | None = None,
    *,
    verify: bool = True,
    options: dict[str, Any] | None = None,
) -> list[Problem]:
    """Load a bundled dataset ``"name[:version]"`` (see :mod:`rlvr.data.bundled`) as Problems, in file order.

    ``raw_dir`` defaults to :func:`~rlvr.data.bundled.default_raw_dir`; with ``verify`` every file's sha256 is checked
    first. ``options``: ``time_limit_s`` (per test, overrides :data:`DEFAULT_TIME_LIMITS`), ``float_tolerance``
    (codecontests), ``include_challenge_tests`` (mbpp).

    Raises :class:`DataError` (unknown dataset, sha256 mismatch, malformed line, missing field: file, line, field).
    """
    ds: BundledDataset = resolve(spec)
    root = Path(raw_dir) if raw_dir is not None else default_raw_dir()
    opts = dict(options or {})
    opts.setdefault("version", ds.version)
    if "reference_check" in ds.aux and "reference_check" not in opts:
        aux = ds.aux["reference_check"]
        path = root / aux.path
        if verify:
            verify_sha256(path, aux.sha256)
        try:
            opts["reference_check"] = json.loads(read_text_utf8(path))["per_problem"]
        except (json.JSONDecodeError, KeyError) as exc:
            raise DataError(f"{path}: field 'per_problem': missing or malformed JSON") from exc
    if "ids" in ds.aux and "mbpp_reg_ids" not in opts:
        opts["mbpp_reg_ids"] = mbpp_reg_ids(root, verify=verify)
    norm = NORMALISERS[ds.loader]
    out: list[Problem] = []
    for f in ds.files:
        path = root / f.path
        if verify:
            verify_sha256(path, f.sha256)
        for lineno, rec in iter_records(path):
            p = norm(rec, f"{path}:{lineno}", f.split, opts)
            if p is not None:
                out.append(p)
    if "ids" in ds.aux:
        check_subset_complete(out, opts["mbpp_reg_ids"], str(root / ds.aux["ids"].path))
    return _unique_ids(out)


def _unique_ids(problems: list[Problem]) -> list[Problem]:
    """Give repeated records distinct ids ``<id>~<n>`` (``meta['repeat_of']`` = the first id) so that one record is
    always one problem; exact dedup then drops the repeats. (MapCoder's APPS-150 file holds 21 problems twice or
    three times: its convert script concatenated the APPS train file with itself before sampling.)"""
    seen: Counter[str] = Counter()
    for p in problems:
        seen[p.id] += 1
        if seen[p.id] > 1:
            first = p.id
            p.id = f"{first}~{seen[first]}"
            p.meta["repeat_of"] = first
    return problems


def load(
    spec: str,
    source: str = "bundled",
    *,
    raw_dir: str | Path | None = None,
    splits: list[str] | None = None,
    options: dict[str, Any] | None = None,
) -> list[Problem]:
    """Load ``"name[:version]"`` from ``source`` (``"bundled"``: ``data/raw`` files, sha256-verified; ``"hub"``:
    :func:`rlvr.data.hub.load_hub`), keeping only ``splits`` when given.

    Raises :class:`DataError` for an unknown source or dataset, or bad input."""
    if source == "bundled":
        problems = load_bundled(spec, raw_dir, options=options)
    elif source == "hub":
        from rlvr.data.hub import load_hub

        problems = load_hub(spec, splits=splits, options=options)
    else:
        raise DataError(f"dataset spec {spec!r}: unknown source {source!r} (expected 'bundled' or 'hub')")
    if splits is not None:
        problems = [p for p in problems if p.split in splits]
    return problems
