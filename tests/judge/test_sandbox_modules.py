"""The judge's preflight checks the libraries submissions import (rlvr.judge.preflight.check_sandbox_modules): a
sandbox interpreter without sortedcontainers (the lent GPU node's, 2026-11-28 rehearsal) judged every correct LeetCode
program importing it runtime_error; the preflight must stop the run at its start with one line instead."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rlvr.check import check_judge
from rlvr.judge.core import RunResult
from rlvr.judge.preflight import SANDBOX_MODULES, JudgeUnavailable, check_sandbox_modules, open_judge, preflight
from rlvr.judge.verdict import JudgeResult
from rlvr.train.verl.preflight import judge_preflight

ROOT = Path(__file__).resolve().parents[2]


class NoModuleJudge:
    """Accepts every judged submission; ``run_code`` runs the program with this interpreter where importing any of
    ``absent`` fails as an uninstalled module does (``sys.modules[name] = None``), like a sandbox lacking them, and
    the other :data:`SANDBOX_MODULES` import (stub modules)."""

    def __init__(self, absent: tuple[str, ...] = ()) -> None:
        self.absent = absent
        self.runs: list[str] = []
        self.closed = False

    def judge_many(self, items, language: str = "python"):
        return [JudgeResult(verdict="accepted", passed=1, total=1, pass_ratio=1.0, judge_s=0.0) for _ in items]

    def judge(self, problem, solution, language: str = "python"):
        res = self.judge_many([(problem, solution)])[0]
        return res

    def run_code(self, code: str, stdin: str = "", timeout_s: float = 10.0, memory_limit_mb: int = 1024,
                 files=None, language: str = "python") -> RunResult:
        self.runs.append(code)
        block = "import sys, types\n" + "".join(  # the others present (stubs: independent of this interpreter)
            f"sys.modules[{m!r}] = None\n" if m in self.absent else f"sys.modules[{m!r}] = types.ModuleType({m!r})\n"
            for m in SANDBOX_MODULES)
        p = subprocess.run([sys.executable, "-c", block + code], capture_output=True, text=True, timeout=60)
        return RunResult(status="Finished", verdict="accepted" if p.returncode == 0 else "runtime_error",
                         exit_code=p.returncode, stdout=p.stdout, stderr=p.stderr)

    def close(self) -> None:
        self.closed = True


#: non-standard imports in the bundled benchmarks that submissions do not need: a CodeContests solution's
#: ``try: import __pypy__`` (PyPy's integer ops, with a fallback)
NOT_NEEDED = {"__pypy__"}
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([A-Za-z_]\w*)[\w.]*[ \t]+import\b"
                     r"|import[ \t]+([A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*))", re.M)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_the_constant_lists_every_library_the_bundled_benchmarks_import() -> None:
    """Every top-level module an import line of the bundled benchmarks (data/raw/**/*.jsonl.gz: prompts, reference
    solutions, tests) names is in the standard library or in SANDBOX_MODULES (~3 s)."""
    found: dict[str, str] = {}
    files = sorted((ROOT / "data" / "raw").rglob("*.jsonl.gz"))
    assert files, "no bundled benchmarks under data/raw"
    for f in files:
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            for line in fh:
                for field, value in json.loads(line).items():
                    for text in _strings(value):
                        if "import" not in text:
                            continue
                        for m in _IMPORT.finditer(text):
                            names = [m.group(1)] if m.group(1) else [
                                n.strip().split(".")[0] for n in m.group(2).split(",")]
                            for n in names:
                                found.setdefault(n, f"{f.relative_to(ROOT)}: {field}")
    extra = {n: where for n, where in found.items() if n not in sys.stdlib_module_names and n not in NOT_NEEDED}
    assert set(extra) <= set(SANDBOX_MODULES), extra
    assert "sortedcontainers" in extra  # the scan sees LeetCodeDataset's imports
    assert {"sortedcontainers", "numpy"} <= set(SANDBOX_MODULES)  # numpy: the Hub's EvalPlus tests (not bundled)


def test_a_sandbox_without_sortedcontainers_fails_the_preflight_with_one_line() -> None:
    fake = NoModuleJudge(absent=("sortedcontainers",))
    with pytest.raises(JudgeUnavailable) as info:
        preflight(fake, "embedded")
    msg = str(info.value)
    assert "\n" not in msg
    assert "cannot import sortedcontainers" in msg and "embedded" in msg
    assert f"interpreter {sys.executable}" in msg  # the sandbox's interpreter, as it reports itself
    assert "python3-sortedcontainers" in msg and "RLVR_SANDBOX_SITE" in msg  # what to do
    assert len(fake.runs) == 1  # one run: cheap


def test_every_missing_module_is_named_and_a_complete_sandbox_passes() -> None:
    with pytest.raises(JudgeUnavailable, match=r"cannot import sortedcontainers \(also missing: numpy\)"):
        check_sandbox_modules(NoModuleJudge(absent=("sortedcontainers", "numpy")), "http://judge:8080")
    check_sandbox_modules(NoModuleJudge(), "embedded")


def test_rlvr_check_reports_the_missing_module_as_one_error() -> None:
    errors = check_judge(lambda: NoModuleJudge(absent=("sortedcontainers",)))
    assert len(errors) == 1 and "cannot import sortedcontainers" in errors[0] and "\n" not in errors[0]


def test_a_stage_and_the_verl_launch_stop_at_their_start(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text("judge:\n  preflight: true\n")
    fake = NoModuleJudge(absent=("numpy",))
    with pytest.raises(JudgeUnavailable, match="cannot import numpy"), open_judge(params, factory=lambda: fake):
        pytest.fail("the stage body must not run")
    assert fake.closed
    with pytest.raises(RuntimeError, match=r"judge preflight on .*cannot import numpy.*python3-numpy"):
        judge_preflight(NoModuleJudge(absent=("numpy",)))


def _wheel(folder: Path, module: str, source: str) -> None:
    with zipfile.ZipFile(folder / f"{module}-1.0-py3-none-any.whl", "w") as z:
        z.writestr(f"{module}/__init__.py", source)


@pytest.mark.skipif(not Path("/usr/bin/python3").exists(), reason="needs /usr/bin/python3 (the sandbox's default)")
def test_the_gpu_recipe_gives_a_sandbox_lacking_sortedcontainers_its_modules(monkeypatch) -> None:
    """The GPU node's case, in the real sandbox: its interpreter (a venv of /usr/bin/python3 without system packages,
    via RLVR_SANDBOX_PYTHON) lacks sortedcontainers: the preflight stops; bench/gpu/sandbox_site.sh (run_gpu.sh's
    step) stops naming it when it has nothing to install, else unpacks the wheels it finds in .gpu/ into a folder it
    prints for RLVR_SANDBOX_SITE, with which the preflight passes and a program importing SortedList is accepted."""
    from rlvr.judge import Judge

    # folders the sandbox's uid can read, outside /tmp (the sandbox's own tmpfs)
    base = ROOT / ".cache" / "test_sandbox_modules"
    venv, site, work = base / "venv", base / "site", base / "work"
    shutil.rmtree(site, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    if not (venv / "bin" / "python3").exists():
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (work / ".gpu").mkdir(parents=True)
    for d in (ROOT / ".cache", base, venv, venv / "bin"):
        os.chmod(d, 0o755)
    sandbox_python = str(venv / "bin" / "python3")
    monkeypatch.setenv("RLVR_SANDBOX_PYTHON", sandbox_python)
    monkeypatch.setenv("RLVR_SANDBOX_SITE", str(venv))  # the venv's own folder must be visible inside
    with Judge(workers=1) as judge, pytest.raises(JudgeUnavailable) as info:
        check_sandbox_modules(judge, "embedded")
    assert f"(embedded, interpreter {sandbox_python}) cannot import sortedcontainers" in str(info.value)

    def recipe() -> subprocess.CompletedProcess:
        env = {**os.environ, "PY": sys.executable, "SANDBOX_SITE": str(site),
               "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path[1:]])}
        return subprocess.run(["bash", str(ROOT / "bench" / "gpu" / "sandbox_site.sh")], cwd=work, env=env,
                              capture_output=True, text=True, timeout=120)

    out = recipe()
    assert out.returncode == 1 and out.stdout == ""
    assert f"interpreter {sandbox_python} cannot import sortedcontainers: put python3-sortedcontainers_" in out.stderr
    _wheel(work / ".gpu", "sortedcontainers",
           "class SortedList(list):\n    def __init__(self, it=()):\n        super().__init__(sorted(it))\n")
    _wheel(work / ".gpu", "numpy", "def allclose(a, b):\n    return a == b\n")
    out = recipe()
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{venv}{os.pathsep}{site}"
    os.chmod(site / "sortedcontainers" / "__init__.py", 0o666)  # writable by anyone: only the mount keeps it intact
    monkeypatch.setenv("RLVR_SANDBOX_SITE", out.stdout.strip())
    with Judge(workers=1) as judge:
        check_sandbox_modules(judge, "embedded")
        res = judge.run_code("from sortedcontainers import SortedList\nprint(SortedList([3, 1, 2])[0])\n")
        assert (res.verdict, res.stdout) == ("accepted", "1\n")
        res = judge.run_code("import sortedcontainers\nopen(sortedcontainers.__file__, 'a')\n")
        assert res.verdict == "runtime_error" and "Read-only file system" in res.stderr


def test_rlvr_sandbox_site_refuses_a_folder_the_sandbox_would_hide(monkeypatch, tmp_path: Path) -> None:
    from rlvr.judge.sandbox.bwrap import SandboxError, sandbox_site

    monkeypatch.setenv("RLVR_SANDBOX_SITE", str(tmp_path))
    with pytest.raises(SandboxError, match="under /tmp"):
        sandbox_site()
    monkeypatch.setenv("RLVR_SANDBOX_SITE", "/no/such/site")
    with pytest.raises(SandboxError, match="'/no/such/site' is not an existing absolute folder"):
        sandbox_site()
