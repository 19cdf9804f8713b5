"""Reviewer-sized views (issue 45): the documented ``dvc metrics show`` views of docs/evaluation.md each fit 200
characters and together show every score file; the "one screen of experiments" ``dvc exp show`` recipe fits 120
columns. Both run DVC itself (the venv's CLI) on the committed metrics of this checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "evaluation.md"
#: Files whose documented commands are measured (the README's workflow 1 runs the same `dvc exp show` line).
SOURCES = (DOC, ROOT / "README.md")
METRICS_WIDTH = 200
SCREEN = 120
#: An experiment row's first cell (``├── 1a2b3c4 [headline-dpo]``, 26 characters) is wider than ``workspace`` and a
#: branch name: the width measured with no experiment is padded to that.
EXPERIMENT_CELL = 26

BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (BIN / "dvc").exists() or not (ROOT / "metrics").is_dir()
                                 or shutil.which("git") is None, reason="needs the venv's dvc and the metrics")]


def _run(cmd: str) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "COLUMNS": "1000",
           "DVC_NO_ANALYTICS": "1"}
    out = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}: {out.stderr[-2000:]}"
    return out.stdout


def _block_lines(path: Path, start: str) -> list[str]:
    """The commands (comment stripped) of the code lines of ``path`` (indented, or a fenced block's line starting
    with ``start``) that contain ``start``."""
    cmds = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if (line.startswith("    ") or line.startswith(start)) and start in line:
            cmds.append(re.sub(r"\s+#.*$", "", line.strip()))
    return cmds


def test_metrics_views_fit_and_show_every_score_file():
    views = [c for c in _block_lines(DOC, "dvc metrics show") if "metrics/cost/" not in c]
    assert len(views) >= 5, views
    shown: set[str] = set()
    for cmd in views:
        out = _run(cmd)
        lines = out.splitlines()
        assert lines, cmd
        widest = max(len(line.rstrip()) for line in lines)
        assert widest <= METRICS_WIDTH, f"{cmd}: {widest} characters wide"
        shown.update(re.findall(r"(metrics/[\w@.+/-]+\.json)", out))
    every = json.loads(_run("dvc metrics show --json"))[""]["data"]
    assert every and set(every) - shown == set()  # every score file is in some view


def test_experiments_screen_fits_120_columns():
    for source in SOURCES:
        cmds = [c for c in _block_lines(source, "dvc exp show --drop")]
        assert cmds, f"{source}: no `dvc exp show --drop` recipe"
        for cmd in cmds:
            out = _run(cmd.replace("dvc exp show", "dvc exp show --no-pager", 1))
            lines = [line.rstrip() for line in out.splitlines() if line.strip()]
            rows = [line for line in lines if line.lstrip() and line.lstrip()[0] not in "─━"]
            first = max(len(line.strip().split("  ")[0]) for line in rows[1:])
            widest = max(len(line) for line in lines) + max(0, EXPERIMENT_CELL - first)
            assert "headline" in out and "reward" in out, out
            assert widest <= SCREEN, f"{source}: {cmd}: {widest} columns with an experiment row"
