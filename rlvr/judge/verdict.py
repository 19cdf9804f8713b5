"""The judge's closed verdict vocabulary and result records.

Metrics, rewards and dashboards key on :data:`VERDICTS`, never on free text (as verl's and EvalPlus's status
vocabularies do). A sandbox failure (``sandbox_error``) is infrastructure, never the program's fault: rewards and
metrics must not score it as a wrong answer.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, Field

Verdict = Literal[
    "accepted",
    "wrong_answer",
    "runtime_error",
    "timeout",
    "memory_limit",
    "syntax_error",
    "sandbox_error",
]

VERDICTS: tuple[str, ...] = get_args(Verdict)
"""The closed verdict vocabulary in :data:`Verdict`'s order."""

# When tests disagree, the submission's verdict is the first failing test's verdict; this order is used only to
# summarise (e.g. a syntax error fails every test at once).
FAILURE_ORDER: tuple[str, ...] = (
    "sandbox_error",
    "syntax_error",
    "memory_limit",
    "timeout",
    "runtime_error",
    "wrong_answer",
)


class TestResult(BaseModel):
    """Outcome of one test of one submission.

    ``time_s`` is wall seconds of that test's process; ``cpu_s`` its user+system CPU seconds. ``stdout``/``stderr``
    are truncated to the judge's report cap (characters). ``message`` is a short human reason (first line of an
    exception, "expected 3, got 4", …) and never contains a hidden test's expected output when ``hide`` was set."""

    __test__ = False  # not a pytest class

    index: int
    verdict: Verdict
    time_s: float = 0.0
    cpu_s: float = 0.0
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    message: str = ""


class JudgeResult(BaseModel):
    """Outcome of one submission over all its tests.

    ``verdict`` is ``accepted`` iff every test passed, else the first failing test's verdict (``syntax_error`` /
    ``sandbox_error`` when nothing ran). ``pass_ratio`` = passed / total tests in [0, 1] (0 when there are no tests).
    ``judge_s`` is wall seconds the judge spent on the submission (sandbox start included). ``retries``: how many
    times the judge's own infrastructure failed under the submission and its remaining tests ran again in a fresh
    sandbox (a sandbox that could not start, or was lost; never because of what the submission did:
    :mod:`rlvr.judge.submit`)."""

    verdict: Verdict
    passed: int
    total: int
    pass_ratio: float
    judge_s: float
    tests: list[TestResult] = Field(default_factory=list)
    message: str = ""
    retries: int = 0

    @property
    def accepted(self) -> bool:
        """True iff the verdict is ``accepted``."""
        return self.verdict == "accepted"


def summarise(results: list[TestResult], judge_s: float, message: str = "") -> JudgeResult:
    """Fold per-test results into a :class:`JudgeResult` (first failing test decides the verdict)."""
    total = len(results)
    passed = sum(r.verdict == "accepted" for r in results)
    verdict: str = "accepted"
    for r in results:
        if r.verdict != "accepted":
            verdict = r.verdict
            break
    if total == 0:
        verdict = "sandbox_error"
        message = message or "problem has no tests"
    return JudgeResult(
        verdict=verdict,  # type: ignore[arg-type]
        passed=passed,
        total=total,
        pass_ratio=(passed / total) if total else 0.0,
        judge_s=judge_s,
        tests=results,
        message=message,
    )


def safe_text(text: str) -> str:
    """``text`` made encodable as UTF-8. Undecodable bytes a program wrote (carried as ``surrogateescape`` surrogates)
    are restored and decoded with U+FFFD for each invalid sequence; any other lone surrogate (e.g. ``\\udcff``)
    becomes U+FFFD too. Valid text is returned unchanged (fast path)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        except UnicodeEncodeError:
            return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text
