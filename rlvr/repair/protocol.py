"""The repair protocol: every text a repair episode shows the model and the rule that picks the answer graded, shared
by the evaluation (:class:`rlvr.repair.env.RepairEnv`), the local engine's training (which plays its rollouts in that
environment) and verl's agent loop (:class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`), so training and evaluation
produce the same transcript for the same policy outputs (``tests/repair/test_repair_protocol.py``).

The protocol (RLEF, Gehring et al. 2024, "RLEF: Grounding Code LLMs in Execution Feedback with Reinforcement
Learning", arXiv:2410.02089, section 3):

1. **Prompt** (:func:`initial_messages`): one user message, exactly the prompt the single-turn phases train and
   evaluate on (:func:`rlvr.data.prompts.build_messages`: SFT, DPO, GRPO, the baseline and final evaluations), so the
   first turn of an episode *is* single-turn accepted@1 and the model meets on it the text it was trained on. Only
   interpreter mode adds to it (:func:`instructions`: how to run code with a ```python-run block, which the model
   must know before its first reply). The protocol's rules (a failing answer gets the results back, at most
   ``turns`` answers, when the episode ends, the last program written is the one graded) come with the feedback,
   the first message that needs them (:func:`protocol_rules`, the feedback template's ``{protocol}`` field): RLEF's
   first turn is also the task's ordinary prompt. (Appending the rules to the first message made the tiny CPU policy,
   GRPO-trained on the plain prompt, answer garbage on every dev problem: accepted@1 0.778 single-turn, 0.0 as the
   repair stage's "before"; ``tests/repair/test_repair_first_turn.py``.)
2. **Every reply is an attempt** (:class:`Episode`): its program (:func:`rlvr.generate.extract_code`) is judged on
   the *visible* tests. A pass, or the ``turns``-th answer, ends the episode. Otherwise the next turn is a **user**
   message with the feedback (:func:`format_feedback` with the answers so far; :data:`NO_CODE_FEEDBACK` when the
   reply has no program).
   Interpreter mode: a reply with a closed ```python-run block (:func:`find_tool_call`) is a tool call, not an
   answer; its output (:func:`tool_output`) comes back as a user message too, at most ``max_tool_calls`` per episode.
3. **The answer graded is the last program of the episode** (:func:`final_program`): the program of the latest
   answer that had one. An episode that ends on text without code ("The solution passes.") is graded on the program
   it submitted before, not scored as "no code". Evaluation judges it on the hidden tests; training scores the same
   program (:func:`fenced` carries it to verl's reward function).
4. **Reward** (training only): the final program's hidden-test reward minus ``turn_penalty`` per feedback turn used
   (answers − 1; tool calls are free), so a pass after one feedback turn earns a first-turn pass's reward less
   ``turn_penalty``.

Why user turns and not verl's tool answers (``run_tests`` called through the chat template's tool-call syntax, the
answer in a ``tool`` turn): RLEF defines feedback as turns of the conversation in which every reply is an attempt, so
the policy cannot skip the judge and there is no second channel ("call the tool" vs "answer") whose choice the reward
has to reconcile; it needs no tool-capable chat template (the smoke profile's random-init policy has none, and any
``generate`` backend renders it); and it is what the evaluation has always measured (recovery after feedback). verl
0.9.1 has no user-turn mechanism of its own (its ``interaction`` hooks are gone): :class:`rlvr.repair.verl_tool.
FinalAnswerAgentLoop` adds the feedback turns to verl's ``ToolAgentLoop`` with verl's own token merge
(``ct_merge_context_msg``), so every feedback token is masked out of the loss as a tool answer would be.

All texts come from this module's public functions, so a scripted rollout (fixed policy outputs per turn) builds
valid turns for either path.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import Field

from rlvr.config import Section
from rlvr.data.prompts import build_messages
from rlvr.data.schema import AssertTest, CallTest, Problem, StdioTest
from rlvr.generate.extract import extract_code
from rlvr.judge.verdict import JudgeResult

__all__ = [
    "DEFAULT_FEEDBACK",
    "FIX_REQUEST",
    "NO_CODE_FEEDBACK",
    "PROTOCOL_RULES",
    "TOOL_INSTRUCTIONS",
    "TOOL_TAG",
    "EnvConfig",
    "Episode",
    "Reply",
    "accepted_feedback",
    "cap_middle",
    "fenced",
    "final_program",
    "find_tool_call",
    "format_feedback",
    "initial_messages",
    "instructions",
    "protocol_rules",
    "tool_output",
]

DEFAULT_FEEDBACK = (
    "Your code was run on the visible tests: {verdict} ({passed}/{total} passed).\n"
    "First failing test input:\n```\n{input}\n```\n"
    "Expected output:\n```\n{expected}\n```\n"
    "Your output:\n```\n{actual}\n```\n"
    "Error:\n```\n{error}\n```\n"
    "{protocol}"
)
NO_CODE_FEEDBACK = "No ```python code block was found in your answer. Reply with the complete solution in a single " \
                   "```python code block."
FIX_REQUEST = "Fix the code and reply with the complete corrected solution in a single ```python code block."
PROTOCOL_RULES = (
    "Fix the code and reply with the complete corrected program in a single ```python code block ({left} of {turns} "
    "answers left). Every answer is run on the example tests and a failing one gets the results back; the episode "
    "ends when your program passes them or after your last answer, and the last program you wrote is the one "
    "graded, on hidden tests."
)
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
    ``expected``, ``actual``, ``error``, ``message``, ``prompt`` (the episode's first message again,
    :func:`initial_messages`: the single-turn prompt; public, so it leaks nothing hidden), ``protocol`` (the
    protocol's rules, :func:`protocol_rules`: answers left, when the episode ends, the program graded; a template
    without it never states them). ``field_chars``: cap per field
    (characters; longer values keep head and tail). ``feedback_chars``: cap of the whole feedback message.
    ``max_tool_calls``: per episode (interpreter mode). ``tool_timeout_s``: wall seconds per tool run;
    ``tool_memory_mb``: MB; ``tool_output_chars``:
    cap of the returned stdout+stderr. ``judge_hidden_each_turn``: also judge every answer on the hidden tests (for
    the accepted@turn-k curve; recorded in the trace only). ``turn_penalty``: training only, reward subtracted per
    feedback turn used (answers − 1; module doc, rule 4: local engine :func:`rlvr.train.local.repair.
    turn_penalty_reward`, verl :class:`rlvr.repair.verl_tool.FinalAnswerAgentLoop`).
    ``tool_format``: verl's ``multi_turn.format``, the tool-call syntax verl's agent loop parses (the repair protocol
    uses no verl tool, so it only matters for the tool variants :class:`rlvr.repair.verl_tool_variant.RunTestsTool` and
    :mod:`rlvr.repair.trl_env`)
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


def format_feedback(visible: Problem, result: JudgeResult, cfg: EnvConfig, prompt: str | None = None,
                    answers: int | None = None) -> str:
    """Feedback text for ``result``, the judge's run of a program on ``visible`` (the visible-test problem only):
    ``cfg.feedback_template`` filled with the verdict, pass counts and the first failing test's input, expected and
    actual output and error (stderr tail, else the judge's message), each capped at ``cfg.field_chars``, the
    episode's first message (``{prompt}``: the ``prompt`` argument, default :func:`initial_messages` of
    ``visible``; uncapped) and the protocol's rules (``{protocol}``: :func:`protocol_rules` of ``answers``, the
    answers of the episode so far, this one included; ``None``, the tool variants: :data:`FIX_REQUEST` alone), the
    whole capped at ``cfg.feedback_chars`` characters. Pass ``prompt`` when ``visible`` was rebuilt from a ground
    truth (:func:`rlvr.data.schema.from_ground_truth` keeps no statement). Only ``visible``, ``result``, ``cfg``,
    ``prompt`` and ``answers`` are read, so nothing hidden can leak."""
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
        prompt=(prompt if prompt is not None else initial_messages(visible, cfg)[0]["content"])
        if "{prompt}" in cfg.feedback_template else "",
        protocol=protocol_rules(cfg, answers),
    )
    return cap_middle(text, cfg.feedback_chars)


def protocol_rules(cfg: EnvConfig, answers: int | None = None) -> str:
    """The protocol's rules as the feedback states them (module doc, rule 1; the template's ``{protocol}``):
    :data:`PROTOCOL_RULES` with the answers left (``cfg.turns - answers``, ``answers`` >= 1 being the episode's
    answers so far) of ``cfg.turns``; :data:`FIX_REQUEST` alone when ``answers`` is ``None`` (the ``run_tests`` tool
    variants, which count no answers).

    >>> "(2 of 3 answers left)" in protocol_rules(EnvConfig(turns=3), 1)
    True
    >>> protocol_rules(EnvConfig(turns=3)) == FIX_REQUEST
    True
    """
    if answers is None:
        return FIX_REQUEST
    return PROTOCOL_RULES.format(left=max(0, cfg.turns - answers), turns=cfg.turns)


def accepted_feedback(total: int) -> str:
    """What the ``run_tests`` tool variants (:mod:`rlvr.repair.trl_env`, :class:`rlvr.repair.verl_tool_variant.
    RunTestsTool`) answer when a program passes all ``total`` visible tests (the protocol itself ends the episode
    there and says nothing)."""
    return f"All {total} example tests passed."


def instructions(cfg: EnvConfig) -> str:
    """What the first user message adds to the single-turn prompt (module doc, rule 1): :data:`TOOL_INSTRUCTIONS`
    in interpreter mode with ``max_tool_calls`` > 0 (the tool must be known before the first reply), else ``""``:
    the protocol's rules come with the feedback (:func:`protocol_rules`)."""
    if cfg.mode == "interpreter" and cfg.max_tool_calls > 0:
        return TOOL_INSTRUCTIONS.format(n=cfg.max_tool_calls)
    return ""


