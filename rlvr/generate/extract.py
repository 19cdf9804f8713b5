"""Turn a model completion into the program the judge runs.

Rules, in order (the evaluation and the rewards must read completions the same way):

1. ``<think>…</think>`` reasoning is dropped (R1-style models draft code there); an unclosed one runs to the end.
2. Fenced Markdown blocks (3+ backticks, tagged ``python``/``py``/``python3``/``py3`` or untagged; a fence left open
   by truncation runs to the end of the text). For a function problem, the **last block that defines the entry
   point** wins; otherwise (no such block, or a stdin/stdout problem) the **last** block wins. Why last: chat models
   restate or correct their final answer at the end, and the prompt (:mod:`rlvr.data.prompts`) asks for a single
   block; preferring a block that defines the entry point skips a trailing "example usage" block, which is the other
   common shape (EvalPlus's sanitiser also keys on the entry point). A block is returned even if it does not compile:
   the judge then reports ``syntax_error``, which is the truth about that answer.
3. No usable fence: the whole text if it compiles (tried only for texts of at most :data:`COMPILE_CHECK_MAX` = 32 KiB:
   compiling costs the host ~700 bytes per character); for a function problem, ``starter_code + text`` if that compiles
   (a HumanEval-style body continuation, EvalPlus ``completion`` semantics). Text fenced only in other languages
   (cpp, text, …) has no Python code.
4. Function problems (``entry_point`` set, ``starter_code`` non-empty) whose code does not define the entry point's
   root name (``add`` for ``add``, ``Solution`` for ``Solution().twoSum``) get ``starter_code`` prepended (the body
   continuation case again, inside a fence).
5. Nothing parsable: ``None``. The evaluation records such a sample as ``syntax_error`` without running it.
"""

from __future__ import annotations

import re

from rlvr.data.schema import Problem

__all__ = ["COMPILE_CHECK_MAX", "extract_code"]

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)
# Possessive quantifiers (Python 3.11): the opening line's parts never give characters back, so an opening line with
# no newline (a million backticks, or a tag of a million letters) fails in one pass instead of backtracking
# quadratically through every split of the line; the matches are the same as the greedy pattern's (the rest of the
# opening line always matched whatever the split, when a newline followed). Linear in the completion.
_FENCE = re.compile(
    r"^[ \t]*+(?P<f>`{3,}+)[ \t]*+(?P<lang>[\w+#.-]*+)[^\n]*+\n(?P<body>.*?)(?:^[ \t]*+(?P=f)[ \t]*+$|\Z)",
    re.M | re.S)
#: Largest unfenced text (characters) whose compilation is tried on the host (rule 3): ``compile`` costs ~700 bytes of
#: memory per character of source, so a longer bare text is not treated as code (it has no fence either: no program).
COMPILE_CHECK_MAX = 32 << 10
_PY_TAGS = frozenset({"", "python", "py", "python3", "py3"})


def _compiles(code: str) -> bool:
    if len(code) > COMPILE_CHECK_MAX:
        return False
    try:
        compile(code, "<completion>", "exec")
    except (SyntaxError, ValueError):  # ValueError: NUL bytes in source
        return False
    return True


def _entry_root(problem: Problem | None) -> str | None:
    if problem is None or not problem.entry_point:
        return None
    root = re.split(r"[().\[\s]", problem.entry_point.strip(), maxsplit=1)[0]
    return root or None


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{re.escape(name)}\b", code, re.M) is not None


def _with_starter(problem: Problem, text: str) -> str:
    sep = "" if problem.starter_code.endswith("\n") else "\n"
    return problem.starter_code + sep + text


def extract_code(text: str, problem: Problem | None = None) -> str | None:
    """The Python program in completion ``text`` for ``problem`` (rules in the module doc), or ``None``.

    Args:
        text: the generated completion (str).
        problem: the problem answered; ``None`` applies only rules 1–3 without the starter-code rules.

    >>> extract_code("Sure:\\n```python\\nprint(1)\\n```\\n")
    'print(1)\\n'
    >>> extract_code("no code here, sorry") is None
    True
    """
    body = _THINK.sub("", text)
    root = _entry_root(problem)
    has_starter = problem is not None and bool(problem.starter_code.strip()) and root is not None
    blocks = [m.group("body") for m in _FENCE.finditer(body) if m.group("lang").lower() in _PY_TAGS]
    blocks = [b for b in blocks if b.strip()]
    code: str | None = None
    if blocks:
        defining = [b for b in blocks if root and _defines(b, root)]
        code = (defining or blocks)[-1]
    elif "```" in body:
        return None
    elif body.strip():
        if _compiles(body):
            code = body
        elif has_starter and _compiles(_with_starter(problem, body)):  # type: ignore[arg-type]
            return _with_starter(problem, body)  # type: ignore[arg-type]
    if code is None:
        return None
    if has_starter and not _defines(code, root):  # type: ignore[arg-type]
        return _with_starter(problem, code)  # type: ignore[arg-type]
    return code
