#!/bin/bash
# session 12: the same code on an H100: ctest -L gpu and the 1M peers
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
B=build-gpu
nvidia-smi --query-gpu=name --format=csv,noheader
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmake.log 2>&1 && make -C $B -j16 > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
( cd $B && timeout 300 ctest -L gpu --output-on-failure -j1 > $OUT/ctest_gpu_h100.log 2>&1; grep -E "tests passed|Passed|Skipped|Failed" $OUT/ctest_gpu_h100.log )
ONLY_PEERS=1 BIG=0 OUT=/tmp/peers bash bench/gpu_bench.sh 2>&1 | tail -12
cp /tmp/peers/gpu_peers_1M.csv $OUT/gpu_peers_1M_h100.csv
