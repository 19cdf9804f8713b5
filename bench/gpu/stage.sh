#!/usr/bin/env bash
# Stage the GPU suite's wheels (bench/gpu/wheels.txt) onto a machine without network whose file transfer is capped
# (e.g. 64 MiB per call): split here, receive part by part there, then join, verify and install there.
#
#   here:  bash bench/gpu/stage.sh split WHEEL_DIR PARTS_DIR [PART_MIB]   # PARTS_DIR/p01 ... each <= PART_MIB (50)
#   there: bash bench/gpu/stage.sh receive PARTS_DIR/pNN                   # copy one part into $STAGE (/root/wheels)
#   there: bash bench/gpu/stage.sh install                                 # join, sha256-check, pip install to $SITE
#
# Large wheels are cut with `split -b` into pieces named <wheel>.part-NN and joined with `cat` in name order. The
# install is offline (`pip install --no-index --no-deps --target $SITE`, default /root/site); put $SITE first on
# PYTHONPATH. Every wheel's sha256 is checked against wheels.txt before installing.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STAGE="${STAGE:-/root/wheels}"
SITE="${SITE:-/root/site}"
cmd="${1:?usage: stage.sh split|receive|install ...}"
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
install)
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
