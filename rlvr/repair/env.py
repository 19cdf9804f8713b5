"""Multi-turn repair environment: the model answers, the judge runs the answer on the *visible* tests and answers with
feedback, the model repairs, up to ``turns`` answers; the verdict that counts is on the *hidden* tests.

Protocol (:mod:`rlvr.repair.protocol`, shared with training; RLEF, Gehring et al. 2024, arXiv:2410.02089): an
episode ends when the latest answer passes every visible test or after ``turns`` answers; the last program of the
episode (the latest answer that had code) is judged on the hidden tests, which the model never sees.

Visible / hidden split (:func:`split_tests`):

* a problem with ``public=True`` tests: visible = the public tests, hidden = the non-public tests (all tests when every
  test is public, the degenerate case where nothing is hidden);
* a problem without public tests: visible = the first ``visible_tests`` tests, and they are **removed** from the
  hidden set, so hidden tests stay hidden; at least one test is always kept hidden (a 1-test problem has no visible
  test and its feedback says only whether code was found).

Feedback never contains anything from a hidden test: it is built only from the visible-test judge run (the hidden run's
result goes to the trace record, never to a message). ``tests/repair`` proves it.

Interpreter mode (``mode="interpreter"``, the seeds' Python-interpreter variant): the model may also run code before
answering by writing a fenced block tagged ``python-run`` (a Markdown fence, so every chat template carries it;
:func:`rlvr.generate.extract_code` ignores that tag, so a tool call is never mistaken for the answer). The first such
block of a reply is run once in the judge's sandbox (``judge.run_code``, empty stdin) and its stdout/stderr go back as
a user message; at most ``max_tool_calls`` per episode, after which ``python-run`` blocks are ignored and the reply is
judged as an answer. Tool calls do not count as turns. Tool results use the ``user`` role (not ``tool``) so models
whose chat template has no tool role work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rlvr.data.schema import Problem
from rlvr.judge.verdict import JudgeResult
from rlvr.repair.protocol import (
    DEFAULT_FEEDBACK,
    NO_CODE_FEEDBACK,
    TOOL_INSTRUCTIONS,
    EnvConfig,
    Episode,
    _Judge,
    cap_middle,
    find_tool_call,
    format_feedback,
    initial_messages,
)

__all__ = [
    "DEFAULT_FEEDBACK",
    "NO_CODE_FEEDBACK",
    "TOOL_INSTRUCTIONS",
    "EnvConfig",
    "RepairEnv",
    "StepResult",
    "cap_middle",
    "find_tool_call",
    "format_feedback",
    "split_tests",
]


def split_tests(problem: Problem, n_visible: int) -> tuple[Problem, Problem]:
    """``(visible, hidden)`` copies of ``problem`` holding disjoint test sets (rules in the module doc).

    Raises ``ValueError`` naming the problem when it has no tests."""
    tests = list(problem.tests)
    if not tests:
        raise ValueError(f"{problem.id}: problem has no tests")
    public = [t for t in tests if t.public]
    if public:
        hidden = [t for t in tests if not t.public] or tests
        visible = public
    else:
        k = min(n_visible, len(tests) - 1)
        visible, hidden = tests[:k], tests[k:]
    return (problem.model_copy(update={"tests": visible}, deep=True),
            problem.model_copy(update={"tests": hidden}, deep=True))


@dataclass
class StepResult:
    """Outcome of one :meth:`RepairEnv.step`.

    ``kind``: ``answer`` (a judged answer) or ``tool`` (a tool call, interpreter mode). ``done``: the episode ended.
    ``message``: the user message appended (feedback or tool output), ``None`` when the episode ended."""

    kind: Literal["answer", "tool"]
    done: bool
    message: str | None


@dataclass
class RepairEnv:
    """One episode on one problem: state = the problem + the conversation (``messages``, chat format).

    Usage: ``env.messages`` is the prompt (:func:`rlvr.repair.protocol.initial_messages`); after each generation call
    ``env.step(text, n_tokens)`` until ``done``; ``env.final`` is the hidden-test :class:`JudgeResult` of the
    episode's last program (:func:`rlvr.repair.protocol.final_program`; ``None`` if no answer had code);
    ``env.accepted`` is the episode's outcome; ``env.record()`` the full trace (JSON-ready). The visible-test part is
    :class:`rlvr.repair.protocol.Episode` (``env.episode``), the same state machine verl's agent loop runs.
    Raises ``ValueError`` (from :func:`split_tests`) for a problem without tests."""

    problem: Problem
    judge: _Judge
    cfg: EnvConfig
    messages: list[dict[str, str]] = field(init=False)
    turns: list[dict[str, Any]] = field(init=False, default_factory=list)
    tool_calls: list[dict[str, Any]] = field(init=False, default_factory=list)
    done: bool = field(init=False, default=False)
    final: JudgeResult | None = field(init=False, default=None)
    judge_s: float = field(init=False, default=0.0)
    tokens: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.visible, self.hidden = split_tests(self.problem, self.cfg.visible_tests)
        self.messages = initial_messages(self.problem, self.cfg)
        self.episode = Episode(self.visible, self.judge, self.cfg, self.messages[0]["content"])
        self._hidden: dict[str, JudgeResult] = {}  # program -> hidden verdict (each program judged once)

    @property
    def accepted(self) -> bool:
        """True iff the episode's last program passed every hidden test."""
        return self.final is not None and self.final.accepted

    def _judge_hidden(self, code: str) -> JudgeResult:
        if code not in self._hidden:
            res = self.judge.judge(self.hidden, code)
            self.judge_s += res.judge_s
            self._hidden[code] = res
        return self._hidden[code]

    def feedback(self, result: JudgeResult) -> str:
        """The feedback message for a visible-test ``result`` (:func:`format_feedback`), as the episode sends it
        after its answers so far (at least one)."""
        return format_feedback(self.visible, result, self.cfg, self.messages[0]["content"],
                               max(1, self.episode.answers))

    def step(self, text: str, n_tokens: int = 0) -> StepResult:
        """Consume one model reply ``text`` (``n_tokens`` generated tokens) through the protocol
        (:meth:`rlvr.repair.protocol.Episode.step`: a tool call is run, an answer judged on the visible tests), then
        judge the episode's last program on the hidden tests when the episode ends (or after every answer with
        ``judge_hidden_each_turn``; an answer without code keeps the earlier program's verdict). Raises
        ``RuntimeError`` when the episode is already done."""
        if self.done:
            raise RuntimeError(f"{self.problem.id}: step() after the episode ended")
        self.tokens += n_tokens
        before = self.episode.judge_s
        reply = self.episode.step(text)
        self.judge_s += self.episode.judge_s - before
        self.messages.append({"role": "assistant", "content": text})
        if reply.kind == "tool":
            run = reply.run
            self.tool_calls.append({"code": find_tool_call(text), "verdict": run.verdict, "time_s": run.time_s})
            assert reply.message is not None
            self.messages.append({"role": "user", "content": reply.message})
            return StepResult("tool", False, reply.message)
        code = reply.code
        turn: dict[str, Any] = {"turn": len(self.turns) + 1, "completion": text, "n_tokens": n_tokens, "code": code}
        turn["visible_verdict"] = ("syntax_error" if code is None else
                                   reply.visible.verdict if reply.visible is not None else "accepted")
        final = self.episode.final
        if final is not None and (reply.done or self.cfg.judge_hidden_each_turn):
            hid = self._judge_hidden(final)
            turn["hidden_verdict"], turn["hidden_pass_ratio"] = hid.verdict, hid.pass_ratio
            self.final = hid
        else:
            turn["hidden_verdict"], turn["hidden_pass_ratio"] = ("syntax_error" if final is None else None), 0.0
        self.turns.append(turn)
        if reply.done:
            self.done = True
            return StepResult("answer", True, None)
        assert reply.message is not None
        self.messages.append({"role": "user", "content": reply.message})
        return StepResult("answer", False, reply.message)

    def record(self) -> dict[str, Any]:
        """The full trace: problem id, split sizes, messages, per-turn records (incl. hidden verdicts), tool calls,
        final verdict, tokens, judge seconds (JSON-ready dict)."""
        return {
            "problem_id": self.problem.id,
            "mode": self.cfg.mode,
            "n_visible": len(self.visible.tests),
            "n_hidden": len(self.hidden.tests),
            "messages": self.messages,
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "final_verdict": self.final.verdict if self.final else "syntax_error",
            "accepted": self.accepted,
            "tokens": self.tokens,
            "judge_s": self.judge_s,
        }
