"""Normalised test-input keys for the contamination audit's test-input leakage rule (the rule and its defaults:
:mod:`rlvr.data.contamination`, "Test-input leakage").
"""

from __future__ import annotations

import ast
import re

from rlvr.data.schema import CallTest, Problem, StdioTest

__all__ = ["input_keys"]


def _squash(s: str) -> str:
    return "".join(s.split())


def _args_key(args: list[ast.expr], keywords: list[ast.keyword]) -> str:
    parts = [ast.unparse(a) for a in args] + [f"{k.arg}={ast.unparse(k.value)}" for k in keywords if k.arg]
    return "call:[" + _squash(",".join(parts)) + "]"


def _entry_names(p: Problem) -> set[str]:
    names = {"candidate"}
    if p.entry_point:
        names.add(p.entry_point.rsplit(".", 1)[-1].split("(")[0])
    return names


def input_keys(p: Problem, max_chars: int = 20000) -> list[str]:
    """Normalised test-input keys of ``p`` (:mod:`rlvr.data.contamination`, test-input leakage), in test order,
    duplicates removed. Call arguments longer than ``max_chars`` are not re-parsed (whitespace is removed from the raw
    text instead)."""
    keys: dict[str, None] = {}
    names = _entry_names(p)
    for t in p.tests:
        if isinstance(t, StdioTest):
            keys["stdin:" + " ".join(t.stdin.split())] = None
        elif isinstance(t, CallTest):
            node = None
            if len(t.args) <= max_chars:
                try:
                    node = ast.parse(t.args.strip(), mode="eval").body
                except (SyntaxError, ValueError, RecursionError):
                    node = None
            if isinstance(node, ast.List | ast.Tuple):
                keys[_args_key(node.elts, [])] = None
            else:
                keys["call:" + _squash(t.args)] = None
        else:
            try:
                tree = ast.parse(t.code)
            except (SyntaxError, ValueError, RecursionError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    f = node.func
                    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                    if name in names and (node.args or node.keywords):
                        keys[_args_key(node.args, node.keywords)] = None
    return list(keys)


_KW_RE = re.compile(r"(?<![\w'\"])[A-Za-z_]\w*=(?!=)")


def _payload_len(key: str) -> int:
    """Characters of an input key's value: prefix, the outer ``[...]`` of call keys and ``name=`` of keyword
    arguments are not counted (``"call:[nums=[1,2]]"`` → 5)."""
    kind, body = key.split(":", 1)
    if kind == "call" and body.startswith("[") and body.endswith("]"):
        body = _KW_RE.sub("", body[1:-1])
    return len(body)
