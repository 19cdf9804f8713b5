"""Load the benchmarks from the HuggingFace Hub with ``datasets.load_dataset`` into :class:`~rlvr.data.schema.Problem`.

The same normalisers as the bundled files (:mod:`rlvr.data.norm_python`, :mod:`rlvr.data.norm_stdio`) map records,
so ids, sources and splits agree whichever ``source`` (``bundled`` | ``hub``) the governance stage is given.
Hub ids and configs:

=================  ===============================  ==========  ==================================================
dataset            Hub id                           config      record fields used
=================  ===============================  ==========  ==================================================
humaneval          openai/openai_humaneval          –           task_id, prompt, canonical_solution, test, entry_point
mbpp               google-research-datasets/mbpp    full        task_id, text, code, test_list, test_setup_code, …
mbpp_reg           google-research-datasets/mbpp    full        as mbpp; only the ids of data/raw/mbpp/mbpp_reg_ids.txt
mbpp_sanitized     google-research-datasets/mbpp    sanitized   task_id, prompt, code, test_imports, test_list
humanevalplus      evalplus/humanevalplus           –           task_id, prompt, canonical_solution, entry_point, test
mbppplus           evalplus/mbppplus                –           task_id, code, prompt, test_imports, test_list, test
codecontests       deepmind/code_contests           –           name, description, public/private/generated_tests,
                                                                solutions, incorrect_solutions, time_limit, …
=================  ===============================  ==========  ==================================================

The EvalPlus Hub datasets are the "OriginFmt" release: ``test`` is self-contained checker code with inputs and
expected outputs embedded (it imports numpy for ``np.allclose``), so they become one :class:`AssertTest` each rather
than call tests. CodeContests (Li et al. 2022): ``solutions``/``incorrect_solutions`` are ``{language: [int],
solution: [str]}`` with language 3 = PYTHON3; ``time_limit`` is ``{seconds, nanos}``.

Importing this module never touches the network; only :func:`load_hub` does (through ``datasets.load_dataset``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.data.bundled import non_utf8_error, parse_spec
from rlvr.data.errors import DataError
from rlvr.data.norm_python import (
    _mbpp_entry_point,
    check_subset_complete,
    mbpp_reg_ids,
    norm_humaneval,
    norm_mbpp,
    norm_mbpp_reg,
    norm_mbpp_sanitized,
)
from rlvr.data.norm_stdio import _stdin
from rlvr.data.records import DEFAULT_TIME_LIMITS, get_field, make_problem, str_list, time_limit
from rlvr.data.schema import AssertTest, Problem, StdioTest

__all__ = ["HUB", "HubDataset", "load_hub", "norm_codecontests_hub", "norm_humanevalplus_hub", "norm_mbppplus_hub"]

PYTHON3 = 3  # deepmind/code_contests Language enum: UNKNOWN 0, PYTHON 1 (py2), CPP 2, PYTHON3 3, JAVA 4


def norm_humanevalplus_hub(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """evalplus/humanevalplus (OriginFmt) record → Problem with one assert test ``test + check(candidate)``."""
    p = norm_humaneval(rec, where, split, opts)
    p.id = f"humanevalplus/{rec['task_id']}"
    p.source = "humanevalplus"
    p.time_limit_s = time_limit("humanevalplus", opts.get("time_limit_s")) * 10  # one test holds all inputs
    p.meta.update(version=opts.get("version"), origin="hub")
    return p


def norm_mbppplus_hub(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """evalplus/mbppplus (OriginFmt) record → Problem with one assert test (the ``test`` script, which calls the
    entry point by name); ``test_imports`` → ``test_setup``."""
    tid = get_field(rec, "task_id", where, (int, str))
    prompt = get_field(rec, "prompt", where)
    code = get_field(rec, "code", where)
    test = get_field(rec, "test", where)
    tests = str_list(rec, "test_list", where)
    imports = str_list(rec, "test_imports", where) if "test_imports" in rec else []
    m = re.search(r"assertion\((\w+)\(\*inp\)", test)
    entry = m.group(1) if m else _mbpp_entry_point(code, tests[0] if tests else "")
    return make_problem(
        where,
        id=f"mbppplus/Mbpp/{tid}", source="mbppplus", split=split or "test",
        statement=f"{prompt.strip()}\n{tests[0].strip()}" if tests else prompt.strip(),
        test_setup="\n".join(imports), entry_point=entry, tests=[AssertTest(code=test)],
        time_limit_s=time_limit("mbppplus", opts.get("time_limit_s")) * 10, solutions=[code.lstrip("\n")],
        meta={"task_id": f"Mbpp/{tid}", "version": opts.get("version"), "origin": "hub"},
    )


def _io_tests(rec: dict[str, Any], key: str, where: str, public: bool) -> list[StdioTest]:
    block = rec.get(key) or {"input": [], "output": []}
    ins, outs = block.get("input"), block.get("output")
    if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
        raise DataError(f"{where}: field '{key}': expected {{input: [str], output: [str]}} of equal length")
    return [StdioTest(stdin=_stdin(i), stdout=o, public=public) for i, o in zip(ins, outs, strict=True)]


def _py3(rec: dict[str, Any], key: str, limit: int) -> list[str]:
    block = rec.get(key) or {}
    langs, sols = block.get("language") or [], block.get("solution") or []
    return [s for lang, s in zip(langs, sols, strict=False) if lang == PYTHON3][:limit]


def norm_codecontests_hub(rec: dict[str, Any], where: str, split: str | None, opts: dict[str, Any]) -> Problem:
    """deepmind/code_contests record → stdio Problem.

    Tests: ``public_tests`` (``public=True``), ``private_tests``, ``generated_tests`` (unless
    ``opts['include_generated']`` is False). Solutions: the first ``opts['max_solutions']`` (default 5) PYTHON3
    solutions and incorrect solutions. ``time_limit_s`` = ``opts['time_limit_s']`` if given, else
    max(record limit, default); ``memory_limit_mb`` = max(record limit, 1024) (Python needs more address space than
    the C++ limits assume); the record's limits are kept in ``meta``."""
    name = get_field(rec, "name", where)
    desc = get_field(rec, "description", where)
    tests = _io_tests(rec, "public_tests", where, True) + _io_tests(rec, "private_tests", where, False)
    if opts.get("include_generated", True):
        tests += _io_tests(rec, "generated_tests", where, False)
    tl = rec.get("time_limit") or {}
    record_tl = float(tl.get("seconds") or 0) + float(tl.get("nanos") or 0) / 1e9
    record_mb = int(rec.get("memory_limit_bytes") or 0) // (1 << 20)
    max_sol = int(opts.get("max_solutions", 5))
    time_limit = (float(opts["time_limit_s"]) if opts.get("time_limit_s") is not None
                  else max(record_tl, DEFAULT_TIME_LIMITS["codecontests"]))
    return make_problem(
        where,
        id=f"codecontests/{name}", source="codecontests", split=split or "train", statement=desc, tests=tests,
        time_limit_s=time_limit, memory_limit_mb=max(record_mb, 1024), float_tolerance=opts.get("float_tolerance"),
        solutions=_py3(rec, "solutions", max_sol), incorrect_solutions=_py3(rec, "incorrect_solutions", max_sol),
        meta={"difficulty": rec.get("difficulty"), "source": rec.get("source"), "cf_rating": rec.get("cf_rating"),
              "cf_tags": list(rec.get("cf_tags") or []), "cf_contest_id": rec.get("cf_contest_id"),
              "cf_index": rec.get("cf_index"), "record_time_limit_s": record_tl, "record_memory_limit_mb": record_mb},
    )


