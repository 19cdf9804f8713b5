#!/bin/bash
# Two trees of rlvr side by side: bench_judge.py run alternately on this tree ("new") and on OTHER ("old", e.g. an
# export of an earlier commit: git archive <commit> rlvr bench | tar -x -C OTHER, or another checkout), each with its
# own PYTHONPATH, PAIRS times, REPEAT repeats per run, systems SYSTEMS (default rlvr,floor). Each tree runs its own
# bench script, or, with BENCH=new, both run this tree's (so an older tree is measured on systems its own bench
# lacks, e.g. SYSTEMS=rlvr,served,floor). Prints one summary line per run and writes each run's results to
# $OUT/pair_{new,old}_<i>.json (OUT default: a fresh temp dir, printed); bench/judge/pairs.py summarises them. A
# pair's two runs are minutes apart, so the machine's drift hits both alike: compare pair by pair. ARGS: more options
# of the bench, word-split (e.g. ARGS="--imports typing,datetime,random" with BENCH=new). Run as root from the
# repository root, e.g.
#   bash bench/judge/alternate.sh /tmp/old
#   BENCH=new SYSTEMS=rlvr,served,floor bash bench/judge/alternate.sh /work/main
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
    if [ "${BENCH:-own}" = new ]; then B=$ROOT/bench/judge/bench_judge.py; else B=$D/bench/judge/bench_judge.py; fi
    (cd "$D" && PYTHONPATH=$D "$HOSTPY" -P "$B" --workers 2 --repeat "${REPEAT:-3}" \
      --systems "${SYSTEMS:-rlvr,floor}" ${ARGS:-} --out "$OUT/pair_${t}_$i.json" 2>&1 | tail -1 | sed "s/^/$t $i /")
  done
done
