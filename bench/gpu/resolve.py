"""Compute the wheel set a GPU machine without network lacks for the GPU suite, and write ``wheels.txt``; or check
a committed lock against the package index (``--check``).

A small offline-aware resolver: starting from the top requirements (:data:`TOP`), it downloads each missing
distribution from PyPI with ``pip download --no-deps --only-binary=:all:`` for CPython 3.12 / manylinux x86_64, reads
its ``Requires-Dist`` (markers evaluated for that target; extras only where requested), and recurses. A requirement is
taken as met when the machine already has the package (``machine_pkgs.txt``: ``name`` or ``name==version`` per line,
as ``pip list --format=freeze`` prints them), unless the package is in :data:`OVERRIDE` (carried at a pinned version
because the machine's version is outside a pin, e.g. verl 0.9.1's ``transformers<5.11``). :data:`SKIP` lists what is
optional at run time for this suite (video, extra kernel packages, trackers) and is never carried.

Every row is an artefact of the index, never something built here: a package published without a matching wheel
(e.g. ``antlr4-python3-runtime 4.9.3``) is locked as its sdist as downloaded (``pip download --no-binary=:all:``;
``stage.sh install`` builds it offline on the GPU machine), because a wheel built here would have a hash that changes
with every build and exists nowhere else. pip runs with the configuration files and the ``PIP_*`` index variables of
this machine switched off (a local ``find-links`` folder or mirror could otherwise hand over a locally built file) and
``--index-url`` :data:`INDEX`, and every row's sha256 must equal the one the index publishes for that file
(:func:`index_hashes`), else the run stops naming the file.

    python bench/gpu/resolve.py --dest .whl --machine bench/gpu/machine_pkgs.txt --out bench/gpu/wheels.txt
    python bench/gpu/resolve.py --check bench/gpu/wheels.txt bench/gpu/dvc_wheels.txt   # metadata only, no download

``wheels.txt`` rows: ``name version sha256 filename`` (the index's sha256 of the file). ``--check`` downloads no
distribution: for every row it asks the index's JSON API which files that release has and their sha256, and fails
(exit 1, one line per bad row) unless the row's file is one of them with the row's hash. Needs ``pip`` and
``packaging`` here, and the package index.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

TOP = [
    "vllm==0.26.0",
    "verl==0.9.1",
    "ray==2.60.0",
    "transformers==5.10.4",
    "tokenizers==0.22.2",
    "hydra-core",
    "cachetools",
    "pydantic>=2.12",
    "pydantic-settings",
    "datasets==5.2.*",
    "tensordict==0.10.0",
    "TransferQueue>=0.1.10",  # verl[verl-core]: verl 0.9.1's main_ppo (TaskRunnerV1) imports transfer_queue
    "trl==1.16.0",  # the local engine's trainers, for `pytest -m gpu tests/train/test_train_gpu.py` on the GPU machine
    "pycountry",  # mistral-common's pydantic-extra-types[pycountry] (transformers' MistralCommonBackend)
    # vllm 0.26.0 pins apache-tvm-ffi==0.1.10 (for flashinfer, not carried) but xgrammar 0.2.8 (imported by vLLM's
    # structured-output manager at engine start) needs >= 0.1.11: xgrammar's need wins (TOP is walked first)
    "apache-tvm-ffi>=0.1.11",
]
# carried even though the machine has a version: the machine's is outside a pin (verl 0.9.1: transformers<5.11,
# which needs tokenizers<=0.23.0; the machine has transformers 5.17 and tokenizers 0.23.2)
OVERRIDE = {"transformers", "tokenizers"}
# optional at run time for this suite; never carried (see docs/training/gpu.md)
SKIP = {
    "torch", "torchaudio", "torchvision", "torchcodec", "pynvvideocodec", "tilelang",
    "humming-kernels", "tokenspeed-mla", "quack-kernels", "nvidia-cutlass-dsl", "flashinfer-python",
    "fastsafetensors", "nvidia-cudnn-frontend", "nvtx", "wandb", "tensorboard", "triton", "numba",
    "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13",
}
# extras never walked: ray[default] (dashboard, metrics agent) is not needed by ray.init() on one node
NO_EXTRAS = {"ray"}
PLATFORMS = [
    "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_24_x86_64",
    "manylinux_2_27_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64",
    "manylinux_2_35_x86_64", "manylinux_2_5_x86_64",
]
# the only index rows come from: fetch.py downloads with pip's default index, which is this one
INDEX = "https://pypi.org"
# pip settings (environment) that would add or replace the index; dropped for every pip run here
PIP_INDEX_VARS = {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_CONSTRAINT"}
ENV = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
       "platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux",
       "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix"}


def machine_packages(path: Path) -> set[str]:
    """Canonical names of the packages the GPU machine already has (``name`` or ``name==version`` tokens in ``path``,
    ``#`` lines skipped)."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]
    return {canonicalize_name(x.split("==")[0]) for ln in lines for x in ln.split()}


def pip_env() -> dict[str, str]:
    """This process's environment without the ``PIP_*`` variables that choose indexes, and with no pip configuration
    file (``PIP_CONFIG_FILE=os.devnull``): pip then sees only :data:`INDEX` (certificate and timeout settings stay)."""
    env = {k: v for k, v in os.environ.items() if k not in PIP_INDEX_VARS}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def index_hashes(name: str, version: str) -> dict[str, str]:
    """``{filename: sha256}`` of every file the index publishes for ``name`` ``version`` (metadata only).

    Asks PyPI's JSON API (``/pypi/<name>/<version>/json``, field ``urls[].digests.sha256``); where that answers 404
    (some proxies serve only the project-level endpoints) it asks the index's own JSON listing (PEP 691,
    ``/simple/<name>/``, ``files[].hashes.sha256``) and keeps that version's files. Raises ``urllib.error.URLError``
    when the index cannot be reached."""
    project = canonicalize_name(name)
    try:
        with urllib.request.urlopen(f"{INDEX}/pypi/{project}/{version}/json", timeout=60) as r:
            return {u["filename"]: u["digests"]["sha256"] for u in json.load(r)["urls"]}
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
    accept = {"Accept": "application/vnd.pypi.simple.v1+json"}
    with urllib.request.urlopen(urllib.request.Request(f"{INDEX}/simple/{project}/", headers=accept), timeout=60) as r:
        files = json.load(r)["files"]
    return {f["filename"]: f["hashes"]["sha256"] for f in files
            if "sha256" in f.get("hashes", {}) and _same_version(file_version(f["filename"]), version)}


def _same_version(a: str | None, b: str) -> bool:
    """Whether two version strings name the same release (PEP 440 normalised; unparsable ones compared as text)."""
    try:
        return a is not None and Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def file_version(filename: str) -> str | None:
    """The version a wheel or sdist file name carries (as written, not normalised), or ``None`` for another file."""
    if filename.endswith(".whl"):
        return filename.split("-")[1]
    for ext in (".tar.gz", ".zip"):
        if filename.endswith(ext):
            return filename[: -len(ext)].rsplit("-", 1)[-1]
    return None


def download(req: str, dest: Path) -> Path:
    """``pip download --no-deps`` one requirement from :data:`INDEX` into ``dest``; returns the file's path.

    A wheel for cp312 manylinux x86_64 when the index has one, else the release's sdist as published (never a wheel
    built here: its hash would change with every build). Raises ``RuntimeError`` with pip's output when neither
    exists."""
    before = set(dest.iterdir())
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--index-url", f"{INDEX}/simple",
            "-d", str(dest)]
    wheel = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
             *[a for p in PLATFORMS for a in ("--platform", p)]]
    res = subprocess.run([*base, *wheel, req], capture_output=True, text=True, env=pip_env())
    if res.returncode:  # no wheel for the target (pure-Python sdist only, e.g. antlr4-python3-runtime 4.9.3)
        res = subprocess.run([*base, "--no-binary=:all:", req], capture_output=True, text=True, env=pip_env())
    if res.returncode:
        raise RuntimeError(f"pip download {req} (wheel, then sdist) failed:\n{res.stderr[-2000:]}")
    name = canonicalize_name(Requirement(req).name)
    new = [p for p in set(dest.iterdir()) - before if file_version(p.name)] or [
        p for p in dest.iterdir() if file_version(p.name) and canonicalize_name(p.name.split("-")[0]) == name]
    return max(new, key=lambda p: p.stat().st_mtime)


