"""Data governance: load every configured dataset, validate, deduplicate, decontaminate, fill call-test oracles,
verify reference solutions; :mod:`rlvr.data.audit` describes all of it (``audit.md``, metrics).

``run_governance(problems, cfg, judge=…, audits=…)`` is the single entry point the ``governance`` stage calls. Its
``audits`` are applied in order, each a callable ``(problems, cfg) -> (kept, report_dict)``; the default
(:data:`AUDITS`) is

1. ``validate`` — bad data (:func:`validate_problems`): no tests, an empty statement, a repeated id, text that is not
   encodable as UTF-8 (lone surrogates); each such problem is removed and listed with its reason;
2. ``exact_dedup`` — normalised-statement hash (:mod:`rlvr.data.dedup`);
3. ``near_dedup`` — MinHash + LSH over statement shingles, verified by exact Jaccard (:mod:`rlvr.data.neardup`),
   threshold ``near_dup_threshold`` (top-level so ``dvc exp run -S governance.near_dup_threshold=0.8`` works), the
   other knobs in ``near_dup:``;
4. ``contamination`` — n-gram overlap (13-gram flags, 10-gram reported) and test-input leakage of every training
   problem against every Dev/Test set (:mod:`rlvr.data.contamination`, knobs in ``contamination:``); flagged training
   problems are removed.

Roles come from ``params.yaml`` (``datasets[].role``, stored as ``meta['role']`` by :func:`load_configured`). Every
removal of every step is listed in the report with the id, the reason, what it duplicates / overlaps and the input
file (``file``, from ``origin_of``): nothing is dropped silently.

Oracle filling (EvalPlus, Liu et al. 2023): a :class:`CallTest` with ``expected=None`` gets the ``repr`` of what the
problem's first reference solution returns, computed by the judge (``call_outputs``). Tests whose output cannot be
computed (exception, timeout, non-builtin value) are removed and reported; a problem left without tests, or without a
reference solution, is dropped and reported. As EvalPlus' ``assertion`` does, a test with ``atol == 0`` whose
expected value is a float (or a list/tuple of floats) gets ``atol = 1e-6`` (EvalPlus problems: in order per group,
with EvalPlus's carry-over, :func:`rlvr.data.evalplus_oracles.evalplus_atols`); problems with an EvalPlus special
oracle (``meta['evalplus_oracle']``: set comparison, ``find_zero``, …) get the assert tests of
:func:`rlvr.data.evalplus_oracles.oracle_test` instead, and EvalPlus problems get per-test time limits from the
reference's times (:func:`rlvr.data.evalplus_limits.set_time_limits`, when the judge can ``judge``).

Reference verification (:func:`verify_references`, after oracle filling): every reference solution (and every known
incorrect solution) of the problems whose role is in ``references.roles`` is judged; the verdicts go to
``data/governance/references.jsonl`` and the manifests stage builds the SFT set (accepted references) and the DPO seed
pairs (accepted vs rejected) from them without a judge. It lives here because governance already owns the judge and
its cost, so the manifests stage stays a fast, judge-free transform that can be re-run for any training-set knob.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field, model_validator

from rlvr.config import Section
from rlvr.data.bundled import parse_spec, resolve, sha256_file
from rlvr.data.contamination import ContaminationConfig, audit_contamination
from rlvr.data.dedup import EVAL_ROLES, exact_dedup
from rlvr.data.errors import DataError
from rlvr.data.evalplus_limits import is_evalplus, set_time_limits
from rlvr.data.evalplus_oracles import evalplus_atols, oracle_test
from rlvr.data.neardup import NearDupConfig, near_dedup
from rlvr.data.schema import CallTest, Problem

__all__ = [
    "AUDITS",
    "DatasetSpec",
    "DedupParams",
    "GovernanceParams",
    "ReferenceParams",
    "canonical_set_literal",
    "dataset_slug",
    "fill_expected",
    "input_checksums",
    "load_configured",
    "origins",
    "run_governance",
    "validate_problems",
    "verify_references",
]

EVALPLUS_FLOAT_ATOL = 1e-6


class DatasetSpec(Section):
    """One dataset entry of ``governance.datasets``.

    ``name``: ``"name[:version]"``; ``role``: ``train`` | ``dev`` | ``test`` (drives decontamination); ``splits``: keep
    only these native splits (``None``: all); ``max_problems``: keep the first N after loading (smoke runs);
    ``time_limit_s`` (per test, seconds) / ``float_tolerance`` / ``include_challenge_tests``: loader options."""

    name: str
    role: Literal["train", "dev", "test"] = "test"
    splits: list[str] | None = None
    max_problems: int | None = Field(default=None, ge=1)
    time_limit_s: float | None = Field(default=None, gt=0)
    float_tolerance: float | None = Field(default=None, ge=0)
    include_challenge_tests: bool = False


class DedupParams(Section):
    """Exact-dedup policy (:func:`rlvr.data.dedup.exact_dedup`)."""

    drop_within_split: bool = True
    drop_train_overlapping_eval: bool = True


class ReferenceParams(Section):
    """``governance.references``: judge the reference solutions (``solutions``, at most ``max_solutions`` per problem)
    and known-incorrect solutions (``incorrect_solutions``, at most ``max_incorrect``) of problems whose role is in
    ``roles``; ``verify: false`` skips it (then the manifests stage has no SFT/DPO data)."""

    verify: bool = True
    roles: list[Literal["train", "dev", "test"]] = Field(default_factory=lambda: ["train"])
    max_solutions: int = Field(default=4, ge=0)
    max_incorrect: int = Field(default=4, ge=0)


class GovernanceParams(Section):
    """``params.yaml`` section ``governance``. ``source``: ``bundled`` (``data/raw``, sha256-verified) or ``hub``;
    ``compute_expected``: fill call-test oracles with the judge; ``expected_workers``: concurrent problems;
    ``near_dup_threshold``: exact-Jaccard threshold of the near-duplicate audit (0–1; top-level so that
    ``dvc exp run -S governance.near_dup_threshold=0.8`` works); ``near_dup``: the other MinHash/LSH knobs
    (:class:`~rlvr.data.neardup.NearDupConfig`; its ``threshold`` must not be set there); ``contamination``:
    :class:`~rlvr.data.contamination.ContaminationConfig`; ``references``: :class:`ReferenceParams`."""

    source: Literal["bundled", "hub"] = "bundled"
    datasets: list[DatasetSpec]
    dedup: DedupParams = DedupParams()
    near_dup_threshold: float = Field(default=0.7, gt=0.0, le=1.0)
    near_dup: NearDupConfig = NearDupConfig()
    contamination: ContaminationConfig = ContaminationConfig()
    compute_expected: bool = True
    expected_workers: int = Field(default=2, ge=1)
    references: ReferenceParams = ReferenceParams()
    include_synthetic: bool = False  # write the procedural smoke-profile family (section `synthetic`), unaudited

    @model_validator(mode="after")
    def _one_threshold(self) -> GovernanceParams:
        if "threshold" in self.near_dup.model_fields_set:
            raise ValueError("governance.near_dup.threshold: set governance.near_dup_threshold instead (one knob)")
        from datasketch import MinHashLSH

        try:  # datasketch needs >= 2 LSH bands: very high thresholds need more permutations
            MinHashLSH(threshold=self.near_dup_threshold, num_perm=self.near_dup.num_perm,
                       weights=self.near_dup.lsh_weights)
        except ValueError as exc:
            raise ValueError(f"governance.near_dup_threshold={self.near_dup_threshold} with near_dup.num_perm="
                             f"{self.near_dup.num_perm}: {exc} (raise num_perm)") from exc
        return self

    def near_dup_config(self) -> NearDupConfig:
        """The near-duplicate config with ``threshold = near_dup_threshold``."""
        return self.near_dup.model_copy(update={"threshold": self.near_dup_threshold})


def dataset_slug(spec: str) -> str:
    """File-name form of ``"name[:version]"`` with the default version filled: ``"humanevalplus-v0.1.10"``."""
    name, version = parse_spec(spec)
    return name if version is None else f"{name}-{version}"


def load_configured(cfg: GovernanceParams, raw_dir: str | Path | None = None) -> dict[str, list[Problem]]:
    """Load every ``cfg.datasets`` entry (``meta['role']`` set), grouped by :func:`dataset_slug`; an entry listed
    twice (e.g. different splits and roles) is merged into one group. Raises :class:`DataError` on bad input or a
    problem id loaded twice."""
    from rlvr.data.loaders import load

    out: dict[str, list[Problem]] = {}
    for ds in cfg.datasets:
        opts: dict[str, Any] = {"include_challenge_tests": ds.include_challenge_tests}
        if ds.time_limit_s is not None:
            opts["time_limit_s"] = ds.time_limit_s
        if ds.float_tolerance is not None:
            opts["float_tolerance"] = ds.float_tolerance
        problems = load(ds.name, cfg.source, raw_dir=raw_dir, splits=ds.splits, options=opts)
        if ds.max_problems is not None:
            problems = problems[: ds.max_problems]
        for p in problems:
            p.meta["role"] = ds.role
        out.setdefault(dataset_slug(ds.name), []).extend(problems)
    seen: set[str] = set()
    for slug, problems in out.items():
        for p in problems:
            if p.id in seen:
                raise DataError(f"dataset {slug!r}: problem id {p.id!r} loaded twice (overlapping entries?)")
            seen.add(p.id)
    return out


def input_checksums(cfg: GovernanceParams, raw_dir: str | Path | None = None) -> list[dict[str, str]]:
    """For bundled sources: ``[{dataset, path, sha256}]`` of every input file (re-hashed now; load already verified
    them against the registry). Empty for the Hub."""
    from rlvr.data.bundled import default_raw_dir

    if cfg.source != "bundled":
        return []
    root = Path(raw_dir) if raw_dir is not None else default_raw_dir()
    rows, seen = [], set()
    for ds in cfg.datasets:
        b = resolve(ds.name)
        for f in [*b.files, *b.aux.values()]:
            if f.path not in seen:
                seen.add(f.path)
                rows.append({"dataset": b.key, "path": f.path, "sha256": sha256_file(root / f.path)})
    return rows


def origins(cfg: GovernanceParams, by_slug: Mapping[str, Sequence[Problem]]) -> dict[str, str]:
    """id → the input file a problem was read from (``data/raw``-relative path for bundled data, ``hub:<name>``
    for the Hub): the ``file`` of every listed removal. A bundled dataset whose files all derive splits per record
    maps to its first file."""
    out: dict[str, str] = {}
    for ds in cfg.datasets:
        slug = dataset_slug(ds.name)
        if cfg.source != "bundled":
            for p in by_slug.get(slug, ()):
                out.setdefault(p.id, f"hub:{ds.name}")
            continue
        files = resolve(ds.name).files
        for p in by_slug.get(slug, ()):
            f = next((f for f in files if f.split == p.split), None) or next(
                (f for f in files if f.split is None), files[0])
            out.setdefault(p.id, f.path)
    return out


class _CallOutputs(Protocol):
    def call_outputs(self, problem: Problem, solution: str) -> list[str | None]: ...


def _is_floats(expected: str) -> bool:
    """EvalPlus ``is_floats`` on a repr: a float, or a non-empty list/tuple of floats (``inf``/``nan`` count)."""
    try:
        from rlvr.judge.literal import parse_literal

        v = parse_literal(expected)
    except Exception:
        try:
            v = ast.literal_eval(expected)
        except Exception:
            return False
    if isinstance(v, float):
        return True
    return isinstance(v, list | tuple) and bool(v) and all(isinstance(x, float) for x in v)


def canonical_set_literal(value: str) -> str:
    """``value`` (the ``repr`` of a set-compared output) with its elements sorted by ``repr``, so that the bytes do not
    depend on the order a set was iterated in (which follows the interpreter's per-process string hash seed).

    Only a list/tuple/set/frozenset literal is re-ordered (as a list: the test compares ``set(…)`` of both sides, so
    the meaning is unchanged); any other value, or a ``repr`` that is not a Python literal, is returned unchanged.

    >>> canonical_set_literal("('b', 'a')")
    "['a', 'b']"
    """
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value
    if isinstance(items, (list, tuple, set, frozenset)):
        return repr(sorted(items, key=repr))
    return value


def fill_expected(
    problems: Sequence[Problem], judge: _CallOutputs, workers: int = 2
) -> tuple[list[Problem], dict[str, Any]]:
    """Fill every ``CallTest.expected is None`` by running the first reference solution through ``judge``.

    Returns ``(kept, report)``: ``report = {"problems_computed", "tests_computed", "tests_failed",
    "failed_tests": {id: n}, "dropped": [{id, reason}]}``; reasons: ``no_solution``, ``judge_error: …``,
    ``no_tests_left``. Problems without pending call tests pass through untouched."""
    pending = [p for p in problems if any(isinstance(t, CallTest) and t.expected is None for t in p.tests)]

    def work(p: Problem) -> tuple[list[str | None] | None, str | None]:
        if not p.solutions:
            return None, "no_solution"
        try:
            return judge.call_outputs(p, p.solutions[0]), None
        except Exception as exc:  # compile error or sandbox failure: reported, never silent
            return None, f"judge_error: {type(exc).__name__}: {exc}"[:500]

    with ThreadPoolExecutor(max_workers=workers) as ex:
        results = dict(zip((p.id for p in pending), ex.map(work, pending), strict=True))
    report: dict[str, Any] = {"problems_computed": 0, "tests_computed": 0, "tests_failed": 0,
                              "failed_tests": {}, "dropped": []}
    kept: list[Problem] = []
    for p in problems:
        if p.id not in results:
            kept.append(p)
            continue
        outs, err = results[p.id]
        if outs is None:
            report["dropped"].append({"id": p.id, "reason": err})
            continue
        calls = [t for t in p.tests if isinstance(t, CallTest)]
        if len(outs) != len(calls):
            report["dropped"].append({"id": p.id, "reason": f"judge_error: {len(outs)} outputs for {len(calls)} tests"})
            continue
        new_tests, failed = [], 0
        out_iter = iter(outs)
        for t in p.tests:
            if not isinstance(t, CallTest):
                new_tests.append(t)
                continue
            value = next(out_iter)
            if t.expected is not None:
                new_tests.append(t)
            elif value is None:
                failed += 1
            elif p.meta.get("evalplus_oracle"):  # EvalPlus special oracle (rlvr.data.evalplus_oracles)
                exp = canonical_set_literal(value) if p.meta["evalplus_oracle"] == "set_eq" else value
                new_tests.append(oracle_test(p.meta["evalplus_oracle"], t, exp, float(p.meta.get("evalplus_atol", 0))))
            else:
                atol = EVALPLUS_FLOAT_ATOL if t.atol == 0 and _is_floats(value) else t.atol
                new_tests.append(t.model_copy(update={"expected": value, "atol": atol}))
        if "evalplus_atol" in p.meta:  # EvalPlus's in-order float tolerance rule
            new_tests = evalplus_atols(new_tests, float(p.meta["evalplus_atol"]))
        report["tests_computed"] += len(calls) - failed
        report["tests_failed"] += failed
        if failed:
            report["failed_tests"][p.id] = failed
        if not new_tests:
            report["dropped"].append({"id": p.id, "reason": "no_tests_left"})
            continue
        report["problems_computed"] += 1
        kept.append(p.model_copy(update={"tests": new_tests}))
    if hasattr(judge, "judge") and any(is_evalplus(p) for p in kept):  # EvalPlus per-test limits from the reference
        kept, report["time_limits"] = set_time_limits(kept, judge, workers=workers)
    return kept, report


def _unencodable_field(p: Problem) -> str | None:
    """First field of ``p`` holding text that UTF-8 cannot encode (lone surrogates, e.g. from ``"\udc80"`` escapes in
    JSON or ``surrogateescape``-decoded bytes); ``None`` when all text is valid."""
    texts: list[tuple[str, str]] = [(f, getattr(p, f)) for f in ("id", "statement", "starter_code",
                                                                    "solution_prefix", "test_setup")]
    texts += [(f"solutions[{i}]", s) for i, s in enumerate(p.solutions)]
    texts += [(f"incorrect_solutions[{i}]", s) for i, s in enumerate(p.incorrect_solutions)]
    for i, t in enumerate(p.tests):
        for name in ("stdin", "stdout", "args", "expected", "code"):
            v = getattr(t, name, None)
            if isinstance(v, str):
                texts.append((f"tests[{i}].{name}", v))
    for name, text in texts:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return name
    try:
        p.model_dump_json(include={"meta", "checker"})
    except Exception:
        return "meta/checker"
    return None


def _printable(s: str) -> str:
    """``s`` with characters UTF-8 cannot encode written as ``\\u`` + 4-hex-digit escapes (reports must be writable)."""
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def validate_problems(problems: Sequence[Problem]) -> tuple[list[Problem], dict[str, Any]]:
    """Remove and list bad data: ``no_tests`` (nothing to judge), ``empty_statement`` (nothing to show the model),
    ``duplicate_id`` (a repeated record: ``meta['repeat_of']`` set by the loader, or an id seen earlier in
    ``problems``), ``non_utf8_text: <field>`` (text not encodable as UTF-8). Returns ``(kept, report)`` with
    ``report = {"n_in", "n_out", "counts": {"bad_<reason>": n, "dropped": n}, "dropped": [{id, reason, …}]}``."""
    seen: set[str] = set()
    kept: list[Problem] = []
    dropped: list[dict[str, Any]] = []
    for p in problems:
        reason, extra = None, {}
        if p.id in seen or p.meta.get("repeat_of"):
            reason, extra = "duplicate_id", {"duplicate_of": str(p.meta.get("repeat_of") or p.id)}
        elif (bad := _unencodable_field(p)) is not None:
            reason = f"non_utf8_text: {bad}"
        elif not p.tests:
            reason = "no_tests"
        elif not p.statement.strip():
            reason = "empty_statement"
        seen.add(p.id)
        if reason is None:
            kept.append(p)
        else:
            dropped.append({"id": _printable(p.id), "reason": reason, **extra})
    counts: dict[str, int] = {"dropped": len(dropped)}
    for d in dropped:
        key = "bad_" + d["reason"].split(":")[0]
        counts[key] = counts.get(key, 0) + 1
    return kept, {"n_in": len(problems), "n_out": len(kept), "counts": counts, "dropped": dropped}


def _validate_audit(problems: list[Problem], cfg: GovernanceParams) -> tuple[list[Problem], dict[str, Any]]:
    return validate_problems(problems)


def _exact_dedup_audit(problems: list[Problem], cfg: GovernanceParams) -> tuple[list[Problem], dict[str, Any]]:
    kept, rep = exact_dedup(problems, drop_within_split=cfg.dedup.drop_within_split,
                            drop_train_overlapping_eval=cfg.dedup.drop_train_overlapping_eval)
    return kept, rep.to_dict()


def _place(p: Problem) -> str:
    return f"{p.source}/{p.split}"


def _near_dedup_audit(problems: list[Problem], cfg: GovernanceParams) -> tuple[list[Problem], dict[str, Any]]:
    kept, rep = near_dedup(problems, cfg.near_dup_config())
    place = {p.id: _place(p) for p in problems}
    d = rep.model_dump(mode="json")
    d["counts"] = rep.counts()
    d["counts"]["cross_place_clusters"] = sum(len({place[m] for m in c.members}) > 1 for c in rep.clusters)
    for c in d["clusters"]:
        c["places"] = [place[m] for m in c["members"]]
    d["n_in"], d["n_out"] = len(problems), len(kept)
    return kept, d


def _contamination_audit(problems: list[Problem], cfg: GovernanceParams) -> tuple[list[Problem], dict[str, Any]]:
    train = [p for p in problems if p.meta.get("role", "test") == "train"]
    eval_sets: dict[str, list[Problem]] = {}
    for p in problems:
        if p.meta.get("role", "test") in EVAL_ROLES:
            eval_sets.setdefault(_place(p), []).append(p)
    rep, flagged = audit_contamination(train, eval_sets, cfg.contamination)
    flagged_set = set(flagged)
    d = rep.model_dump(mode="json")
    d["counts"] = rep.counts()
    d["counts"]["contamination_input_leaks"] = sum("test_input_leak" in it.reasons for it in rep.items)
    dropped = []
    for it in rep.items:
        if not it.flagged:
            continue
        top = max(it.hits, key=lambda h: (h.n == cfg.contamination.main_n, h.shared), default=None)
        leak = max(it.input_leaks, key=lambda x: x.shared, default=None)
        first = top if top is not None and f"ngram_{top.n}" in it.reasons else leak
        dropped.append({"id": it.id, "reason": "contamination: " + ",".join(it.reasons),
                        "duplicate_of": first.eval_id if first is not None else ""})
    d["dropped"] = dropped
    d["n_in"] = len(problems)
    kept = [p for p in problems if p.id not in flagged_set]
    d["n_out"] = len(kept)
    return kept, d


Audit = Callable[[list[Problem], GovernanceParams], tuple[list[Problem], dict[str, Any]]]

#: Audits run in order by :func:`run_governance`, keyed by report name.
AUDITS: dict[str, Audit] = {
    "validate": _validate_audit,
    "exact_dedup": _exact_dedup_audit,
    "near_dedup": _near_dedup_audit,
    "contamination": _contamination_audit,
}


class _Judge(Protocol):
    def judge_many(self, items: Sequence[tuple[Problem, str]]) -> list[Any]: ...


def verify_references(
    problems: Sequence[Problem], judge: _Judge, cfg: ReferenceParams
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Judge the reference and known-incorrect solutions of every problem whose ``meta['role']`` is in
    ``cfg.roles`` (first ``max_solutions`` / ``max_incorrect`` of each), all in one ``judge.judge_many`` call.

    Returns ``(rows, report)``: one row per judged program ``{"id", "kind": "solution"|"incorrect", "index",
    "verdict", "accepted", "pass_ratio"}`` (problem order, then kind, then index); ``report["counts"]``:
    ``references_judged``, ``references_accepted``, ``references_rejected``, ``incorrect_judged``,
    ``incorrect_rejected``, ``incorrect_accepted`` (a "wrong" program the tests cannot tell apart),
    ``problems_with_accepted``, ``problems_without_solution``; ``report["rejected"]``: ``[{id, index, verdict}]`` of
    references the judge did not accept (dropped from SFT, never silently)."""
    todo: list[tuple[Problem, str, str, int]] = []
    no_solution = 0
    for p in problems:
        if p.meta.get("role", "test") not in cfg.roles:
            continue
        if not p.solutions:
            no_solution += 1
        todo += [(p, s, "solution", i) for i, s in enumerate(p.solutions[: cfg.max_solutions])]
        todo += [(p, s, "incorrect", i) for i, s in enumerate(p.incorrect_solutions[: cfg.max_incorrect])]
    results = judge.judge_many([(p, s) for p, s, _, _ in todo]) if todo else []
    rows: list[dict[str, Any]] = []
    for (p, _s, kind, i), r in zip(todo, results, strict=True):
        rows.append({"id": p.id, "kind": kind, "index": i, "verdict": r.verdict, "accepted": r.verdict == "accepted",
                     "pass_ratio": round(float(r.pass_ratio), 6)})
    refs = [r for r in rows if r["kind"] == "solution"]
    wrong = [r for r in rows if r["kind"] == "incorrect"]
    counts = {
        "references_judged": len(refs),
        "references_accepted": sum(r["accepted"] for r in refs),
        "references_rejected": sum(not r["accepted"] for r in refs),
        "incorrect_judged": len(wrong),
        "incorrect_rejected": sum(not r["accepted"] for r in wrong),
        "incorrect_accepted": sum(r["accepted"] for r in wrong),
        "problems_with_accepted": len({r["id"] for r in refs if r["accepted"]}),
        "problems_without_solution": no_solution,
    }
    verdicts = dict(sorted(Counter(r["verdict"] for r in refs).items()))
    rejected = [{"id": r["id"], "index": r["index"], "verdict": r["verdict"]} for r in refs if not r["accepted"]]
    return rows, {"counts": counts, "verdicts": verdicts, "rejected": rejected}


def _counts(problems: Sequence[Problem]) -> dict[str, int]:
    c = Counter(_place(p) for p in problems)
    return dict(sorted(c.items()))


def run_governance(
    problems: Sequence[Problem],
    cfg: GovernanceParams,
    *,
    judge: Any = None,
    audits: dict[str, Audit] | None = None,
    origin_of: Mapping[str, str] | None = None,
) -> tuple[list[Problem], dict[str, Any]]:
    """Audit then verify ``problems`` (all datasets together, so cross-source collisions are seen).

    Steps: each audit of ``audits`` (default :data:`AUDITS`) in order; then, if ``cfg.compute_expected``, fill
    call-test oracles with ``judge`` (needs ``call_outputs``); then, if ``cfg.references.verify``, judge reference
    solutions (:func:`verify_references`, needs ``judge_many``). ``ValueError`` if a judge is needed and missing.
    ``origin_of`` (id → input file, :func:`origins`) adds ``file`` to every removed item.

    Returns ``(kept, report)`` with ``report = {"counts_before", "counts_after" ("<source>/<split>" → n),
    "audits": {name: report}, "expected": fill report or None, "references": verification report or None,
    "reference_rows": rows of :func:`verify_references`, "removed": [{id, step, reason, duplicate_of, file}]}``."""
    report: dict[str, Any] = {"counts_before": _counts(problems), "audits": {}, "expected": None,
                              "references": None, "reference_rows": []}
    kept = list(problems)
    for name, audit in (AUDITS if audits is None else audits).items():
        kept, report["audits"][name] = audit(kept, cfg)
    if cfg.compute_expected and any(isinstance(t, CallTest) and t.expected is None for p in kept for t in p.tests):
        if judge is None:
            raise ValueError("run_governance: compute_expected needs a judge")
        kept, report["expected"] = fill_expected(kept, judge, workers=cfg.expected_workers)
    if cfg.references.verify and any(p.meta.get("role", "test") in cfg.references.roles for p in kept):
        if judge is None:
            raise ValueError("run_governance: references.verify needs a judge")
        report["reference_rows"], report["references"] = verify_references(kept, judge, cfg.references)
    report["counts_after"] = _counts(kept)
    removed: list[dict[str, Any]] = []
    files = {_printable(k): v for k, v in (origin_of or {}).items()}
    steps = [(n, r) for n, r in report["audits"].items()] + [("expected", report["expected"])]
    for step, rep in steps:
        for d in (rep or {}).get("dropped", []) if isinstance(rep, dict) else []:
            d.setdefault("file", files.get(_printable(str(d["id"])), ""))
            removed.append({"id": d["id"], "step": step, "reason": d["reason"],
                            "duplicate_of": d.get("duplicate_of", ""), "file": d["file"]})
    report["removed"] = removed
    return kept, report
