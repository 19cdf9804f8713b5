"""Compatibility re-export of the judge server, which lives in :mod:`rlvr.judge.api` (one module per wire API).

``from rlvr.judge.server import create_app, serve`` keeps working; new code imports from the modules named below.
"""

from __future__ import annotations

from rlvr.judge.api.admission import AdmissionGate, Saturated
from rlvr.judge.api.app import JsonLogFormatter, configure_logging, create_app, serve
from rlvr.judge.api.common import BadRequest
from rlvr.judge.api.native import JudgeRequest
from rlvr.judge.api.sandboxfusion import (
    DEFAULT_MEMORY_LIMIT_MB,
    CommandRunResult,
    RunCodeRequest,
    RunCodeResponse,
    run_response,
)
from rlvr.judge.api.scalebox import (
    DEFAULT_RUN_TIMEOUT_S,
    EvalResult,
    EvalTestCase,
    SubmitRequest,
    extract_fenced,
    problem_from_submit,
)

__all__ = [
    "DEFAULT_MEMORY_LIMIT_MB",
    "DEFAULT_RUN_TIMEOUT_S",
    "AdmissionGate",
    "BadRequest",
    "CommandRunResult",
    "EvalResult",
    "EvalTestCase",
    "JsonLogFormatter",
    "JudgeRequest",
    "RunCodeRequest",
    "RunCodeResponse",
    "Saturated",
    "SubmitRequest",
    "configure_logging",
    "create_app",
    "extract_fenced",
    "problem_from_submit",
    "run_response",
    "serve",
]
