"""``.venv/bin/dvc repro`` without activating the venv: stage commands do not depend on ``PATH`` (``stages/run.sh``
finds the interpreter that can import rlvr), or fail at once with one line saying what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[1]
RUN = ROOT / "stages" / "run.sh"
BARE_PATH = "/usr/bin:/bin"  # no venv on it: what a shell has before `source .venv/bin/activate`


def _cmds() -> dict[str, str]:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    out = {}
    for name, st in stages.items():
        body = st.get("do", st)
        out[name] = body["cmd"] if isinstance(body["cmd"], str) else body["cmd"][0]
    return out


def test_every_stage_runs_through_the_runner():
    cmds = _cmds()
    assert len(cmds) == 12 and "profile" in cmds  # dvc.yaml's 12 stages, the profile stage included
    for name, cmd in cmds.items():
        assert cmd.startswith("sh stages/run.sh stages/"), (name, cmd)  # not `python …`: that needs PATH


def _project(tmp_path: Path, venv: bool) -> Path:
    """A working directory holding a probe stage script, and (``venv``) a ``.venv/bin/python`` that is this test's
    interpreter (which can import rlvr)."""
    (tmp_path / "probe.py").write_text("import sys, rlvr\nprint('ran', sys.argv[1:])\n")
    if venv:
        py = tmp_path / ".venv" / "bin" / "python"
        py.parent.mkdir(parents=True)
        py.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
        py.chmod(0o755)
    return tmp_path


def _run(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PATH", "VIRTUAL_ENV", "RLVR_PYTHON", "PYTHONPATH")}
    return subprocess.run(["/bin/sh", str(RUN), "probe.py", "--seed", "1"], cwd=cwd, env={**base, **env},
                          capture_output=True, text=True, timeout=60)


def test_the_venv_interpreter_is_found_without_path(tmp_path):
    r = _run(_project(tmp_path, venv=True), {"PATH": BARE_PATH})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ran ['--seed', '1']"


def test_rlvr_python_wins(tmp_path):
    r = _run(_project(tmp_path, venv=False), {"PATH": BARE_PATH, "RLVR_PYTHON": sys.executable})
    assert r.returncode == 0 and r.stdout.startswith("ran"), r.stderr
    r = _run(tmp_path, {"PATH": BARE_PATH, "RLVR_PYTHON": "/bin/false"})
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "RLVR_PYTHON=/bin/false cannot import rlvr" in r.stderr


@pytest.mark.parametrize("path", [BARE_PATH, "/nonexistent"])
def test_no_interpreter_with_rlvr_fails_in_one_line(tmp_path, path):
    """The system python3 (no rlvr) or none at all: one line naming what to do, not `python: command not found` or a
    ModuleNotFoundError traceback."""
    r = _run(_project(tmp_path, venv=False), {"PATH": path})
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("probe.py: no Python here can import rlvr") and "make setup" in r.stderr


@pytest.mark.skipif(not (Path(sys.executable).parent / "dvc").is_file(), reason="dvc is not installed next to python")
def test_dvc_repro_from_the_venv_without_activation(tmp_path):
    """``<venv>/bin/dvc repro`` with a bare PATH runs a stage written as dvc.yaml writes them."""
    proj = _project(tmp_path, venv=True)
    shutil.copytree(ROOT / "stages", proj / "stages", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    shutil.copy(proj / "probe.py", proj / "stages" / "probe.py")
    (proj / "dvc.yaml").write_text("stages:\n  probe:\n    cmd: sh stages/run.sh stages/probe.py --seed 1 > out.txt\n"
                                   "    outs: [out.txt]\n")
    env = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}, "PATH": BARE_PATH,
           "DVC_NO_ANALYTICS": "1"}
    dvc = str(Path(sys.executable).parent / "dvc")
    subprocess.run([dvc, "init", "--no-scm", "-q"], cwd=proj, env=env, check=True, timeout=120)
    r = subprocess.run([dvc, "repro", "--no-commit"], cwd=proj, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (proj / "out.txt").read_text().strip() == "ran ['--seed', '1']"


def test_no_stage_script_shadows_a_standard_module():
    """``python stages/<x>.py`` puts ``stages/`` first on ``sys.path``: a script named like a standard-library module
    (``profile.py`` did: ``cProfile`` imports ``profile``) breaks every other stage's imports."""
    import sys

    names = {f.stem for f in (Path(__file__).resolve().parents[1] / "stages").glob("*.py")}
    assert names and not names & set(sys.stdlib_module_names), names & set(sys.stdlib_module_names)
