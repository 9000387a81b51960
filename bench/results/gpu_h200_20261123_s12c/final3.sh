#!/bin/bash
# session 12 final 3 (loop time without the final download): build, gpu_backend, peers at 1M and 8M
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
B=build-gpu
( cmake -S . -B $B -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmake.log 2>&1 && make -C $B -j16 > /tmp/build.log 2>&1 ) || { tail -30 /tmp/build.log; exit 1; }
( cd $B && timeout 300 ctest -R "gpu_backend|cuda_kernels" --output-on-failure -j1 > $OUT/ctest_gpu.log 2>&1; grep -E "tests passed|Passed|Failed" $OUT/ctest_gpu.log )
ONLY_PEERS=1 BIG=1 OUT=/tmp/peers bash bench/gpu_bench.sh 2>&1 | tail -22
cp /tmp/peers/gpu_peers_1M.csv /tmp/peers/gpu_peers_8M.csv $OUT/
