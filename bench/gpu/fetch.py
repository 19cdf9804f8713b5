"""Download the GPU wheel set exactly as locked in ``bench/gpu/wheels.txt`` (and ``dvc_wheels.txt``): no resolution.

``resolve.py`` *computes* a lock (it walks requirements, so on another day it may pick newer releases); this script only
*reproduces* one: for every row ``name version sha256 filename`` it runs ``pip download --no-deps name==version`` for
CPython 3.12 / manylinux x86_64 with pip's hash-checking mode (``--require-hashes``: pip refuses a file whose sha256
differs from the row), then checks that the file name is the row's. Distributions published only as an sdist (e.g.
``antlr4-python3-runtime 4.9.3``) are locked as the sdist itself (``.tar.gz``), never as a wheel built here, whose hash
would change with every build; ``stage.sh install`` installs that sdist offline on the GPU machine. Every row is
checked before anything is downloaded (:func:`row_problem`: exact pin, no local version label, no path or URL, a
target wheel tag); ``resolve.py --check`` checks the hashes against the index's published ones without downloading.

    python bench/gpu/fetch.py --dest .whl [--lock bench/gpu/wheels.txt ...]

By default ``wheels.txt``'s files go into ``DEST`` (what ``stage.sh split DEST ...`` packs) and ``dvc_wheels.txt``'s
into ``DEST/dvc`` (what ``dvc_setup.sh`` installs from, carried in ``.gpu/dvc``: docs/training/gpu.md); each
``--lock`` given goes into ``DEST`` itself.

Raises ``SystemExit`` naming the row when pip fails (unavailable version, hash mismatch) or a file name differs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

HERE = Path(__file__).resolve().parent
#: the default locks and the sub-folder of ``--dest`` each goes to (the GPU wheel set flat, dvc's set in ``dvc/``)
DEFAULT_LOCKS = (("wheels.txt", ""), ("dvc_wheels.txt", "dvc"))
PLATFORMS = [
    "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_24_x86_64",
    "manylinux_2_26_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64", "manylinux_2_35_x86_64", "manylinux_2_5_x86_64",
]

# every wheel tag pip accepts for the target (CPython 3.12, manylinux x86_64): cp312/abi3/pure-Python, PLATFORMS or any
TARGET_TAGS = frozenset(cpython_tags((3, 12), abis=["cp312"], platforms=PLATFORMS)) | frozenset(
    compatible_tags((3, 12), interpreter="cp312", platforms=PLATFORMS))


def row_problem(name: str, version: str, sha: str, filename: str) -> str | None:
    """Why a lock row is not a PyPI artefact pinned exactly, or ``None`` when it looks like one (offline checks).

    A row must be: a canonical project name; a PEP 440 version without a local label (``+...``: PyPI refuses such
    uploads, and PyPI is the only index the locks use, so a local label means a local build or another index); a
    64-digit lowercase hex sha256; a bare file name (no directory, no ``file:`` or other URL) that is a wheel or an
    ``.tar.gz`` sdist whose name and version are the row's; a wheel with a tag in :data:`TARGET_TAGS` (a plain
    ``linux_x86_64`` tag is what ``pip wheel`` writes for a binary wheel built here, and PyPI refuses it). A
    pure-Python wheel built here cannot be told apart by name: that is what ``resolve.py --check`` (the index's
    published sha256) is for."""
    if canonicalize_name(name) != name:
        return f"name {name!r} is not canonical ({canonicalize_name(name)!r})"
    try:
        v = Version(version)
    except InvalidVersion:
        return f"version {version!r} is not PEP 440"
    if v.local is not None:
        return f"version {version!r} has a local label: not a PyPI release (a local build or another index)"
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        return f"sha256 {sha!r} is not 64 lowercase hex digits"
    if any(c in filename for c in "/\\:") or filename.startswith("."):
        return f"file {filename!r} is a path or URL, not an index file name"
    try:
        if filename.endswith(".whl"):
            fname, fversion, _, tags = parse_wheel_filename(filename)
        elif filename.endswith(".tar.gz"):
            (fname, fversion), tags = parse_sdist_filename(filename), None
        else:
            return f"file {filename!r} is neither a wheel nor a .tar.gz sdist"
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion) as e:
        return f"file {filename!r}: {e}"
    if fname != name or fversion != v:
        return f"file {filename!r} is {fname} {fversion}, not the row's {name} {version}"
    if tags is not None and not tags & TARGET_TAGS:
        return (f"wheel {filename!r} has no tag for CPython 3.12 on manylinux x86_64 (a plain linux_* platform tag "
                "is a wheel built locally)")
    return None


def read_lock(path: Path) -> list[tuple[str, str, str, str]]:
    """Rows ``(name, version, sha256, filename)`` of a lock file (``#`` lines skipped), each checked by
    :func:`row_problem`.

    Raises ``SystemExit`` naming the file and line when a row does not have four fields or is not an index artefact
    pinned exactly, or when a package has two rows (two versions stop the offline install)."""
    rows, seen = [], {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 4:
            raise SystemExit(f"{path}:{i}: expected 'name version sha256 filename', got {line!r}")
        problem = row_problem(*parts)
        if problem:
            raise SystemExit(f"{path}:{i}: {problem}")
        if parts[0] in seen:
            raise SystemExit(f"{path}:{i}: {parts[0]} already locked on line {seen[parts[0]]}")
        seen[parts[0]] = i
        rows.append((parts[0], parts[1], parts[2], parts[3]))
    return rows


def fetch(rows: list[tuple[str, str, str, str]], dest: Path) -> None:
    """Download every row into ``dest`` (skipping files already there with the right hash), hash-checked by pip."""
    dest.mkdir(parents=True, exist_ok=True)
    import hashlib

    def ok(p: Path, sha: str) -> bool:
        return p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest() == sha

    todo = [r for r in rows if not ok(dest / r[3], r[2])]
    wheels = [r for r in todo if r[3].endswith(".whl")]
    sdists = [r for r in todo if not r[3].endswith(".whl")]
    for group, binary in ((wheels, ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
                                    *[a for p in PLATFORMS for a in ("--platform", p)]]),
                          (sdists, ["--no-binary=:all:"])):
        if not group:
            continue
        req = dest / ".lock-requirements.txt"
        req.write_text("".join(f"{n}=={v} --hash=sha256:{s}\n" for n, v, s, _ in group), encoding="utf-8")
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes", *binary,
               "-d", str(dest), "-r", str(req)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        req.unlink()
        if res.returncode:
            raise SystemExit(f"pip download of the locked set failed:\n{res.stderr[-3000:]}")
    missing = [f for _, _, s, f in rows if not ok(dest / f, s)]
    if missing:
        raise SystemExit(f"{dest}: after download these locked files are missing or differ: {', '.join(missing)}")


def main() -> None:
    """CLI: fetch every lock given into DEST (default: wheels.txt into DEST, dvc_wheels.txt into DEST/dvc)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=Path(".whl"))
    ap.add_argument("--lock", type=Path, action="append")
    a = ap.parse_args()
    targets = [(lock, a.dest) for lock in a.lock] if a.lock else [
        (HERE / lock, a.dest / sub) for lock, sub in DEFAULT_LOCKS if (HERE / lock).is_file()]
    for lock, dest in targets:
        rows = read_lock(lock)
        fetch(rows, dest)
        total = sum((dest / f).stat().st_size for *_, f in rows)
        print(f"{lock.name}: {len(rows)} locked files, {total / 2**20:.1f} MiB, hashes verified -> {dest}")


if __name__ == "__main__":
    main()