def initial_messages(problem: Problem, cfg: EnvConfig) -> list[dict[str, str]]:
    """The episode's prompt, chat format: :func:`rlvr.data.prompts.build_messages` of ``problem``, the prompt every
    single-turn phase trains and evaluates on, unchanged in repair mode; in interpreter mode its user message is
    followed by ``"\\n\\n" + instructions(cfg)`` (module doc, rule 1). Public only: the problem's statement and
    starter code, never a test."""
    messages = build_messages(problem)
    extra = instructions(cfg)
    if extra:
        messages[0]["content"] += "\n\n" + extra
    return messages


def tool_output(run: Any, cfg: EnvConfig) -> str:
    """The user message answering a ```python-run call: ``run`` (:meth:`rlvr.judge.client.Judge.run_code`'s result:
    ``verdict``, ``exit_code``, ``stdout``, ``stderr``) as text, capped at ``cfg.tool_output_chars`` characters
    (:func:`cap_middle`)."""
    out = (f"[{TOOL_TAG}: {run.verdict}, exit code {run.exit_code}]\nstdout:\n```\n{run.stdout}\n```\n"
           f"stderr:\n```\n{run.stderr}\n```")
    return cap_middle(out, cfg.tool_output_chars)


def final_program(programs: Sequence[str | None]) -> str | None:
    """The program graded (module doc, rule 3): the last non-``None`` entry of ``programs`` (one per answer, ``None``
    for an answer without code), ``None`` when no answer had code.

    >>> final_program(["print(1)", None])
    'print(1)'
    >>> final_program([None]) is None
    True
    """
    return next((p for p in reversed(programs) if p is not None), None)


