#!/usr/bin/env bash
# gpu_final.sh: on one GPU: build, the gpu-labelled tests, then the 1M-row peer comparison (bench/gpu_peers.py).
set -u
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/out-gpu}; mkdir -p "$OUT"
SKIP_TESTS=0 BIG=0 ONLY_PEERS=1 bash bench/gpu_bench.sh 2>&1 | tail -12 &
pid=$!
wait $pid
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 600) > "$OUT/ctest_gpu.log" 2>&1
grep -E "Test +#|tests passed|tests failed" "$OUT/ctest_gpu.log"
