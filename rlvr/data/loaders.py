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
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from rlvr.data.evalplus import norm_humanevalplus, norm_mbppplus
from rlvr.data.records import DEFAULT_TIME_LIMITS, func_docstring, get_field, make_problem, str_list, time_limit
from rlvr.data.schema import AssertTest, Problem, StdioTest
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
]

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
    tid = get_field(rec, "task_id", where, (int, str))
    try:
        return int(tid)
    except ValueError as exc:
        raise DataError(f"{where}: field 'task_id': not an integer: {tid!r}") from exc


# ---------------------------------------------------------------------------------------------------- normalisers
# Every normaliser: (record, where, split, options) -> Problem.  `split` is the file's split (None = derive).


def norm_humaneval(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """HumanEval record (``task_id, prompt, entry_point, canonical_solution, test``) → Problem (see module doc)."""
    tid = get_field(rec, "task_id", where)
    prompt = get_field(rec, "prompt", where)
    entry = get_field(rec, "entry_point", where)
    test = get_field(rec, "test", where)
    sol = get_field(rec, "canonical_solution", where)
    doc = func_docstring(prompt, entry)
    return make_problem(
        where,
        id=f"humaneval/{tid}", source="humaneval", split=split or "test",
        statement=doc or prompt, starter_code=prompt, entry_point=entry,
        tests=[AssertTest(code=f"{test}\ncheck(candidate)\n")],
        time_limit_s=time_limit("humaneval", opts.get("time_limit_s")),
        solutions=[prompt + sol], meta={"task_id": tid, "statement_in_starter": doc is not None},
    )


def norm_mbpp(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """Full-MBPP record (``task_id, text, code, test_list, test_setup_code, challenge_test_list``) → Problem."""
    tid = _int_id(rec, where)
    text = get_field(rec, "text", where)
    code = get_field(rec, "code", where).replace("\r\n", "\n")
    tests = str_list(rec, "test_list", where)
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
    return make_problem(
        where,
        id=f"mbpp/{tid}", source="mbpp", split=split or native_split,
        statement=_mbpp_statement(text, tests[0]), test_setup=setup.replace("\r\n", "\n"),
        entry_point=_mbpp_entry_point(code, tests[0]), tests=asserts,
        time_limit_s=time_limit("mbpp", opts.get("time_limit_s")), solutions=[code],
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
    p.time_limit_s = time_limit("mbpp_reg", opts.get("time_limit_s"))
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
    text = get_field(rec, "prompt", where)
    code = get_field(rec, "code", where).replace("\r\n", "\n")
    tests = str_list(rec, "test_list", where)
    if not tests:
        raise DataError(f"{where}: field 'test_list': empty")
    imports = str_list(rec, "test_imports", where) if "test_imports" in rec else []
    try:
        native_split = mbpp_split(tid)
    except ValueError as exc:
        raise DataError(f"{where}: field 'task_id': {exc}") from exc
    return make_problem(
        where,
        id=f"mbpp_sanitized/{tid}", source="mbpp_sanitized", split=split or native_split,
        statement=_mbpp_statement(text, tests[0]), test_setup="\n".join(imports),
        entry_point=_mbpp_entry_point(code, tests[0]),
        tests=[AssertTest(code=t, public=(i == 0)) for i, t in enumerate(tests)],
        time_limit_s=time_limit("mbpp_sanitized", opts.get("time_limit_s")), solutions=[code],
        meta={"task_id": tid, "source_file": rec.get("source_file", "")},
    )


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
    slug = get_field(rec, "task_id", where)
    preamble = get_field(rec, "prompt", where)
    entry = get_field(rec, "entry_point", where)
    test = get_field(rec, "test", where)
    completion = get_field(rec, "completion", where)
    meta_in = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    if "problem_description" in rec:
        statement = get_field(rec, "problem_description", where)
        starter = get_field(rec, "starter_code", where)
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
    return make_problem(
        where,
        id=f"leetcode/{slug}", source="leetcode", split=split or "test",
        statement=statement, starter_code=starter, solution_prefix=preamble, entry_point=entry, tests=tests,
        time_limit_s=time_limit("leetcode", opts.get("time_limit_s")), solutions=[completion], meta=meta,
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
    tid = get_field(rec, "task_id", where)
    prompt = get_field(rec, "prompt", where)
    test = get_field(rec, "test", where)
    statement = get_field(rec, "prompt_sft", where)
    meta_in = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    starter = prompt.rsplit('"""\n', 1)[-1] if '"""\n' in prompt else ""
    methods = sorted(set(re.findall(r"my_solution\.(\w+)\(", test)))
    if not methods:
        raise DataError(f"{where}: field 'test': no 'my_solution.<method>(' call found")
    return make_problem(
        where,
        id=f"leetcode_contest/{tid}", source="leetcode_contest", split=split or "test",
        statement=statement, starter_code=starter,
        solution_prefix=DEEPSEEK_IMPORT_HELPER + LEETCODE_HELPERS, entry_point=f"Solution().{methods[0]}",
        tests=[AssertTest(code=c) for c in _split_contest_test(test)],
        time_limit_s=time_limit("leetcode_contest", opts.get("time_limit_s")),
        meta={"task_id": tid, "url": rec.get("url"), "difficulty": meta_in.get("difficulty"),
              "question_id": meta_in.get("questionFrontendId"), "start_time": rec.get("start_time")},
    )


def _stdin(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


def norm_codecontests(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """CodeContests-subset record (``id, name, description, tests[{input, output}], solution_python3, difficulty,
    cf_tags, cluster``) → stdio Problem."""
    pid = get_field(rec, "id", where)
    desc = get_field(rec, "description", where)
    raw_tests = get_field(rec, "tests", where, list)
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
    return make_problem(
        where,
        id=f"codecontests/{pid}", source="codecontests", split=split or "train", statement=desc, tests=tests,
        time_limit_s=time_limit("codecontests", opts.get("time_limit_s")),
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
    pid = get_field(rec, "id", where, (int, str))
    desc = get_field(rec, "description", where)
    starter = rec.get("starter_code") or ""
    raw = get_field(rec, "test_list", where, list)
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
    return make_problem(
        where,
        id=f"apps/{pid}", source="apps", split=split or "train",
        statement=desc.strip() + (APPS_CALL_NOTE if call_based else ""), starter_code=starter.lstrip("\n"),
        tests=tests, time_limit_s=time_limit("apps", opts.get("time_limit_s")),
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
