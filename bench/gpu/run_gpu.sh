#!/usr/bin/env bash
# The GPU suite: run inside a folder made by bench/gpu/prepare.py, on a machine with one CUDA GPU and the wheels of
# bench/gpu/wheels.txt installed into $SITE (bench/gpu/stage.sh install). No network needed.
#
#   bash bench/gpu/run_gpu.sh [PART ...]      # default: all parts in order
#
# Parts: dvc:STAGE (that DVC stage, e.g. dvc:grpo@1, via `dvc repro --no-commit -s`; bench/gpu/dvc_setup.sh first),
# place:DIR (models/base hard-linked at DIR, e.g. place:models/dpo: a stage output an earlier sitting made),
# scale_model and scale<N> (GRPO scaling on N GPUs; bench/gpu/grpo_scaling.sh writes their params files),
# env baseline_hf baseline_vllm baseline_openai sft grpo repair repair_tool big_baseline big_grpo big_sft big_openai
# big_repair (big_*: the ~0.5B random-init models/big, built here when missing). Each runs a stage script
# directly (no DVC), timed, with `nvidia-smi` sampling GPU memory every 0.5 s; its log goes to $RES/logs/<part>.log
# and its row (rc, wall seconds, peak GPU memory) to $RES/parts.jsonl. Results accumulate in $RES across calls, and
# bench/gpu/collect.py writes $OUT/results.json (+ $OUT/logs.tar.gz) after every call.
# GRPO_MODEL: the grpo part's input model (models/sft). Environment: SITE (/root/site), RES (/root/gpu_results), OUT (./out), BWRAP_DEB (a bubblewrap .deb to unpack when
# no bwrap is on PATH; default: .gpu/bubblewrap_*.deb, else bench/gpu/bubblewrap_*.deb), SANDBOX_SITE
# (/opt/rlvr-sandbox-site: the sandbox's missing Python modules, see below), PART_TIMEOUT_S (540).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
SITE="${SITE:-/root/site}"; RES="${RES:-/root/gpu_results}"; OUT="${OUT:-$PWD/out}"
PART_TIMEOUT_S="${PART_TIMEOUT_S:-540}"
mkdir -p "$RES/logs" "$OUT"
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
export RLVR_SANDBOX_WORKERS="${RLVR_SANDBOX_WORKERS:-4}" RLVR_CACHE_DIR="$PWD/.cache" WANDB_MODE=disabled TOKENIZERS_PARALLELISM=true PYTHONUNBUFFERED=1
# vLLM 0.26's sampler imports flashinfer unless told not to; flashinfer-python is not carried (bench/gpu/resolve.py)
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 RAY_USAGE_STATS_ENABLED=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ -z "${RLVR_BWRAP:-}" ] && ! command -v bwrap >/dev/null; then
  # .gpu/: the carry folder of bench/gpu/pack.sh (docs/training/gpu.md); bench/gpu/: the one-GPU suite's folder
  deb="${BWRAP_DEB:-$(ls .gpu/bubblewrap_*.deb .whl/deb/bubblewrap_*.deb bench/gpu/bubblewrap_*.deb 2>/dev/null | head -1)}"
  # not under /root (mode 700): the judge runs bwrap as an unprivileged uid, which must reach the binary
  if [ -n "$deb" ]; then dpkg -x "$deb" /opt/bwrap && export RLVR_BWRAP=/opt/bwrap/usr/bin/bwrap
  elif [ -x /opt/bwrap/usr/bin/bwrap ]; then export RLVR_BWRAP=/opt/bwrap/usr/bin/bwrap  # unpacked by an earlier call
  fi
fi
# without bubblewrap every verdict is sandbox_error and a training part would run on no reward at all (seen once)
if [ -z "${RLVR_BWRAP:-}" ] && ! command -v bwrap >/dev/null; then
  echo "run_gpu.sh: no bubblewrap: put bwrap on PATH, set RLVR_BWRAP, or pass BWRAP_DEB=<bubblewrap .deb>" >&2; exit 2
fi
PY=python3
# the sandbox's interpreter must import what benchmark programs import (sortedcontainers, numpy), or every correct
# program importing one is judged runtime_error (the 2026-11-28 rehearsal): sandbox_site.sh puts the missing ones in a
# folder that RLVR_SANDBOX_SITE names, or stops naming the module
sbsite=$(PY=$PY bash bench/gpu/sandbox_site.sh) || exit 2
[ -n "$sbsite" ] && export RLVR_SANDBOX_SITE="$sbsite"

