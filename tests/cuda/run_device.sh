#!/bin/bash
# run_device.sh: on a GPU machine, from the repository root: configure a build with the CUDA backend,
# build the CUDA tests and the kernel benchmark, run the gpu-labelled tests and the benchmark.
# Logs and a summary go to $OUT (or ./out-device). Until the top-level CMakeLists.txt includes
# cmake/cuda.cmake itself, this inserts that include into the (throw-away) copy it runs in.
#   tests/cuda/run_device.sh [bench args: n d k reps]
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
OUT=${OUT:-$PWD/out-device}
mkdir -p "$OUT"
B=${BUILD_DIR:-build-cuda}
if ! grep -q 'cmake/cuda.cmake' CMakeLists.txt; then
  sed -i 's|^include(cmake/core.cmake)$|&\nif(VECANNEAL_HAVE_CUDA)\n  include(cmake/cuda.cmake)\nendif()|' CMakeLists.txt
fi
{
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,driver_version --format=csv
  nvcc --version | tail -1
} 2>&1 | tee "$OUT/env.txt"
t0=$(date +%s)
cmake -S . -B "$B" -DVECANNEAL_CUDA=ON -DVECANNEAL_CUDA_ARCHITECTURES=90 >"$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
make -C "$B" -j"$(nproc)" test_cuda_kernels gpu_kernels_bench $(grep -q test_nccl "$B/Makefile" && echo test_nccl) >"$OUT/build.log" 2>&1 \
  || { grep -E "error|Error" "$OUT/build.log" | head -40; tail -20 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
grep -E "spill|warning" "$OUT/build.log" | sort -u | head -10
obj=$(find "$B" -name 'cuda_assign.cu.o' | head -1)
if command -v cuobjdump >/dev/null && [ -n "$obj" ]; then
  echo "SASS of cuda_assign.cu.o (instruction counts):"
  cuobjdump --dump-sass "$obj" | grep -oE "HMMA\.[0-9A-Z.]+|LDSM[.A-Z0-9]*|LDGSTS[.A-Z0-9]*|\bLDL\b|\bSTL\b" | sort | uniq -c
fi
rc=0
(cd "$B" && ctest -R '^cuda_' --output-on-failure --timeout 900) >"$OUT/ctest.log" 2>&1 || rc=1
grep -E "tests passed|Test +#|SKIP" "$OUT/ctest.log" | head -20
grep -E "FAIL|mismatches|worst|checked|PASSED|FAILED|device:|case|fused kernel" "$B"/Testing/Temporary/LastTest.log > "$OUT/cuda_kernels_detail.txt" 2>/dev/null
grep -E "^FAIL|FAILED|PASSED" "$OUT/cuda_kernels_detail.txt" | head -30
grep -E "fused cfg [3-6]" "$OUT/cuda_kernels_detail.txt" | sort -t'(' -k2 -r | head -4 | cut -c1-150
if [ -x "$B/test_nccl" ]; then
  echo "test_nccl on 1 rank (exercises the code path on a single GPU):"
  mpirun -n 1 "$B/test_nccl" 2>&1 | tail -3
fi
if [ "${VA_NCU:-0}" = 1 ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  if [ -n "$NCU" ]; then
    echo "ncu (fused kernels, tf32 and fp16, second pass of each):"
    timeout 100 "$NCU" --clock-control none -k regex:fused_ --launch-skip 1 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
      "$B/gpu_kernels_bench" 1000000 128 1024 1 ncu >"$OUT/ncu_tf32.txt" 2>&1
    timeout 100 "$NCU" --clock-control none -k regex:fused_ --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
      "$B/gpu_kernels_bench" 1000000 128 1024 1 ncu >"$OUT/ncu_fp16.txt" 2>&1
    for f in "$OUT"/ncu_tf32.txt "$OUT"/ncu_fp16.txt; do
      echo "== $(basename $f)"
      grep -E "fused_|Compute \(SM\) Throughput|Memory Throughput|Duration|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Registers Per|Shared Memory Config" "$f" | head -14 | cut -c1-150
    done
  fi
fi
echo "benchmark:"
"$B/gpu_kernels_bench" "$@" >"$OUT/bench.txt" 2>&1 || rc=1
grep -E "automatic fused|rows differ" "$OUT/bench.txt" | cut -c1-100
sed -n '/== summary/,$p' "$OUT/bench.txt" | grep -vE "^(stats|farthest)|cuBLAS alone, |gemm, [0-9]+-row"
exit $rc
