"""The GPU wheel set is a lock (bench/gpu/wheels.txt, dvc_wheels.txt): pinned versions and hashes, read exactly by
bench/gpu/fetch.py, every row an index artefact (never a wheel built locally: an sdist-only package is locked as its
sdist), re-locked by bench/gpu/resolve.py without building anything; and the machine image it was resolved against is
checked by bench/gpu/stage.sh before installing."""

from __future__ import annotations

import importlib.util
import io
import os
import re
import subprocess
import sys
import tarfile
import urllib.error
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "bench/gpu"
ANTLR_SDIST = "antlr4-python3-runtime-4.9.3.tar.gz"
ANTLR_SHA = "f224469b4168294902bb1efa80a8bf7855f24c99aef99cbefc1bcd3cce77881b"  # PyPI's published sha256


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, GPU / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fetch():
    return _load("fetch")


@pytest.mark.parametrize("lock", ["wheels.txt", "dvc_wheels.txt"])
def test_locks_are_exact(lock):
    rows = _fetch().read_lock(GPU / lock)  # every row passes fetch.row_problem, one row per package
    assert rows
    if lock == "wheels.txt":  # published only as an sdist: locked as that sdist with the index's hash
        assert ("antlr4-python3-runtime", "4.9.3", ANTLR_SHA, ANTLR_SDIST) in rows