def _metadata_lines(dist: Path) -> list[str]:
    """``Requires-Dist`` source lines of a wheel (``*.dist-info/METADATA``) or sdist.

    An sdist's top ``PKG-INFO`` is used when it lists ``Requires-Dist`` (metadata 2.x); older sdists (metadata 1.x,
    e.g. antlr4-python3-runtime 4.9.3) carry their dependencies only in setuptools' ``*.egg-info/requires.txt``
    (sections ``[extra]``, ``[:marker]``, ``[extra:marker]``), which is turned into ``Requires-Dist`` lines. Raises
    ``RuntimeError`` for an sdist with neither: its dependencies would be unknown."""
    if dist.name.endswith(".whl"):
        with zipfile.ZipFile(dist) as z:
            meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
            return z.read(meta).decode("utf-8").splitlines()
    if dist.name.endswith(".zip"):
        z = zipfile.ZipFile(dist)
        names, read = z.namelist(), (lambda n: z.read(n).decode("utf-8"))
    else:
        t = tarfile.open(dist)
        names, read = t.getnames(), (lambda n: t.extractfile(n).read().decode("utf-8"))
    pkg_info = min((n for n in names if n.count("/") == 1 and n.endswith("/PKG-INFO")), default=None)
    lines = read(pkg_info).splitlines() if pkg_info else []
    meta_version = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Metadata-Version:")), "1.0")
    dynamic = any(ln.startswith("Dynamic:") and "requires-dist" in ln.lower() for ln in lines)
    if any(ln.startswith("Requires-Dist:") for ln in lines) or (
            tuple(map(int, meta_version.split(".")[:2])) >= (2, 2) and not dynamic):
        return lines  # metadata 2.2+: Requires-Dist in PKG-INFO is binding unless declared Dynamic
    reqs = [n for n in names if n.endswith(".egg-info/requires.txt")]
    if not reqs:
        if not any(n.endswith(".egg-info/PKG-INFO") for n in names):
            raise RuntimeError(f"{dist.name}: dependencies unknown (no binding Requires-Dist, no egg-info)")
        return []  # setuptools writes no requires.txt for a package without dependencies
    out, extra, marker = [], "", ""
    for raw in read(min(reqs, key=len)).splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("["):
            extra, _, marker = line.strip("[]").partition(":")
            continue
        conds = [f"({marker})"] if marker else []
        conds += [f'extra == "{extra}"'] if extra else []
        out.append(f"Requires-Dist: {line}" + (f" ; {' and '.join(conds)}" if conds else ""))
    return out


