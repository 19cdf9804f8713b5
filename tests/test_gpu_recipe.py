"""The CPU side of the GPU recipe (docs/training/gpu.md), run as the page writes it, on a dry run.

The page's CPU block (`.venv/bin/dvc repro manifests`, `bash bench/gpu/pack.sh`) runs in a small git repository holding
bench/gpu's staging scripts, with two fakes: a `dvc` whose `repro manifests` writes a small data folder, and a local
wheel index (three tiny wheels, one larger than a part) named by fake locks, so `fetch.py` downloads through pip with
hash checking and no network. Then the GPU side of the staging runs here too (`stage.sh receive` of every part,
`stage.sh install`): the parts are under the size, the large wheel's pieces rejoin, every sha256 matches, the data
tarball unpacks to the same files and `.gpu/` holds what `dvc_setup.sh` and `run_gpu.sh` read.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "bench/gpu"
PAGE = ROOT / "docs/training/gpu.md"
MIB = 2**20


def page_cpu_block() -> str:
    """The page's CPU-side staging block: the ```bash block whose first line is ``# CPU side: staging``."""
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)
    found = [b for b in blocks if b.startswith("# CPU side: staging")]
    assert len(found) == 1, "docs/training/gpu.md: one ```bash block starting '# CPU side: staging'"
    return found[0]


def _wheel(index: Path, name: str, payload: int) -> tuple[str, str]:
    """A pure-Python wheel ``name-1.0-py3-none-any.whl`` with ``payload`` random (incompressible) bytes; its file name
    and sha256."""
    fname = f"{name}-1.0-py3-none-any.whl"
    dist = f"{name}-1.0.dist-info"
    files = {f"{name}/__init__.py": b"VALUE = 1\n", f"{name}/blob.bin": os.urandom(payload),
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(
        f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}\n"
        for p, b in files.items()) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(index / fname, "w", zipfile.ZIP_STORED) as z:
        for p, b in files.items():
            z.writestr(p, b)
        z.writestr(f"{dist}/RECORD", record)
    return fname, hashlib.sha256((index / fname).read_bytes()).hexdigest()