@dataclass(frozen=True)
class HubDataset:
    """Where a dataset lives on the Hub: ``path`` and ``config`` for ``datasets.load_dataset``, its ``splits``, and
    the normaliser (same signature as :data:`rlvr.data.loaders.NORMALISERS`; ``None`` = record not in the dataset).
    ``id_list``: the dataset is a fixed subset selected by the committed id list of :mod:`rlvr.data.mbpp_reg` (read
    from the repository, never the network); every Hub split is read and a ``splits`` filter applies to the
    problems' own split."""

    path: str
    config: str | None
    splits: tuple[str, ...]
    normaliser: Callable[[dict[str, Any], str, str | None, dict[str, Any]], Problem | None]
    id_list: bool = False


HUB: dict[str, HubDataset] = {
    "humaneval": HubDataset("openai/openai_humaneval", None, ("test",), norm_humaneval),
    "mbpp": HubDataset("google-research-datasets/mbpp", "full", ("train", "test", "validation", "prompt"), norm_mbpp),
    "mbpp_reg": HubDataset("google-research-datasets/mbpp", "full", ("train", "test", "validation", "prompt"),
                           norm_mbpp_reg, id_list=True),
    "mbpp_sanitized": HubDataset("google-research-datasets/mbpp", "sanitized",
                                 ("train", "test", "validation", "prompt"), norm_mbpp_sanitized),
    "humanevalplus": HubDataset("evalplus/humanevalplus", None, ("test",), norm_humanevalplus_hub),
    "mbppplus": HubDataset("evalplus/mbppplus", None, ("test",), norm_mbppplus_hub),
    "codecontests": HubDataset("deepmind/code_contests", None, ("train", "valid", "test"), norm_codecontests_hub),
}


