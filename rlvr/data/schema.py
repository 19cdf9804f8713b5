"""One problem schema for every code benchmark rlvr reads.

Every loader (HumanEval, MBPP, EvalPlus, LeetCodeDataset, APPS, CodeContests, …) normalises its records into
:class:`Problem`. The judge, the rewards, the manifests and the evaluation only ever see this schema.

Test kinds (one discriminated union, key ``kind``):

* ``stdio``  – program reads ``stdin`` and must print ``stdout`` (CodeContests / APPS style). Compared on the host,
  token-wise, whitespace-insensitive; floats only with ``Problem.float_tolerance``.
* ``call``   – call ``Problem.entry_point`` with ``args`` (a Python literal of the argument list) and compare the
  return value with ``expected`` (a Python literal) by exact type and value, ``atol`` for floats (EvalPlus style,
  Liu et al. 2023). ``expected=None`` means "not yet computed": the governance stage fills it by running the
  canonical solution, as EvalPlus does.
* ``assert`` – ``code`` is executed after the solution in a copy of the solution's globals (so helpers such as
  HumanEval/32's ``poly`` or LeetCode's ``list_node`` resolve) with ``candidate`` bound to the entry point, the
  solution's functions wrapped by the return-value guard, and pristine builtins; it passes when it raises nothing
  (HumanEval ``check(candidate)``, MBPP ``assert`` lines).

Expected outputs of ``stdio`` and ``call`` tests never enter the sandbox; ``assert`` tests carry their expected values
inside their code by nature of the benchmark.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlvr.data.verl_layout import is_verl_layout, verl_layout_fields


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class StdioTest(_Strict):
    """A stdin/stdout test: ``stdin`` text fed to the program, ``stdout`` the expected output text; ``time_limit_s``
    this test's own wall limit in seconds (``None``: ``Problem.time_limit_s``)."""

    kind: Literal["stdio"] = "stdio"
    stdin: str
    stdout: str
    public: bool = False
    time_limit_s: float | None = None


class CallTest(_Strict):
    """A function-call test: ``args`` is a Python literal list of positional arguments (``repr`` form, so tuples,
    sets and complex numbers survive), ``expected`` the Python literal of the return value, ``atol`` the absolute
    float tolerance (0 = exact), as in EvalPlus. ``group``: ``"base"``/``"plus"`` for EvalPlus tests (which of the
    benchmark's input sets it comes from; ``None`` elsewhere). ``time_limit_s``: this test's own wall limit, seconds
    (``None``: ``Problem.time_limit_s``); EvalPlus tests get ``max(1 s, 4 × the ground truth's time)``, see
    :mod:`rlvr.data.evalplus_limits`. Both fields exist on every test kind."""

    kind: Literal["call"] = "call"
    args: str
    expected: str | None = None
    atol: float = 0.0
    public: bool = False
    group: Literal["base", "plus"] | None = None
    time_limit_s: float | None = None


class AssertTest(_Strict):
    """Assertion code run after the solution with ``candidate`` bound to the entry point; passes if it raises
    nothing. HumanEval's ``check(candidate)`` and MBPP's ``assert`` lines are this kind. ``group`` / ``time_limit_s``:
    as for :class:`CallTest` (EvalPlus special oracles are assert tests)."""

    kind: Literal["assert"] = "assert"
    code: str
    public: bool = False
    group: Literal["base", "plus"] | None = None
    time_limit_s: float | None = None


Test = Annotated[StdioTest | CallTest | AssertTest, Field(discriminator="kind")]


class Checker(_Strict):
    """A special checker deciding ``stdio`` tests whose correct output is not unique (run by
    :mod:`rlvr.judge.checkers`, inside the sandbox).

    Fields:
        kind: ``python`` — ``source`` defines ``check(input: str, expected: str, actual: str) -> bool``;
            ``testlib`` — a complete program called ``checker <input> <output> <answer>`` (testlib's argv order:
            the submission's output, then the jury's answer); exit 0 = accepted, 1/2 = wrong answer, else failure.
        language: of a ``testlib`` checker (``python``, ``cpp``, ``c``, ``go``, ``rust``).
        source: the checker's program text.
        time_limit_s: wall seconds per check. memory_limit_mb: MB.
    """

    kind: Literal["python", "testlib"]
    language: str = "python"
    source: str
    time_limit_s: float = 10.0
    memory_limit_mb: int = 1024