@pytest.fixture
def clone(tmp_path):
    """A small git repository with bench/gpu's staging scripts, fake locks of local wheels, a fake venv (the real
    interpreter, a fake dvc) and the pip settings of a local index; returns (repo, env)."""
    repo, index = tmp_path / "clone", tmp_path / "index"
    (repo / "bench/gpu").mkdir(parents=True)
    index.mkdir()
    for f in ("pack.sh", "fetch.py", "stage.sh"):
        shutil.copy2(GPU / f, repo / "bench/gpu" / f)
    shutil.copy2(ROOT / ".gitignore", repo / ".gitignore")
    (repo / "bench/gpu/machine_pkgs.txt").write_text("# the test's image: no pins\n")
    (repo / "dvc.lock").write_text("schema: '2.0'\nstages: {}\n")
    gpu_rows = [(n, *_wheel(index, n, size)) for n, size in (("tinybig", 3 * MIB // 2), ("tinysmall", MIB // 4))]
    dvc_rows = [("tinydvc", *_wheel(index, "tinydvc", MIB // 8))]
    for lock, rows in (("wheels.txt", gpu_rows), ("dvc_wheels.txt", dvc_rows)):
        (repo / "bench/gpu" / lock).write_text(
            "# name version sha256 filename\n" + "".join(f"{n} 1.0 {sha} {f}\n" for n, f, sha in rows))
    venv = repo / ".venv/bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (venv / "dvc").write_text(  # `dvc repro manifests`: the data stages' outputs, small
        '#!/bin/sh\n[ "$*" = "repro manifests" ] || { echo "fake dvc: $*" >&2; exit 2; }\n'
        "mkdir -p data/governance/problems data/manifests/verl\n"
        "printf '{\"id\": \"p1\"}\\n' > data/governance/problems/synthetic.jsonl\n"
        "head -c 200000 /dev/urandom > data/manifests/verl/train.parquet\n")
    (venv / "dvc").chmod(0o755)
    (tmp_path / "bubblewrap_0.8.0-2_amd64.deb").write_bytes(b"!<arch>\n")
    subprocess.run("git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm init",
                   shell=True, cwd=repo, check=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index), "PIP_CONFIG_FILE": os.devnull,
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PART_MIB": "1", "CARRY_MIB": "2",
           "BWRAP_DEB": str(tmp_path / "bubblewrap_0.8.0-2_amd64.deb"),
           "STAGE": str(tmp_path / "stage"), "SITE": str(tmp_path / "site"),
           "TARGET_PY": "{}.{}".format(*sys.version_info[:2])}
    return repo, env


def _run(cmd: str, repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=repo, env=env, capture_output=True, text=True)


def test_page_cpu_side_stages_everything(clone, tmp_path):
    """The page's CPU block packs parts under the size, .gpu/ with the data, dvc's wheels and the .deb; the parts
    received and installed there give back every wheel, hash-checked."""
    repo, env = clone
    block = page_cpu_block()
    assert ".venv/bin/dvc repro manifests" in block and "bash bench/gpu/pack.sh" in block
    res = _run(block, repo, env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "call 1: carry .gpu" in res.stdout

    # fetch.py's layout: the GPU set flat in .whl, dvc's in .whl/dvc (what .gpu/dvc and dvc_setup.sh use)
    assert sorted(p.name for p in (repo / ".whl/dvc").glob("*.whl")) == ["tinydvc-1.0-py3-none-any.whl"]
    parts = sorted((repo / ".whl/parts").iterdir())
    assert len(parts) >= 2
    for part in parts:
        assert sum(f.stat().st_size for f in part.iterdir()) <= MIB, part
    pieces = [f.name for p in parts for f in p.iterdir()]
    assert "tinybig-1.0-py3-none-any.whl.part-00" in pieces and "tinybig-1.0-py3-none-any.whl.part-01" in pieces

    gpu = repo / ".gpu"
    assert (gpu / "dvc/tinydvc-1.0-py3-none-any.whl").is_file() and list(gpu.glob("bubblewrap_*.deb"))
    out = tmp_path / "unpacked"
    out.mkdir()
    with tarfile.open(gpu / "gov.tar.xz") as t:
        t.extractall(out, filter="data")
    for rel in ("data/governance/problems/synthetic.jsonl", "data/manifests/verl/train.parquet"):
        assert (out / rel).read_bytes() == (repo / rel).read_bytes()

    # there: one receive per part, then install (join, sha256 check, offline pip install)
    for part in parts:
        assert _run(f"bash bench/gpu/stage.sh receive {part}", repo, env).returncode == 0
    res = _run("bash bench/gpu/stage.sh install", repo, env)
    assert res.returncode == 0, res.stdout + res.stderr
    site = Path(env["SITE"])
    assert (site / "tinybig/blob.bin").stat().st_size == 3 * MIB // 2 and (site / "tinysmall/__init__.py").is_file()


def test_pack_stops_without_the_data_stages(clone):
    """A fresh clone without `dvc repro manifests`: one line saying to run it."""
    repo, env = clone
    res = _run("bash bench/gpu/pack.sh", repo, env)
    assert res.returncode != 0 and len(res.stderr.strip().splitlines()) == 1
    assert "dvc repro manifests" in res.stderr


def test_pack_refuses_a_carry_over_the_cap(clone):
    """A part that does not fit the cap together with the synced tree is named before any call is made."""
    repo, env = clone
    res = _run(".venv/bin/dvc repro manifests && bash bench/gpu/pack.sh", repo, {**env, "CARRY_MIB": "1"})
    assert res.returncode != 0
    assert re.search(r"\.whl/parts/p01.* exceed 1\.0 MiB", res.stderr)
