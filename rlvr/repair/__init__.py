"""Multi-turn repair: the protocol shared by training and evaluation (:mod:`.protocol`), the judge-feedback
environment (:mod:`.env`) and its evaluation (:mod:`.eval`).

See :mod:`rlvr.repair.protocol` for the protocol (prompt, feedback as user turns, the program graded) and
:mod:`rlvr.repair.env` for the visible/hidden split and interpreter mode."""

from rlvr.repair.env import EnvConfig, RepairEnv, StepResult, find_tool_call, format_feedback, split_tests
from rlvr.repair.eval import RepairParams, default_model, repair_metrics, run_episodes, run_repair
from rlvr.repair.protocol import Episode, fenced, final_program, initial_messages, instructions

__all__ = [
    "EnvConfig",
    "Episode",
    "RepairEnv",
    "RepairParams",
    "StepResult",
    "default_model",
    "fenced",
    "final_program",
    "find_tool_call",
    "format_feedback",
    "initial_messages",
    "instructions",
    "repair_metrics",
    "run_episodes",
    "run_repair",
    "split_tests",
]
