#!/usr/bin/env bash
# The RL sitting on the lent 4 x H100 (issue: real scale, item 8; bench/gpu/results_4gpu.json "fourth sitting"), run in
# the DVC copy after `bench/gpu/stage.sh install` and
#   bash bench/gpu/dvc_setup.sh profiles/lent/qwen7b_random_4xh100_rl.yaml 1 .gpu/dvc .gpu/gov.tar.xz
# then:  bash bench/gpu/sitting_rl.sh > /root/chain.log 2>&1
# 1. the chain through DVC: model, the SFT / DPO / GRPO inputs placed as the base weights (an earlier sitting ran SFT
#    and DPO; a 30-minute lease does not hold all stages), repair (2 steps), GRPO (3 steps), the final eval;
# 2. in the background, once the repair stage has had JL_DELAY_S (330) seconds to reach its steps: the judge load
#    benchmark (bench/gpu/judge_load.py), the node pool split over actor processes, then per-process pools, each
#    1,024 HumanEval+ references with 16 busy loops, into $RES/judge_load*.json.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RES="${RES:-/root/gpu_results}"; mkdir -p "$RES"
jl() {  # jl LABEL ARGS...: one judge_load run
  local label="$1"; shift
  (export PYTHONPATH="${SITE:-/root/site}:$PWD" PATH="${SITE:-/root/site}/bin:$PATH"
   [ -x /opt/bwrap/usr/bin/bwrap ] && export RLVR_BWRAP=/opt/bwrap/usr/bin/bwrap  # unpacked by run_gpu.sh
   python3 bench/gpu/judge_load.py --problems data/governance/problems/humanevalplus-v0.1.10.jsonl \
     --reward-workers 8 --concurrency 64 --rounds 2 --burn 16 --label "$label" --out "$RES/judge_load_$label.json" "$@")
}
rm -f "$RES/logs/dvc_repair.log"  # a log of an earlier call would start the load at once
(
  until grep -q "^== dvc_repair" "$RES/logs/dvc_repair.log" 2>/dev/null; do sleep 5; done
  sleep "${JL_DELAY_S:-330}"
  jl node_sharded --pool node
  jl process --pool process --judge-workers 8
) > "$RES/judge_load.log" 2>&1 &
jl_pid=$!
bash bench/gpu/run_gpu.sh dvc:profile dvc:model place:models/sft place:models/dpo place:models/grpo/seed-1 dvc:repair dvc:grpo@1 \
  dvc:eval
# the repair stage never started (e.g. run_gpu.sh stopped early): the load has nothing to wait for
[ -f "$RES/logs/dvc_repair.log" ] || kill "$jl_pid" 2>/dev/null
wait
