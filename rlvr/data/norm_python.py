"""Normalisers of the function-completion benchmarks: HumanEval and the MBPP family (``mbpp``, ``mbpp_reg``,
``mbpp_sanitized``). Each is ``(record, where, split, options) -> Problem``; the per-dataset decisions are listed in
:mod:`rlvr.data.loaders`.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from rlvr.data.bundled import default_raw_dir, read_id_list, resolve, verify_sha256
from rlvr.data.errors import DataError
from rlvr.data.records import func_docstring, get_field, make_problem, str_list, time_limit
from rlvr.data.schema import AssertTest, Problem

__all__ = ["MBPP_REG_SPLIT", "check_subset_complete", "mbpp_reg_ids", "mbpp_split", "norm_humaneval", "norm_mbpp",
           "norm_mbpp_reg", "norm_mbpp_sanitized"]


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


def _mbpp_fields(rec: dict[str, Any], where: str, text_field: str) -> tuple[int, str, str, list[str], str]:
    """``(task_id, statement text, code with LF line ends, test_list, native split)`` of an MBPP-family record.
    Raises :class:`DataError` naming ``where`` and the field (bad id, empty ``test_list``, id outside 1–974)."""
    tid = _int_id(rec, where)
    text = get_field(rec, text_field, where)
    code = get_field(rec, "code", where).replace("\r\n", "\n")
    tests = str_list(rec, "test_list", where)
    if not tests:
        raise DataError(f"{where}: field 'test_list': empty")
    try:
        native_split = mbpp_split(tid)
    except ValueError as exc:
        raise DataError(f"{where}: field 'task_id': {exc}") from exc
    return tid, text, code, tests, native_split


def norm_mbpp(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """Full-MBPP record (``task_id, text, code, test_list, test_setup_code, challenge_test_list``) → Problem."""
    tid, text, code, tests, native_split = _mbpp_fields(rec, where, "text")
    setup = rec.get("test_setup_code") or ""
    challenge = list(rec.get("challenge_test_list") or [])
    asserts = [AssertTest(code=t, public=(i == 0)) for i, t in enumerate(tests)]
    if opts.get("include_challenge_tests"):
        asserts += [AssertTest(code=t) for t in challenge]
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
    tid, text, code, tests, native_split = _mbpp_fields(rec, where, "prompt")
    imports = str_list(rec, "test_imports", where) if "test_imports" in rec else []
    return make_problem(
        where,
        id=f"mbpp_sanitized/{tid}", source="mbpp_sanitized", split=split or native_split,
        statement=_mbpp_statement(text, tests[0]), test_setup="\n".join(imports),
        entry_point=_mbpp_entry_point(code, tests[0]),
        tests=[AssertTest(code=t, public=(i == 0)) for i, t in enumerate(tests)],
        time_limit_s=time_limit("mbpp_sanitized", opts.get("time_limit_s")), solutions=[code],
        meta={"task_id": tid, "source_file": rec.get("source_file", "")},
    )
