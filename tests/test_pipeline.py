"""The DVC pipeline's wiring: every stage's deps list the rlvr packages it imports (statically, lazy imports too),
every stage script answers --help, and every params section a stage names exists."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text())
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def _stages() -> dict[str, dict]:
    out = {}
    for name, st in DVC["stages"].items():
        if "foreach" in st:
            out[name] = st["do"]
        elif "matrix" in st:
            out[name] = st
        else:
            out[name] = st
    return out


def _module_file(mod: str) -> Path | None:
    rel = Path(*mod.split("."))
    for cand in (ROOT / rel.with_suffix(".py"), ROOT / rel / "__init__.py"):
        if cand.exists():
            return cand
    return None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    mods = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods.add(node.module)
            mods.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in mods if m == "rlvr" or m.startswith("rlvr.")}


def rlvr_closure(script: Path) -> set[str]:
    """Top-level rlvr packages/modules reachable from ``script`` through static imports (lazy ones included)."""
    seen: set[Path] = set()
    todo = [script]
    tops: set[str] = set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for mod in _imports(f):
            parts = mod.split(".")
            if len(parts) < 2:
                continue
            top = ROOT / "rlvr" / parts[1]
            tops.add(f"rlvr/{parts[1]}" if top.is_dir() else f"rlvr/{parts[1]}.py")
            for i in range(2, len(parts) + 1):
                mf = _module_file(".".join(parts[:i]))
                if mf is not None:
                    todo.append(mf)
    return tops


def _script(st: dict) -> Path:
    cmd = st["cmd"] if isinstance(st["cmd"], str) else st["cmd"][0]
    token = next(t for t in cmd.split() if t.startswith("stages/") and t.endswith(".py"))
    return ROOT / token


def rlvr_files(script: Path) -> set[str]:
    """Every rlvr module file reachable from ``script`` through static imports (lazy ones included), repo-relative."""
    seen: set[Path] = set()
    todo = [script]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for mod in _imports(f):
            parts = mod.split(".")
            for i in range(2, len(parts) + 1):
                mf = _module_file(".".join(parts[:i]))
                if mf is not None:
                    todo.append(mf)
    return {str(p.relative_to(ROOT)) for p in seen if p != script}


# modules a stage runs that no import names: started as processes (``-m``) or imported by name inside verl's workers
RUNS = {
    "dpo": {"rlvr/train/local/dpo_worker.py"},  # accelerate launch -m rlvr.train.local.dpo_worker
    "sft": {"rlvr/train/verl/compat.py", "rlvr/train/verl/advantage.py", "rlvr/train/verl/mask.py"},
    "grpo": {"rlvr/train/verl/advantage.py", "rlvr/train/verl/mask.py", "rlvr/reward/verl.py",
             "rlvr/reward/verl_manager.py"},
    "repair": {"rlvr/train/verl/advantage.py", "rlvr/train/verl/mask.py", "rlvr/reward/verl.py",
               "rlvr/reward/verl_manager.py"},
}


def _covered(path: str, deps: set[str]) -> bool:
    """``path`` is a dep or lies under a folder dep."""
    return any(path == d or path.startswith(d + "/") for d in deps)


@pytest.mark.parametrize("name", sorted(_stages()))
def test_stage_deps_list_every_imported_rlvr_package(name):
    st = _stages()[name]
    script = _script(st)
    deps = {str(d).rstrip("/") for d in st.get("deps", [])}
    assert str(script.relative_to(ROOT)) in deps, f"{name}: stage file not in deps"
    needed = rlvr_closure(script)
    missing = sorted(m for m in needed if not any(d == m or d.startswith(m + "/") for d in deps))
    assert not missing, f"stage {name} imports {missing} but its deps do not list them"
    files = rlvr_files(script) | RUNS.get(name, set())
    uncovered = sorted(f for f in files if not _covered(f, deps))
    assert not uncovered, f"stage {name} runs {uncovered} but its deps do not cover them"


def test_training_stages_depend_on_the_modules_they_run_not_the_whole_package():
    """Editing DPO's code does not re-run the verl stages, nor verl's the DPO stage (issue 44)."""
    deps = {n: {str(d) for d in st.get("deps", [])} for n, st in _stages().items()}
    assert all("rlvr/train" not in d for d in deps.values())
    assert not _covered("rlvr/train/verl/launch.py", deps["dpo"])
    for name in ("sft", "grpo", "repair"):
        assert not _covered("rlvr/train/local/dpo.py", deps[name]), name
    assert not _covered("rlvr/train/local/grpo.py", deps["sft"])


@pytest.mark.parametrize("name", sorted(_stages()))
def test_stage_params_sections_exist(name):
    st = _stages()[name]
    for entry in st.get("params", []):
        keys = entry if isinstance(entry, str) else None
        if isinstance(entry, dict):
            continue
        top = keys.split(".")[0]
        assert top in PARAMS, f"{name}: params key {keys} missing from params.yaml"


@pytest.mark.parametrize("name", sorted(_stages()))
def test_stage_params_list_every_section_the_script_reads(name):
    """A section the stage file loads (``load_section("x", ...)``) but ``params`` does not name would not make the
    stage stale when it changes (``dvc exp run -S x.y=...`` would re-use the old outputs)."""
    st = _stages()[name]
    read = set(re.findall(r'load_section\(\s*"([a-z_]+)"', _script(st).read_text()))
    named = {e.split(".")[0] for e in st.get("params", []) if isinstance(e, str)}
    assert read <= named, f"stage {name} reads params sections {sorted(read - named)} its params do not list"


@pytest.mark.parametrize("name", sorted(_stages()))
def test_stage_help(name):
    script = _script(_stages()[name])
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Usage:" in out.stdout
