"""Bad-data validation, the first governance audit: no tests, an empty statement, a repeated id, text UTF-8 cannot
encode. Every removed problem is listed with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlvr.data.schema import Problem

__all__ = ["validate_problems"]


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
