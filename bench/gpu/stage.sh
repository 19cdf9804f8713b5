#!/usr/bin/env bash
# Stage the GPU suite's wheels (bench/gpu/wheels.txt) onto a machine without network whose file transfer is capped
# (e.g. 64 MiB per call): split here, receive part by part there, then join, verify and install there.
#
#   here:  bash bench/gpu/stage.sh split WHEEL_DIR PARTS_DIR [PART_MIB]   # PARTS_DIR/p01 ... each <= PART_MIB (50)
#   there: bash bench/gpu/stage.sh receive PARTS_DIR/pNN                   # copy one part into $STAGE (/root/wheels)
#   there: bash bench/gpu/stage.sh install                                 # join, sha256-check, pip install to $SITE
#   there: bash bench/gpu/stage.sh check-image                             # (run by install first) the image is the one
#                                                                          #   the lock was resolved for
#
# Large wheels are cut with `split -b` into pieces named <wheel>.part-NN and joined with `cat` in name order. The
# install is offline (`pip install --no-index --no-deps --target $SITE`, default /root/site); put $SITE first on
# PYTHONPATH. Every wheel's sha256 is checked against wheels.txt before installing. Before that, `check-image` stops
# with one line naming the package when the machine's python3 is not CPython $TARGET_PY (3.12: the wheels are cp312)
# or its image (PYTHONPATH unset) has another version of a package machine_pkgs.txt pins (`name==version`): the lock
# carries only what that image lacks, so another image needs a re-lock (docs/training/gpu.md). Unpinned names that
# are missing only warn (their versions were never recorded; see machine_pkgs.txt).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STAGE="${STAGE:-/root/wheels}"
SITE="${SITE:-/root/site}"
TARGET_PY="${TARGET_PY:-3.12}"
cmd="${1:?usage: stage.sh split|receive|install|check-image ...}"
case "$cmd" in
split)
  src="${2:?wheel dir}"; out="${3:?parts dir}"; mib="${4:-50}"
  rm -rf "$out"; mkdir -p "$out/pieces"
  grep -v '^#' "$HERE/wheels.txt" | while read -r name version sha file; do
    size=$(stat -c %s "$src/$file")
    if (( size > mib * 1048576 )); then
      split -b "${mib}M" -d -a 2 "$src/$file" "$out/pieces/$file.part-"
    else
      cp "$src/$file" "$out/pieces/$file"
    fi
  done
  # first-fit-decreasing packing of the pieces into parts of <= mib MiB
  python3 - "$out" "$mib" <<'PY'
import os, sys
out, cap = sys.argv[1], int(sys.argv[2]) * 1048576
pieces = sorted(((os.path.getsize(os.path.join(out, "pieces", f)), f) for f in os.listdir(os.path.join(out, "pieces"))),
                reverse=True)
bins: list[list] = []
for size, f in pieces:
    for b in bins:
        if b[0] + size <= cap:
            b[0] += size; b[1].append(f); break
    else:
        bins.append([size, [f]])
for i, (size, files) in enumerate(bins, 1):
    d = os.path.join(out, f"p{i:02d}"); os.makedirs(d)
    for f in files:
        os.rename(os.path.join(out, "pieces", f), os.path.join(d, f))
    print(f"p{i:02d}: {size / 1048576:.1f} MiB, {len(files)} files")
os.rmdir(os.path.join(out, "pieces"))
PY
  ;;
receive)
  part="${2:?part dir}"; mkdir -p "$STAGE"; cp "$part"/* "$STAGE"/
  echo "received $(ls "$part" | wc -l) files; $STAGE holds $(du -sm "$STAGE" | cut -f1) MiB"
  ;;
check-image)
  env -u PYTHONPATH python3 - "$HERE/machine_pkgs.txt" "$TARGET_PY" <<'PY'
import importlib.metadata as md
import sys

try:
    from packaging.specifiers import SpecifierSet
except ImportError:  # pip vendors packaging
    from pip._vendor.packaging.specifiers import SpecifierSet
pkgs, target = sys.argv[1], sys.argv[2]
have_py = "%d.%d" % sys.version_info[:2]
if have_py != target:
    sys.exit(f"stage.sh: python3 is {sys.version.split()[0]}, the lock (wheels.txt) is for CPython {target}")
redo = "regenerate machine_pkgs.txt with `pip list --format=freeze` here and re-run resolve.py (docs/training/gpu.md)"
missing = []
for line in open(pkgs, encoding="utf-8"):
    if line.startswith("#") or not line.strip():
        continue
    name, _, pin = line.strip().partition("==")
    try:
        version = md.version(name)
    except md.PackageNotFoundError:
        if pin:
            sys.exit(f"stage.sh: the image lacks {name} (machine_pkgs.txt pins {name}=={pin}); {redo}")
        missing.append(name)
        continue
    if pin and not SpecifierSet(f"=={pin}").contains(version, prereleases=True):
        sys.exit(f"stage.sh: the image has {name} {version}, machine_pkgs.txt pins {name}=={pin}; {redo}")
if missing:
    print(f"stage.sh: warning: not on this image (unpinned in machine_pkgs.txt): {' '.join(missing)}", file=sys.stderr)
print(f"image checked: CPython {have_py}, every pin in machine_pkgs.txt matches")
PY
  ;;
install)
  bash "$HERE/stage.sh" check-image
  cd "$STAGE"
  for first in *.part-00; do
    [ -e "$first" ] || continue
    whl="${first%.part-00}"; cat "$whl".part-* > "$whl"; rm -f "$whl".part-*
  done
  grep -v '^#' "$HERE/wheels.txt" | while read -r name version sha file; do
    echo "$sha  $file"
  done | sha256sum -c --quiet
  # sdists (locked as such, never as a wheel built elsewhere: fetch.py) build here offline with the machine's setuptools
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --no-build-isolation --upgrade \
    --target "$SITE" $(grep -v '^#' "$HERE/wheels.txt" | awk '{print $4}')
  echo "installed $(grep -vc '^#' "$HERE/wheels.txt") wheels into $SITE"
  ;;
*) echo "unknown command $cmd" >&2; exit 2 ;;
esac
