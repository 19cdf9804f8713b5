#!/bin/bash
# In-sandbox CPU per stdio test (profile_sandbox.py) against the floor (floor.py), alternating, 3 repeats, under
# each sandbox interpreter given. Appends one JSON line per run (machine, interpreter, both reports) to the file
# $RESULTS (default bench/judge/profile_vs_floor.jsonl). The profile covers the sandbox only (no host, no bwrap
# start): its cpu_ms_per_test over the floor's is a proxy of bench_judge.py's ratio (the host adds ~0.1 ms per test
# there). Run as root from the repository root, e.g.
#   bash bench/judge/profile_vs_floor.sh /usr/bin/python3.11
# Needs bubblewrap (RLVR_BWRAP or bwrap on PATH) and rlvr importable by HOSTPY (default: python3). LOOPS: the
# runner's per-test loops to profile, "c" (the compiled loop, built with cc first) and/or "python" (default "c").
set -euo pipefail
HOSTPY=${HOSTPY:-python3}
RESULTS=${RESULTS:-bench/judge/profile_vs_floor.jsonl}
LOOPS=${LOOPS:-c}
REQ=$(mktemp)
trap 'rm -f "$REQ"' EXIT
"$HOSTPY" - "$REQ" <<'PY'
import gzip, json, sys
items = [json.loads(line) for line in gzip.open("bench/judge/stdio200.jsonl.gz", "rt")]
json.dump({"items": [{"code": i["code"], "tests": i["tests"]} for i in items]}, open(sys.argv[1], "w"))
PY
machine="{\"kernel\": \"$(uname -r)\", \"cpus\": $(nproc), \"date\": \"$(date -u +%FT%TZ)\"}"
for py in "$@"; do
  version=$("$py" -c 'import platform; print(platform.python_version())')
  for r in 1 2 3; do
    for loop in $LOOPS; do
      prof=$(RLVR_SANDBOX_PYTHON=$py PYTHONPATH=$PWD "$HOSTPY" -P bench/judge/profile_sandbox.py --programs 200 \
             --loop "$loop" | tail -1)
      floor=$("$py" -I bench/judge/floor.py < "$REQ")
      echo "{\"machine\": $machine, \"interpreter\": \"$py\", \"version\": \"$version\", \"repeat\": $r," \
           "\"loop\": \"$loop\", \"profile\": $prof, \"floor\": $floor}" | tee -a "$RESULTS"
    done
  done
done
