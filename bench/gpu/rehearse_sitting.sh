#!/usr/bin/env bash
# The scripted-policy rehearsal sitting (issue: the 7B recipe with a real policy, item 6; docs/training/rehearsal.md),
# run in a copy of the repository on the lent 4-GPU machine after `bench/gpu/stage.sh install`:
#
#   bash bench/gpu/rehearse_sitting.sh > /root/rehearse.log 2>&1
#
# Inputs made on the CPU machine (docs/training/rehearsal.md): .gpu/problems.tar.xz (the governed problems, the
# tokenizer's corpus), .gpu/rehearse/{grpo,repair} (bench/gpu/rehearse.py script), .gpu/bubblewrap_*.deb. Writes
# params.rehearse.yaml (params.yaml with the scripted profile selected: every other value params.yaml's, so the
# profile's keys are not contradicted), then run_gpu.sh's parts rh_model, rh_grpo, rh_repair; the judge gets the
# node's own budget (RLVR_SANDBOX_WORKERS=0: one sandbox per core). Results: $RES/rehearsal_{grpo,repair}.json.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# the governed problems (the tokenizer's corpus): .gpu/problems.tar.xz (problems/ only), else pack.sh's gov.tar.xz
if [ -f .gpu/problems.tar.xz ]; then mkdir -p data/governance && tar xJf .gpu/problems.tar.xz -C data/governance
elif [ -f .gpu/gov.tar.xz ]; then tar xJf .gpu/gov.tar.xz
else echo "rehearse_sitting.sh: no .gpu/problems.tar.xz or .gpu/gov.tar.xz (docs/training/rehearsal.md)" >&2; exit 2
fi
# 4 GPUs: the 4-GPU profile; 2 (4-GPU kinds withheld): the 2-GPU one; 1 (only the 1-GPU kind lent): the 0.5B-shaped
# one (a 7B does not train on one GPU with this recipe; the profile's comment says what that run does not show)
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
case "$gpus" in
  0) echo "rehearse_sitting.sh: no GPU (nvidia-smi -L lists none)" >&2; exit 2 ;;
  1) profile=profiles/lent/qwen0p5b_scripted_1xh200.yaml ;;
  2|3) profile=profiles/lent/qwen7b_scripted_2xh200.yaml ;;
  *) profile=profiles/lent/qwen7b_scripted_4xh200.yaml ;;
esac
profile="${RH_PROFILE:-$profile}"
sed "s#^profile:.*#profile: $profile#" params.yaml > params.rehearse.yaml
export BWRAP_DEB="${BWRAP_DEB:-$(ls .gpu/bubblewrap_*.deb 2>/dev/null | head -1)}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export RLVR_SANDBOX_WORKERS="${RLVR_SANDBOX_WORKERS:-0}" PART_TIMEOUT_S="${PART_TIMEOUT_S:-1500}"
bash bench/gpu/run_gpu.sh ${RH_PARTS:-rh_model rh_grpo rh_repair}
