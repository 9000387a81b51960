#!/bin/bash
# session 19 call 7: the peers at the session's final code (73a1b5c): bench/gpu_bench.sh ONLY_PEERS=1
# (1M x 128 x 1024, 20 iterations; 8M x 128 x 1024, 10 iterations), data files removed before return.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 vecanneal > /tmp/bn.log 2>&1) || { tail -30 /tmp/bn.log; exit 1; }
echo "build $(( $(date +%s) - T0 )) s"
ONLY_PEERS=1 OUT=/tmp/peers BUILD_DIR=build-gpu bash bench/gpu_bench.sh > $OUT/gpu_bench_peers.log 2>&1; tail -26 $OUT/gpu_bench_peers.log
cp /tmp/peers/gpu_peers_1M.csv /tmp/peers/gpu_peers_8M.csv $OUT/ 2>/dev/null
echo "all $(( $(date +%s) - T0 )) s"
