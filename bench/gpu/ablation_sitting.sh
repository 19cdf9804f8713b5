#!/usr/bin/env bash
# The one-GPU half of the sparse-vs-dense ablation (issue 42 item 7; docs/results/ablations.md), run in a copy of the
# repository on a lent GPU machine after `bench/gpu/stage.sh install`:
#
#   bash bench/gpu/ablation_sitting.sh > /root/ablation.log 2>&1
#
# Inputs made on the CPU machine from a `make repro` workspace whose dvc.lock is this commit's:
#   .gpu/problems.tar.xz   the governed problems (problems/ only; bench/gpu/pack.sh)
#   .gpu/abl.tar.xz        models/base, models/dpo, data/profile, data/manifests and the governance files the grpo
#                          stage reads (and any problems file newer than problems.tar.xz), e.g.
#                          tar cf - models/base models/dpo data/profile data/manifests \
#                            data/governance/{contamination.jsonl,params.resolved.json,references.jsonl} | xz -6 > …
#   .gpu/bubblewrap_*.deb  bubblewrap for the judge (the image has none)
# Then run_gpu.sh's part `ablation` (bench/ablation/run.py: the grpo and eval stages' own commands per seed and
# mode, every run from the carried models/dpo, ABL_JOBS at once on the one GPU); its results file is
# $OUT/ablation_gpu.json (default ./out), rewritten after each seed. The judge gets RLVR_SANDBOX_WORKERS (default 2)
# sandboxes per run, so ABL_JOBS runs use about ABL_JOBS × 2 of the node's cores.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
[ -f .gpu/problems.tar.xz ] && [ -f .gpu/abl.tar.xz ] || {
  echo "ablation_sitting.sh: .gpu/problems.tar.xz and .gpu/abl.tar.xz are needed (see this file's header)" >&2; exit 2; }
mkdir -p data/governance && tar xJf .gpu/problems.tar.xz -C data/governance && tar xJf .gpu/abl.tar.xz || exit 2
export BWRAP_DEB="${BWRAP_DEB:-$(ls .gpu/bubblewrap_*.deb 2>/dev/null | head -1)}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export RLVR_SANDBOX_WORKERS="${RLVR_SANDBOX_WORKERS:-2}" PART_TIMEOUT_S="${PART_TIMEOUT_S:-1500}"
bash bench/gpu/run_gpu.sh ablation