SHA = "0" * 64
BAD_ROWS = {
    "a wheel under a local path": (f"foo 1.0 {SHA} /tmp/wheels/foo-1.0-py3-none-any.whl", "path or URL"),
    "a file: URL": (f"foo 1.0 {SHA} file:///opt/wheels/foo-1.0-py3-none-any.whl", "path or URL"),
    "a local version label": (f"foo 1.0+local {SHA} foo-1.0+local-py3-none-any.whl", "local label"),
    "another index's +cu130 build": (
        f"torch 2.11.0+cu130 {SHA} torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", "local label"),
    "a binary wheel built here (linux_x86_64)": (
        f"blake3 1.0.11 {SHA} blake3-1.0.11-cp312-cp312-linux_x86_64.whl", "built locally"),
    "a wheel for another Python": (f"foo 1.0 {SHA} foo-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", "no tag"),
    "a range, not a pin": (f"foo >=1.0 {SHA} foo-1.0-py3-none-any.whl", "not PEP 440"),
    "a file of another version": (f"foo 1.0 {SHA} foo-1.1-py3-none-any.whl", "not the row's"),
    "a non-canonical name": (f"Foo_Bar 1.0 {SHA} foo_bar-1.0-py3-none-any.whl", "not canonical"),
    "a short hash": ("foo 1.0 abc123 foo-1.0-py3-none-any.whl", "64 lowercase hex"),
    "an md5-style upper-case hash": (f"foo 1.0 {'A' * 64} foo-1.0-py3-none-any.whl", "64 lowercase hex"),
    "a second version of a locked package": (f"antlr4-python3-runtime 4.9.2 {SHA} antlr4-python3-runtime-4.9.2.tar.gz",
                                             "already locked"),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_lock_with_a_row_that_is_not_an_index_artefact_is_refused(tmp_path, case):
    """The committed lock plus one bad row: fetch.py refuses it before downloading, naming the row's line."""
    row, why = BAD_ROWS[case]
    good = (GPU / "wheels.txt").read_text(encoding="utf-8")
    bad = tmp_path / "wheels.txt"
    bad.write_text(good + row + "\n", encoding="utf-8")
    line = len(good.splitlines()) + 1
    with pytest.raises(SystemExit, match=rf"wheels\.txt:{line}: .*{why}"):
        _fetch().read_lock(bad)


def test_a_malformed_lock_row_names_the_line(tmp_path):
    bad = tmp_path / "w.txt"
    bad.write_text("# header\nname 1.0 abc\n")
    with pytest.raises(SystemExit, match=r"w\.txt:2: expected 'name version sha256 filename'"):
        _fetch().read_lock(bad)


def test_check_rejects_a_locally_built_wheel_and_a_changed_hash():
    """A pure-Python wheel built here looks like an index file by name; resolve.check compares every row with the
    index's published files and hashes (here a stand-in for PyPI's answer for antlr4-python3-runtime 4.9.3)."""
    index = {("antlr4-python3-runtime", "4.9.3"): {ANTLR_SDIST: ANTLR_SHA}}
    check = _load("resolve").check
    lookup = lambda n, v: index[(n, v)]  # noqa: E731
    assert check([("antlr4-python3-runtime", "4.9.3", ANTLR_SHA, ANTLR_SDIST)], lookup) == []
    built = ("antlr4-python3-runtime", "4.9.3", "1" * 64, "antlr4_python3_runtime-4.9.3-py3-none-any.whl")
    changed = ("antlr4-python3-runtime", "4.9.3", "2" * 64, ANTLR_SDIST)
    bad = check([built, changed], lookup)
    assert len(bad) == 2 and "is not on the index" in bad[0] and "the index publishes" in bad[1]


def test_resolve_downloads_and_never_builds(tmp_path, monkeypatch):
    """No wheel for the target: resolve.download takes the sdist from the index (``pip download --no-binary``), never
    ``pip wheel``, with this machine's pip configuration and index variables switched off."""
    resolve = _load("resolve")
    calls = []

    def run(cmd, **kw):
        calls.append((cmd, kw["env"]))
        if "--only-binary=:all:" in cmd:
            return subprocess.CompletedProcess(cmd, 1, "", "no matching distribution")
        (tmp_path / ANTLR_SDIST).write_bytes(b"sdist")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(resolve.subprocess, "run", run)
    monkeypatch.setenv("PIP_FIND_LINKS", "/opt/wheels")
    got = resolve.download("antlr4-python3-runtime==4.9.3", tmp_path)
    assert got.name == ANTLR_SDIST and len(calls) == 2
    for cmd, env in calls:
        assert cmd[2:4] == ["pip", "download"] and "wheel" not in cmd[3:4]
        assert cmd[cmd.index("--index-url") + 1] == "https://pypi.org/simple"
        assert env["PIP_CONFIG_FILE"] == os.devnull and "PIP_FIND_LINKS" not in env
    assert "--no-binary=:all:" in calls[1][0]
    assert "pip\", \"wheel" not in (GPU / "resolve.py").read_text(encoding="utf-8")


def test_an_old_sdist_s_dependencies_come_from_egg_info(tmp_path):
    """Metadata 1.x sdists (antlr4 4.9.3) list dependencies only in egg-info/requires.txt: read with markers."""
    sdist = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as t:
        for name, text in {"pkg-1.0/PKG-INFO": "Metadata-Version: 1.0\nName: pkg\nVersion: 1.0\n",
                           "pkg-1.0/src/pkg.egg-info/PKG-INFO": "Metadata-Version: 1.0\n",
                           "pkg-1.0/src/pkg.egg-info/requires.txt":
                               "six\n\n[:python_version < \"3.5\"]\ntyping\n\n[fast]\nujson>=5\n"}.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    requires = _load("resolve").requires
    assert [r.name for r in requires(sdist, set())] == ["six"]
    assert [r.name for r in requires(sdist, {"fast"})] == ["six", "ujson"]


def _machine_pkgs(text: str) -> list[tuple[str, str]]:
    return [(ln.strip().partition("==")[0], ln.strip().partition("==")[2]) for ln in text.splitlines()
            if ln.strip() and not ln.startswith("#")]


def test_machine_pkgs_pins_what_the_sittings_recorded():
    pkgs = dict(_machine_pkgs((GPU / "machine_pkgs.txt").read_text(encoding="utf-8")))
    assert pkgs["torch"] == "2.11.0"  # results*.json: every sitting ran torch 2.11.0 (+cu130)
    assert "transformers" in pkgs and not pkgs["transformers"]  # shadowed by the lock's transformers 5.10.4


@pytest.mark.parametrize(("pins", "expect"), [
    ("pytest==0.0.1\n", "the image has pytest .*pins pytest==0.0.1"),
    ("no-such-package-xyz==1.0\n", "the image lacks no-such-package-xyz"),
    ("pytest\nno-such-package-xyz\n", None),  # unpinned and missing: a warning, not a stop
])
def test_stage_install_checks_the_image_first(tmp_path, pins, expect):
    """stage.sh check-image (run first by install) stops with one line naming a package whose pinned version the
    image does not have; TARGET_PY is this interpreter's so that the test runs on any Python."""
    (tmp_path / "stage.sh").write_text((GPU / "stage.sh").read_text(encoding="utf-8"))
    (tmp_path / "machine_pkgs.txt").write_text("# test\n" + pins)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "TARGET_PY": "{}.{}".format(*sys.version_info[:2])}
    res = subprocess.run(["bash", str(tmp_path / "stage.sh"), "check-image"], capture_output=True, text=True, env=env)
    if expect is None:
        assert res.returncode == 0 and "warning: not on this image" in res.stderr
        assert "no-such-package-xyz" in res.stderr
    else:
        assert res.returncode != 0 and len(res.stderr.strip().splitlines()) == 1
        assert re.search(expect, res.stderr)


