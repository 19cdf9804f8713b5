#!/usr/bin/env bash
# The CPU side of the GPU recipe (docs/training/gpu.md): everything the lent GPU machine needs, packed to fit its
# transfer cap. Run in the clone, after `.venv/bin/dvc repro manifests`:
#
#   bash bench/gpu/pack.sh
#
# 1. .whl/ (bench/gpu/wheels.txt) and .whl/dvc/ (dvc_wheels.txt): the locked wheels, hash-checked (fetch.py; files
#    already there with the right hash are not downloaded again; SKIP_FETCH=1 uses .whl as it is);
# 2. .whl/parts/pNN: the GPU wheels in parts of <= PART_MIB MiB (stage.sh split; large wheels cut in pieces);
# 3. .gpu/: what the first call carries: gov.tar.xz (data/governance + data/manifests, the data stages' outputs;
#    `xz -T0 -$XZ_LEVEL`: -9e took 12 min on 2 cores), dvc/ (dvc's wheels, for dvc_setup.sh) and the bubblewrap .deb
#    (BWRAP_DEB, else `apt-get download bubblewrap`) and python3-sortedcontainers' .deb (the sandbox lacks it there);
# 4. checks that each call's carry fits CARRY_MIB together with the synced tree (the files git tracks or does not
#    ignore: the device tool sends them on every call), and prints the calls.
#
# Stops with one line when the data stages have not run (`dvc repro manifests` first), a lock or download fails, or a
# carry would not fit. Environment: PART_MIB (46), CARRY_MIB (64), XZ_LEVEL (3), BWRAP_DEB (a bubblewrap .deb to copy),
# PYTHON (.venv/bin/python, else python3), SKIP_FETCH (0).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PART_MIB="${PART_MIB:-46}"; CARRY_MIB="${CARRY_MIB:-64}"; XZ_LEVEL="${XZ_LEVEL:-3}"
PYTHON="${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}"
die() { echo "pack.sh: $*" >&2; exit 1; }

for d in data/governance/problems data/manifests; do
  [ -d "$d" ] || die "$d is missing: run the data stages first (\`.venv/bin/dvc repro manifests\`, ~15 min on 2 cores)"
done
if [ -f dvc.lock ] && ! git diff --quiet -- dvc.lock 2>/dev/null; then
  echo "pack.sh: warning: dvc.lock differs from the commit (git diff dvc.lock): if governance or manifests changed," \
    "the data differ from the committed ones (under heavy load governance can drop a reference on a time limit):" \
    "\`git checkout dvc.lock\` and re-run \`dvc repro manifests\` on a quiet machine" >&2
fi
{ git check-ignore -q .gpu/x && git check-ignore -q .whl/x; } || die ".gpu/ and .whl/ must be ignored by git (.gitignore), or every call sends them"

[ "${SKIP_FETCH:-0}" = 1 ] || "$PYTHON" bench/gpu/fetch.py --dest .whl
bash bench/gpu/stage.sh split .whl .whl/parts "$PART_MIB"

mkdir -p .gpu
tar cf - data/governance data/manifests | xz -T0 "-$XZ_LEVEL" > .gpu/gov.tar.xz.tmp && mv .gpu/gov.tar.xz.tmp .gpu/gov.tar.xz
rm -rf .gpu/dvc && cp -r .whl/dvc .gpu/dvc
if [ -n "${BWRAP_DEB:-}" ]; then cp "$BWRAP_DEB" .gpu/
elif ! ls .gpu/bubblewrap_*.deb >/dev/null 2>&1; then (cd .gpu && apt-get download bubblewrap >/dev/null)
fi
ls .gpu/bubblewrap_*.deb >/dev/null 2>&1 || die "no bubblewrap .deb in .gpu/ (apt-get download bubblewrap, or BWRAP_DEB=...)"
# the judge sandbox's interpreter on the GPU image lacks sortedcontainers (LeetCode programs import it; the judge's
# preflight stops without it): run_gpu.sh's sandbox_site.sh unpacks this .deb for it (best effort here: a machine
# without apt-get names the step in the warning)
ls .gpu/python3-sortedcontainers_*.deb >/dev/null 2>&1 || (cd .gpu && apt-get download python3-sortedcontainers >/dev/null 2>&1) ||
  echo "pack.sh: warning: no python3-sortedcontainers .deb in .gpu/ (apt-get download python3-sortedcontainers)" >&2

# the synced tree: tracked files as they are in the working tree + untracked files git does not ignore
tree=$(git ls-files -z --cached --others --exclude-standard | "$PYTHON" -c '
import os, sys
print(sum(os.path.getsize(f) for f in sys.stdin.read().split("\0") if f and os.path.isfile(f)))')
"$PYTHON" - "$tree" "$CARRY_MIB" <<'PY'
import os, sys
tree, cap = int(sys.argv[1]), int(sys.argv[2]) * 2**20

def size(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)

mib = lambda n: f"{n / 2**20:.1f} MiB"
parts = sorted(p for p in os.listdir(".whl/parts") if p.startswith("p"))
calls = [(".gpu", size(".gpu"))] + [(f".whl/parts/{p}", size(f".whl/parts/{p}")) for p in parts]
print(f"synced tree {mib(tree)}; each call carries one of (limit {mib(cap)} with the tree):")
for i, (path, n) in enumerate(calls, 1):
    print(f"  call {i}: carry {path}: {mib(n)} -> {mib(tree + n)}")
over = [path for path, n in calls if tree + n > cap]
if over:
    sys.exit(f"pack.sh: {', '.join(over)} with the synced tree ({mib(tree)}) exceed {mib(cap)}: a smaller PART_MIB, "
             "or fewer untracked files in the tree")
PY
