#!/bin/bash
# session 14: peers (median of 3 runs each) on the final code; BIG from the environment; device share
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
R=$OUT; mkdir -p /tmp/gb; T0=$(date +%s); B=build-gpu
OUT=/tmp/gb ONLY_PEERS=1 BIG=${BIG:-0} bash bench/gpu_bench.sh > $R/gpu_bench.log 2>&1; echo "bench rc $? $(( $(date +%s) - T0 )) s"
grep -v "^\s*$" $R/gpu_bench.log | tail -30
cp /tmp/gb/gpu_peers_*.csv $R/
make -C $B -j16 gpu_kernels_bench > /tmp/bk.log 2>&1; $B/gpu_kernels_bench 1000000 128 1024 20 > /tmp/k.log 2>&1; grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" /tmp/k.log | head -6 | tee $R/device_share.txt
echo "all $(( $(date +%s) - T0 )) s"
