"""Test-suite amplification for weak training suites (issue 42): EvalPlus-style inputs, reference oracles.

A reward computed on 3 asserts (MBPP) or on LeetCode's 1–5 statement examples accepts many wrong programs (EvalPlus,
Liu et al. 2023). For every **call-style** training problem (its tests, or some of them, are ``assert ENTRY(literal
args) == LITERAL``, the shape the judge itself runs as a host-compared call, :func:`rlvr.judge.asserts.as_call`; or
:class:`~rlvr.data.schema.CallTest` s) whose suite has fewer than ``min_tests`` tests, governance:

1. takes the argument lists of those tests as seeds (keyword arguments put in the reference's parameter order);
2. derives new argument lists by type-aware mutation (:mod:`rlvr.data.type_mutation`), seeded by
   ``sha256(seed:problem id)`` (never Python's salted ``hash``), until the suite would have ``max_tests`` tests or
   ``max_attempts`` mutants were drawn; an input equal to a seed or to an earlier mutant (same ``repr``) is dropped;
3. appends them as :class:`CallTest` s with ``expected=None`` and fills them with the **same** oracle filling as the
   EvalPlus problems (:func:`rlvr.data.oracles.fill_expected`: the judge-verified first reference runs on them; an
   input on which it raises, times out or returns a non-literal value is discarded; the retry rule makes that
   decision the same at any load), with the oracle run limited to ``oracle_time_limit_s`` per test (the seeds run
   in the same request); the kept tests then take the problem's own time limit like every other test;
4. discards a new input whose output has a type the reference never returns on the seeds (``None`` where every seed
   gives a list: Two Sum without a solution — outside the problem's domain, where a correct program may answer
   anything) or whose expected literal is longer than ``max_expected_chars`` and 4x the longest original test.

Amplification never removes a problem: when the oracle run fails as a whole the problem keeps its original suite, and
so does a problem whose first reference the later reference verification rejects (:func:`revert_unverified`: the
added outputs are only as right as the reference that computed them).
Each amplified problem records ``meta['amplify'] = {"seed", "original_tests", "added", "candidates", "discarded"}``;
its original tests are ``tests[:original_tests]``, the added ones follow. Tests per problem before/after, per
source, are in the stage's report (:func:`suite_stats`) and ``metrics/provenance/governance.json``.

LeetCode inputs carry constraints a generic mutator cannot know (value ranges, "sorted", "a valid tree", "exactly one
answer"): the invariants inferred from the seeds (:class:`rlvr.data.type_mutation.Invariants`) catch some; an input
outside the constraints on which the reference still returns a value becomes a test a *correct* program may fail.
``sources`` switches amplification per source (``docs/stages/governance.md``).
"""

from __future__ import annotations

import ast
import hashlib
import statistics
from collections import Counter
from collections.abc import Sequence
from random import Random
from typing import Any

from pydantic import Field, model_validator

from rlvr.config import Section
from rlvr.data.schema import CallTest, Problem
from rlvr.data.type_mutation import canonical_repr, has_set, infer_invariants, mutate_args

__all__ = ["AmplifyParams", "amplify_problems", "call_seeds", "problem_seed", "revert_unverified", "suite_stats"]


class NearMissParams(Section):
    """``governance.amplify.near_miss``: the near-miss audit (:func:`rlvr.data.mutants.near_miss_report`).
    ``max_problems``: amplified problems audited per source (the first by id; 0 = off); ``mutants_per_problem``:
    AST mutants of the reference judged per problem."""

    max_problems: int = Field(default=40, ge=0)
    mutants_per_problem: int = Field(default=3, ge=1)


