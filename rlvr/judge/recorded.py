"""Recorded settle margins: committed decisions for the trusted programs whose CPU need straddles a settle limit.

The settle rule (:mod:`rlvr.judge.settle`) judges a trusted program that timed out once more with CPU limits of
``margin`` × its limits, and that verdict is final: a program is accepted exactly when it needs less CPU than that.
CPU seconds are not a constant either. Under contention on the 2-core machine they moved by up to 40 %:
``leetcode/largest-palindrome-product``'s reference needs 2.3–3.2 s of CPU on its amplified input ``n = 8`` against
the oracle's 2.5 s CPU cap, and CodeContests' ``1503_e_2coloring_8359`` needs 32–35 s against its 30 s cap. Each flipped
a hashed output or a metric between two runs of the same commit (``docs/stages/governance.md``).

No measurement can decide such a program the same way every time, so the decision is measured once and committed,
as the EvalPlus time limits are (:mod:`rlvr.data.evalplus_limits`). ``data/recorded_margins.json`` lists each such
program: the problem id, the sha256 of the program's text (UTF-8) and optionally one call test's ``args`` (an oracle
input of :func:`rlvr.data.oracles.fill_expected`), with the margin its settle run uses instead of the default, chosen
on the side the committed outputs took and at least :data:`MIN_HEADROOM` × away from every CPU time measured
(checked when the file is read). Any program not listed follows the default rule; a listed program whose text
changed is not listed any more (its sha256 differs).

File layout (``entries`` in any order; ``decision`` and ``measured_cpu_s`` document and check the margin)::

    {"rule": "...", "entries": [
      {"problem": "codecontests/1503_e_2coloring_8359", "program_sha256": "<64 hex>", "args": null,
       "base_limit_s": 10.0, "margin": 6.0, "decision": "accept", "measured_cpu_s": [32.0, 35.0],
       "note": "where and when it was measured"}]}

``base_limit_s`` is the limit the margin multiplies (the problem's or the test's own limit, seconds); the settle
run's CPU limit is ``margin × base_limit_s``. A new candidate shows up in the log:
:func:`rlvr.judge.settle.judge_settled` warns about a program whose settle run used more than
:data:`rlvr.judge.settle.NEAR_SHARE` of a test's CPU limit. ``rlvr recorded-margin`` measures a program
(:func:`rlvr.judge.settle.measure_cpu`) and writes its entry (:func:`propose`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = ["DEFAULT_FILE", "MIN_HEADROOM", "RecordedMargin", "RecordedMargins", "program_sha256", "propose"]

DEFAULT_FILE = "data/recorded_margins.json"
MIN_HEADROOM = 1.5  # a recorded CPU limit is at least this factor away from every CPU time measured


def program_sha256(program: str) -> str:
    """sha256 (hex) of a program's text, UTF-8 with surrogates escaped (a submission may hold lone surrogates)."""
    return hashlib.sha256(program.encode("utf-8", "surrogatepass")).hexdigest()


class RecordedMargin(BaseModel):
    """One entry of the recorded-margins file (module docstring). Raises ``ValueError`` (pydantic's) when the margin
    is on the wrong side of, or closer than :data:`MIN_HEADROOM` × to, a measured CPU time."""

    model_config = ConfigDict(extra="forbid")

    problem: str = Field(min_length=1)
    program_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    args: str | None = None
    base_limit_s: float = Field(gt=0)
    margin: float = Field(gt=0)
    decision: Literal["accept", "reject"]
    measured_cpu_s: list[float] = Field(min_length=1)
    note: str = ""

    @model_validator(mode="after")
    def _clear_of_measurements(self) -> RecordedMargin:
        cap = self.margin * self.base_limit_s
        if self.decision == "accept" and cap < MIN_HEADROOM * max(self.measured_cpu_s):
            raise ValueError(f"margin: {self.margin} x {self.base_limit_s} s = {cap:g} s of CPU is within "
                             f"{MIN_HEADROOM}x of the measured {max(self.measured_cpu_s):g} s: it would not accept "
                             "under every load")
        if self.decision == "reject" and cap * MIN_HEADROOM > min(self.measured_cpu_s):
            raise ValueError(f"margin: {self.margin} x {self.base_limit_s} s = {cap:g} s of CPU is within "
                             f"{MIN_HEADROOM}x of the measured {min(self.measured_cpu_s):g} s: it would not reject "
                             "under every load")
        return self


