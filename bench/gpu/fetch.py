"""Download the GPU wheel set exactly as locked in ``bench/gpu/wheels.txt`` (and ``dvc_wheels.txt``): no resolution.

``resolve.py`` *computes* a lock (it walks requirements, so on another day it may pick newer releases); this script only
*reproduces* one: for every row ``name version sha256 filename`` it runs ``pip download --no-deps name==version`` for
CPython 3.12 / manylinux x86_64 with pip's hash-checking mode (``--require-hashes``: pip refuses a file whose sha256
differs from the row), then checks that the file name is the row's. Distributions published only as an sdist (e.g.
``antlr4-python3-runtime 4.9.3``) are locked as the sdist itself (``.tar.gz``), never as a wheel built here, whose hash
would change with every build; ``stage.sh install`` installs that sdist offline on the GPU machine.

    python bench/gpu/fetch.py --dest .whl [--lock bench/gpu/wheels.txt ...]

Raises ``SystemExit`` naming the row when pip fails (unavailable version, hash mismatch) or a file name differs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PLATFORMS = [
    "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_24_x86_64",
    "manylinux_2_26_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64",
    "manylinux_2_34_x86_64", "manylinux_2_35_x86_64", "manylinux_2_5_x86_64",
]


def read_lock(path: Path) -> list[tuple[str, str, str, str]]:
    """Rows ``(name, version, sha256, filename)`` of a lock file (``#`` lines skipped).

    Raises ``SystemExit`` naming the file and line when a row does not have four fields."""
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 4:
            raise SystemExit(f"{path}:{i}: expected 'name version sha256 filename', got {line!r}")
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
    """CLI: fetch every lock given (default: wheels.txt and dvc_wheels.txt beside this file)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=Path(".whl"))
    ap.add_argument("--lock", type=Path, action="append")
    a = ap.parse_args()
    locks = a.lock or [p for p in (HERE / "wheels.txt", HERE / "dvc_wheels.txt") if p.is_file()]
    rows = [r for lock in locks for r in read_lock(lock)]
    fetch(rows, a.dest)
    total = sum((a.dest / f).stat().st_size for *_, f in rows)
    print(f"{len(rows)} locked files, {total / 2**20:.1f} MiB, hashes verified -> {a.dest}")


if __name__ == "__main__":
    main()
