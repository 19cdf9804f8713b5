"""Program extraction for the reward layer: the same rules as the evaluation (:func:`rlvr.generate.extract_code`).

Rewards and evaluation must read a completion the same way, so this module only adapts the shared extractor to the
reward layer's call shape; the rules and their sources are documented in :mod:`rlvr.generate.extract`.

The completion is untrusted text: :func:`clean_completion` makes it a valid Unicode ``str`` first (lone surrogates,
the form undecodable bytes take, would otherwise fail when the program is serialised for the judge, and that failure
must not read as an infrastructure ``sandbox_error``), and :func:`safe_program_for` turns a crash of the extractor on
a hostile completion into "no program" (logged), so one completion cannot stop the batch.
"""

from __future__ import annotations

import logging
from typing import Any

from rlvr.data.schema import Problem
from rlvr.generate.extract import extract_code
from rlvr.judge.verdict import safe_text

__all__ = ["clean_completion", "extract_code", "program_for", "safe_program_for"]

log = logging.getLogger(__name__)


def clean_completion(text: Any) -> str:
    """``text`` as a ``str`` that encodes as UTF-8: ``None`` → ``""``, bytes decoded as UTF-8 with U+FFFD for invalid
    sequences, other non-strings ``str()``-ed, lone surrogates replaced by U+FFFD (surrogate-escaped bytes are
    restored and decoded the same way). Never raises.

    >>> clean_completion(b"ok\\xff"), clean_completion("a\\udcffb"), clean_completion(None)
    ('ok\ufffd', 'a\ufffdb', '')
    """
    if text is None:
        return ""
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        try:
            text = str(text)
        except Exception:
            return ""
    return safe_text(text)


def program_for(problem: Problem, completion: str) -> str | None:
    """The program the judge runs for ``completion`` (str) on ``problem``; ``None`` when there is no code.

    >>> from rlvr.data.schema import Problem, CallTest
    >>> p = Problem(id="t/1", source="t", split="test", statement="add", starter_code="def add(a, b):\\n",
    ...             entry_point="add", tests=[CallTest(args="[1, 2]", expected="3")])
    >>> program_for(p, "    return a + b\\n")
    'def add(a, b):\\n    return a + b\\n'
    >>> program_for(p, "I cannot solve this.") is None
    True
    """
    return extract_code(completion, problem)


def safe_program_for(problem: Problem, completion: Any) -> str | None:
    """:func:`program_for` on :func:`clean_completion` of ``completion``; ``None`` (no program: the completion scores
    as having no code) when the extractor raises on it, logged. Never raises."""
    try:
        return program_for(problem, clean_completion(completion))
    except Exception as exc:  # a completion must never stop the batch
        log.warning("reward: extraction failed on a completion of %s (%s: %s); scored as no code", problem.id,
                    type(exc).__name__, exc)
        return None
