#!/usr/bin/env bash
# Make a copy of this repository on the GPU machine runnable with `dvc repro` (issue: real scale, item 8). Run once in
# that copy (not in the device tool's synced working tree, which each call resets: dvc.lock and metrics/ are tracked),
# after bench/gpu/stage.sh install:
#
#   bash bench/gpu/dvc_setup.sh PROFILE SEEDS DVC_WHEEL_DIR [DATA_TAR]
#
# (docs/training/gpu.md: DVC_WHEEL_DIR = .gpu/dvc, DATA_TAR = .gpu/gov.tar.xz, both written by bench/gpu/pack.sh)
#
# 1. installs dvc from DVC_WHEEL_DIR into $SITE (/root/site), every file sha256-checked against bench/gpu/dvc_wheels.txt
#    (offline, --no-deps: the lock is complete against wheels.txt + the machine's packages);
# 2. DVC without Git (the copy has no .git): core.no_scm; cache.type hardlink,symlink (five 15 GB models would not fit
#    the disk twice), and `python` on PATH for the stages' commands;
# 3. params.yaml: `profile: PROFILE`, `seeds: [SEEDS]` (comma-separated), line-edited so the rest stays as committed;
# 4. DATA_TAR (a .tar.xz of data/governance + data/manifests made on the CPU machine from the committed dvc.lock's
#    outputs): unpacked, so the data stages, which do not track the profile (dvc.yaml), are up to date here;
# then prints `dvc status`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
profile="${1:?profile}"; seeds="${2:?seeds}"; wheels="${3:?dvc wheel dir}"; data="${4:-}"
SITE="${SITE:-/root/site}"
grep -v '^#' bench/gpu/dvc_wheels.txt | awk -v d="$wheels" '{print $3"  "d"/"$4}' | sha256sum -c --quiet
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
  $(grep -v '^#' bench/gpu/dvc_wheels.txt | awk -v d="$wheels" '{print d"/"$4}')
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
command -v python >/dev/null || ln -sf "$(command -v python3)" /usr/local/bin/python
printf '[core]\n    no_scm = true\n[cache]\n    type = "hardlink,symlink"\n' > .dvc/config.local
python3 - "$profile" "$seeds" <<'PY'
import re, sys
from pathlib import Path
p = Path("params.yaml"); s = p.read_text(encoding="utf-8")
s, n1 = re.subn(r"(?m)^profile:.*$", f"profile: {sys.argv[1]}", s)
s, n2 = re.subn(r"(?m)^seeds:(\n- .*)+", "seeds:" + "".join(f"\n- {x}" for x in sys.argv[2].split(",")), s)
assert n1 == 1 and n2 == 1, "params.yaml: no top-level profile/seeds to set"
p.write_text(s, encoding="utf-8")
PY
if [ -n "$data" ]; then tar xJf "$data" && dvc commit -f governance manifests; fi  # into the (hardlinked) cache: up to date, not "not in cache"
dvc version | head -3
dvc status
