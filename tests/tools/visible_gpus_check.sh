#!/usr/bin/env bash
# visible_gpus_check.sh SCRIPTS_DIR: scripts/visible-gpus against a stand-in nvidia-smi that lists two GPUs,
# one split into a MIG device (and one that fails, as without a driver): the count CUDA_VISIBLE_DEVICES
# leaves, entry by entry.
set -u
script=$1/visible-gpus
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
printf '%s\n' '#!/bin/sh' 'echo "GPU 0: H (UUID: GPU-a0)"' 'echo "GPU 1: H (UUID: GPU-b1)"' \
  'echo "  MIG 1g Device 0: (UUID: MIG-c2)"' > "$fake/nvidia-smi"
chmod +x "$fake/nvidia-smi"
bad=0
check() { # EXPECTED CUDA_VISIBLE_DEVICES|unset
  local got
  if [ "$2" = unset ]; then got=$(env -u CUDA_VISIBLE_DEVICES PATH="$fake:$PATH" bash "$script")
  else got=$(CUDA_VISIBLE_DEVICES="$2" PATH="$fake:$PATH" bash "$script"); fi
  printf 'CUDA_VISIBLE_DEVICES=%-10s -> %s\n' "[$2]" "$got"
  [ "$got" = "$1" ] || { echo "FAIL: expected $1"; bad=1; }
}
check 2 unset
check 0 ""
check 1 0
check 1 1
check 2 0,1
check 2 " 1, 0"
check 2 0,1,2
check 0 2
check 0 -1
check 1 0,-1,1
check 1 GPU-a0
check 1 GPU-a
check 2 GPU-a0,MIG-c2
check 0 GPU-z
check 1 GPU-a0,GPU-z,GPU-b1
check 0 GPU-
printf '#!/bin/sh\nexit 9\n' > "$fake/nvidia-smi"
check 0 unset
check 0 0
exit $bad