class Problem(_Strict):
    """A normalised programming problem.

    Fields:
        id: globally unique, ``"<source>/<native id>"`` (e.g. ``"humaneval/HumanEval/0"``).
        source: dataset name (verl's ``data_source``), e.g. ``"humaneval"``, ``"mbpp"``, ``"codecontests"``.
        split: the dataset's own split name (``"test"``, ``"train"``, ``"validation"``, …).
        statement: natural-language task shown to the model.
        starter_code: code the answer continues or must keep (HumanEval prompt, LeetCode ``class Solution`` stub).
        solution_prefix: code the judge puts before every solution (imports a benchmark assumes), never shown as
            part of the answer.
        test_setup: code run after the solution and before the tests (MBPP ``test_setup_code``).
        entry_point: name or expression of the function under test for ``call``/``assert`` tests
            (``"add"``, ``"Solution().twoSum"``); ``None`` for stdin/stdout problems.
        tests: the hidden tests the verdict is computed on (``public=True`` ones may be shown to the model).
        time_limit_s: wall-clock limit per test, seconds. memory_limit_mb: address-space limit, MB.
        float_tolerance: for ``stdio`` tests, absolute/relative tolerance for float tokens; ``None`` = exact tokens.
        checker: special checker for ``stdio`` tests (several correct outputs); ``None`` = token comparison.
        solutions / incorrect_solutions: complete reference programs (accepted / known-rejected).
        meta: free-form provenance (difficulty, tags, dates).
    """

    id: str
    source: str
    split: str
    statement: str
    starter_code: str = ""
    solution_prefix: str = ""
    test_setup: str = ""
    entry_point: str | None = None
    language: str = "python"
    tests: list[Test]
    time_limit_s: float = 6.0
    memory_limit_mb: int = 1024
    float_tolerance: float | None = None
    checker: Checker | None = None
    solutions: list[str] = Field(default_factory=list)
    incorrect_solutions: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)

    def content_sha256(self) -> str:
        """sha256 (hex, 64 chars) of the canonical JSON of this problem (sorted keys): the manifest's content hash."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()

    def tests_json(self) -> str:
        """The tests as a JSON string: verl's ``reward_model.ground_truth`` payload (see :mod:`rlvr.reward`)."""
        return json.dumps([t.model_dump(mode="json") for t in self.tests], ensure_ascii=False)


# Fields of a Problem the judge needs; verl's ``reward_model.ground_truth`` is this object as a JSON string.
JUDGE_FIELDS: tuple[str, ...] = (
    "tests",
    "entry_point",
    "solution_prefix",
    "test_setup",
    "starter_code",
    "time_limit_s",
    "memory_limit_mb",
    "float_tolerance",
    "checker",
)


def ground_truth(problem: Problem) -> str:
    """Serialise what the judge needs of ``problem`` (``JUDGE_FIELDS`` plus ``id``) as a JSON string.

    This is the ``reward_model.ground_truth`` column of the verl parquet and the ``ground_truth`` column of the TRL
    datasets; :func:`from_ground_truth` inverts it. The problem's special ``checker`` travels with it, so the rewards
    (verl's ``compute_score``, TRL's reward functions) accept every output the checker accepts, as evaluation does;
    a problem without a checker leaves the key out (its payload is unchanged from before checkers travelled)."""
    d = problem.model_dump(mode="json", include={"id", *JUDGE_FIELDS})
    if d.get("checker") is None:
        d.pop("checker", None)
    return json.dumps(d, ensure_ascii=False, sort_keys=True)


def from_ground_truth(gt: str | dict[str, Any], data_source: str = "unknown") -> Problem:
    """Rebuild a judgeable :class:`Problem` from a ``ground_truth`` JSON string (or its parsed dict).

    Also reads verl's code layout ``{"inputs", "outputs"[, "fn_name"]}`` (PRIME/TACO/APPS files, what verl's
    ``prime_code`` and ``sandbox_fusion`` scorers read): :func:`rlvr.data.verl_layout.verl_layout_fields`.

    Raises ``ValueError`` naming the missing/invalid field when ``gt`` is neither payload."""
    d = json.loads(gt) if isinstance(gt, str) else dict(gt)
    if is_verl_layout(d):
        d = verl_layout_fields(d, data_source)
    if not isinstance(d, dict) or "tests" not in d:
        raise ValueError("ground_truth: expected a JSON object with a 'tests' field (rlvr's layout) or 'inputs' and "
                         "'outputs' (verl's prime_code/sandbox_fusion layout)")
    d.setdefault("id", f"{data_source}/unknown")
    return Problem(source=data_source, split="unknown", statement="", **d)


def read_problems(path: str | Path) -> list[Problem]:
    """Read a problems JSONL file (one :class:`Problem` JSON object per line).

    Raises ``ValueError`` naming the file, line number and field on a malformed line."""
    path = Path(path)
    out: list[Problem] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                out.append(Problem.model_validate_json(line))
            except ValidationError as exc:
                e = exc.errors()[0]
                loc = ".".join(map(str, e["loc"])) or "<line>"
                raise ValueError(f"{path}:{lineno}: field '{loc}': {e['msg']}") from exc
    return out


def write_problems(path: str | Path, problems: Iterable[Problem]) -> int:
    """Write problems as JSONL atomically (temp + rename); returns the count."""
    from rlvr.io import atomic_open

    n = 0
    with atomic_open(path) as fh:
        for p in problems:
            fh.write(p.model_dump_json() + "\n")
            n += 1
    return n
