"""Adversarial suite, cross-submission state and secret leaks (issue 14, items 2 and 3).

State: each pair (planter, reader) runs back to back on a one-worker judge; the reader must not find the planter's
random token. Secrets: ``RLVR_RED_TEAM_API_KEY`` is planted in this process's environment when the corpus is imported
(collection time, before any judge of the session starts) and is set again before this module's own judge starts; no
output may contain it."""

from __future__ import annotations

import os
import secrets

import pytest
from hostile import HOST_SECRET, HOST_SECRET_ENV, OK_VERDICTS, PROBES, cases, describe, judge_hostile
from hostile import secrets as secret_programs
from hostile.state import PAIRS

from rlvr.judge import Judge

SECRET_ENV, SECRET = HOST_SECRET_ENV, HOST_SECRET  # planted when ``hostile`` is imported (collection time)


@pytest.fixture(scope="module")
def judge1():
    """A fresh one-worker judge started after the secret was planted: every submission lands on the same worker."""
    os.environ[SECRET_ENV] = SECRET
    j = Judge(workers=1)
    yield j
    j.close()


def _output(rr) -> str:
    return f"{rr.stdout}\n{rr.stderr}"


@pytest.mark.parametrize("p", PAIRS, ids=[p.name for p in PAIRS])
def test_nothing_of_a_submission_is_visible_to_the_next(judge1, p):
    token = "RLVRTOK_" + secrets.token_hex(16)
    first = judge1.run_code(p.planter.replace("{TOKEN}", token), timeout_s=10, language=p.language)
    assert first.verdict != "sandbox_error", _output(first)[-500:]
    second = judge1.run_code(p.reader, timeout_s=15, language=p.language)
    assert second.verdict != "sandbox_error", _output(second)[-500:]
    assert token not in _output(second), f"{p.name} ({p.attempt}): the reader saw the planter's token"
    assert token[8:] not in _output(second)


@pytest.mark.parametrize(("h", "target"), cases(secret_programs.PROGRAMS))
def test_host_secret_is_in_no_output(judge1, h, target):
    res, _ = judge_hostile(judge1, h, target)
    assert res.verdict in OK_VERDICTS, f"{h.name}: {describe(res)}"
    blob = res.message + "".join(t.stdout + t.stderr + t.message for t in res.tests)
    assert SECRET not in blob, f"{h.name} ({h.attempt}) read the host secret"
    rr = judge1.run_code(h.code, timeout_s=10)
    assert SECRET not in _output(rr), f"{h.name} via run_code read the host secret"


def test_secret_not_visible_to_the_session_judge_either(judge):
    h = secret_programs.PROGRAMS[0]
    rr = judge.run_code(h.code, timeout_s=10)
    assert rr.verdict != "sandbox_error"
    assert SECRET not in _output(rr)
    assert judge.judge(PROBES["stdio"](), "print(input())").verdict in OK_VERDICTS
