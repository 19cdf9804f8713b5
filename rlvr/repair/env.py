"""Multi-turn repair environment: the model answers, the judge runs the answer on the *visible* tests and answers with
feedback, the model repairs, up to ``turns`` answers; the verdict that counts is on the *hidden* tests.

Protocol (RLEF, Gehring et al. 2024, "RLEF: Grounding Code LLMs in Execution Feedback with Reinforcement Learning",
arXiv:2410.02089): an episode ends when the latest answer passes every visible test or after ``turns`` answers; the
final answer is judged on the hidden tests, which the model never sees.

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

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import Field

from rlvr.config import Section
from rlvr.data.prompts import build_messages, build_prompt
from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest
from rlvr.generate.extract import extract_code
from rlvr.judge.verdict import JudgeResult

__all__ = [
    "DEFAULT_FEEDBACK",
    "TOOL_INSTRUCTIONS",
    "EnvConfig",
    "RepairEnv",
    "StepResult",
    "cap_middle",
    "find_tool_call",
    "format_feedback",
    "split_tests",
]

DEFAULT_FEEDBACK = (
    "Your code was run on the visible tests: {verdict} ({passed}/{total} passed).\n"
    "First failing test input:\n```\n{input}\n```\n"
    "Expected output:\n```\n{expected}\n```\n"
    "Your output:\n```\n{actual}\n```\n"
    "Error:\n```\n{error}\n```\n"
    "Fix the code and reply with the complete corrected solution in a single ```python code block."
)
NO_CODE_FEEDBACK = "No ```python code block was found in your answer. Reply with the complete solution in a single " \
                   "```python code block."
TOOL_TAG = "python-run"
TOOL_INSTRUCTIONS = (
    "You may run Python code before answering: write it in a ```" + TOOL_TAG + " code block and nothing else in that "
    "reply; you will get its standard output and error back. At most {n} such runs. Your final answer must still be "
    "a single ```python code block."
)
# Opening lines of tool blocks and fence-only lines (closing candidates), both found in one linear pass each; a block
# is closed by the first later fence-only line of the same number of backticks. (One regex with a lazy body and a
# backreference rescanned the rest of the text for every unclosed opening: quadratic in the number of openings.)
_TOOL_OPEN = re.compile(r"^[ \t]*+(?P<f>`{3,}+)[ \t]*+" + re.escape(TOOL_TAG) + r"[ \t]*+\n", re.M)
_FENCE_LINE = re.compile(r"^[ \t]*+(?P<f>`{3,}+)[ \t]*+$", re.M)


class EnvConfig(Section):
    """Environment settings (part of the ``repair`` params section).

    ``turns``: K, the most answers per episode (>= 1). ``mode``: ``repair`` (judge feedback only) or ``interpreter``
    (feedback plus the ``python-run`` tool). ``visible_tests``: N visible tests for problems without public tests.
    ``feedback_template``: ``str.format`` template with fields ``verdict``, ``passed``, ``total``, ``input``,
    ``expected``, ``actual``, ``error``, ``message``, ``prompt`` (the problem's first-turn prompt again,
    :func:`rlvr.data.prompts.build_prompt`; public, so it leaks nothing hidden). ``field_chars``: cap per field
    (characters; longer values keep head and tail). ``feedback_chars``: cap of the whole feedback message.
    ``max_tool_calls``: per episode (interpreter mode). ``tool_timeout_s``: wall seconds per tool run;
    ``tool_memory_mb``: MB; ``tool_output_chars``:
    cap of the returned stdout+stderr. ``judge_hidden_each_turn``: also judge every answer on the hidden tests (for
    the accepted@turn-k curve; recorded in the trace only). ``turn_penalty``: training only, reward subtracted per
    feedback turn used (TRL :func:`rlvr.repair.trl_env.make_repair_reward`, verl ``run_tests`` step reward).
    ``tool_format``: engine ``verl`` only, the tool-call syntax the policy writes and verl's agent loop parses
    (``actor_rollout_ref.rollout.multi_turn.format``; verl 0.9.1 ``experimental/agent_loop/tool_parser.py``):
    ``hermes`` = ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Qwen2.5 instruct models),
    ``qwen3_coder`` = ``<tool_call><function=NAME><parameter=code>...</parameter></function></tool_call>``
    (Qwen3-Coder: arguments unescaped, and a call cut off by the length limit still parses); the local engine's
    repair loop gives feedback as user turns and does not read it."""

    turns: int = Field(default=3, ge=1)
    mode: Literal["repair", "interpreter"] = "repair"
    visible_tests: int = Field(default=1, ge=0)
    feedback_template: str = DEFAULT_FEEDBACK
    field_chars: int = Field(default=500, ge=20)
    feedback_chars: int = Field(default=3000, ge=100)
    max_tool_calls: int = Field(default=3, ge=0)
    tool_timeout_s: float = Field(default=5.0, gt=0)
    tool_memory_mb: int = Field(default=1024, ge=64)
    tool_output_chars: int = Field(default=1500, ge=50)
    judge_hidden_each_turn: bool = True
    turn_penalty: float = Field(default=0.0, ge=0.0)
    tool_format: Literal["hermes", "qwen3_coder"] = "hermes"


class _Judge(Protocol):
    def judge(self, problem: Problem, solution: str) -> JudgeResult: ...

    def run_code(self, code: str, stdin: str = "", timeout_s: float = 10.0, memory_limit_mb: int = 1024) -> Any: ...


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


def cap_middle(text: str, n: int) -> str:
    """``text`` cut to at most about ``n`` characters (+ a one-line marker), keeping head and tail (tracebacks end
    with the useful line).

    >>> cap_middle("abc", 10)
    'abc'
    """
    if len(text) <= n:
        return text
    half = max(1, (n - 20) // 2)
    return f"{text[:half]}\n... [{len(text) - 2 * half} chars cut] ...\n{text[-half:]}"


def _test_io(problem: Problem, test: Any) -> tuple[str, str]:
    """(input, expected) text of a visible test, as shown to the model."""
    if isinstance(test, StdioTest):
        return test.stdin, test.stdout
    if isinstance(test, CallTest):
        args = test.args.strip()
        inner = args[1:-1] if args.startswith("[") and args.endswith("]") else args
        return f"{problem.entry_point}({inner})", test.expected or "?"
    assert isinstance(test, AssertTest)
    return test.code, "the assertions pass"


def find_tool_call(text: str) -> str | None:
    """The code of the first closed ```python-run block of ``text``, or ``None``: the first opening line (3+ backticks,
    the tag) that a later line of only the same backticks closes. O(n log n) in ``len(text)`` (one pass for the
    closing lines, one for the openings, a bisection each), memory O(lines)."""
    closes: dict[int, list[int]] = {}
    for m in _FENCE_LINE.finditer(text):
        closes.setdefault(len(m.group("f")), []).append(m.start())
    if not closes:
        return None
    for m in _TOOL_OPEN.finditer(text):
        starts = closes.get(len(m.group("f")))
        if starts:
            k = bisect_left(starts, m.end())
            if k < len(starts):
                return text[m.end():starts[k]]
    return None


def format_feedback(visible: Problem, result: JudgeResult, cfg: EnvConfig) -> str:
    """Feedback text for ``result``, the judge's run of a program on ``visible`` (the visible-test problem only):
    ``cfg.feedback_template`` filled with the verdict, pass counts and the first failing test's input, expected and
    actual output and error (stderr tail, else the judge's message), each capped at ``cfg.field_chars``, and the
    problem's prompt (``prompt``, uncapped), the whole capped at ``cfg.feedback_chars`` characters. Only
    ``visible`` and ``result`` are read, so nothing hidden can leak."""
    first = next((t for t in result.tests if t.verdict != "accepted"), None)
    inp = exp = act = ""
    err = result.message
    if first is not None and first.index < len(visible.tests):
        test = visible.tests[first.index]
        inp, exp = _test_io(visible, test)
        act = first.stdout if isinstance(test, StdioTest) else first.message
        err = first.stderr.strip() or first.message
    c = cfg.field_chars
    text = cfg.feedback_template.format(
        verdict=result.verdict, passed=result.passed, total=result.total, input=cap_middle(inp.rstrip("\n"), c),
        expected=cap_middle(exp.rstrip("\n"), c), actual=cap_middle(act.rstrip("\n"), c),
        error=cap_middle(err or "(none)", c),
        message=cap_middle(result.message, c),
        prompt=build_prompt(visible) if "{prompt}" in cfg.feedback_template else "",
    )
    return cap_middle(text, cfg.feedback_chars)


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

    Usage: ``env.messages`` is the prompt; after each generation call ``env.step(text, n_tokens)`` until ``done``;
    ``env.final`` is the hidden-test :class:`JudgeResult` of the last answer (``None`` if no answer had code);
    ``env.accepted`` is the episode's outcome; ``env.record()`` the full trace (JSON-ready).
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
        self.messages = build_messages(self.problem)
        if self.cfg.mode == "interpreter" and self.cfg.max_tool_calls > 0:
            self.messages[0]["content"] += "\n\n" + TOOL_INSTRUCTIONS.format(n=self.cfg.max_tool_calls)

    @property
    def accepted(self) -> bool:
        """True iff the last answer passed every hidden test."""
        return self.final is not None and self.final.accepted

    def _judge(self, problem: Problem, code: str) -> JudgeResult:
        res = self.judge.judge(problem, code)
        self.judge_s += res.judge_s
        return res

    def feedback(self, result: JudgeResult) -> str:
        """The feedback message for a visible-test ``result`` (:func:`format_feedback`)."""
        return format_feedback(self.visible, result, self.cfg)

    def _tool(self, text: str, code: str) -> StepResult:
        run = self.judge.run_code(code, stdin="", timeout_s=self.cfg.tool_timeout_s,
                                  memory_limit_mb=self.cfg.tool_memory_mb)
        out = (f"[python-run: {run.verdict}, exit code {run.exit_code}]\nstdout:\n```\n{run.stdout}\n```\n"
               f"stderr:\n```\n{run.stderr}\n```")
        out = cap_middle(out, self.cfg.tool_output_chars)
        self.tool_calls.append({"code": code, "verdict": run.verdict, "time_s": run.time_s})
        self.messages += [{"role": "assistant", "content": text}, {"role": "user", "content": out}]
        return StepResult("tool", False, out)

    def step(self, text: str, n_tokens: int = 0) -> StepResult:
        """Consume one model reply ``text`` (``n_tokens`` generated tokens): run a tool call, or judge the answer on
        the visible tests (and the hidden ones when the episode ends or ``judge_hidden_each_turn``). Raises
        ``RuntimeError`` when the episode is already done."""
        if self.done:
            raise RuntimeError(f"{self.problem.id}: step() after the episode ended")
        self.tokens += n_tokens
        if self.cfg.mode == "interpreter" and len(self.tool_calls) < self.cfg.max_tool_calls:
            code = find_tool_call(text)
            if code is not None:
                return self._tool(text, code)
        code = extract_code(text, self.problem)
        turn: dict[str, Any] = {"turn": len(self.turns) + 1, "completion": text, "n_tokens": n_tokens, "code": code}
        if code is None:
            vis_verdict, vis_ok, msg = "syntax_error", False, NO_CODE_FEEDBACK
        elif self.visible.tests:
            vis = self._judge(self.visible, code)
            vis_verdict, vis_ok = vis.verdict, vis.accepted
            msg = None if vis_ok else self.feedback(vis)
        else:
            vis_verdict, vis_ok, msg = "accepted", True, None
        turn["visible_verdict"] = vis_verdict
        last = vis_ok or len(self.turns) + 1 >= self.cfg.turns
        if code is not None and (last or self.cfg.judge_hidden_each_turn):
            hid = self._judge(self.hidden, code)
            turn["hidden_verdict"], turn["hidden_pass_ratio"] = hid.verdict, hid.pass_ratio
            self.final = hid
        else:
            turn["hidden_verdict"], turn["hidden_pass_ratio"] = ("syntax_error" if code is None else None), 0.0
            if code is None:
                self.final = None
        self.turns.append(turn)
        self.messages.append({"role": "assistant", "content": text})
        if last:
            self.done = True
            return StepResult("answer", True, None)
        assert msg is not None
        self.messages.append({"role": "user", "content": msg})
        return StepResult("answer", False, msg)

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