@pytest.mark.slow
def test_committed_locks_are_the_index_s_files():
    """Network (metadata only, PyPI's JSON API): every committed row is a file PyPI publishes with that sha256, and a
    locally built antlr wheel row is not. Skips when the index cannot be reached."""
    resolve, fetch = _load("resolve"), _fetch()
    rows = [r for lock in ("wheels.txt", "dvc_wheels.txt") for r in fetch.read_lock(GPU / lock)]
    built = ("antlr4-python3-runtime", "4.9.3", "1" * 64, "antlr4_python3_runtime-4.9.3-py3-none-any.whl")
    try:
        bad = resolve.check([*rows, built])
    except (urllib.error.URLError, OSError) as e:
        pytest.skip(f"package index unreachable: {e}")
    assert bad and len(bad) == 1 and "antlr4_python3_runtime-4.9.3-py3-none-any.whl is not on the index" in bad[0]


# the stages a `dvc repro` runs on a GPU machine (governance and manifests run on CPU; their outputs are carried)
GPU_STAGES = ["judge_check", "profile", "model", "baseline", "sft", "dpo", "grpo", "repair", "eval", "report"]
# imported only where present: wandb (resolve.py SKIP; rlvr.eval.tracking imports it inside a try, when tracking is
# on) and literal_scan (the sandbox's top-level name for rlvr/judge/literal_scan.py, tried before the package import)
OPTIONAL = {"wandb", "literal_scan"}


def _stage_script(stage: str) -> Path:
    """The script dvc.yaml's ``stage`` runs (its cmd names ``stages/<script>.py``; the name need not be the
    stage's: ``profile`` runs stages/resolve_profile.py)."""
    import re

    import yaml

    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][stage]
    cmd = spec["do"]["cmd"] if "foreach" in spec else spec["cmd"]
    found = re.findall(r"stages/\w+\.py", cmd)
    assert len(found) == 1, f"dvc.yaml stage {stage!r}: cmd names {found}, not one stage script"
    return ROOT / found[0]


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
    stack = [_stage_script(stage)]
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
    have |= {_norm(n) for n, _ in _machine_pkgs((ROOT / "bench/gpu/machine_pkgs.txt").read_text(encoding="utf-8"))}
    missing = {
        mod: where for mod, where in _third_party_imports(stage).items()
        if mod not in OPTIONAL and not {_norm(d) for d in dists.get(mod, [mod])} & have
    }
    assert not missing, f"{_stage_script(stage).relative_to(ROOT)} reaches packages the GPU machine lacks: {missing}"