def load_hub(spec: str, *, splits: list[str] | None = None, options: dict[str, Any] | None = None) -> list[Problem]:
    """Load ``"name[:version]"`` from the Hub with ``datasets.load_dataset`` and normalise every record.

    ``splits`` restricts the Hub splits read (default: all of :data:`HUB`'s; an ``id_list`` dataset reads all and
    keeps the problems of ``splits`` in :func:`rlvr.data.loaders.load`). ``options`` as for
    :func:`rlvr.data.loaders.load_bundled`, plus ``revision`` (a Hub git revision/tag, passed through),
    ``include_generated`` and ``max_solutions`` (codecontests). The version of the spec is recorded in ``meta`` only.

    Raises :class:`DataError` for a dataset without a Hub mapping, a bad record (``hub:<path>/<split>:<row>``), bytes
    that are not UTF-8 (the split, the row when known, the record id and field for a ``bytes`` field), or a listed
    id missing from the Hub data (``mbpp_reg``); other network/Hub errors propagate from ``datasets``."""
    import datasets  # imported here so that importing rlvr.data never loads it nor touches the network

    name, version = parse_spec(spec)
    if name not in HUB:
        raise DataError(f"dataset spec {spec!r}: no Hub mapping for {name!r}; known: {sorted(HUB)}")
    hub = HUB[name]
    opts = dict(options or {})
    opts.setdefault("version", version)
    if hub.id_list and "mbpp_reg_ids" not in opts:
        opts["mbpp_reg_ids"] = mbpp_reg_ids()
    out: list[Problem] = []
    for split in (None if hub.id_list else splits) or list(hub.splits):
        kwargs: dict[str, Any] = {"split": split}
        if opts.get("revision"):
            kwargs["revision"] = opts["revision"]
        where = f"hub:{hub.path}/{split}"
        i = 0
        try:
            ds = (datasets.load_dataset(hub.path, hub.config, **kwargs) if hub.config
                  else datasets.load_dataset(hub.path, **kwargs))
            for i, rec in enumerate(ds, 1):
                p = hub.normaliser(_checked_record(dict(rec), f"{where}:{i}"), f"{where}:{i}", split, opts)
                if p is not None:
                    out.append(p)
        except UnicodeDecodeError as exc:  # raised by the datasets reader on undecodable bytes in a data file
            at = f"{where}:{i + 1}" if i else where
            raise DataError(f"{at}: non-UTF-8 bytes {exc.object[exc.start:exc.start + 8]!r} at byte {exc.start} "
                            f"({exc.reason})") from exc
    if hub.id_list:
        check_subset_complete(out, opts["mbpp_reg_ids"], f"hub:{hub.path} (ids: data/raw/mbpp/mbpp_reg_ids.txt)")
    return out


def _checked_record(rec: dict[str, Any], where: str) -> dict[str, Any]:
    """``rec`` unchanged, unless a field holds ``bytes`` that are not UTF-8: then :class:`DataError` naming ``where``,
    the record id and the field. (Strings from ``datasets`` are decoded already; text with lone surrogates is removed
    and listed by the governance stage's bad-data check.)"""
    for key, val in rec.items():
        if isinstance(val, bytes):
            try:
                val.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise non_utf8_error(where, val, exc, {**rec, key: val.decode("utf-8", "surrogateescape")}) from exc
    return rec