def requires(dist: Path, extras: set[str]) -> list[Requirement]:
    """The distribution's ``Requires-Dist`` that apply on the target (markers evaluated; ``extra`` only for
    ``extras``)."""
    out = []
    for line in _metadata_lines(dist):
        if not line.startswith("Requires-Dist:"):
            continue
        r = Requirement(line.split(":", 1)[1].strip())
        if r.marker is None or any(r.marker.evaluate({**ENV, "extra": e}) for e in (extras or {""})):
            out.append(r)
    return out


def resolve(dest: Path, have: set[str], top: list[str] | None = None) -> list[tuple[str, str, Path]]:
    """Walk the requirements from ``top`` (default :data:`TOP`); returns ``(name, version, file)`` for every
    carried wheel or sdist."""
    dest.mkdir(parents=True, exist_ok=True)
    todo = [Requirement(r) for r in (top or TOP)]
    done: dict[str, tuple[str, str, Path]] = {}
    extras_done: dict[str, set[str]] = {}
    while todo:
        r = todo.pop(0)
        name = canonicalize_name(r.name)
        if name in SKIP or (name in have and name not in OVERRIDE):
            continue
        if name in done:  # seen: walk only the extras not walked yet (e.g. pydantic-extra-types[pycountry])
            new = set() if name in NO_EXTRAS else set(r.extras) - extras_done[name]
            if new:
                extras_done[name] |= new
                todo += [q for q in requires(done[name][2], new) if q.marker is not None]
            continue
        spec = f"{r.name}{r.specifier}" if str(r.specifier) else r.name
        wheel = download(spec, dest)
        version = file_version(wheel.name)
        done[name] = (name, version, wheel)
        extras_done[name] = set(r.extras)
        todo += requires(wheel, set(r.extras))
    return sorted(done.values())


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_lock(path: Path) -> list[tuple[str, str, str, str]]:
    """The rows of a lock, read and validated by ``fetch.py`` (the one reader of the format)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fetch", Path(__file__).with_name("fetch.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.read_lock(path)


def check(rows: list[tuple[str, str, str, str]], lookup=index_hashes) -> list[str]:
    """One line per row that is not an index artefact: the index has no file of that name for the row's release,
    or publishes another sha256 for it. ``lookup(name, version)`` gives ``{filename: sha256}`` (default: the index's
    JSON API, metadata only); an unreachable index raises (``urllib.error.URLError``) rather than passing."""
    bad = []
    for name, version, sha, filename in rows:
        files = lookup(name, version)
        if filename not in files:
            bad.append(f"{name} {version}: {filename} is not on the index (it has: {', '.join(sorted(files)) or '-'})")
        elif files[filename] != sha:
            bad.append(f"{name} {version}: {filename} sha256 {sha} but the index publishes {files[filename]}")
    return bad


def main() -> None:
    """CLI: ``--check LOCK ...`` verifies locks against the index without downloading or rewriting them; otherwise
    resolve, then write ``--out`` (``name version sha256 filename`` rows, the index's sha256) and print the size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", type=Path, nargs="+", metavar="LOCK",
                    help="only verify these locks: every row's file is on the index with that sha256 (exit 1 if not)")
    ap.add_argument("--dest", type=Path, default=Path(".whl"))
    ap.add_argument("--machine", type=Path, default=Path(__file__).with_name("machine_pkgs.txt"))
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("wheels.txt"))
    ap.add_argument("--top", nargs="*", help="top requirements instead of TOP (e.g. dvc==3.67.1 for dvc_wheels.txt)")
    ap.add_argument("--have-lock", type=Path, action="append", default=[],
                    help="a lock whose packages count as present (e.g. wheels.txt when resolving dvc_wheels.txt)")
    a = ap.parse_args()
    if a.check:
        failed = 0
        for lock in a.check:
            rows = read_lock(lock)
            bad = check(rows)
            failed += len(bad)
            for line in bad:
                print(f"{lock}: {line}")
            print(f"{lock}: {len(rows) - len(bad)}/{len(rows)} rows are the index's files with the index's sha256")
        sys.exit(1 if failed else 0)
    have = machine_packages(a.machine)
    for lock in a.have_lock:
        have |= {canonicalize_name(ln.split()[0]) for ln in lock.read_text(encoding="utf-8").splitlines()
                 if ln.strip() and not ln.startswith("#")}
    rows = resolve(a.dest, have, a.top)
    lines = []
    for n, v, w in rows:  # the row's hash is the index's; the downloaded file must match it
        published = index_hashes(n, v).get(w.name)
        if published != sha256(w):
            raise SystemExit(f"{w.name}: sha256 {sha256(w)} is not the index's ({published}): not locked")
        lines.append(f"{n} {v} {published} {w.name}")
    a.out.write_text("# name version sha256 filename (bench/gpu/resolve.py)\n" + "\n".join(lines) + "\n",
                     encoding="utf-8")
    total = sum(w.stat().st_size for _, _, w in rows)
    print(f"{len(rows)} files, {total / 2**20:.1f} MiB -> {a.out}")
    for n, v, w in sorted(rows, key=lambda r: -r[2].stat().st_size)[:15]:
        print(f"  {w.stat().st_size / 2**20:7.1f} MiB {n} {v}")


if __name__ == "__main__":
    main()
