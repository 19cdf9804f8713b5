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

The normalisers live in :mod:`rlvr.data.norm_python` (HumanEval, MBPP family), :mod:`rlvr.data.norm_leetcode`,
:mod:`rlvr.data.norm_stdio` (CodeContests, APPS) and :mod:`rlvr.data.evalplus`; this module maps dataset names to them
and reads the files.

Time limits (``time_limit_s``, per test) default per dataset in :data:`DEFAULT_TIME_LIMITS`; callers may override.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvr.data.bundled import BundledDataset, default_raw_dir, iter_records, read_text_utf8, resolve, verify_sha256
from rlvr.data.errors import DataError
from rlvr.data.evalplus import norm_humanevalplus, norm_mbppplus
from rlvr.data.norm_leetcode import norm_leetcode, norm_leetcode_contest
from rlvr.data.norm_python import (
    MBPP_REG_SPLIT,
    check_subset_complete,
    mbpp_reg_ids,
    mbpp_split,
    norm_humaneval,
    norm_mbpp,
    norm_mbpp_reg,
    norm_mbpp_sanitized,
)
from rlvr.data.norm_stdio import norm_apps, norm_codecontests
from rlvr.data.records import DEFAULT_TIME_LIMITS
from rlvr.data.schema import Problem

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


# ---------------------------------------------------------------------------------------------------- normalisers
# Every normaliser: (record, where, split, options) -> Problem.  `split` is the file's split (None = derive).
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
