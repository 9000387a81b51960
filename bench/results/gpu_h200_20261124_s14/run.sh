#!/bin/bash
# session 14: peers benchmark on the final code (1M and 8M), parity case wall time (10 runs each backend), device share
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name --format=csv,noheader
R=$OUT; mkdir -p /tmp/gb
T0=$(date +%s)
OUT=/tmp/gb ONLY_PEERS=1 BIG=1 bash bench/gpu_bench.sh > $R/gpu_bench.log 2>&1; echo "bench rc $? $(( $(date +%s) - T0 )) s"
cat $R/gpu_bench.log | grep -v "^\s*$" | tail -30
cp /tmp/gb/gpu_peers_1M.csv /tmp/gb/gpu_peers_8M.csv $R/
B=build-gpu
$B/vecanneal gen --kind vlc-demo --n 10000 --d 128 --out /tmp/demo.h5 > /dev/null
for be in cuda cpu auto; do
  ts=""
  for rep in 1 2 3 4 5 6 7 8 9 10; do
    s=$(date +%s.%N)
    $B/vecanneal compress --config configs/vlc-demo-large.ini --input /tmp/demo.h5:/train --out /tmp/demo_$be.h5 --backend $be --set progress_every=0 --set threads=16 > /tmp/demo_$be.log 2>&1
    e=$(date +%s.%N); ts="$ts $(awk -v a=$s -v b=$e 'BEGIN{printf "%.3f", b-a}')"
  done
  echo "parity case $be:$ts" | tee -a $R/parity_wall.txt
done
make -C $B -j16 gpu_kernels_bench > /tmp/bk.log 2>&1; $B/gpu_kernels_bench 1000000 128 1024 20 > /tmp/k.log 2>&1; grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" /tmp/k.log | head -6 | tee $R/device_share.txt
echo "all $(( $(date +%s) - T0 )) s"