def fenced(code: str) -> str:
    """``code`` as a single ```python block, the form in which the final program reaches a reward function that
    extracts code (:func:`rlvr.generate.extract_code` reads it back as ``code`` with one trailing newline).

    >>> fenced("print(1)\\n")
    '```python\\nprint(1)\\n```'
    """
    return "```python\n" + code.rstrip("\n") + "\n```"


@dataclass
class Reply:
    """What :meth:`Episode.step` made of one model reply.

    ``kind``: ``answer`` or ``tool`` (a ```python-run call, interpreter mode). ``done``: the episode ended (no
    message follows). ``message``: the next user turn (feedback, or the tool's output), ``None`` when ``done``.
    ``code``: the answer's program (``None``: no code, or a tool call). ``visible``: the visible-test judge result of
    the answer (``None`` when it had no code or there are no visible tests). ``run``: the tool run's result."""

    kind: Literal["answer", "tool"]
    done: bool
    message: str | None
    code: str | None = None
    visible: JudgeResult | None = None
    run: Any = None


@dataclass
class Episode:
    """The protocol's state machine over the *visible* tests only (module doc, rule 2), shared by the evaluation and
    verl's agent loop.

    ``visible``: the problem holding only the visible tests (:func:`rlvr.repair.env.split_tests`); ``judge``: an
    object with ``judge(problem, code) -> JudgeResult`` and ``run_code(code, stdin, timeout_s, memory_limit_mb)``;
    ``cfg``: the environment settings; ``prompt``: the episode's first message (restated by a ``{prompt}`` feedback
    template; default :func:`initial_messages` of ``visible``, which lacks the statement when ``visible`` was rebuilt
    from a ground truth). After each reply, :meth:`step`; ``programs`` holds one entry per answer,
    :attr:`final` the program graded, :attr:`feedback_turns` the answers that got feedback, ``judge_s`` the judge's
    wall seconds."""

    visible: Problem
    judge: Any
    cfg: EnvConfig
    prompt: str | None = None
    programs: list[str | None] = field(init=False, default_factory=list)
    tool_calls: int = field(init=False, default=0)
    done: bool = field(init=False, default=False)
    judge_s: float = field(init=False, default=0.0)

    @property
    def answers(self) -> int:
        """Answers so far (tool calls excluded)."""
        return len(self.programs)

    @property
    def final(self) -> str | None:
        """The program graded: :func:`final_program` of ``programs``."""
        return final_program(self.programs)

    @property
    def feedback_turns(self) -> int:
        """Answers followed by feedback: ``answers - 1`` once done (each answer but the last), ``answers`` before."""
        return max(0, self.answers - 1) if self.done else self.answers

    def step(self, text: str) -> Reply:
        """Consume one model reply ``text``: a tool call (interpreter mode, calls left) is run, anything else is an
        answer judged on the visible tests (module doc). Raises ``RuntimeError`` naming the problem when the episode
        has already ended."""
        if self.done:
            raise RuntimeError(f"{self.visible.id}: step() after the episode ended")
        cfg = self.cfg
        if cfg.mode == "interpreter" and self.tool_calls < cfg.max_tool_calls:
            code = find_tool_call(text)
            if code is not None:
                run = self.judge.run_code(code, stdin="", timeout_s=cfg.tool_timeout_s,
                                          memory_limit_mb=cfg.tool_memory_mb)
                self.tool_calls += 1
                return Reply("tool", False, tool_output(run, cfg), run=run)
        code = extract_code(text, self.visible)
        self.programs.append(code)
        vis: JudgeResult | None = None
        if code is None:
            ok, msg = False, NO_CODE_FEEDBACK
        elif self.visible.tests:
            vis = self.judge.judge(self.visible, code)
            self.judge_s += vis.judge_s
            ok, msg = vis.accepted, (None if vis.accepted else
                                     format_feedback(self.visible, vis, cfg, self.prompt, self.answers))
        else:
            ok, msg = True, None
        self.done = ok or self.answers >= cfg.turns
        return Reply("answer", self.done, None if self.done else msg, code, vis)
