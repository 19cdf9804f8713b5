#!/bin/bash
# Two trees of rlvr side by side: bench_judge.py --systems rlvr,floor run alternately on this tree ("new") and on
# OTHER ("old", e.g. an export of an earlier commit: git archive <commit> rlvr bench | tar -x -C OTHER), each from its
# own directory with its own PYTHONPATH, PAIRS times, REPEAT repeats per run. Prints one summary line per run and
# writes each run's results to $OUT/pair_{new,old}_<i>.json (OUT default: a fresh temp dir, printed). A pair's two runs
# are minutes apart, so the machine's drift hits both alike: compare pair by pair. Run as root from the repository
# root, e.g.
#   bash bench/judge/alternate.sh /tmp/old
# Needs bubblewrap (RLVR_BWRAP or bwrap on PATH) and rlvr's dependencies importable by HOSTPY (default: python3).
set -euo pipefail
OTHER=$(cd "$1" && pwd)
HOSTPY=${HOSTPY:-python3}
case $HOSTPY in */*) HOSTPY=$(realpath -s "$HOSTPY") ;; esac  # each run starts in its own tree
OUT=${OUT:-$(mktemp -d)}
echo "results in $OUT"
ROOT=$PWD
for i in $(seq "${PAIRS:-3}"); do
  for t in new old; do
    if [ "$t" = new ]; then D=$ROOT; else D=$OTHER; fi
    (cd "$D" && PYTHONPATH=$D "$HOSTPY" -P bench/judge/bench_judge.py --workers 2 --repeat "${REPEAT:-3}" \
      --systems rlvr,floor --out "$OUT/pair_${t}_$i.json" 2>&1 | tail -1 | sed "s/^/$t $i /")
  done
done
