"""The GPU wheel set is a lock (bench/gpu/wheels.txt, dvc_wheels.txt): pinned versions and hashes, read exactly by
bench/gpu/fetch.py, and no row that is a wheel built locally (an sdist-only package is locked as its sdist)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _fetch():
    spec = importlib.util.spec_from_file_location("fetch", ROOT / "bench/gpu/fetch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("lock", ["wheels.txt", "dvc_wheels.txt"])
def test_locks_are_exact(lock):
    rows = _fetch().read_lock(ROOT / "bench/gpu" / lock)
    assert rows
    names = [n for n, *_ in rows]
    assert len(names) == len(set(names))  # one version per package: two stop the offline install
    for name, version, sha, file in rows:
        assert len(sha) == 64 and all(c in "0123456789abcdef" for c in sha), name
        assert version in file and (file.endswith(".whl") or file.endswith(".tar.gz")), name
    assert ("antlr4-python3-runtime", "4.9.3") in {(n, v) for n, v, *_ in rows} or lock != "wheels.txt"
    antlr = [f for n, _, _, f in rows if n == "antlr4-python3-runtime"]
    assert all(f.endswith(".tar.gz") for f in antlr)  # published only as an sdist: never a locally built wheel


def test_a_malformed_lock_row_names_the_line(tmp_path):
    bad = tmp_path / "w.txt"
    bad.write_text("# header\nname 1.0 abc\n")
    with pytest.raises(SystemExit, match=r"w\.txt:2: expected 'name version sha256 filename'"):
        _fetch().read_lock(bad)


# the stages a `dvc repro` runs on a GPU machine (governance and manifests run on CPU; their outputs are carried)
GPU_STAGES = ["judge_check", "model", "baseline", "sft", "dpo", "grpo", "repair", "eval", "report"]
# imported only where present: wandb (resolve.py SKIP; rlvr.eval.tracking imports it inside a try, when tracking is
# on) and literal_scan (the sandbox's top-level name for rlvr/judge/literal_scan.py, tried before the package import)
OPTIONAL = {"wandb", "literal_scan"}


def _third_party_imports(stage: str) -> dict[str, str]:
    """Top-level third-party module -> the first file importing it, over the stage script and every rlvr module it
    reaches: through any import statement (module-level or inside a function: a lazy import runs too), the
    ``__init__.py`` of every package on the way (importing ``rlvr.a.b`` runs ``rlvr/a/__init__.py``), and any string
    constant naming an rlvr module (``importlib.import_module("rlvr…")``, ``python -m rlvr…`` commands, judge
    factories ``"rlvr.x:y"``). A relative import fails the walk (rlvr uses none; the walk would not follow it)."""
    import ast
    import re
    import sys

    def module_files(name: str) -> list[Path]:
        parts = name.split(".")
        out = []
        for i in range(1, len(parts) + 1):
            base = ROOT.joinpath(*parts[:i])
            for p in (base / "__init__.py", base.with_suffix(".py")):
                if p.exists():
                    out.append(p)
        return out

    named = re.compile(r"^(rlvr(?:\.\w+)+)(?::\w+)?$")
    seen: set[Path] = set()
    third: dict[str, str] = {}
    stack = [ROOT / f"stages/{stage}.py"]
    while stack:
        path = stack.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path}:{node.lineno}: a relative import the walk does not follow"
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and named.match(node.value):
                names = [named.match(node.value).group(1)]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top == "rlvr":
                    stack.extend(q for q in module_files(name) if q not in seen)
                elif top not in sys.stdlib_module_names:
                    third.setdefault(top, str(path.relative_to(ROOT)))
    return third


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


@pytest.mark.parametrize("stage", GPU_STAGES)
def test_the_gpu_machine_has_every_package_a_gpu_stage_imports(stage):
    """The final eval died on the lent 4 x H100 with `No module named 'datasketch'` (a lazy import of
    rlvr.data.governance): every package a GPU-run stage can import is in the GPU lock or on the machine's image."""
    import importlib.metadata as md

    dists = md.packages_distributions()
    have = {_norm(n) for n, *_ in _fetch().read_lock(ROOT / "bench/gpu/wheels.txt")}
    for line in (ROOT / "bench/gpu/machine_pkgs.txt").read_text().splitlines():
        if not line.startswith("#"):
            have |= {_norm(n) for n in line.split()}
    missing = {
        mod: where for mod, where in _third_party_imports(stage).items()
        if mod not in OPTIONAL and not {_norm(d) for d in dists.get(mod, [mod])} & have
    }
    assert not missing, f"stages/{stage}.py reaches packages the GPU machine lacks: {missing}"
