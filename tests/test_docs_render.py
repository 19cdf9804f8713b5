"""The docs render as written and agree with the code (issue 30, item 8), checked on the Markdown sources (fast):

* tables: every block of ``|`` lines has a delimiter row as its second line and a blank line before it (else
  Python-Markdown prints the rows as text);
* lists: a list starts after a blank line (else Python-Markdown runs its items into the paragraph above);
* headings: no line outside code starts with ``#`` + a non-space (Python-Markdown makes ``#148, …`` a heading);
* shell: every ```` ```bash ```` / ``sh`` / ``shell`` / ``console`` block parses with ``bash -n``;
* commands: ``rlvr …`` names an existing subcommand and options, ``dvc …`` parses with DVC's own argument parser,
  ``make T`` names a Makefile target, and ``python stages/…`` / ``bench/…`` scripts and ``python -m rlvr…`` modules
  exist — in shell blocks, indented code blocks and inline code spans;
* ``docs/…md`` paths named in ``params.yaml``, ``README.md`` and the pages exist, with their ``#anchor``.

The built site (links, anchors, rows and list items rendered as text) is checked in ``tests/test_docs.py``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SHELL_LANGS = {"bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_DELIM = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_LIST = re.compile(r"^\s{0,3}([-*+]|\d+\.)\s+\S")
_INLINE = re.compile(r"(?<!`)`((?:rlvr|dvc|make|python|\.venv/bin/python) [^`]+)`(?!`)")


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _lines(text: str) -> Iterator[tuple[int, str, str | None]]:
    """``(line number, line, fence language or None)``; fence lines themselves get language ``"<fence>"``."""
    fence: str | None = None
    lang = ""
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence, lang = m.group(2), m.group(3).lower()
            yield n, line, "<fence>"
        elif fence is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip(fence[0]).strip():
            fence = None
            yield n, line, "<fence>"
        else:
            yield n, line, lang if fence is not None else None


def _render_problems(text: str) -> list[str]:
    """Lines that Python-Markdown would render other than meant (see the module docstring), as ``"line N: why"``."""
    out: list[str] = []
    rows = [(n, line, lang) for n, line, lang in _lines(text)]
    in_list = False  # inside a list block: a list item seen since the last paragraph that was not a list
    prev = ""
    prev_code = True
    for i, (n, line, lang) in enumerate(rows):
        if lang is not None:
            prev, prev_code = line, True
            continue
        stripped = line.strip()
        indented_code = line.startswith("    ") and not prev.strip() and not in_list
        if not stripped:
            prev, prev_code = line, False
            continue
        if indented_code or (line.startswith("    ") and prev_code and prev.strip() == ""):
            prev, prev_code = line, False
            continue
        if stripped.startswith("|") and not line.startswith("    "):
            start = not prev.strip().startswith("|") or prev_code
            if start:
                nxt = rows[i + 1][1] if i + 1 < len(rows) else ""
                if not _DELIM.match(nxt):
                    out.append(f"line {n}: a '|' row with no delimiter row under it renders as text")
                elif prev.strip() and not prev_code and not _LIST.match(prev):
                    out.append(f"line {n}: a table right after a paragraph line (no blank line) renders as text")
        elif _LIST.match(line) and not line.startswith(" "):
            if prev.strip() and not prev_code and not in_list and not prev.strip().startswith("|"):
                out.append(f"line {n}: a list right after a paragraph line (no blank line) runs into the paragraph")
            in_list = True
        elif re.match(r"#{1,6}[^#\s]", line) and not line.startswith("#!"):
            out.append(f"line {n}: a line starting with {line[:8]!r} renders as a heading")
        if not prev.strip() and not _LIST.match(line) and not line.startswith(" "):
            in_list = False
        prev, prev_code = line, False
    return out


def test_render_lint_catches_what_it_should() -> None:
    """The lint flags the three defects the issue found, and leaves their fixed forms alone."""
    bad = "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n\nText:\n- one\n- two\n\nafter issue\n#148, April\n"
    problems = _render_problems(bad)
    assert [p.split(":")[0] for p in problems] == ["line 5", "line 8", "line 12"], problems
    good = ("| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\nText:\n\n- one\n  more\n- two\nlazy\n\n- three\n\n"
            "```bash\n# comment\n| x\n```\n\n    indented code\n    - not a list\n")
    assert _render_problems(good) == []


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_page_renders_as_written(page: Path) -> None:
    problems = _render_problems(page.read_text(encoding="utf-8"))
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


def _shell_blocks() -> list[tuple[str, str]]:
    out = []
    for page in _pages():
        block: list[str] = []
        start = 0
        for n, line, lang in _lines(page.read_text(encoding="utf-8")):
            if lang in SHELL_LANGS:
                if not block:
                    start = n
                block.append(line)
            elif block:
                out.append((f"{page.relative_to(ROOT)}:{start}", "\n".join(block)))
                block = []
    return out


def test_shell_blocks_parse() -> None:
    bash = shutil.which("bash")
    assert bash, "bash not found"
    blocks = _shell_blocks()
    assert len(blocks) >= 10, "the docs' shell blocks were not found"
    bad = []
    for where, code in blocks:
        code = "\n".join(line.removeprefix("$ ") for line in code.splitlines())
        run = subprocess.run([bash, "-n"], input=code, capture_output=True, text=True, timeout=30)
        if run.returncode:
            bad.append(f"{where}: {run.stderr.strip()}")
    assert not bad, "shell blocks that do not parse:\n" + "\n".join(bad)


def _commands() -> list[tuple[str, str]]:
    """``(where, command line)`` for every command in shell blocks, indented code blocks and inline code spans."""
    out: list[tuple[str, str]] = []
    for page in _pages():
        rel = page.relative_to(ROOT)
        prev = ""
        for n, line, lang in _lines(page.read_text(encoding="utf-8")):
            if lang in SHELL_LANGS:
                out.append((f"{rel}:{n}", line.removeprefix("$ ")))
            elif lang is None and line.startswith("    ") and (not prev.strip() or prev.startswith("    ")):
                out.append((f"{rel}:{n}", line.strip()))
            elif lang is None:
                out.extend((f"{rel}:{n}", m.group(1)) for m in _INLINE.finditer(line))
            prev = line if lang is None else ""
    return out


def _simple_commands(line: str) -> Iterator[list[str]]:
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:
        return
    cmd: list[str] = []
    for tok in tokens:
        if tok and set(tok) <= set(";&|()"):
            if cmd:
                yield cmd
            cmd = []
        else:
            cmd.append(tok)
    if cmd:
        yield cmd


def _placeholder(tok: str) -> bool:
    return "…" in tok or "<" in tok or "..." in tok or "$" in tok or tok.startswith("[")


def _check_rlvr(argv: list[str]) -> str | None:
    import click

    from rlvr.cli import main

    cmd: click.Command = main
    ctx = click.Context(main)
    path = ["rlvr"]
    args = list(argv)
    while isinstance(cmd, click.Group) and args and not args[0].startswith("-"):
        if _placeholder(args[0]):
            return None
        sub = cmd.get_command(ctx, args[0])
        if sub is None:
            return f"{' '.join(path)} has no command {args[0]!r}"
        path.append(args.pop(0))
        cmd = sub
    opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}
    for a in args:
        if a.startswith("--") and not _placeholder(a) and a.split("=", 1)[0] not in opts:
            return f"{' '.join(path)} has no option {a.split('=', 1)[0]!r}"
    return None


def _check_dvc(argv: list[str]) -> str | None:
    if any(_placeholder(a) and not a.startswith("-") and "=" not in a for a in argv[:2]):
        return None
    from dvc.cli import DvcParserError
    from dvc.cli.parser import get_main_parser

    err = io.StringIO()
    handler = logging.StreamHandler(err)
    log = logging.getLogger("dvc.cli.parser")
    log.addHandler(handler)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            get_main_parser().parse_args(argv)
    except (SystemExit, DvcParserError) as e:
        msg = err.getvalue()
        if len(argv) <= 1 and "arguments are required" in msg:
            return None  # a command group named in prose (`dvc exp`)
        if not isinstance(e, SystemExit) or e.code:
            return (err.getvalue().strip().splitlines() or ["dvc's parser refused it"])[-1]
    finally:
        log.removeHandler(handler)
    return None


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([\w.-]+)\s*:(?!=)", text, re.M)}


def _check(argv: list[str]) -> str | None:
    while argv and re.match(r"^\w+=", argv[0]):  # VAR=value prefixes
        argv = argv[1:]
    if argv and argv[0] in {"sudo", "time", "env"}:
        argv = argv[1:]
    if not argv:
        return None
    exe, args = argv[0], argv[1:]
    if exe == "rlvr":
        return _check_rlvr(args)
    if exe == "dvc":
        return _check_dvc(args)
    if exe == "make":
        missing = [t for t in args if not t.startswith("-") and "=" not in t and t not in _make_targets()]
        return f"the Makefile has no target {missing[0]!r}" if missing else None
    if exe.endswith("python") or exe.endswith("python3") or exe == "bash":
        args = [a for a in args if a not in {"-P", "-u", "-B"}]
        if args[:1] == ["-m"] and len(args) > 1 and args[1].startswith("rlvr") and not _placeholder(args[1]):
            return None if importlib.util.find_spec(args[1]) else f"no module {args[1]!r}"
        if args and args[0].startswith(("stages/", "bench/")) and not _placeholder(args[0]):
            return None if (ROOT / args[0]).is_file() else f"no file {args[0]!r}"
    return None


def test_commands_name_what_exists() -> None:
    commands = _commands()
    checked = 0
    bad = []
    for where, line in commands:
        for argv in _simple_commands(line):
            if argv and argv[0] in {"rlvr", "dvc", "make"}:
                checked += 1
            problem = _check(argv)
            if problem:
                bad.append(f"{where}: `{line.strip()}`: {problem}")
    assert checked >= 20, f"only {checked} rlvr/dvc/make commands found in the docs"
    assert not bad, "commands in the docs that name nothing:\n" + "\n".join(bad)


def test_command_check_can_fail() -> None:
    assert _check(["rlvr", "judgee"]) and _check(["rlvr", "judge", "--kk", "1"])
    assert _check(["dvc", "exp", "shw"]) and _check(["make", "nope"])
    assert _check(["python", "stages/nope.py"]) and _check(["python", "-m", "rlvr.nope"])
    assert _check(["rlvr", "judge", "--k", "1,10"]) is None and _check(["dvc", "metrics", "diff", "--md"]) is None


def _anchors(page: Path) -> set[str]:
    """The ids Python-Markdown's toc gives the page's headings (the default slugify)."""
    out = set()
    for _, line, lang in _lines(page.read_text(encoding="utf-8")):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line) if lang is None else None
        if m:
            text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
            slug = re.sub(r"[^\w\s-]", "", text).strip().lower()
            out.add(re.sub(r"[-\s]+", "-", slug))
    return out


def test_docs_paths_named_outside_the_site_exist() -> None:
    """``docs/…md[#anchor]`` in params.yaml, README.md and the pages name an existing page and heading."""
    bad = []
    for src in [ROOT / "params.yaml", ROOT / "README.md", *_pages()]:
        for m in re.finditer(r"(?<![\w/.])docs/([\w/.-]+\.md)(#[\w-]+)?", src.read_text(encoding="utf-8")):
            page = DOCS / m.group(1)
            if not page.is_file():
                bad.append(f"{src.relative_to(ROOT)}: {m.group(0)} does not exist")
            elif m.group(2) and m.group(2)[1:] not in _anchors(page):
                bad.append(f"{src.relative_to(ROOT)}: {m.group(0)}: no such heading")
    readme = {m.group(1).strip() for m in re.finditer(r"^#+\s+(.*)$", (ROOT / "README.md").read_text(), re.M)}
    for m in re.finditer(r"README, ([A-Z][\w -]*\w)", (ROOT / "params.yaml").read_text(encoding="utf-8")):
        if m.group(1) not in readme:
            bad.append(f"params.yaml: 'README, {m.group(1)}': README.md has no such section")
    assert not bad, "\n".join(bad)
