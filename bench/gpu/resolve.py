"""Compute the wheel set a GPU machine without network lacks for the GPU suite, and write ``wheels.txt``.

A small offline-aware resolver: starting from the top requirements (:data:`TOP`), it downloads each missing
distribution with ``pip download --no-deps --only-binary=:all:`` for CPython 3.12 / manylinux x86_64, reads its
``Requires-Dist`` (markers evaluated for that target; extras only where requested), and recurses. A requirement is
taken as met when the machine already has the package (``machine_pkgs.txt``: names as ``pip list`` prints them, one
per line or space separated), unless the package is in :data:`OVERRIDE` (carried at a pinned version because the
machine's version is outside a pin, e.g. verl 0.9.1's ``transformers<5.11``). :data:`SKIP` lists what is optional at
run time for this suite (video, extra kernel packages, trackers) and is never carried.

    python bench/gpu/resolve.py --dest .whl --machine bench/gpu/machine_pkgs.txt --out bench/gpu/wheels.txt

``wheels.txt`` rows: ``name version sha256 filename`` (sha256 of the wheel file as downloaded). Needs ``pip`` and
``packaging`` here, and the package index.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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
ENV = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
       "platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux",
       "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix"}


def machine_packages(path: Path) -> set[str]:
    """Canonical names of the packages the GPU machine already has (whitespace-separated names in ``path``)."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]
    return {canonicalize_name(x) for ln in lines for x in ln.split()}


def download(req: str, dest: Path) -> Path:
    """``pip download --no-deps`` one requirement for cp312 manylinux x86_64 into ``dest``; returns the wheel path.

    Raises ``RuntimeError`` with pip's output when no wheel matches."""
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           "3.12", "--implementation", "cp", *[a for p in PLATFORMS for a in ("--platform", p)], "-d", str(dest), req]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:  # sdist only (pure Python, e.g. antlr4-python3-runtime 4.9.3): build the wheel here
        res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), req],
                             capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"pip download/wheel {req} failed:\n{res.stderr[-2000:]}")
    name = canonicalize_name(Requirement(req).name)
    new = [p for p in set(dest.glob("*.whl")) - before] or [
        p for p in dest.glob("*.whl") if canonicalize_name(p.name.split("-")[0]) == name]
    return max(new, key=lambda p: p.stat().st_mtime)


def requires(wheel: Path, extras: set[str]) -> list[Requirement]:
    """The wheel's ``Requires-Dist`` that apply on the target (markers evaluated; ``extra`` only for ``extras``)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode("utf-8").splitlines()
    out = []
    for line in lines:
        if not line.startswith("Requires-Dist:"):
            continue
        r = Requirement(line.split(":", 1)[1].strip())
        if r.marker is None or any(r.marker.evaluate({**ENV, "extra": e}) for e in (extras or {""})):
            out.append(r)
    return out


def resolve(dest: Path, have: set[str], top: list[str] | None = None) -> list[tuple[str, str, Path]]:
    """Walk the requirements from ``top`` (default :data:`TOP`); returns ``(name, version, wheel)`` for every
    carried wheel."""
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
        version = wheel.name.split("-")[1]
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


def main() -> None:
    """CLI: resolve, then write ``--out`` (``name version sha256 filename`` rows) and print the total size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=Path(".whl"))
    ap.add_argument("--machine", type=Path, default=Path(__file__).with_name("machine_pkgs.txt"))
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("wheels.txt"))
    ap.add_argument("--top", nargs="*", help="top requirements instead of TOP (e.g. dvc==3.67.1 for dvc_wheels.txt)")
    ap.add_argument("--have-lock", type=Path, action="append", default=[],
                    help="a lock whose packages count as present (e.g. wheels.txt when resolving dvc_wheels.txt)")
    a = ap.parse_args()
    have = machine_packages(a.machine)
    for lock in a.have_lock:
        have |= {canonicalize_name(ln.split()[0]) for ln in lock.read_text(encoding="utf-8").splitlines()
                 if ln.strip() and not ln.startswith("#")}
    rows = resolve(a.dest, have, a.top)
    lines = [f"{n} {v} {sha256(w)} {w.name}" for n, v, w in rows]
    a.out.write_text("# name version sha256 filename (bench/gpu/resolve.py)\n" + "\n".join(lines) + "\n",
                     encoding="utf-8")
    total = sum(w.stat().st_size for _, _, w in rows)
    print(f"{len(rows)} wheels, {total / 2**20:.1f} MiB -> {a.out}")
    for n, v, w in sorted(rows, key=lambda r: -r[2].stat().st_size)[:15]:
        print(f"  {w.stat().st_size / 2**20:7.1f} MiB {n} {v}")


if __name__ == "__main__":
    main()
