"""Import contracts (``[tool.importlinter]`` in pyproject.toml: layered packages, the judge usable alone, the report
reading files only) and no import circle between rlvr modules. Lazy imports inside functions count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    # analyse this checkout's rlvr, whatever copy the venv has installed
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_import_contracts_hold() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.fail(f"{exe} not found: install the dev extra (import-linter)")
    run = subprocess.run([str(exe), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def _cycles(adj: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan 1972), iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in adj:
        if root in index:
            continue
        work = [(root, iter(adj[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(adj[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []


def test_no_import_circle_between_modules() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        graph = grimp.build_graph("rlvr", include_external_packages=False, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    adj = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    assert _cycles(adj) == []
