"""Set-up as a new user meets it: `rlvr --version`, `make setup`/`make repro` saying how to run rlvr (and `make repro`
starting with `rlvr check`), chromium optional in `make system` for a non-root user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlvr.cli import main

ROOT = Path(__file__).resolve().parents[1]
MAKE = shutil.which("make")


def test_version_matches_pyproject() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for flag in ("--version", "-V"):
        res = CliRunner().invoke(main, [flag])
        assert res.exit_code == 0 and res.output.strip() == f"rlvr {version}"
    r = subprocess.run([sys.executable, "-m", "rlvr.cli", "--version"], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"rlvr {version}"


@pytest.mark.skipif(MAKE is None, reason="make is not installed")
def test_setup_and_repro_end_by_saying_how_to_run_rlvr() -> None:
    r = subprocess.run([MAKE, "-s", "-C", str(ROOT), "how-to-run"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert ".venv/bin/rlvr" in r.stdout and "source .venv/bin/activate" in r.stdout
    for target, skip in (("setup", []), ("repro", ["-o", "setup"])):  # the last line each recipe prints
        r = subprocess.run([MAKE, "-n", "-C", str(ROOT), "--no-print-directory", "-o", "system", "-o",
                            ".venv/.rlvr-installed", *skip, target], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "rlvr is installed in .venv" in r.stdout.strip().splitlines()[-1], r.stdout
        if target == "repro":  # the preflight comes before the pipeline
            assert r.stdout.splitlines()[0] == ".venv/bin/rlvr check", r.stdout


@pytest.mark.skipif(MAKE is None or shutil.which("bwrap") is None or shutil.which("cc") is None,
                    reason="make, bwrap or cc missing: `make system` would stop on them first")
def test_make_system_without_chromium_goes_on_for_a_non_root_user(tmp_path: Path) -> None:
    probe = subprocess.run(["/usr/bin/python3", "-c", "import sortedcontainers, numpy"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("Debian's python3 lacks sortedcontainers/numpy: `make system` would stop on them first")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "id").write_text("#!/bin/sh\necho 1000\n")  # not root: never apt-get
    (fake / "id").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    r = subprocess.run([MAKE, "-s", "-C", str(ROOT), "system", "CHROMIUM=rlvr-no-such-browser"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "optional: chromium is not installed" in r.stdout and "skipped" in r.stdout