class RecordedMargins:
    """The recorded margins, looked up by problem id and program text. An empty table (no file) changes nothing.

    ``entries``: the :class:`RecordedMargin` rows; ``source``: where they were read (for messages)."""

    def __init__(self, entries: list[RecordedMargin] | None = None, source: str = "") -> None:
        self.entries = list(entries or [])
        self.source = source
        self._by_key: dict[tuple[str, str], dict[str | None, float]] = {}
        for e in self.entries:
            self._by_key.setdefault((e.problem, e.program_sha256), {})[e.args] = e.margin

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def read(cls, path: str | Path) -> RecordedMargins:
        """Read ``path`` (module docstring's layout); a missing file is an empty table.

        Raises :class:`ValueError` with one line naming the file, the entry and the field when the file is not JSON,
        an entry is malformed, or two entries name the same problem, program and ``args``."""
        p = Path(path)
        if not p.is_file():
            return cls(source=str(p))
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{p}: not a JSON file: {exc}") from None
        raw = data.get("entries") if isinstance(data, dict) else None
        if not isinstance(raw, list):
            raise ValueError(f"{p}: field 'entries': missing or not a list")
        entries: list[RecordedMargin] = []
        seen: set[tuple[str, str, str | None]] = set()
        for i, row in enumerate(raw):
            try:
                e = RecordedMargin.model_validate(row)
            except ValidationError as exc:
                err = exc.errors()[0]
                field = ".".join(str(x) for x in err["loc"]) or "entry"
                raise ValueError(f"{p}: entries[{i}]: field '{field}': {err['msg']}") from None
            key = (e.problem, e.program_sha256, e.args)
            if key in seen:
                raise ValueError(f"{p}: entries[{i}]: {e.problem} is listed twice for the same program and args")
            seen.add(key)
            entries.append(e)
        return cls(entries, source=str(p))

    def margin(self, problem_id: str, program: str, default: float) -> float:
        """The settle margin of ``program`` on ``problem_id`` as a whole: the entry without ``args``, else
        ``default``."""
        got = self._by_key.get((problem_id, program_sha256(program)))
        return got.get(None, default) if got else default

    def test_margins(self, problem_id: str, program: str) -> Mapping[str, float]:
        """Margins of single call tests of ``program`` on ``problem_id``: ``args`` text → margin (empty when none)."""
        got = self._by_key.get((problem_id, program_sha256(program))) or {}
        return {a: m for a, m in got.items() if a is not None}

    def listed(self, problem_id: str, program: str) -> bool:
        """Whether any entry names ``program`` on ``problem_id``."""
        return (problem_id, program_sha256(program)) in self._by_key


def propose(problem_id: str, program: str, base_limit_s: float, measured_cpu_s: list[float],
            decision: Literal["accept", "reject"], args: str | None = None, note: str = "") -> RecordedMargin:
    """An entry for ``program``: the margin is the nearest of 1, 1.5, 2, 3, 4, 6, 8, 10, 15, 20, 30, 40, 60, 80 ×
    (… × 10) that keeps :data:`MIN_HEADROOM` from every measured CPU time on the ``decision``'s side. Raises
    ``ValueError`` when no margin ≥ 1 rejects (the program needs less than 1.5 × its limit: reject it by hand)."""
    steps = [m * 10**e for e in range(0, 4) for m in (1, 1.5, 2, 3, 4, 6, 8)]
    if decision == "accept":
        margin = next(m for m in steps if m * base_limit_s >= MIN_HEADROOM * max(measured_cpu_s))
    else:
        ok = [m for m in steps if m * base_limit_s * MIN_HEADROOM <= min(measured_cpu_s)]
        if not ok:
            raise ValueError(f"{problem_id}: needs {min(measured_cpu_s):g} s, under {MIN_HEADROOM} x its "
                             f"{base_limit_s:g} s limit: no settle margin >= 1 rejects it")
        margin = ok[-1]
    return RecordedMargin(problem=problem_id, program_sha256=program_sha256(program), args=args,
                          base_limit_s=base_limit_s, margin=float(margin), decision=decision,
                          measured_cpu_s=sorted(measured_cpu_s), note=note)
