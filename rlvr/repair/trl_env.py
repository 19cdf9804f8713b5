"""Multi-turn repair for TRL's GRPO: an ``environment_factory`` environment plus its hidden-test reward.

This is the *tool variant* (feedback as ``tool`` turns of a ``run_tests`` tool the policy calls), for a tool-capable
instruct model; the repair stage trains and evaluates the repair protocol (:mod:`rlvr.repair.protocol`: feedback as
user turns) instead. It shares the protocol's texts and its rule for the program graded.

TRL 1.16 ``GRPOTrainer(environment_factory=...)`` (experimental API; read from ``trl/trainer/grpo_trainer.py``):
the factory is called with no argument, one instance per rollout (pooled, reused); ``reset(**row)`` receives the
dataset row and may return a string appended to the last user message; every public method other than ``reset`` /
``get_reward`` is exposed to the model as a *tool* (name, type hints and Google-style docstring make the schema; the
model calls it through its chat template's tool-call format, so the policy needs a tool-capable chat template);
reward functions receive ``environments=`` (the per-rollout instances) as a keyword argument.

Mapping of the repair protocol (:mod:`rlvr.repair.env`) onto it:

* :class:`RepairToolEnv` (mode ``repair``): tool ``run_tests(code)`` = one repair turn: the code is judged on the
  *visible* tests only and the tool returns the same feedback text as the evaluation environment; at most
  ``turns - 1`` calls (the final answer is the K-th attempt), later calls return a refusal. Hidden tests live in the
  instance (from the row's ``ground_truth``) and never enter a tool result.
* :class:`InterpreterToolEnv` (mode ``interpreter``): additionally ``run_python(code)`` (``judge.run_code``), at most
  ``max_tool_calls`` calls.
* :func:`make_repair_reward`: the reward of a rollout is 1.0 when its last program (the completion's last ```python
  block, :func:`rlvr.generate.extract_code`, else the last program given to ``run_tests``: the protocol's rule,
  :func:`rlvr.repair.protocol.final_program`) passes the hidden tests, else 0.0, minus
  ``turn_penalty`` × the number of ``run_tests`` calls (optional per-turn penalty; 0 disables it).
  ``sandbox_error`` gives ``None`` (TRL ignores it), never a wrong-answer score.

TRL's tool loop is bounded by ``GRPOConfig.max_tool_calling_iterations``; set it to at least
``turns - 1 + max_tool_calls``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlvr.data.schema import Problem, from_ground_truth
from rlvr.generate.extract import extract_code
from rlvr.repair.env import split_tests
from rlvr.repair.protocol import EnvConfig, accepted_feedback, cap_middle, final_program, format_feedback
from rlvr.reward.trl import completion_text

__all__ = ["InterpreterToolEnv", "RepairToolEnv", "make_environment_factory", "make_repair_reward"]


class RepairToolEnv:
    """Per-rollout repair state for TRL (module doc). ``judge``: an object with ``judge``/``run_code``;
    ``cfg``: :class:`EnvConfig`. Attributes after ``reset``: ``problem``, ``visible``, ``hidden`` (Problems),
    ``test_calls`` (int), ``tool_calls`` (int), ``last_code`` (str | None)."""

    def __init__(self, judge: Any, cfg: EnvConfig) -> None:
        self._judge_obj = judge
        self._cfg = cfg
        self.problem: Problem | None = None

    def reset(self, ground_truth: str | dict[str, Any] | None = None, data_source: str = "unknown",
              **_: Any) -> str | None:
        """Start a rollout for the dataset row (needs its ``ground_truth`` column, :func:`rlvr.data.schema.
        ground_truth`). Returns the tool instructions appended to the user message. Raises ``ValueError`` when the
        row has no ``ground_truth``."""
        if ground_truth is None:
            raise ValueError("repair environment: dataset row has no 'ground_truth' column")
        self.problem = from_ground_truth(ground_truth, data_source)
        self.visible, self.hidden = split_tests(self.problem, self._cfg.visible_tests)
        self.test_calls = 0
        self.tool_calls = 0
        self.last_code: str | None = None
        n = self._cfg.turns - 1
        return (f"\n\nYou may call the tool run_tests with your code up to {n} time(s) to run it on the example tests "
                "before giving your final answer.") if n > 0 else None

    def run_tests(self, code: str) -> str:
        """Run a candidate solution on the example tests and get feedback.

        Args:
            code: The complete Python solution program.

        Returns:
            The verdict on the example tests and, on failure, the first failing test's input, expected and actual
            output and error.
        """
        assert self.problem is not None, "reset() first"
        if self.test_calls >= self._cfg.turns - 1:
            return "No test runs left; give your final answer."
        self.test_calls += 1
        self.last_code = code
        if not self.visible.tests:
            return "There are no example tests for this problem."
        res = self._judge_obj.judge(self.visible, code)
        if res.accepted:
            return accepted_feedback(res.total)
        return format_feedback(self.visible, res, self._cfg)

    def _final_reward(self, text: str, turn_penalty: float = 0.0) -> float | None:
        """Hidden-test reward of final answer ``text`` (module doc); ``None`` on ``sandbox_error``. Private so that
        TRL does not expose it as a tool."""
        assert self.problem is not None, "reset() first"
        code = final_program([self.last_code, extract_code(text, self.problem)])
        if code is None:
            score = 0.0
        else:
            res = self._judge_obj.judge(self.hidden, code)
            if res.verdict == "sandbox_error":
                return None
            score = 1.0 if res.accepted else 0.0
        return score - turn_penalty * self.test_calls


class InterpreterToolEnv(RepairToolEnv):
    """:class:`RepairToolEnv` plus the ``run_python`` tool (interpreter mode)."""

    def run_python(self, code: str) -> str:
        """Run a Python program and get its output.

        Args:
            code: The Python program to run (standard input is empty).

        Returns:
            The exit status, standard output and standard error of the run.
        """
        if self.tool_calls >= self._cfg.max_tool_calls:
            return "No python runs left."
        self.tool_calls += 1
        run = self._judge_obj.run_code(code, stdin="", timeout_s=self._cfg.tool_timeout_s,
                                       memory_limit_mb=self._cfg.tool_memory_mb)
        return cap_middle(f"[{run.verdict}, exit code {run.exit_code}]\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}",
                    self._cfg.tool_output_chars)


def make_environment_factory(judge: Any, cfg: EnvConfig) -> Callable[[], RepairToolEnv]:
    """The zero-argument factory TRL calls: :class:`InterpreterToolEnv` for ``cfg.mode == "interpreter"``, else
    :class:`RepairToolEnv`, all sharing ``judge``."""
    cls = InterpreterToolEnv if cfg.mode == "interpreter" else RepairToolEnv
    return lambda: cls(judge, cfg)


def make_repair_reward(turn_penalty: float = 0.0) -> Callable[..., list[float | None]]:
    """A TRL reward function ``f(completions, environments, **kwargs) -> list[float | None]`` scoring each rollout's
    final answer on its environment's hidden tests (module doc). Raises ``ValueError`` when TRL passes no
    environments (the trainer was built without ``environment_factory``)."""

    def repair_reward(completions: list[Any], environments: list[RepairToolEnv] | None = None,
                      **_: Any) -> list[float | None]:
        if not environments:
            raise ValueError("repair_reward needs GRPOTrainer(environment_factory=make_environment_factory(...))")
        return [env._final_reward(completion_text(c), turn_penalty)
                for c, env in zip(completions, environments, strict=True)]

    repair_reward.__name__ = "repair_reward"
    return repair_reward
