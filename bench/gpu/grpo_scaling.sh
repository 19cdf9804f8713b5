#!/usr/bin/env bash
# GRPO step time on 1, 2 and 4 GPUs at the same global batch (issue: real scale, item 8), in the DVC copy on the lent
# 4 x H100 after `bench/gpu/stage.sh install` and `bench/gpu/dvc_setup.sh ...` (any profile):
#
#   bash bench/gpu/grpo_scaling.sh [GPU_COUNT ...]        # default: 1 4 2
#
# Builds models/scale_base (random-init Qwen2.5-Coder-1.5B shapes, profiles/lent/qwen1p5b_random_scaling_4xh100.yaml)
# unless present, then per GPU count runs stages/grpo.py with params.scale<N>.yaml (params.yaml with the profile
# qwen1p5b_random_scaling_<N>xh100.yaml; the three differ only in n_gpus_per_node) as a run_gpu.sh part
# (`scale<N>`, timed, nvidia-smi memory sampled), each writing metrics/cost/scale<N>/seed-1.tsv (verl's per-step
# split, throughput, MFU). bench/gpu/scaling_collect.py then writes $RES/scaling.json (speedup and efficiency of the
# last step against the smallest GPU count). The stage's own eval after training is part of each part's wall time,
# not of the step figures.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
RES="${RES:-/root/gpu_results}"; SITE="${SITE:-/root/site}"; mkdir -p "$RES"
export PART_TIMEOUT_S="${PART_TIMEOUT_S:-1500}"  # a 1-GPU run: start-up + 2 steps + its eval exceed run_gpu.sh's 540 s
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}" PATH="$SITE/bin:$PATH"
counts=("$@"); [ ${#counts[@]} -eq 0 ] && counts=(1 4 2)
for n in "${counts[@]}"; do
  [ -f "profiles/lent/qwen1p5b_random_scaling_${n}xh100.yaml" ] || { echo "no scaling profile for $n GPUs" >&2; exit 2; }
  sed "s#^profile:.*#profile: profiles/lent/qwen1p5b_random_scaling_${n}xh100.yaml#" params.yaml > "params.scale$n.yaml"
done
[ -f params.scale4.yaml ] || sed "s#^profile:.*#profile: profiles/lent/qwen1p5b_random_scaling_4xh100.yaml#" params.yaml \
  > params.scale4.yaml  # the model part reads the 4-GPU profile (the model is the same in all three)
[ -f models/scale_base/config.json ] || bash bench/gpu/run_gpu.sh scale_model
bash bench/gpu/run_gpu.sh "${counts[@]/#/scale}"
python3 bench/gpu/scaling_collect.py --root . --gpus "${counts[@]}" --out "$RES/scaling.json"