class AmplifyParams(Section):
    """``params.yaml`` section ``governance.amplify`` (module docstring).

    ``enabled``: off = governance's outputs as before amplification existed; ``sources``: problem sources amplified
    (``Problem.source``; only problems of role ``train``); ``min_tests``: a suite with fewer tests is weak (the RL
    floor, ``manifests.grpo_min_tests``); ``max_tests``: cap of an amplified suite, original tests included;
    ``max_attempts``: mutants drawn per problem at most; ``seed``: base seed; ``oracle_time_limit_s``: per-test wall
    limit of the reference on a new input, seconds (the oracle's retry runs at 10x); ``max_expected_chars``: an added
    test whose expected output is longer (and longer than 4x the longest original test) is dropped; ``near_miss``:
    :class:`NearMissParams`."""

    enabled: bool = False
    sources: list[str] = Field(default_factory=lambda: ["mbpp", "leetcode"])
    min_tests: int = Field(default=5, ge=1)
    max_tests: int = Field(default=10, ge=1)
    max_attempts: int = Field(default=60, ge=1)
    seed: int = Field(default=0, ge=0)
    oracle_time_limit_s: float = Field(default=0.25, gt=0)
    max_expected_chars: int = Field(default=1000, ge=1)
    near_miss: NearMissParams = NearMissParams()

    @model_validator(mode="after")
    def _cap_covers_floor(self) -> AmplifyParams:
        if self.max_tests < self.min_tests:
            raise ValueError(f"max_tests={self.max_tests} is below min_tests={self.min_tests}: an amplified suite "
                             "could stay weak")
        if any(not s.strip() for s in self.sources):
            raise ValueError("sources: empty source name")
        return self


def problem_seed(seed: int, problem_id: str) -> int:
    """The RNG seed of ``problem_id``: the first 8 bytes of ``sha256(f"{seed}:{problem_id}")`` as an int (the same in
    every process, unlike ``hash``)."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{problem_id}".encode()).digest()[:8], "big")


def _param_names(problem: Problem) -> list[str] | None:
    """Parameter names of the entry point in the first reference (``self`` dropped), or ``None``."""
    if not problem.solutions or not problem.entry_point:
        return None
    name = problem.entry_point.rsplit(".", 1)[-1]
    try:
        tree = ast.parse(problem.solutions[0])
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            if node.args.vararg or node.args.kwarg or node.args.kwonlyargs:
                return None
            names = [a.arg for a in [*node.args.posonlyargs, *node.args.args]]
            return names[1:] if names[:1] in (["self"], ["cls"]) else names
    return None


def call_seeds(problem: Problem) -> list[list[Any]]:
    """The argument lists of ``problem``'s call-style tests (module docstring), deduplicated by ``repr``, in test
    order; tests of any other shape are skipped, and so are keyword calls whose names are not exactly the
    reference's parameters. All seeds returned have the arity of the first."""
    from rlvr.judge.asserts import as_call

    params = _param_names(problem)
    out: list[list[Any]] = []
    seen: set[str] = set()
    for t in problem.tests:
        if isinstance(t, CallTest):
            args, kwargs = t.args, "{}"
        elif t.kind == "assert":
            conv = as_call(t.code, problem.entry_point)
            if conv is None:
                continue
            args, kwargs = conv.args, conv.kwargs
        else:
            continue
        try:
            pos, kw = ast.literal_eval(args), ast.literal_eval(kwargs)  # dataset text (trusted), already parsed once
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if kw:
            if params is None or len(pos) + len(kw) != len(params) or set(kw) != set(params[len(pos):]):
                continue
            pos = [*pos, *(kw[k] for k in params[len(pos):])]
        if (out and len(pos) != len(out[0])) or not pos:
            continue
        if canonical_repr(pos) not in seen:
            seen.add(canonical_repr(pos))
            out.append(list(pos))
    return out


def _eligible(p: Problem, cfg: AmplifyParams) -> bool:
    return (p.meta.get("role", "test") == "train" and p.source in cfg.sources and len(p.tests) < cfg.min_tests
            and bool(p.solutions) and p.checker is None and not p.meta.get("evalplus_oracle"))


