#!/bin/bash
# session 13: the final code on an H100: ctest -L gpu, peers at 1M (ONLY_PEERS=1 BIG=0), device share
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
R=$OUT; T0=$(date +%s)
B=build-gpu
nvidia-smi --query-gpu=name --format=csv,noheader
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmake.log 2>&1 && make -C $B -j16 > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
( cd $B && timeout 300 ctest -L gpu --output-on-failure > $R/ctest_gpu.log 2>&1; grep -E "tests passed|tests failed|Passed|Skipped|\*\*\*" $R/ctest_gpu.log | head -8 )
echo "ctest $(( $(date +%s) - T0 )) s"
mkdir -p /tmp/gb; OUT=/tmp/gb ONLY_PEERS=1 BIG=0 bash bench/gpu_bench.sh > $R/gpu_bench.log 2>&1; echo "bench rc $?"
grep -v "^\s*$" $R/gpu_bench.log | tail -14; cp /tmp/gb/gpu_peers_1M.csv $R/
$B/gpu_kernels_bench 1000000 128 1024 20 > /tmp/k.log 2>&1; grep -E "^loop iteration|argmin kernel alone (fp16|bf16|tf32) wgmma" /tmp/k.log | head -6 | tee $R/device_share.txt
echo "all $(( $(date +%s) - T0 )) s"
