#!/usr/bin/env bash
# Give the judge sandbox's interpreter the libraries benchmark programs import (rlvr.judge.preflight.SANDBOX_MODULES:
# sortedcontainers, numpy): without one, every correct program importing it is judged runtime_error (the 2026-11-28
# rehearsal: the GPU image's python3 lacked sortedcontainers). Run from the repository root (bench/gpu/run_gpu.sh does):
#
#   RLVR_SANDBOX_SITE=$(bash bench/gpu/sandbox_site.sh) || exit 1
#
# Each module the interpreter (rlvr.judge.sandbox.bwrap.sandbox_python: RLVR_SANDBOX_PYTHON, /usr/bin/python3 as
# root) cannot import, with the folders already in RLVR_SANDBOX_SITE, goes into $SANDBOX_SITE (/opt/rlvr-sandbox-site;
# not under /root, mode 700, nor /tmp, which the sandbox replaces): unpacked from its Debian .deb
# (python3-<module>_*.deb in .gpu/, .whl/deb/ or bench/gpu/; pure Python, any python3) or wheel (<module>-*.whl in
# .gpu/ or .whl/), else copied from $PY's own (python3; numpy: the image has it) when both are the same Python
# version. Prints the RLVR_SANDBOX_SITE to use (empty: none needed); exits 1 with one line on stderr naming the
# module when one is still missing. Environment: PY, SANDBOX_SITE, RLVR_SANDBOX_SITE, RLVR_SANDBOX_PYTHON.
set -uo pipefail
PY="${PY:-python3}"
SANDBOX_SITE="${SANDBOX_SITE:-/opt/rlvr-sandbox-site}"
read -r sbpy mods < <($PY -c "from rlvr.judge.sandbox.bwrap import sandbox_python as p
from rlvr.judge.preflight import SANDBOX_MODULES as m; print(p(), *m)" 2>/dev/null)
if [ -z "${mods:-}" ]; then
  echo "sandbox_site.sh: $PY cannot import rlvr (run from the repository root, rlvr's dependencies on PYTHONPATH)" >&2
  exit 1
fi
sbpath="${RLVR_SANDBOX_SITE:+$RLVR_SANDBOX_SITE:}$SANDBOX_SITE"
for m in $mods; do
  env -i PYTHONPATH="$sbpath" "$sbpy" -s -c "import $m" >/dev/null 2>&1 && continue
  mkdir -p "$SANDBOX_SITE"
  deb=$(ls .gpu/python3-"$m"_*.deb .whl/deb/python3-"$m"_*.deb bench/gpu/python3-"$m"_*.deb 2>/dev/null | head -1)
  whl=$(ls .gpu/"$m"-*.whl .whl/"$m"-*.whl 2>/dev/null | head -1)
  {  # stdout carries only the answer
    if [ -n "$deb" ]; then
      tmp=$(mktemp -d) && dpkg -x "$deb" "$tmp" && cp -r "$tmp"/usr/lib/python3/dist-packages/. "$SANDBOX_SITE"/
      rm -rf "$tmp"; echo "sandbox_site.sh: $m from $deb into $SANDBOX_SITE"
    elif [ -n "$whl" ]; then $PY -m zipfile -e "$whl" "$SANDBOX_SITE" && echo "sandbox_site.sh: $m from $whl"
    elif src=$($PY -c "import os, $m; print(os.path.dirname($m.__file__))" 2>/dev/null) && \
        [ "$($PY -c 'import sys; print(sys.version_info[:2])')" = "$("$sbpy" -c 'import sys; print(sys.version_info[:2])')" ]; then
      cp -r "$src" "$SANDBOX_SITE"/ && { [ ! -d "$src.libs" ] || cp -r "$src.libs" "$SANDBOX_SITE"/; } &&
        echo "sandbox_site.sh: $m copied from $src"
    fi
  } >&2
  chmod -R a+rX "$SANDBOX_SITE"
  if ! env -i PYTHONPATH="$sbpath" "$sbpy" -s -c "import $m" >/dev/null 2>&1; then
    echo "sandbox_site.sh: the sandbox's interpreter $sbpy cannot import $m: put python3-${m}_*.deb (apt-get download" \
      "python3-$m) or a $m wheel in .gpu/, or set RLVR_SANDBOX_SITE to a folder holding it" >&2; exit 1
  fi
done
if [ -d "$SANDBOX_SITE" ]; then echo "$sbpath"; else echo "${RLVR_SANDBOX_SITE:-}"; fi