def _candidates(p: Problem, cfg: AmplifyParams) -> tuple[list[CallTest], dict[str, Any]] | None:
    """New pending call tests of ``p`` (``None`` when it has no call-style seed) and its ``meta['amplify']``."""
    seeds = call_seeds(p)
    if not seeds:
        return None
    rng = Random(problem_seed(cfg.seed, p.id))
    invs = infer_invariants(seeds)
    want = cfg.max_tests - len(p.tests)
    seen = {canonical_repr(s) for s in seeds}
    pool, new = list(seeds), []
    limit = min(p.time_limit_s, cfg.oracle_time_limit_s)
    for _ in range(cfg.max_attempts):
        if len(new) >= want:
            break
        args = mutate_args(pool, rng, invs)
        if args is None:
            continue
        text = canonical_repr(args)
        try:  # the judge reads args as a literal: no inf/nan, no objects
            if ast.literal_eval(text) != args:
                continue
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if text in seen or len(text) > 4 * max(len(canonical_repr(s)) for s in seeds) + 200:
            continue
        seen.add(text)
        pool.append(args)  # EvalPlus grows its seed pool with its mutants
        new.append(CallTest(args=text, time_limit_s=limit))
    meta = {"seed": cfg.seed, "original_tests": len(p.tests), "added": 0, "candidates": len(new), "discarded": 0}
    # the seeds run too (same oracle run): the types of the reference's outputs on them (_keep)
    return [*(CallTest(args=canonical_repr(s), time_limit_s=limit) for s in seeds), *new], meta


def _value(expected: str | None) -> Any:
    try:
        return ast.literal_eval(expected) if expected is not None else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _keep(p: Problem, filled: Problem, cfg: AmplifyParams) -> tuple[list[CallTest], Counter[str]]:
    """The added tests of ``filled`` (``p`` after the oracle run of its seeds and candidates) that are kept, and why
    the others went: ``oracle`` (the reference raised, timed out or returned a non-literal: removed by
    :func:`~rlvr.data.oracles.fill_expected`), ``output_size`` (:func:`_expected_cap`), ``output_type`` (the
    reference's output has a type it never returns on the seeds — e.g. ``None`` where every seed gives a list: an
    input outside the problem's domain)."""
    tail = [t for t in filled.tests[len(p.tests):] if isinstance(t, CallTest)]
    seeds_text = {canonical_repr(s) for s in call_seeds(p)}
    types = {type(_value(t.expected)) for t in tail if t.args in seeds_text}
    cap = _expected_cap(p, cfg)
    why: Counter[str] = Counter()
    kept: list[CallTest] = []
    for t in tail:
        if t.args in seeds_text:
            continue
        if len(t.expected or "") > cap:
            why["output_size"] += 1
            continue
        v = _value(t.expected)
        if types and type(v) not in types:
            why["output_type"] += 1
            continue
        exp = canonical_repr(v) if has_set(v) else t.expected  # a set's repr follows the sandbox's hash seed
        kept.append(t.model_copy(update={"time_limit_s": None, "expected": exp}))
    return kept, why


def _expected_cap(p: Problem, cfg: AmplifyParams) -> int:
    """Longest expected-output literal an added test of ``p`` may have, characters: ``max_expected_chars`` or 4x the
    longest test text of the original suite, whichever is larger (a mutant that blows the output up — ``n`` from 3 to
    12 in "generate parentheses" is 208,012 strings — makes a test every rollout pays for)."""
    longest = max((len(t.model_dump_json()) for t in p.tests), default=0)
    return max(cfg.max_expected_chars, 4 * longest)


