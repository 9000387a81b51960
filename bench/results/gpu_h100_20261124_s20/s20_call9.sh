#!/bin/bash
# session 20, call 9 (final code): `ctest -L gpu`, then the peers at 1M and 8M x 128 x 1024
# (bench/gpu_bench.sh ONLY_PEERS=1; .whl/peers carried).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 NCCL_NVLS_ENABLE=0
T0=$(date +%s)
(cmake -S . -B build-gpu -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 -DVA_EMBED_MODEL_DIR=$PWD/.gpu-model > /tmp/cmn.log 2>&1 && make -C build-gpu -j16 > /tmp/bn.log 2>&1) || { grep error /tmp/bn.log | head; exit 1; }
echo "built $(( $(date +%s) - T0 )) s"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600) > $OUT/ctest_final.log 2>&1
grep -E "Test +#|tests passed|tests failed" $OUT/ctest_final.log
echo "ctest $(( $(date +%s) - T0 )) s"
ONLY_PEERS=1 OUT=/tmp/peers BUILD_DIR=build-gpu timeout $(( 560 - ($(date +%s) - T0) )) bash bench/gpu_bench.sh > $OUT/gpu_bench_peers.log 2>&1; echo "peers rc $?"; tail -26 $OUT/gpu_bench_peers.log
echo "all $(( $(date +%s) - T0 )) s"