part() {  # part NAME COMMAND...: run, time, sample GPU memory, record
  local name="$1"; shift
  local log="$RES/logs/$name.log" mem="$RES/logs/$name.mem"
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 500 > "$mem" 2>/dev/null & local smi=$!
  local t0; t0=$(date +%s%3N)
  echo "== $name: $*" | tee "$log"
  timeout "$PART_TIMEOUT_S" bash -c '"$@"' _ "$@" >> "$log" 2>&1; local rc=$?
  local t1; t1=$(date +%s%3N); local wall; wall=$(python3 -c "print(($t1 - $t0) / 1000)")
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  # per GPU: the largest memory.used sample of each index (whole device: every process on it, nvidia-smi's view)
  local per; per=$(python3 -c "import sys,json,collections; d=collections.defaultdict(int)
for ln in open(sys.argv[1]):
    p=[x.strip() for x in ln.split(',')]
    if len(p)==2 and p[1].isdigit(): d[p[0]]=max(d[p[0]],int(p[1]))
print(json.dumps({k:d[k] for k in sorted(d)}))" "$mem")
  local peak; peak=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(max(d.values()) if d else 'null')" "$per")
  echo "{\"part\": \"$name\", \"rc\": $rc, \"wall_s\": $wall, \"peak_gpu_mib\": ${peak:-null}, \"peak_gpu_mib_per_gpu\": $per}" \
    >> "$RES/parts.jsonl"
  echo "== $name: rc=$rc, $wall s, peak ${peak:-?} MiB"; tail -n 25 "$log"
}

serve_and_baseline() {  # [MODEL [NAME]]: vllm serve MODEL (models/base) on :8000 as "base", run the openai-backend
  # baseline against it into data/NAME + metrics/NAME/ (baseline_openai), stop it
  local model="${1:-models/base}" name="${2:-baseline_openai}"
  $PY -m vllm.entrypoints.cli.main serve "$model" --served-model-name base --port 8000 \
    --gpu-memory-utilization 0.3 --max-model-len 2048 --generation-config vllm > "$RES/logs/vllm_serve.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 180); do
    curl -sf http://127.0.0.1:8000/v1/models >/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "vllm serve exited"; tail -40 "$RES/logs/vllm_serve.log"; return 1; }
    sleep 1
  done
  $PY stages/baseline.py --params params.openai.yaml --out-dir "data/$name" --metrics "metrics/$name"; local rc=$?
  kill "$pid"; wait "$pid" 2>/dev/null
  return $rc
}

need_big() {  # build models/big (the ~0.5B random-init Qwen2) unless an earlier part did
  [ -d models/big ] || $PY bench/gpu/prepare.py --dest . --big-only
}

run_part() {
  case "$1" in
    env) part env $PY bench/gpu/collect.py --env-only --res "$RES" ;;
    baseline_hf) part baseline_hf $PY stages/baseline.py --out-dir data/baseline_hf --metrics metrics/baseline_hf ;;
    baseline_vllm) part baseline_vllm $PY stages/baseline.py --params params.vllm.yaml --out-dir data/baseline_vllm \
      --metrics metrics/baseline_vllm ;;
    baseline_openai) part baseline_openai serve_and_baseline ;;
    sft) part sft $PY stages/sft.py ;;
    grpo) part grpo $PY stages/grpo.py --seed 1 --model "${GRPO_MODEL:-models/sft}" ;;
    repair) part repair $PY stages/repair.py --model models/grpo/seed-1 ;;
    repair_tool) [ -d models/tool ] || $PY bench/gpu/teach_tools.py --model models/sft \
        --problems data/governance/problems/synthetic.jsonl --params params.tool.yaml --out models/tool
      part repair_tool $PY stages/repair.py --params params.tool.yaml --model models/tool \
      --out-model models/repair_tool --out-dir data/repair_tool --metrics metrics/repair_tool/eval \
      --curves metrics/repair_tool/curves.tsv ;;
    big_baseline) need_big
      part big_baseline $PY stages/baseline.py --params params.big.yaml --out-dir data/big_baseline_vllm \
        --metrics metrics/big_baseline_vllm ;;
    big_grpo) need_big
      part big_grpo $PY stages/grpo.py --seed 1 --model models/big --out-root models/big_grpo \
        --metrics-root metrics/big_grpo --eval-root metrics/big_eval --eval-dir data/eval/big ;;
    big_sft) need_big
      part big_sft $PY stages/sft.py --params params.big.yaml --model models/big --out-model models/big_sft \
        --metrics metrics/big_sft.json --curves metrics/big_sft/curves.tsv --eval-metrics metrics/big_eval_sft \
        --eval-dir data/eval/big_sft ;;
    big_openai) need_big
      part big_openai serve_and_baseline models/big big_baseline_openai ;;
    big_repair) need_big
      part big_repair $PY stages/repair.py --params params.big.yaml --model models/big --out-model models/big_repair \
        --out-dir data/big_repair --metrics metrics/big_repair/eval --curves metrics/big_repair/curves.tsv ;;
    # the 7B recipe (profiles/lent/qwen7b_random_2xh100.yaml via params.7b.yaml): random-init Qwen2.5-Coder-7B shapes
    s7_model) part s7_model $PY stages/model.py --params params.7b.yaml --out models/base7b ;;
    s7_sft) part s7_sft $PY stages/sft.py --params params.7b.yaml --model models/base7b --out-model models/sft7b \
      --metrics metrics/s7_sft.json --curves metrics/s7_sft/curves.tsv --eval-metrics metrics/s7_eval_sft \
      --eval-dir data/eval/s7_sft ;;
    s7_grpo) part s7_grpo $PY stages/grpo.py --params params.7b.yaml --seed 1 --model "${GRPO7_MODEL:-models/sft7b}" \
      --out-root models/s7_grpo --metrics-root metrics/s7_grpo --eval-root metrics/s7_eval --eval-dir data/eval/s7_grpo ;;
    s7_repair) part s7_repair $PY stages/repair.py --params params.7b.yaml --model models/s7_grpo/seed-1 \
      --out-model models/s7_repair --out-dir data/s7_repair --metrics metrics/s7_repair/eval \
      --curves metrics/s7_repair/curves.tsv ;;
    # the scripted-policy rehearsal (bench/gpu/rehearse.py; params.rehearse.yaml selects
    # profiles/lent/qwen7b_scripted_4xh200.yaml): the random-init 7B, then GRPO and repair with every rollout turn
    # answered from the script made on the CPU machine (.gpu/rehearse/<kind>), each followed by its collect
    rh_model) part rh_model $PY stages/model.py --params params.rehearse.yaml --out models/base ;;
    rh_grpo|rh_repair) local k="${1#rh_}"
      part "rh_$k" $PY bench/gpu/rehearse.py run --kind "$k" --params params.rehearse.yaml --dir ".gpu/rehearse/$k" \
        --model models/base
      $PY bench/gpu/rehearse.py collect --dir ".gpu/rehearse/$k" --out "$RES/rehearsal_$k.json" \
        > "$RES/logs/rh_${k}_collect.log" 2>&1; tail -n 8 "$RES/logs/rh_${k}_collect.log"
      find .cache/train -type d -name checkpoints -prune -exec rm -rf {} + 2>/dev/null ;;
    # dvc:STAGE: the stage through DVC (`dvc repro --no-commit -s STAGE`, in a copy set up by dvc_setup.sh); the
    # model-only FSDP checkpoints it leaves (30 GB at 7B) are removed after it, or the disk fills by the third stage
    dvc:*) local st="${1#dvc:}"; part "dvc_${st%@*}" dvc repro --no-commit -s "$st"
      find .cache/train -type d -name checkpoints -prune -exec rm -rf {} + 2>/dev/null; df -h . | tail -1 ;;
    # GRPO scaling (bench/gpu/grpo_scaling.sh writes params.scale<N>.yaml): the 1.5B-shaped model, then one run per
    # GPU count from it, same global batch
    scale_model) part scale_model $PY stages/model.py --params params.scale4.yaml --out models/scale_base ;;
    scale[0-9]*) local n="${1#scale}"
      part "scale$n" $PY stages/grpo.py --params "params.scale$n.yaml" --seed 1 --model models/scale_base \
        --out-root "models/scale$n" --metrics-root "metrics/scale$n" --eval-root "metrics/scale${n}_eval" \
        --eval-dir "data/eval/scale$n"
      find .cache/train -type d -name checkpoints -prune -exec rm -rf {} + 2>/dev/null ;;
    # the sparse-vs-dense ablation (issue 42 item 7, one-GPU half): bench/ablation/run.py on this GPU, the embedded
    # default's GRPO phase from the carried models/dpo; ABL_SEEDS seeds, ABL_JOBS runs at once; the results file is
    # rewritten after each seed (a part cut short keeps its paired seeds) into $OUT/ablation_gpu.json
    ablation) part ablation $PY bench/ablation/run.py --seeds "${ABL_SEEDS:-10}" --jobs "${ABL_JOBS:-8}" \
      --out "$OUT/ablation_gpu.json" --work .cache/ablation --commit "${ABL_COMMIT:-}" --note "${ABL_NOTE:-}" ;;
    # place:DIR: DIR becomes models/base hard-linked (no copy), standing in for a stage's output that an earlier
    # sitting produced, so a later stage can start on a 30-minute lease (the placement is a recorded part)
    place:*) local dest="${1#place:}"
      part "place_$(basename "$dest")" bash -c 'rm -rf "$1" && mkdir -p "$(dirname "$1")" && cp -al models/base "$1"' _ "$dest" ;;
    *) echo "unknown part $1" >&2; return 2 ;;
  esac
}

export -f part serve_and_baseline; export PY RES PART_TIMEOUT_S
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(env baseline_hf baseline_vllm baseline_openai sft grpo repair repair_tool big_baseline
  big_grpo big_sft big_openai big_repair)
for p in "${parts[@]}"; do run_part "$p"; done
$PY bench/gpu/collect.py --res "$RES" --repo . --out "$OUT/results.json"
tar czf "$OUT/logs.tar.gz" -C "$RES" logs parts.jsonl -C "$PWD" metrics $(ls -d .cache/train/*/*/logs \
  .cache/train/*/*/*/logs .cache/train/*/*/verl_*.* .cache/train/*/*/*/verl_*.* .cache/train/*/*/tool_config.yaml .cache/train/*/*/agent_loops.yaml \
  .cache/train/*/*/judge .cache/train/*/*/*/judge .cache/train/repair/*/rollouts 2>/dev/null)
ls -la "$OUT"