def amplify_problems(problems: Sequence[Problem], cfg: AmplifyParams, judge: Any, workers: int = 2,
                     recorded: Any = None) -> tuple[list[Problem], dict[str, Any]]:
    """Amplify the weak suites of ``problems`` (module docstring); others are returned unchanged, in order.

    ``judge``: needs ``call_outputs`` (:func:`rlvr.data.oracles.fill_expected`); ``workers``: concurrent problems;
    ``recorded``: the committed margins of references near the oracle's cap on an input
    (:class:`rlvr.judge.recorded.RecordedMargins`, passed to ``fill_expected``).
    Returns ``(problems, report)``; ``report = {"params", "problems_eligible", "problems_no_call_tests",
    "problems_amplified", "tests_added", "inputs_discarded", "discarded_by_reason": {oracle, output_type,
    output_size} (:func:`_keep`), "oracle_failures": [{id, reason}] (problems whose oracle run failed as a whole:
    kept with their original suite), "before": stats, "after": stats}`` (stats: :func:`suite_stats` over the eligible
    problems' sources)."""
    from rlvr.data.oracles import fill_expected

    eligible = [p for p in problems if _eligible(p, cfg)] if cfg.enabled else []
    pending: dict[str, Problem] = {}
    metas: dict[str, dict[str, Any]] = {}
    no_calls = 0
    for p in eligible:
        got = _candidates(p, cfg)
        if got is None:
            no_calls += 1
            continue
        new, metas[p.id] = got
        if new:
            pending[p.id] = p.model_copy(update={"tests": [*p.tests, *new]})
    filled, fill_rep = fill_expected(list(pending.values()), judge, workers=workers, measure_limits=False,
                                     recorded=recorded) if pending else ([], {"dropped": []})
    by_id = {p.id: p for p in filled}
    out: list[Problem] = []
    why: Counter[str] = Counter()
    added = amplified = 0
    for p in problems:
        q = by_id.get(p.id)
        if q is None:
            out.append(p)
            continue
        extra, w = _keep(p, q, cfg)
        why["oracle"] += metas[p.id]["candidates"] - len(extra) - sum(w.values())
        why.update(w)
        meta = dict(metas[p.id], added=len(extra), discarded=metas[p.id]["candidates"] - len(extra))
        added += len(extra)
        amplified += bool(extra)
        out.append(p.model_copy(update={"tests": [*p.tests, *extra], "meta": {**p.meta, "amplify": meta}}))
    sources = sorted({p.source for p in eligible})
    report = {"params": cfg.model_dump(mode="json"), "problems_eligible": len(eligible),
              "problems_no_call_tests": no_calls, "problems_amplified": amplified, "tests_added": added,
              "inputs_discarded": sum(why.values()),
              "discarded_by_reason": {k: why[k] for k in ("oracle", "output_type", "output_size")},
              "oracle_failures": list(fill_rep["dropped"]),
              "before": suite_stats(problems, sources, cfg.min_tests),
              "after": suite_stats(out, sources, cfg.min_tests)}
    return out, report


def revert_unverified(problems: Sequence[Problem], rejected_ids: set[str], report: dict[str, Any]) -> list[Problem]:
    """``problems`` with the amplification of every problem in ``rejected_ids`` (its first reference, which computed
    the added outputs, was not accepted by reference verification) undone: original tests only, ``meta['amplify']``
    gets ``added=0, reverted="reference_rejected"``. Updates ``report`` (of :func:`amplify_problems`) in place:
    ``problems_reverted`` and ``after``."""
    out: list[Problem] = []
    n = 0
    for p in problems:
        amp = p.meta.get("amplify")
        if p.id in rejected_ids and amp and amp.get("added"):
            n += 1
            meta = {**p.meta, "amplify": {**amp, "added": 0, "reverted": "reference_rejected"}}
            p = p.model_copy(update={"tests": p.tests[: amp["original_tests"]], "meta": meta})
        out.append(p)
    report["problems_reverted"] = n
    report["problems_amplified"] -= n
    report["tests_added"] = sum((p.meta.get("amplify") or {}).get("added", 0) for p in out)
    report["after"] = suite_stats(out, sorted(report["after"]), report["params"]["min_tests"])
    return out


def suite_stats(problems: Sequence[Problem], sources: Sequence[str], min_tests: int = 5
                ) -> dict[str, dict[str, float]]:
    """Per source of ``sources``, over the ``train``-role problems: ``{"problems", "tests_mean", "tests_median",
    "tests_min", "weak", "amplified"}`` (``weak``: fewer than ``min_tests`` tests; ``amplified``: problems given at
    least one test, ``meta['amplify']['added'] > 0``; the mean rounded to 3 places)."""
    out: dict[str, dict[str, float]] = {}
    for s in sources:
        ps = [p for p in problems if p.source == s and p.meta.get("role", "test") == "train"]
        ns = [len(p.tests) for p in ps]
        if ns:
            out[s] = {"problems": len(ns), "tests_mean": round(statistics.mean(ns), 3),
                      "tests_median": float(statistics.median(ns)), "tests_min": min(ns),
                      "weak": sum(n < min_tests for n in ns),
                      "amplified": sum(bool((p.meta.get("amplify") or {}).get("added")) for p in ps)}
    return out
